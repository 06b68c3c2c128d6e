// Cache views and the write path (spec 4.1-4.4, 5.1-5.3, D3, D7).
//
// Every insert test poisons the cache with random bytes, builds the expected bytes of
// the whole buffer independently (byte offsets written out from the spec's layout
// formulas, values from brute-force reference encoders), runs the insert and compares
// every byte, so skipped slots and untouched rows are checked as well.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"
#include "flashmsa/version.h"
#include "test_util.h"

namespace {

using namespace flashmsa;
using flashmsa::testing::Rng;

// ---------------------------------------------------------------------------
// Independent references (brute force over the code tables, ties to the even code).

double ref_e4m3_decode(int code) {
  const int s = (code >> 7) & 1, e = (code >> 3) & 0xf, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? m * std::ldexp(1.0, -9) : (8 + m) * std::ldexp(1.0, e - 10);
  return s ? -mag : mag;
}

std::uint8_t ref_e4m3_encode(double x) {
  if (std::isnan(x)) return 0x7f;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  if (a >= 448.0) return sign | 0x7e;
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7e; ++c) {
    const double err = std::fabs(a - ref_e4m3_decode(c));
    if (err < best_err || (err == best_err && c % 2 == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | static_cast<std::uint8_t>(best);
}

std::uint8_t ref_e2m1_encode(double x) {
  static const double v[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  if (std::isnan(x)) return 0;
  const double a = std::fabs(x);
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 8; ++c) {
    const double err = std::fabs(a - v[c]);
    if (err < best_err || (err == best_err && c % 2 == 0)) {
      best = c;
      best_err = err;
    }
  }
  if (best == 0) return 0;
  return static_cast<std::uint8_t>(std::signbit(x) ? (best | 8) : best);
}

float bf(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Expected bytes of one 128-dim row in each format.
void ref_row_bf16(const std::uint16_t* src, std::uint8_t* dst) { std::memcpy(dst, src, 256); }

void ref_row_fp8(const std::uint16_t* src, float scale, std::uint8_t* dst) {
  for (int d = 0; d < 128; ++d) dst[d] = ref_e4m3_encode(bf(src[d]) / scale);  // float division
}

// NVFP4, spec 5.2: scale = E4M3(gs * amax / 6), code = E2M1(clamp(x * gs / scale, +-6)).
void ref_row_nvfp4(const std::uint16_t* src, float global_scale, std::uint8_t packed[64],
                   std::uint8_t scales[8]) {
  const float gs = 1.0f / global_scale;
  for (int g = 0; g < 8; ++g) {
    float amax = 0.0f;
    for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(bf(src[16 * g + i])));
    scales[g] = ref_e4m3_encode(gs * amax / 6.0f);
    const float sf = static_cast<float>(ref_e4m3_decode(scales[g]));
    std::uint8_t codes[16];
    for (int i = 0; i < 16; ++i) {
      float y = sf == 0.0f ? 0.0f : bf(src[16 * g + i]) * gs / sf;
      y = std::min(std::max(y, -6.0f), 6.0f);
      codes[i] = sf == 0.0f ? 0 : ref_e2m1_encode(y);
    }
    for (int i = 0; i < 8; ++i)
      packed[8 * g + i] = static_cast<std::uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
  }
}

// Scale-plane position, written out from spec 4.3 (not via the library).
int ref_scale_pos(int t, int g, bool swizzled) {
  return swizzled ? 32 * (t / 4) + 4 * g + (t % 4) : t * 8 + g;
}

// ---------------------------------------------------------------------------
// Helpers

HostTensor random_bf16(std::vector<std::int64_t> shape, Rng& rng, float stddev) {
  HostTensor t(DType::bf16, shape);
  flashmsa::testing::fill_bf16_normal(t, rng, stddev);
  return t;
}

void fill_random_bytes(HostTensor& t, Rng& rng) {
  std::uniform_int_distribution<int> d(0, 255);
  auto* p = static_cast<std::uint8_t*>(t.view().data);
  for (std::size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<std::uint8_t>(d(rng));
}

std::vector<std::uint8_t> bytes_of(const HostTensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.view().data);
  return std::vector<std::uint8_t>(p, p + t.bytes());
}

// Makes some extreme values: a zero block, a block far above 448*6 and an element
// far above 448, so saturation paths are exercised.
void add_extremes(HostTensor& x) {
  auto* p = x.data<std::uint16_t>();
  const std::int64_t n = x.numel();
  for (int i = 0; i < 16 && i < n; ++i) p[i] = 0;                     // zero block
  for (int i = 16; i < 32 && i < n; ++i) p[i] = float_to_bf16(bf(p[i]) * 8000.0f);
  if (n > 40) p[40] = float_to_bf16(-1000.0f);
  if (n > 300) p[300] = float_to_bf16(std::ldexp(1.0f, -12));          // tiny
}

HostTensor slots_tensor(const std::vector<std::int32_t>& s) {
  HostTensor t(DType::i32, {static_cast<std::int64_t>(s.size())});
  if (!s.empty()) std::memcpy(t.view().data, s.data(), s.size() * 4);
  return t;
}

// Unique random slots in [0, pages*128), with every 5th token skipped (-1).
std::vector<std::int32_t> make_slots(int t, int pages, Rng& rng) {
  std::vector<std::int32_t> perm = flashmsa::testing::random_permutation(pages * kPageSize, rng);
  std::vector<std::int32_t> s(perm.begin(), perm.begin() + t);
  for (int i = 3; i < t; i += 5) s[i] = -1;
  return s;
}

// Where one row's bytes go in the expected buffers.
struct RowSink {
  // Start of the row's data bytes (bf16: 256 bytes, fp8: 128, nvfp4: 64).
  std::function<std::uint8_t*(int side, std::int64_t page, int h, int t)> data;
  // NVFP4: the scale byte of group g.
  std::function<std::uint8_t*(int side, std::int64_t page, int h, int t, int g)> scale;
};

// Applies the insert to the expected buffers, token by token in order (last wins).
void build_expected(KvFormat fmt, const HostTensor& k, const HostTensor& v,
                    const std::vector<std::int32_t>& slots, float k_scale, float v_scale,
                    const RowSink& sink) {
  const std::int64_t hkv = k.view().shape[1];
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0) continue;
    const std::int64_t page = slots[i] / 128;
    const int t = slots[i] % 128;
    for (int side = 0; side < 2; ++side) {
      const HostTensor& x = side == 0 ? k : v;
      const float sc = side == 0 ? k_scale : v_scale;
      for (int h = 0; h < hkv; ++h) {
        const std::uint16_t* src = x.data<std::uint16_t>() + (i * hkv + h) * 128;
        std::uint8_t* dst = sink.data(side, page, h, t);
        if (fmt == KvFormat::bf16) {
          ref_row_bf16(src, dst);
        } else if (fmt == KvFormat::fp8) {
          ref_row_fp8(src, sc, dst);
        } else {
          std::uint8_t scales[8];
          ref_row_nvfp4(src, sc, dst, scales);
          for (int g = 0; g < 8; ++g) *sink.scale(side, page, h, t, g) = scales[g];
        }
      }
    }
  }
}

// MSA-style separate caches (spec 4.2): K and V tensors, NVFP4 with separate scales.
struct SeparateCache {
  HostTensor kd, vd, ks, vs;
  PagedKvCache cache;
};

void make_separate(SeparateCache* c, KvFormat fmt, int pages, int hkv, float k_scale,
                   float v_scale, bool k_swz, bool v_swz, Rng& rng) {
  const DType dt = fmt == KvFormat::bf16 ? DType::bf16 : fmt == KvFormat::fp8 ? DType::e4m3 : DType::u8;
  const std::int64_t cols = fmt == KvFormat::nvfp4 ? 64 : 128;
  c->kd = HostTensor(dt, {pages, hkv, 128, cols});
  c->vd = HostTensor(dt, {pages, hkv, 128, cols});
  fill_random_bytes(c->kd, rng);
  fill_random_bytes(c->vd, rng);
  c->cache.format = fmt;
  c->cache.k.data = c->kd.view();
  c->cache.v.data = c->vd.view();
  c->cache.k.global_scale = k_scale;
  c->cache.v.global_scale = v_scale;
  if (fmt == KvFormat::nvfp4) {
    c->ks = HostTensor(DType::e4m3, {pages, hkv, 128, 8});
    c->vs = HostTensor(DType::e4m3, {pages, hkv, 128, 8});
    fill_random_bytes(c->ks, rng);
    fill_random_bytes(c->vs, rng);
    c->cache.k.block_scale = c->ks.view();
    c->cache.v.block_scale = c->vs.view();
    c->cache.k.scale_swizzled = k_swz;
    c->cache.v.scale_swizzled = v_swz;
  }
}

void run_separate_case(KvFormat fmt, int pages, int hkv, int tokens, float k_scale, float v_scale,
                       bool k_swz, bool v_swz, std::uint64_t seed,
                       const std::vector<std::int32_t>* fixed_slots = nullptr) {
  Rng rng(seed);
  SeparateCache c;
  make_separate(&c, fmt, pages, hkv, k_scale, v_scale, k_swz, v_swz, rng);
  HostTensor k = random_bf16({tokens, hkv, 128}, rng, 2.0f);
  HostTensor v = random_bf16({tokens, hkv, 128}, rng, 0.7f);
  add_extremes(k);
  add_extremes(v);
  const std::vector<std::int32_t> slots = fixed_slots ? *fixed_slots : make_slots(tokens, pages, rng);
  HostTensor sm = slots_tensor(slots);

  std::vector<std::uint8_t> ekd = bytes_of(c.kd), evd = bytes_of(c.vd);
  std::vector<std::uint8_t> eks = fmt == KvFormat::nvfp4 ? bytes_of(c.ks) : std::vector<std::uint8_t>();
  std::vector<std::uint8_t> evs = fmt == KvFormat::nvfp4 ? bytes_of(c.vs) : std::vector<std::uint8_t>();
  const std::int64_t row_bytes = fmt == KvFormat::bf16 ? 256 : fmt == KvFormat::fp8 ? 128 : 64;
  RowSink sink;
  // Spec 4.2: data byte ((P*Hkv + h)*128 + t) * row_bytes; scale ((P*Hkv + h)*128)*8 + S(t, g).
  sink.data = [&](int side, std::int64_t p, int h, int t) {
    return (side == 0 ? ekd : evd).data() + ((p * hkv + h) * 128 + t) * row_bytes;
  };
  sink.scale = [&](int side, std::int64_t p, int h, int t, int g) {
    const bool swz = side == 0 ? k_swz : v_swz;
    return (side == 0 ? eks : evs).data() + (p * hkv + h) * 1024 + ref_scale_pos(t, g, swz);
  };
  build_expected(fmt, k, v, slots, k_scale, v_scale, sink);

  const Status st = cache_insert(k.view(), v.view(), sm.view(), c.cache);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(bytes_of(c.kd) == ekd) << kv_format_name(fmt) << " K data";
  EXPECT_TRUE(bytes_of(c.vd) == evd) << kv_format_name(fmt) << " V data";
  if (fmt == KvFormat::nvfp4) {
    EXPECT_TRUE(bytes_of(c.ks) == eks) << "K scales";
    EXPECT_TRUE(bytes_of(c.vs) == evs) << "V scales";
  }
}

// ---------------------------------------------------------------------------
// kv_format_name

TEST(CacheFormat, Names) {
  EXPECT_STREQ(kv_format_name(KvFormat::bf16), "bf16");
  EXPECT_STREQ(kv_format_name(KvFormat::fp8), "fp8");
  EXPECT_STREQ(kv_format_name(KvFormat::nvfp4), "nvfp4");
}

// ---------------------------------------------------------------------------
// Inserts into separate caches

TEST(CacheInsert, Bf16) {
  for (int hkv : {1, 2, 8}) run_separate_case(KvFormat::bf16, 3, hkv, 37, 1.0f, 1.0f, false, false, 100 + hkv);
}

TEST(CacheInsert, Fp8WithScales) {
  // k_scale 0.5 doubles the values before rounding (with saturation of the extremes);
  // v_scale 3 is not a power of two, so the float division itself rounds.
  run_separate_case(KvFormat::fp8, 3, 2, 37, 0.5f, 3.0f, false, false, 200);
  run_separate_case(KvFormat::fp8, 2, 8, 11, 1.0f, 1.0f, false, false, 201);
}

TEST(CacheInsert, Fp8DividesByScale) {
  // The stored value is E4M3_sat(x / k_scale) with a true float division. These bf16
  // inputs with scale 7 land on different E4M3 codes if one multiplied by float(1/7)
  // instead (found by exhaustive search over bf16): 0x3e2f/7 -> 0x0c, 0x3e4b/7 -> 0x0e,
  // 0x3db6/7 -> 0x06 (the reciprocal product gives 0x0d, 0x0f, 0x07).
  Rng rng(210);
  SeparateCache c;
  make_separate(&c, KvFormat::fp8, 1, 1, 7.0f, 7.0f, false, false, rng);
  HostTensor k(DType::bf16, {1, 1, 128}), v(DType::bf16, {1, 1, 128});
  const std::uint16_t in[3] = {0x3e2f, 0x3e4b, 0x3db6};
  const std::uint8_t want[3] = {0x0c, 0x0e, 0x06};
  for (int i = 0; i < 3; ++i) k.data<std::uint16_t>()[i] = v.data<std::uint16_t>()[i] = in[i];
  HostTensor sm = slots_tensor({9});
  ASSERT_TRUE(cache_insert(k.view(), v.view(), sm.view(), c.cache).ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.kd.data<std::uint8_t>()[9 * 128 + i], want[i]) << i;
    EXPECT_EQ(c.vd.data<std::uint8_t>()[9 * 128 + i], want[i]) << i;
  }
}

TEST(CacheInsert, Nvfp4Linear) {
  run_separate_case(KvFormat::nvfp4, 3, 2, 37, 1.0f, 1.0f, false, false, 300);
  run_separate_case(KvFormat::nvfp4, 3, 1, 21, 0.02f, 4.0f, false, false, 301);
}

TEST(CacheInsert, Nvfp4SwizzledScales) {
  run_separate_case(KvFormat::nvfp4, 3, 2, 37, 0.25f, 0.5f, false, true, 400);
  run_separate_case(KvFormat::nvfp4, 2, 3, 9, 1.0f, 1.0f, true, true, 401);
}

TEST(CacheInsert, OddTokenCountsAndEmpty) {
  for (int t : {1, 3, 127, 129}) run_separate_case(KvFormat::fp8, 2, 2, t, 1.5f, 0.75f, false, false, 500 + t);
  run_separate_case(KvFormat::bf16, 1, 1, 0, 1.0f, 1.0f, false, false, 510, nullptr);
}

TEST(CacheInsert, AllSkippedLeavesCacheUntouched) {
  const std::vector<std::int32_t> slots(13, -1);
  run_separate_case(KvFormat::nvfp4, 2, 2, 13, 1.0f, 1.0f, false, true, 520, &slots);
  const std::vector<std::int32_t> neg = {-1, -5, -128, std::numeric_limits<std::int32_t>::min()};
  run_separate_case(KvFormat::bf16, 2, 2, 4, 1.0f, 1.0f, false, false, 521, &neg);
}

TEST(CacheInsert, DuplicateSlotsLastTokenWinsInParallel) {
  // 301 tokens (parallel path) drawn with replacement from 256 slots: many duplicates.
  Rng rng(600);
  std::uniform_int_distribution<int> d(-20, 255);
  std::vector<std::int32_t> slots(301);
  for (auto& s : slots) s = d(rng) < 0 ? -1 : d(rng);
  for (int rep = 0; rep < 3; ++rep) {
    run_separate_case(KvFormat::nvfp4, 2, 2, 301, 1.0f, 2.0f, false, true, 601, &slots);
    run_separate_case(KvFormat::fp8, 2, 2, 301, 1.0f, 2.0f, false, false, 602, &slots);
  }
}

TEST(CacheInsert, FirstAndLastSlot) {
  // Slot 0 and slot pages*128 - 1 are both valid.
  const std::vector<std::int32_t> slots = {0, 3 * 128 - 1, 128};
  run_separate_case(KvFormat::bf16, 3, 2, 3, 1.0f, 1.0f, false, false, 700, &slots);
  run_separate_case(KvFormat::nvfp4, 3, 2, 3, 1.0f, 1.0f, true, false, 701, &slots);
}

TEST(CacheInsert, StridedInputs) {
  // k and v as slices of a fused [T, 2*Hkv + 4, 128] buffer (non-contiguous token stride).
  Rng rng(800);
  const int t = 17, hkv = 2, pages = 2;
  HostTensor fused = random_bf16({t, 2 * hkv + 4, 128}, rng, 1.0f);
  const std::int64_t rs = (2 * hkv + 4) * 128;
  TensorView kv = make_strided_view(fused.data<std::uint16_t>() + 4 * 128, DType::bf16,
                                    {t, hkv, 128}, {rs, 128, 1});
  TensorView vv = make_strided_view(fused.data<std::uint16_t>() + (4 + hkv) * 128, DType::bf16,
                                    {t, hkv, 128}, {rs, 128, 1});
  // Contiguous copies for the reference.
  HostTensor k(DType::bf16, {t, hkv, 128}), v(DType::bf16, {t, hkv, 128});
  for (int i = 0; i < t; ++i) {
    std::memcpy(k.data<std::uint16_t>() + i * hkv * 128, kv.ptr<std::uint16_t>() + i * rs, hkv * 256);
    std::memcpy(v.data<std::uint16_t>() + i * hkv * 128, vv.ptr<std::uint16_t>() + i * rs, hkv * 256);
  }
  SeparateCache c;
  make_separate(&c, KvFormat::fp8, pages, hkv, 0.5f, 0.5f, false, false, rng);
  const std::vector<std::int32_t> slots = make_slots(t, pages, rng);
  HostTensor sm = slots_tensor(slots);
  std::vector<std::uint8_t> ekd = bytes_of(c.kd), evd = bytes_of(c.vd);
  RowSink sink;
  sink.data = [&](int side, std::int64_t p, int h, int tt) {
    return (side == 0 ? ekd : evd).data() + ((p * hkv + h) * 128 + tt) * 128;
  };
  build_expected(KvFormat::fp8, k, v, slots, 0.5f, 0.5f, sink);
  const Status st = cache_insert(kv, vv, sm.view(), c.cache);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(bytes_of(c.kd) == ekd);
  EXPECT_TRUE(bytes_of(c.vd) == evd);
}

// ---------------------------------------------------------------------------
// Packed vLLM [pages, Hkv, 128, 256] views (spec 4.1)

void run_packed_case(KvFormat fmt, bool nhd, float k_scale, float v_scale, std::uint64_t seed) {
  Rng rng(seed);
  const int pages = 3, hkv = 2, tokens = 29;
  const DType dt = fmt == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
  const std::int64_t es = fmt == KvFormat::bf16 ? 2 : 1;
  HostTensor buf(dt, {pages, hkv, 128, 256});
  fill_random_bytes(buf, rng);
  TensorView kv = buf.view();
  if (nhd)  // physical [P][t][h][c], logical [P, h, t, c]
    kv = make_strided_view(buf.view().data, dt, {pages, hkv, 128, 256},
                           {128 * hkv * 256, 256, hkv * 256, 1});
  PagedKvCache cache;
  Status st = packed_kv_views(kv, fmt, k_scale, v_scale, &cache);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(cache.format, fmt);
  EXPECT_EQ(cache.k.data.data, buf.view().data);
  EXPECT_EQ(static_cast<std::uint8_t*>(cache.v.data.data),
            static_cast<std::uint8_t*>(buf.view().data) + 128 * es);
  EXPECT_EQ(cache.k.data.shape[3], 128);
  EXPECT_EQ(cache.v.data.shape[3], 128);
  EXPECT_EQ(cache.k.global_scale, k_scale);
  EXPECT_EQ(cache.v.global_scale, v_scale);

  HostTensor k = random_bf16({tokens, hkv, 128}, rng, 3.0f);
  HostTensor v = random_bf16({tokens, hkv, 128}, rng, 3.0f);
  add_extremes(k);
  const std::vector<std::int32_t> slots = make_slots(tokens, pages, rng);
  HostTensor sm = slots_tensor(slots);
  std::vector<std::uint8_t> e = bytes_of(buf);
  RowSink sink;
  // Spec 4.1 table: HND ((P*Hkv + h)*128 + t)*256 + c; NHD ((P*128 + t)*Hkv + h)*256 + c;
  // K at c = 0, V at c = 128; bytes = elements * elem size.
  sink.data = [&](int side, std::int64_t p, int h, int t) {
    const std::int64_t row = nhd ? (p * 128 + t) * hkv + h : (p * hkv + h) * 128 + t;
    return e.data() + (row * 256 + side * 128) * es;
  };
  build_expected(fmt, k, v, slots, k_scale, v_scale, sink);
  st = cache_insert(k.view(), v.view(), sm.view(), cache);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(bytes_of(buf) == e) << kv_format_name(fmt) << (nhd ? " NHD" : " HND");
}

TEST(PackedKvViews, Bf16Hnd) { run_packed_case(KvFormat::bf16, false, 1.0f, 1.0f, 900); }
TEST(PackedKvViews, Bf16Nhd) { run_packed_case(KvFormat::bf16, true, 1.0f, 1.0f, 901); }
TEST(PackedKvViews, Fp8Hnd) { run_packed_case(KvFormat::fp8, false, 0.125f, 2.5f, 902); }
TEST(PackedKvViews, Fp8Nhd) { run_packed_case(KvFormat::fp8, true, 1.0f, 0.3f, 903); }

TEST(PackedKvViews, ExplicitOffset) {
  // bf16 HND, Hkv = 2: V element (P=1, h=1, t=5, d=3) lives at element
  // ((1*2 + 1)*128 + 5)*256 + 128 + 3 = 389*256 + 131 = 99715.
  HostTensor buf(DType::bf16, {2, 2, 128, 256});
  PagedKvCache cache;
  ASSERT_TRUE(packed_kv_views(buf.view(), KvFormat::bf16, 1.0f, 1.0f, &cache).ok());
  HostTensor k(DType::bf16, {1, 2, 128}), v(DType::bf16, {1, 2, 128});
  v.data<std::uint16_t>()[1 * 128 + 3] = 0x4049;  // 3.140625
  k.data<std::uint16_t>()[1 * 128 + 3] = 0xc000;  // -2
  HostTensor sm = slots_tensor({128 + 5});
  ASSERT_TRUE(cache_insert(k.view(), v.view(), sm.view(), cache).ok());
  EXPECT_EQ(buf.data<std::uint16_t>()[99715], 0x4049);
  EXPECT_EQ(buf.data<std::uint16_t>()[99715 - 128], 0xc000);  // K column 3 of the same row
}

// ---------------------------------------------------------------------------
// vLLM NVFP4 head-slot page [pages, 2*Hkv, 128, 72] (spec 4.3)

TEST(HeadSlotViews, Geometry) {
  const int pages = 3, hkv = 2;
  HostTensor buf(DType::u8, {pages, 2 * hkv, 128, 72});
  auto* base = buf.data<std::uint8_t>();
  PagedKvCache c;
  Status st = nvfp4_head_slot_views(buf.view(), false, true, 0.5f, 2.0f, &c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.format, KvFormat::nvfp4);
  // side_base = side * Hkv * 9216; scale region at side_base + Hkv * 8192.
  EXPECT_EQ(c.k.data.ptr<std::uint8_t>(), base);
  EXPECT_EQ(c.v.data.ptr<std::uint8_t>(), base + hkv * 9216);
  EXPECT_EQ(c.k.block_scale.ptr<std::uint8_t>(), base + hkv * 8192);
  EXPECT_EQ(c.v.block_scale.ptr<std::uint8_t>(), base + hkv * 9216 + hkv * 8192);
  for (const PagedCacheSide* s : {&c.k, &c.v}) {
    EXPECT_EQ(s->data.dtype, DType::u8);
    EXPECT_EQ(s->block_scale.dtype, DType::e4m3);
    const std::int64_t ds[4] = {pages, hkv, 128, 64}, dst[4] = {2 * hkv * 9216, 8192, 64, 1};
    const std::int64_t ss[4] = {pages, hkv, 128, 8}, sst[4] = {2 * hkv * 9216, 1024, 8, 1};
    ASSERT_EQ(s->data.rank, 4);
    ASSERT_EQ(s->block_scale.rank, 4);
    for (int d = 0; d < 4; ++d) {
      EXPECT_EQ(s->data.shape[d], ds[d]);
      EXPECT_EQ(s->data.stride[d], dst[d]);
      EXPECT_EQ(s->block_scale.shape[d], ss[d]);
      EXPECT_EQ(s->block_scale.stride[d], sst[d]);
    }
  }
  EXPECT_FALSE(c.k.scale_swizzled);
  EXPECT_TRUE(c.v.scale_swizzled);
  EXPECT_EQ(c.k.global_scale, 0.5f);
  EXPECT_EQ(c.v.global_scale, 2.0f);
}

TEST(HeadSlotViews, InsertWholeBufferAndExplicitOffsets) {
  for (int hkv : {1, 2, 4}) {
    Rng rng(1000 + hkv);
    const int pages = 3, tokens = 41;
    const float ks = 0.75f, vs = 1.0f / 64;
    HostTensor buf(DType::u8, {pages, 2 * hkv, 128, 72});
    fill_random_bytes(buf, rng);
    PagedKvCache c;
    ASSERT_TRUE(nvfp4_head_slot_views(buf.view(), false, true, ks, vs, &c).ok());
    HostTensor k = random_bf16({tokens, hkv, 128}, rng, 1.0f);
    HostTensor v = random_bf16({tokens, hkv, 128}, rng, 0.1f);
    add_extremes(k);
    std::vector<std::int32_t> slots = make_slots(tokens, pages, rng);
    slots[0] = 128 + 5;  // page 1, token 5 (checked byte by byte below)
    for (int i = 1; i < tokens; ++i)
      if (slots[i] == 128 + 5) slots[i] = -1;
    HostTensor sm = slots_tensor(slots);
    std::vector<std::uint8_t> e = bytes_of(buf);
    RowSink sink;
    // Spec 4.3: page_base = P*Hkv*18432; side_base = page_base + side*Hkv*9216;
    // data byte = side_base + (h*128 + t)*64 + d/2;
    // scale byte = side_base + Hkv*8192 + h*1024 + S(t, g); K linear, V swizzled.
    sink.data = [&](int side, std::int64_t p, int h, int t) {
      return e.data() + p * hkv * 18432 + side * hkv * 9216 + (h * 128 + t) * 64;
    };
    sink.scale = [&](int side, std::int64_t p, int h, int t, int g) {
      return e.data() + p * hkv * 18432 + side * hkv * 9216 + hkv * 8192 + h * 1024 +
             ref_scale_pos(t, g, side == 1);
    };
    build_expected(KvFormat::nvfp4, k, v, slots, ks, vs, sink);
    const Status st = cache_insert(k.view(), v.view(), sm.view(), c);
    ASSERT_TRUE(st.ok()) << st.message();
    const std::vector<std::uint8_t> got = bytes_of(buf);
    EXPECT_TRUE(got == e) << "hkv " << hkv;

    // A few offsets by hand, token 0 -> page 1, t = 5, last head h = hkv-1:
    const int h = hkv - 1;
    std::uint8_t kp[64], kscale[8], vp[64], vscale[8];
    ref_row_nvfp4(k.data<std::uint16_t>() + h * 128, ks, kp, kscale);
    ref_row_nvfp4(v.data<std::uint16_t>() + h * 128, vs, vp, vscale);
    const std::int64_t page1 = 1 * hkv * 18432;
    // K data dims 6,7 -> byte 3 of the row: page1 + (h*128 + 5)*64 + 3.
    EXPECT_EQ(got[page1 + (h * 128 + 5) * 64 + 3], kp[3]);
    // K scale, group 2, linear: page1 + Hkv*8192 + h*1024 + 5*8 + 2.
    EXPECT_EQ(got[page1 + hkv * 8192 + h * 1024 + 42], kscale[2]);
    // V data byte 63 (dims 126, 127): page1 + Hkv*9216 + (h*128 + 5)*64 + 63.
    EXPECT_EQ(got[page1 + hkv * 9216 + (h * 128 + 5) * 64 + 63], vp[63]);
    // V scale, group 3, swizzled: 32*(5/4) + 4*3 + 5%4 = 32 + 12 + 1 = 45.
    EXPECT_EQ(got[page1 + hkv * 9216 + hkv * 8192 + h * 1024 + 45], vscale[3]);
    if (hkv == 2) {
      // Spelled out for Hkv = 2, h = 1: 36864 + 18432 + 16384 + 1024 + 45 = 72749.
      EXPECT_EQ(got[72749], vscale[3]);
    }
  }
}

TEST(HeadSlotViews, ViewsMatchSeparateCacheInsert) {
  // The same tokens inserted through head-slot views and into MSA separate tensors
  // give the same data rows and (after applying the swizzle) the same scales.
  Rng rng(1100);
  const int pages = 2, hkv = 2, tokens = 15;
  HostTensor buf(DType::u8, {pages, 2 * hkv, 128, 72});
  PagedKvCache hs;
  ASSERT_TRUE(nvfp4_head_slot_views(buf.view(), true, false, 1.0f, 1.0f, &hs).ok());
  SeparateCache sep;
  make_separate(&sep, KvFormat::nvfp4, pages, hkv, 1.0f, 1.0f, false, false, rng);
  HostTensor k = random_bf16({tokens, hkv, 128}, rng, 1.0f);
  HostTensor v = random_bf16({tokens, hkv, 128}, rng, 1.0f);
  const std::vector<std::int32_t> slots = make_slots(tokens, pages, rng);
  HostTensor sm = slots_tensor(slots);
  ASSERT_TRUE(cache_insert(k.view(), v.view(), sm.view(), hs).ok());
  ASSERT_TRUE(cache_insert(k.view(), v.view(), sm.view(), sep.cache).ok());
  const auto* b = buf.data<std::uint8_t>();
  for (std::int32_t s : slots) {
    if (s < 0) continue;
    const int p = s / 128, t = s % 128;
    for (int h = 0; h < hkv; ++h) {
      for (int side = 0; side < 2; ++side) {
        const std::uint8_t* hrow = b + p * hkv * 18432 + side * hkv * 9216 + (h * 128 + t) * 64;
        const std::uint8_t* srow =
            (side == 0 ? sep.kd : sep.vd).data<std::uint8_t>() + ((p * hkv + h) * 128 + t) * 64;
        EXPECT_EQ(std::memcmp(hrow, srow, 64), 0);
        for (int g = 0; g < 8; ++g) {
          const std::uint8_t hsc = b[p * hkv * 18432 + side * hkv * 9216 + hkv * 8192 + h * 1024 +
                                     ref_scale_pos(t, g, side == 0)];
          const std::uint8_t ssc = (side == 0 ? sep.ks : sep.vs)
                                       .data<std::uint8_t>()[((p * hkv + h) * 128 + t) * 8 + g];
          EXPECT_EQ(hsc, ssc);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Index-K cache (spec 4.4, 2.1 items 4-5)

void run_index_case(KvFormat fmt, float gscale, int tokens, std::uint64_t seed) {
  Rng rng(seed);
  const int pages = 3;
  const DType dt = fmt == KvFormat::bf16 ? DType::bf16 : fmt == KvFormat::fp8 ? DType::e4m3 : DType::u8;
  const std::int64_t row_bytes = fmt == KvFormat::bf16 ? 256 : fmt == KvFormat::fp8 ? 128 : 64;
  HostTensor data(dt, {pages, 128, row_bytes / static_cast<std::int64_t>(dtype_size(dt))});
  HostTensor scale(DType::e4m3, {pages, 128, 8});
  fill_random_bytes(data, rng);
  fill_random_bytes(scale, rng);
  IndexKCache c;
  c.format = fmt;
  c.data = data.view();
  if (fmt == KvFormat::nvfp4) {
    c.block_scale = scale.view();
    c.global_scale = gscale;
  }
  HostTensor x = random_bf16({tokens, 128}, rng, 40.0f);  // fp8: some values beyond 448
  add_extremes(x);
  const std::vector<std::int32_t> slots = make_slots(tokens, pages, rng);
  HostTensor sm = slots_tensor(slots);
  std::vector<std::uint8_t> ed = bytes_of(data), es = bytes_of(scale);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0) continue;
    // Spec 4.4: (P*128 + t) rows; slot = P*128 + t, so the row index is the slot itself.
    const std::uint16_t* src = x.data<std::uint16_t>() + i * 128;
    std::uint8_t* dst = ed.data() + static_cast<std::int64_t>(slots[i]) * row_bytes;
    if (fmt == KvFormat::bf16) {
      ref_row_bf16(src, dst);
    } else if (fmt == KvFormat::fp8) {
      ref_row_fp8(src, 1.0f, dst);  // no scale: E4M3_sat(x)
    } else {
      ref_row_nvfp4(src, gscale, dst, es.data() + static_cast<std::int64_t>(slots[i]) * 8);
    }
  }
  const Status st = index_cache_insert(x.view(), sm.view(), c);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(bytes_of(data) == ed) << kv_format_name(fmt);
  EXPECT_TRUE(bytes_of(scale) == es) << kv_format_name(fmt);
}

TEST(IndexCacheInsert, Bf16) { run_index_case(KvFormat::bf16, 1.0f, 37, 1200); }
TEST(IndexCacheInsert, Fp8NoScale) {
  run_index_case(KvFormat::fp8, 1.0f, 37, 1201);
  run_index_case(KvFormat::fp8, 1.0f, 200, 1202);  // parallel path
}
TEST(IndexCacheInsert, Nvfp4) {
  run_index_case(KvFormat::nvfp4, 1.0f, 37, 1203);
  run_index_case(KvFormat::nvfp4, 0.1f, 65, 1204);
}

TEST(IndexCacheInsert, Fp8SaturatesHandWorked) {
  // 1000 -> 448 (0x7e); -3 -> 0xc4; 1.0625 ties to 1.0 (0x38).
  HostTensor data(DType::e4m3, {1, 128, 128});
  IndexKCache c;
  c.format = KvFormat::fp8;
  c.data = data.view();
  HostTensor x(DType::bf16, {1, 128});
  x.data<std::uint16_t>()[0] = float_to_bf16(1000.0f);
  x.data<std::uint16_t>()[1] = float_to_bf16(-3.0f);
  x.data<std::uint16_t>()[2] = float_to_bf16(1.0625f);
  HostTensor sm = slots_tensor({7});
  ASSERT_TRUE(index_cache_insert(x.view(), sm.view(), c).ok());
  const auto* d = data.data<std::uint8_t>() + 7 * 128;
  EXPECT_EQ(d[0], 0x7e);
  EXPECT_EQ(d[1], 0xc4);
  EXPECT_EQ(d[2], 0x38);
  EXPECT_EQ(d[3], 0x00);
}

// ---------------------------------------------------------------------------
// quantize_query_e4m3 (D7, spec 5.1)

TEST(QuantizeQuery, MatchesReference) {
  Rng rng(1300);
  for (float qs : {1.0f, 0.37f, 8.0f}) {
    HostTensor q = random_bf16({5, 3, 128}, rng, 60.0f);
    add_extremes(q);
    HostTensor out(DType::e4m3, {5, 3, 128});
    out.fill_bytes(0x55);
    const Status st = quantize_query_e4m3(q.view(), qs, out.view());
    ASSERT_TRUE(st.ok()) << st.message();
    for (std::int64_t i = 0; i < q.numel(); ++i)
      ASSERT_EQ(out.data<std::uint8_t>()[i], ref_e4m3_encode(bf(q.data<std::uint16_t>()[i]) / qs))
          << "q_scale " << qs << " element " << i;
  }
  // Hand-worked: q = 3, q_scale = 2 -> 1.5 = 0x3c; q = 1000, q_scale = 2 -> 500 -> 448.
  HostTensor q(DType::bf16, {1, 1, 128}), out(DType::e4m3, {1, 1, 128});
  q.data<std::uint16_t>()[0] = float_to_bf16(3.0f);
  q.data<std::uint16_t>()[1] = float_to_bf16(1000.0f);
  ASSERT_TRUE(quantize_query_e4m3(q.view(), 2.0f, out.view()).ok());
  EXPECT_EQ(out.data<std::uint8_t>()[0], 0x3c);
  EXPECT_EQ(out.data<std::uint8_t>()[1], 0x7e);
  // True division: bf16 0x3e2f / 7 -> 0x0c (multiplying by float(1/7) would give 0x0d).
  q.data<std::uint16_t>()[2] = 0x3e2f;
  ASSERT_TRUE(quantize_query_e4m3(q.view(), 7.0f, out.view()).ok());
  EXPECT_EQ(out.data<std::uint8_t>()[2], 0x0c);
}

TEST(QuantizeQuery, StridedOutputAndManyRows) {
  // 300 rows x 2 heads (parallel path); out is a head-major view [T, H, 128] of a
  // [H, T, 128] buffer.
  Rng rng(1301);
  const int t = 300, h = 2;
  HostTensor q = random_bf16({t, h, 128}, rng, 10.0f);
  HostTensor buf(DType::e4m3, {h, t, 128});
  TensorView out = make_strided_view(buf.view().data, DType::e4m3, {t, h, 128}, {128, t * 128, 1});
  ASSERT_TRUE(quantize_query_e4m3(q.view(), 0.5f, out).ok());
  for (int i = 0; i < t; ++i)
    for (int hh = 0; hh < h; ++hh)
      for (int d = 0; d < 128; ++d)
        ASSERT_EQ(buf.data<std::uint8_t>()[(hh * t + i) * 128 + d],
                  ref_e4m3_encode(bf(q.data<std::uint16_t>()[(i * h + hh) * 128 + d]) / 0.5f));
}

// ---------------------------------------------------------------------------
// Rejections: every rule, message names the argument, cache untouched.

struct Fixture {
  Rng rng{1400};
  SeparateCache c;
  HostTensor k, v, sm;
  Fixture(KvFormat fmt = KvFormat::fp8) {
    make_separate(&c, fmt, 2, 2, 1.0f, 1.0f, false, fmt == KvFormat::nvfp4, rng);
    k = random_bf16({5, 2, 128}, rng, 1.0f);
    v = random_bf16({5, 2, 128}, rng, 1.0f);
    sm = slots_tensor({0, 1, -1, 200, 255});
  }
};

void expect_invalid(const Status& st, const std::string& arg, const char* also = nullptr) {
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("'" + arg + "'"), std::string::npos)
      << "message should name '" << arg << "': " << st.message();
  if (also) {
    EXPECT_NE(st.message().find(also), std::string::npos) << st.message();
  }
}

TEST(CacheInsertRejects, ValidFixtureIsAccepted) {
  Fixture f;
  EXPECT_TRUE(cache_insert(f.k.view(), f.v.view(), f.sm.view(), f.c.cache).ok());
  Fixture f4(KvFormat::nvfp4);
  EXPECT_TRUE(cache_insert(f4.k.view(), f4.v.view(), f4.sm.view(), f4.c.cache).ok());
}

TEST(CacheInsertRejects, WrongDtype) {
  Fixture f;
  TensorView k = f.k.view();
  k.dtype = DType::f16;
  expect_invalid(cache_insert(k, f.v.view(), f.sm.view(), f.c.cache), "k", "dtype");
  TensorView v = f.v.view();
  v.dtype = DType::e4m3;
  expect_invalid(cache_insert(f.k.view(), v, f.sm.view(), f.c.cache), "v", "dtype");
  TensorView s = f.sm.view();
  s.dtype = DType::f32;
  expect_invalid(cache_insert(f.k.view(), f.v.view(), s, f.c.cache), "slot_mapping", "dtype");
  PagedKvCache c = f.c.cache;
  c.k.data.dtype = DType::bf16;  // fp8 cache with a bf16 tensor
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.k.data", "dtype");
}

TEST(CacheInsertRejects, WrongRank) {
  Fixture f;
  TensorView k = make_view(f.k.view().data, DType::bf16, {5, 256});
  expect_invalid(cache_insert(k, f.v.view(), f.sm.view(), f.c.cache), "k");
  TensorView s = make_view(f.sm.view().data, DType::i32, {5, 1});
  expect_invalid(cache_insert(f.k.view(), f.v.view(), s, f.c.cache), "slot_mapping");
  PagedKvCache c = f.c.cache;
  c.v.data = make_view(c.v.data.data, DType::e4m3, {2 * 2 * 128, 128});
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.v.data");
}

TEST(CacheInsertRejects, WrongShape) {
  Fixture f;
  TensorView k = make_view(f.k.view().data, DType::bf16, {5, 4, 64});
  expect_invalid(cache_insert(k, f.v.view(), f.sm.view(), f.c.cache), "k", "shape");
  TensorView v = make_view(f.v.view().data, DType::bf16, {4, 2, 128});  // T mismatch
  expect_invalid(cache_insert(f.k.view(), v, f.sm.view(), f.c.cache), "v", "shape");
  TensorView s = make_view(f.sm.view().data, DType::i32, {4});
  expect_invalid(cache_insert(f.k.view(), f.v.view(), s, f.c.cache), "slot_mapping", "shape");
  PagedKvCache c = f.c.cache;
  c.v.data.shape[0] = 1;  // page count differs from K
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.v.data");
  Fixture f4(KvFormat::nvfp4);
  PagedKvCache c4 = f4.c.cache;
  c4.k.block_scale.shape[3] = 16;
  expect_invalid(cache_insert(f4.k.view(), f4.v.view(), f4.sm.view(), c4), "kv.k.block_scale");
}

TEST(CacheInsertRejects, KvHeadMismatch) {
  Fixture f;
  HostTensor k3 = random_bf16({5, 3, 128}, f.rng, 1.0f), v3 = random_bf16({5, 3, 128}, f.rng, 1.0f);
  expect_invalid(cache_insert(k3.view(), v3.view(), f.sm.view(), f.c.cache), "k", "num_kv_heads");
  // v with another Hkv than k.
  HostTensor v1 = random_bf16({5, 1, 128}, f.rng, 1.0f);
  expect_invalid(cache_insert(f.k.view(), v1.view(), f.sm.view(), f.c.cache), "v");
  // Cache with 9 heads (D10 limit 8).
  HostTensor big(DType::e4m3, {1, 9, 128, 128});
  PagedKvCache c = f.c.cache;
  c.k.data = big.view();
  c.v.data = big.view();
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.k.data");
}

TEST(CacheInsertRejects, MisalignedPointer) {
  Fixture f;
  const std::vector<std::uint8_t> before = bytes_of(f.c.kd);
  TensorView k = f.k.view();
  k.data = static_cast<std::uint8_t*>(k.data) + 2;  // bf16-aligned, not 16-byte aligned
  expect_invalid(cache_insert(k, f.v.view(), f.sm.view(), f.c.cache), "k", "16-byte");
  PagedKvCache c = f.c.cache;
  c.v.data.data = static_cast<std::uint8_t*>(c.v.data.data) + 8;
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.v.data", "16-byte");
  // An outer stride that is not a multiple of 16 bytes.
  HostTensor wide(DType::bf16, {5, 2, 136});
  TensorView kw = make_strided_view(wide.view().data, DType::bf16, {5, 2, 128}, {2 * 132, 132, 1});
  expect_invalid(cache_insert(kw, f.v.view(), f.sm.view(), f.c.cache), "k", "16 bytes");
  EXPECT_TRUE(bytes_of(f.c.kd) == before);
}

TEST(CacheInsertRejects, NonUnitInnerStride) {
  Fixture f;
  HostTensor wide(DType::bf16, {5, 2, 256});
  TensorView k = make_strided_view(wide.view().data, DType::bf16, {5, 2, 128}, {512, 256, 2});
  expect_invalid(cache_insert(k, f.v.view(), f.sm.view(), f.c.cache), "k", "innermost stride 1");
  PagedKvCache c = f.c.cache;
  c.k.data.stride[3] = 2;
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.k.data",
                 "innermost stride 1");
  Fixture f4(KvFormat::nvfp4);
  PagedKvCache c4 = f4.c.cache;
  c4.v.block_scale.stride[2] = 16;  // swizzled plane must be a contiguous 128 x 8 plane
  expect_invalid(cache_insert(f4.k.view(), f4.v.view(), f4.sm.view(), c4), "kv.v.block_scale");
}

TEST(CacheInsertRejects, SlotOutOfRangeLeavesCacheUntouched) {
  Fixture f;  // 2 pages -> slots [0, 256)
  const std::vector<std::uint8_t> kb = bytes_of(f.c.kd), vb = bytes_of(f.c.vd);
  HostTensor sm = slots_tensor({0, 1, -1, 256, 5});
  const Status st = cache_insert(f.k.view(), f.v.view(), sm.view(), f.c.cache);
  expect_invalid(st, "slot_mapping[3]", "256");
  EXPECT_TRUE(bytes_of(f.c.kd) == kb) << "slot 0 must not have been written";
  EXPECT_TRUE(bytes_of(f.c.vd) == vb);
  HostTensor big = slots_tensor({0, 1, -1, 5, std::numeric_limits<std::int32_t>::max()});
  expect_invalid(cache_insert(f.k.view(), f.v.view(), big.view(), f.c.cache), "slot_mapping[4]");
}

TEST(CacheInsertRejects, BadScale) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (KvFormat fmt : {KvFormat::fp8, KvFormat::nvfp4}) {
    Fixture f(fmt);
    for (float bad : {0.0f, -1.0f, nan, inf}) {
      PagedKvCache c = f.c.cache;
      c.k.global_scale = bad;
      expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.k.global_scale");
      c = f.c.cache;
      c.v.global_scale = bad;
      expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.v.global_scale");
    }
  }
  Fixture fb(KvFormat::bf16);
  PagedKvCache c = fb.c.cache;
  c.k.global_scale = 2.0f;  // bf16 caches carry no scale
  expect_invalid(cache_insert(fb.k.view(), fb.v.view(), fb.sm.view(), c), "kv.k.global_scale");
}

TEST(CacheInsertRejects, NullTensors) {
  Fixture f(KvFormat::nvfp4);
  expect_invalid(cache_insert(TensorView{}, f.v.view(), f.sm.view(), f.c.cache), "k", "null");
  expect_invalid(cache_insert(f.k.view(), TensorView{}, f.sm.view(), f.c.cache), "v", "null");
  expect_invalid(cache_insert(f.k.view(), f.v.view(), TensorView{}, f.c.cache), "slot_mapping",
                 "null");
  PagedKvCache c = f.c.cache;
  c.k.data = TensorView{};
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.k.data", "null");
  c = f.c.cache;
  c.v.block_scale = TensorView{};
  expect_invalid(cache_insert(f.k.view(), f.v.view(), f.sm.view(), c), "kv.v.block_scale", "null");
}

TEST(CacheInsertRejects, CudaDevice) {
  // Mixed devices: the first tensor decides, the first one on the other device is named.
  Fixture f(KvFormat::nvfp4);
  TensorView k = f.k.view();
  k.device = Device::cuda;
  Status st = cache_insert(k, f.v.view(), f.sm.view(), f.c.cache);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("'v'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("cuda"), std::string::npos) << st.message();
  PagedKvCache c = f.c.cache;
  c.v.data.device = Device::cuda;
  st = cache_insert(f.k.view(), f.v.view(), f.sm.view(), c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'kv.v.data'"), std::string::npos) << st.message();
  c = f.c.cache;
  c.k.block_scale.device = Device::cuda;
  st = cache_insert(f.k.view(), f.v.view(), f.sm.view(), c);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'kv.k.block_scale'"), std::string::npos) << st.message();
  if (!built_with_cuda()) {  // all on cuda in a CPU-only build: Unsupported
    TensorView v = f.v.view(), sm = f.sm.view();
    v.device = sm.device = Device::cuda;
    c = f.c.cache;
    for (TensorView* t : {&c.k.data, &c.v.data, &c.k.block_scale, &c.v.block_scale})
      t->device = Device::cuda;
    st = cache_insert(k, v, sm, c);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
    EXPECT_NE(st.message().find("device cuda"), std::string::npos) << st.message();
  }
}

TEST(IndexCacheInsertRejects, Rules) {
  Rng rng(1500);
  HostTensor data(DType::u8, {2, 128, 64}), scale(DType::e4m3, {2, 128, 8});
  IndexKCache c;
  c.format = KvFormat::nvfp4;
  c.data = data.view();
  c.block_scale = scale.view();
  HostTensor x = random_bf16({3, 128}, rng, 1.0f);
  HostTensor sm = slots_tensor({0, 255, -1});
  ASSERT_TRUE(index_cache_insert(x.view(), sm.view(), c).ok());
  expect_invalid(index_cache_insert(TensorView{}, sm.view(), c), "index_k", "null");
  TensorView xr = make_view(x.view().data, DType::bf16, {3, 1, 128});
  expect_invalid(index_cache_insert(xr, sm.view(), c), "index_k");
  TensorView xd = x.view();
  xd.dtype = DType::f16;
  expect_invalid(index_cache_insert(xd, sm.view(), c), "index_k", "dtype");
  TensorView xa = x.view();
  xa.data = static_cast<std::uint8_t*>(xa.data) + 4;
  expect_invalid(index_cache_insert(xa, sm.view(), c), "index_k", "16-byte");
  HostTensor bad = slots_tensor({0, 256, -1});
  expect_invalid(index_cache_insert(x.view(), bad.view(), c), "slot_mapping[1]");
  IndexKCache cg = c;
  cg.global_scale = 0.0f;
  expect_invalid(index_cache_insert(x.view(), sm.view(), cg), "index_k.global_scale");
  IndexKCache cs = c;
  cs.block_scale = TensorView{};
  expect_invalid(index_cache_insert(x.view(), sm.view(), cs), "index_k.block_scale");
  IndexKCache cf = c;
  cf.format = KvFormat::fp8;  // u8 [.., 64] data is not an fp8 index cache
  expect_invalid(index_cache_insert(x.view(), sm.view(), cf), "index_k.data");
  TensorView xc = x.view();
  xc.device = Device::cuda;
  Status st = index_cache_insert(xc, sm.view(), c);  // mixed devices
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'slot_mapping'"), std::string::npos) << st.message();
  IndexKCache cc = c;
  cc.block_scale.device = Device::cuda;
  st = index_cache_insert(x.view(), sm.view(), cc);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'index_k.block_scale'"), std::string::npos) << st.message();
  if (!built_with_cuda()) {
    TensorView smc = sm.view();
    smc.device = Device::cuda;
    cc.data.device = Device::cuda;
    st = index_cache_insert(xc, smc, cc);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  }
}

TEST(ViewsRejects, PackedKvViews) {
  HostTensor buf(DType::bf16, {2, 2, 128, 256});
  PagedKvCache c;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(packed_kv_views(buf.view(), KvFormat::bf16, 1.0f, 1.0f, nullptr), "out");
  expect_invalid(packed_kv_views(TensorView{}, KvFormat::bf16, 1.0f, 1.0f, &c), "kv", "null");
  expect_invalid(packed_kv_views(buf.view(), KvFormat::fp8, 1.0f, 1.0f, &c), "kv", "dtype");
  expect_invalid(packed_kv_views(buf.view(), KvFormat::nvfp4, 1.0f, 1.0f, &c), "format");
  expect_invalid(packed_kv_views(make_view(buf.view().data, DType::bf16, {2, 2, 256, 128}),
                                 KvFormat::bf16, 1.0f, 1.0f, &c), "kv", "shape");
  expect_invalid(packed_kv_views(make_view(buf.view().data, DType::bf16, {4, 128, 256}),
                                 KvFormat::bf16, 1.0f, 1.0f, &c), "kv");
  HostTensor nine(DType::bf16, {1, 9, 128, 256});
  expect_invalid(packed_kv_views(nine.view(), KvFormat::bf16, 1.0f, 1.0f, &c), "kv", "1..8");
  TensorView mis = buf.view();
  mis.data = static_cast<std::uint8_t*>(mis.data) + 2;
  expect_invalid(packed_kv_views(mis, KvFormat::bf16, 1.0f, 1.0f, &c), "kv", "16-byte");
  TensorView st = buf.view();
  st.stride[3] = 2;
  expect_invalid(packed_kv_views(st, KvFormat::bf16, 1.0f, 1.0f, &c), "kv", "innermost stride 1");
  expect_invalid(packed_kv_views(buf.view(), KvFormat::bf16, 0.5f, 1.0f, &c), "k_scale");
  HostTensor f8(DType::e4m3, {2, 2, 128, 256});
  expect_invalid(packed_kv_views(f8.view(), KvFormat::fp8, 1.0f, nan, &c), "v_scale");
  expect_invalid(packed_kv_views(f8.view(), KvFormat::fp8, -2.0f, 1.0f, &c), "k_scale");
}

TEST(ViewsRejects, HeadSlotViews) {
  HostTensor buf(DType::u8, {2, 4, 128, 72});
  PagedKvCache c;
  expect_invalid(nvfp4_head_slot_views(buf.view(), false, true, 1.0f, 1.0f, nullptr), "out");
  expect_invalid(nvfp4_head_slot_views(TensorView{}, false, true, 1.0f, 1.0f, &c), "kv", "null");
  TensorView d = buf.view();
  d.dtype = DType::e4m3;
  expect_invalid(nvfp4_head_slot_views(d, false, true, 1.0f, 1.0f, &c), "kv", "dtype");
  expect_invalid(nvfp4_head_slot_views(make_view(buf.view().data, DType::u8, {2, 4, 128, 64}),
                                       false, true, 1.0f, 1.0f, &c), "kv", "shape");
  expect_invalid(nvfp4_head_slot_views(make_view(buf.view().data, DType::u8, {2, 3, 128, 72}),
                                       false, true, 1.0f, 1.0f, &c), "kv");
  expect_invalid(nvfp4_head_slot_views(make_view(buf.view().data, DType::u8, {8, 128, 72}),
                                       false, true, 1.0f, 1.0f, &c), "kv");
  TensorView nc = buf.view();
  nc.stride[0] *= 2;  // pages not back to back
  expect_invalid(nvfp4_head_slot_views(nc, false, true, 1.0f, 1.0f, &c), "kv", "contiguous");
  TensorView mis = make_view(buf.data<std::uint8_t>() + 8, DType::u8, {1, 4, 128, 72});
  expect_invalid(nvfp4_head_slot_views(mis, false, true, 1.0f, 1.0f, &c), "kv", "16-byte");
  expect_invalid(nvfp4_head_slot_views(buf.view(), false, true, 0.0f, 1.0f, &c), "k_scale");
  expect_invalid(nvfp4_head_slot_views(buf.view(), false, true, 1.0f,
                                       std::numeric_limits<float>::infinity(), &c), "v_scale");
}

TEST(QuantizeQueryRejects, Rules) {
  Rng rng(1600);
  HostTensor q = random_bf16({2, 4, 128}, rng, 1.0f);
  HostTensor out(DType::e4m3, {2, 4, 128});
  ASSERT_TRUE(quantize_query_e4m3(q.view(), 1.0f, out.view()).ok());
  expect_invalid(quantize_query_e4m3(TensorView{}, 1.0f, out.view()), "q", "null");
  expect_invalid(quantize_query_e4m3(q.view(), 1.0f, TensorView{}), "out", "null");
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN()})
    expect_invalid(quantize_query_e4m3(q.view(), bad, out.view()), "q_scale");
  TensorView qd = q.view();
  qd.dtype = DType::f32;
  expect_invalid(quantize_query_e4m3(qd, 1.0f, out.view()), "q", "dtype");
  expect_invalid(quantize_query_e4m3(make_view(q.view().data, DType::bf16, {8, 128}), 1.0f,
                                     out.view()), "q");
  expect_invalid(quantize_query_e4m3(q.view(), 1.0f,
                                     make_view(out.view().data, DType::e4m3, {2, 2, 128})),
                 "out", "shape");
  TensorView od = out.view();
  od.dtype = DType::bf16;
  expect_invalid(quantize_query_e4m3(q.view(), 1.0f, od), "out", "dtype");
  TensorView os = out.view();
  os.stride[2] = 2;
  expect_invalid(quantize_query_e4m3(q.view(), 1.0f, os), "out", "innermost stride 1");
  TensorView qc = q.view();
  qc.device = Device::cuda;
  Status st = quantize_query_e4m3(qc, 1.0f, out.view());  // mixed devices
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'out'"), std::string::npos) << st.message();
  if (!built_with_cuda()) {
    TensorView oc = out.view();
    oc.device = Device::cuda;
    st = quantize_query_e4m3(qc, 1.0f, oc);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  }
}

TEST(Nvfp4ToFp8Rejects, Rules) {
  HostTensor p(DType::u8, {4, 64}), s(DType::e4m3, {4, 8}), o(DType::e4m3, {4, 128});
  ASSERT_TRUE(nvfp4_to_fp8(p.view(), s.view(), o.view()).ok());
  expect_invalid(nvfp4_to_fp8(TensorView{}, s.view(), o.view()), "packed", "null");
  expect_invalid(nvfp4_to_fp8(p.view(), TensorView{}, o.view()), "scale", "null");
  expect_invalid(nvfp4_to_fp8(p.view(), s.view(), TensorView{}), "out", "null");
  expect_invalid(nvfp4_to_fp8(make_view(p.view().data, DType::u8, {2, 128}), s.view(), o.view()),
                 "packed", "shape");
  expect_invalid(nvfp4_to_fp8(p.view(), make_view(s.view().data, DType::e4m3, {4, 4}), o.view()),
                 "scale", "shape");
  expect_invalid(nvfp4_to_fp8(p.view(), make_view(s.view().data, DType::e4m3, {3, 8}), o.view()),
                 "scale", "shape");
  TensorView od = o.view();
  od.dtype = DType::u8;
  expect_invalid(nvfp4_to_fp8(p.view(), s.view(), od), "out", "dtype");
  TensorView pm = p.view();
  pm.data = static_cast<std::uint8_t*>(pm.data) + 1;
  expect_invalid(nvfp4_to_fp8(pm, s.view(), o.view()), "packed", "16-byte");
  TensorView ss = s.view();
  ss.stride[1] = 2;
  expect_invalid(nvfp4_to_fp8(p.view(), ss, o.view()), "scale", "innermost stride 1");
  TensorView oc = o.view();
  oc.device = Device::cuda;
  Status st = nvfp4_to_fp8(p.view(), s.view(), oc);  // mixed devices
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'out'"), std::string::npos) << st.message();
  if (!built_with_cuda()) {
    TensorView pc = p.view(), sc = s.view();
    pc.device = sc.device = Device::cuda;
    st = nvfp4_to_fp8(pc, sc, oc);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
  }
}

}  // namespace

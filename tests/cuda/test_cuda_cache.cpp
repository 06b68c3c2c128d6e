// GPU cache write path against the CPU backend, BYTE for byte: cache_insert (bf16,
// fp8 with k_scale / v_scale, nvfp4 linear / swizzled, separate tensors, vLLM packed
// views and head-slot views), index_cache_insert (bf16, fp8, nvfp4),
// quantize_query_e4m3 (every bf16 bit pattern) and nvfp4_to_fp8 (every code x scale
// pair). Caches start as the same random bytes on both sides and the whole buffers are
// compared, so skipped slots (-1, and on the GPU also slots >= num_pages*128) and
// untouched rows are checked too. Inputs have a wide dynamic range plus zeros, -0,
// +-inf, NaN and bf16 subnormals. Slots are unique (duplicate slots are unspecified on
// the GPU, see cache.h). Exact-size device buffers: compute-sanitizer memcheck clean.
// Skips without a CUDA device; run on the H200 with build/test_cuda_cache.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "flashmsa/flashmsa.h"
#include "test_util.h"

namespace flashmsa {
namespace {

using namespace cudatest;
using testing::Rng;

// bf16 values over a wide range: per row a mode (random exponents, one exponent, all
// zero, specials sprinkled), so E4M3 saturation / subnormals and NVFP4 zero blocks occur.
void fill_bf16_wide(HostTensor& t, Rng& rng) {
  auto* p = t.data<std::uint16_t>();
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-24, 12), mode(0, 9), pick(0, 99);
  const std::uint16_t specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc1, 0x0001, 0x8003,
                                    0x43e0 /*448*/, 0x43e8 /*464*/, 0xc3f0 /*-480*/};
  const std::int64_t n = t.numel();
  for (std::int64_t r = 0; r < n; r += 128) {
    const int m = mode(rng);
    const int fixed = ex(rng);
    for (std::int64_t i = r; i < std::min(n, r + 128); ++i) {
      float x;
      if (m == 0) x = 0.0f;
      else if (m <= 3) x = std::ldexp(nd(rng), fixed);
      else x = std::ldexp(nd(rng), ex(rng));
      std::uint16_t b = float_to_bf16(x);
      if (m == 9 && pick(rng) < 5) b = specials[pick(rng) % (sizeof(specials) / 2)];
      p[i] = b;
    }
  }
}

void fill_bytes_random(HostTensor& t, Rng& rng) {
  auto* p = static_cast<std::uint8_t*>(t.view().data);
  for (std::size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<std::uint8_t>(rng());
}

HostTensor clone(const HostTensor& h) {
  HostTensor c;
  std::vector<std::int64_t> shape(h.view().shape.begin(), h.view().shape.begin() + h.view().rank);
  c.reset(h.view().dtype, shape);
  if (h.bytes()) std::memcpy(c.view().data, h.view().data, h.bytes());
  return c;
}

void expect_same_bytes(const HostTensor& gpu, const HostTensor& cpu, const std::string& what) {
  ASSERT_EQ(gpu.bytes(), cpu.bytes());
  const auto* a = static_cast<const std::uint8_t*>(gpu.view().data);
  const auto* b = static_cast<const std::uint8_t*>(cpu.view().data);
  std::int64_t bad = 0, first = -1;
  for (std::size_t i = 0; i < gpu.bytes(); ++i)
    if (a[i] != b[i]) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++bad;
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " bytes differ, first at byte " << first << " gpu 0x"
                    << std::hex << (first >= 0 ? int(a[first]) : 0) << " cpu 0x"
                    << (first >= 0 ? int(b[first]) : 0) << std::dec;
}

TensorView on_device(TensorView v, void* data) {
  v.data = data;
  v.device = Device::cuda;
  return v;
}

// Unique slots for T tokens over `pages` pages; ~1/5 skipped (-1), optionally a few
// out-of-range ones (GPU only: the CPU rejects them, so its reference gets -1 there).
void make_slots(int T, int pages, bool oob, Rng& rng, HostTensor* gpu, HostTensor* cpu) {
  gpu->reset(DType::i32, {T});
  cpu->reset(DType::i32, {T});
  std::vector<std::int32_t> perm = testing::random_permutation(pages * 128, rng);
  for (int i = 0; i < T; ++i) {
    std::int32_t s = perm[static_cast<std::size_t>(i) % perm.size()];
    std::int32_t c = s;
    const int r = static_cast<int>(rng() % 10);
    if (r < 2) s = c = -1;
    else if (oob && r == 2) {
      s = (i % 2) ? pages * 128 + static_cast<int>(rng() % 1000) : std::numeric_limits<std::int32_t>::min() + i;
      c = -1;
    }
    gpu->data<std::int32_t>()[i] = s;
    cpu->data<std::int32_t>()[i] = c;
  }
}

// ---------------------------------------------------------------------------
// cache_insert

enum class Layout { separate, packed, head_slot };

struct KvCase {
  KvFormat fmt = KvFormat::bf16;
  Layout layout = Layout::separate;
  int hkv = 4, T = 333, pages = 5;
  bool k_swz = false, v_swz = false;
  float k_scale = 1.0f, v_scale = 1.0f;
  bool oob = true;
  std::uint64_t seed = 1;
};

std::string name_of(const KvCase& c) {
  const char* l = c.layout == Layout::separate ? "separate" : c.layout == Layout::packed ? "packed" : "head-slot";
  return std::string(kv_format_name(c.fmt)) + " " + l + " Hkv " + std::to_string(c.hkv) + " T " +
         std::to_string(c.T) + " pages " + std::to_string(c.pages) + (c.k_swz ? " k-swz" : "") +
         (c.v_swz ? " v-swz" : "");
}

// Backing buffers of a cache, and the cache over given base pointers.
std::vector<HostTensor> make_buffers(const KvCase& c, Rng& rng) {
  std::vector<HostTensor> b;
  const std::int64_t P = c.pages, H = c.hkv;
  switch (c.layout) {
    case Layout::packed:
      b.emplace_back(c.fmt == KvFormat::bf16 ? DType::bf16 : DType::e4m3,
                     std::initializer_list<std::int64_t>{P, H, 128, 256});
      break;
    case Layout::head_slot:
      b.emplace_back(DType::u8, std::initializer_list<std::int64_t>{P, 2 * H, 128, 72});
      break;
    case Layout::separate:
      if (c.fmt == KvFormat::nvfp4) {
        for (int s = 0; s < 2; ++s) b.emplace_back(DType::u8, std::initializer_list<std::int64_t>{P, H, 128, 64});
        for (int s = 0; s < 2; ++s) b.emplace_back(DType::e4m3, std::initializer_list<std::int64_t>{P, H, 128, 8});
      } else {
        const DType dt = c.fmt == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
        for (int s = 0; s < 2; ++s) b.emplace_back(dt, std::initializer_list<std::int64_t>{P, H, 128, 128});
      }
      break;
  }
  for (HostTensor& t : b) fill_bytes_random(t, rng);
  return b;
}

PagedKvCache make_cache(const KvCase& c, const std::vector<TensorView>& v) {
  PagedKvCache kv;
  Status st;
  switch (c.layout) {
    case Layout::packed:
      st = packed_kv_views(v[0], c.fmt, c.k_scale, c.v_scale, &kv);
      break;
    case Layout::head_slot:
      st = nvfp4_head_slot_views(v[0], c.k_swz, c.v_swz, c.k_scale, c.v_scale, &kv);
      break;
    case Layout::separate:
      kv.format = c.fmt;
      kv.k.data = v[0];
      kv.v.data = v[1];
      kv.k.global_scale = c.k_scale;
      kv.v.global_scale = c.v_scale;
      if (c.fmt == KvFormat::nvfp4) {
        kv.k.block_scale = v[2];
        kv.v.block_scale = v[3];
        kv.k.scale_swizzled = c.k_swz;
        kv.v.scale_swizzled = c.v_swz;
      }
      break;
  }
  EXPECT_TRUE(st.ok()) << st.message();
  return kv;
}

void check_kv_case(const KvCase& c) {
  SCOPED_TRACE(name_of(c));
  Rng rng(c.seed);
  // k and v are views of one [T, 2*Hkv + 1, 128] projection buffer (token stride not T*H*128).
  const std::int64_t row_heads = 2 * c.hkv + 1;
  HostTensor src(DType::bf16, {c.T, row_heads, 128});
  fill_bf16_wide(src, rng);
  const TensorView k = make_strided_view(src.view().data, DType::bf16, {c.T, c.hkv, 128}, {row_heads * 128, 128, 1});
  TensorView v = k;
  v.data = src.data<std::uint16_t>() + c.hkv * 128;
  HostTensor slots_gpu, slots_cpu;
  make_slots(c.T, c.pages, c.oob, rng, &slots_gpu, &slots_cpu);

  std::vector<HostTensor> cpu_bufs = make_buffers(c, rng);
  std::vector<HostTensor> gpu_result;
  std::vector<std::unique_ptr<DeviceTensor>> dev;
  std::vector<TensorView> cpu_views, gpu_views;
  for (HostTensor& b : cpu_bufs) {
    gpu_result.push_back(clone(b));
    dev.push_back(std::make_unique<DeviceTensor>(b));
    cpu_views.push_back(b.view());
    gpu_views.push_back(dev.back()->view());
  }
  DeviceTensor d_src(src), d_slots(slots_gpu);
  const TensorView dk = on_device(k, d_src.view().data);
  const TensorView dv = on_device(v, static_cast<std::uint16_t*>(d_src.view().data) + c.hkv * 128);

  Status st = cache_insert(k, v, slots_cpu.view(), make_cache(c, cpu_views));
  ASSERT_TRUE(st.ok()) << st.message();
  st = cache_insert(dk, dv, d_slots.view(), make_cache(c, gpu_views));
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (std::size_t i = 0; i < cpu_bufs.size(); ++i) {
    dev[i]->download(gpu_result[i]);
    expect_same_bytes(gpu_result[i], cpu_bufs[i], "buffer " + std::to_string(i));
  }
}

TEST(CudaCacheInsert, Bf16AndFp8) {
  REQUIRE_GPU();
  std::uint64_t seed = 10;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8})
    for (Layout l : {Layout::separate, Layout::packed})
      for (int hkv : {1, 4, 8})
        for (int T : {1, 7, 333}) {
          KvCase c;
          c.fmt = f;
          c.layout = l;
          c.hkv = hkv;
          c.T = T;
          c.pages = (T + 127) / 128 + 2;
          if (f == KvFormat::fp8) {
            c.k_scale = 0.0371f;
            c.v_scale = 3.5f;
          }
          c.seed = seed++;
          check_kv_case(c);
        }
}

TEST(CudaCacheInsert, Nvfp4LinearSwizzledHeadSlot) {
  REQUIRE_GPU();
  std::uint64_t seed = 100;
  for (Layout l : {Layout::separate, Layout::head_slot})
    for (int swz = 0; swz < 4; ++swz)
      for (int hkv : {1, 4, 8})
        for (int T : {1, 129, 1001}) {
          KvCase c;
          c.fmt = KvFormat::nvfp4;
          c.layout = l;
          c.k_swz = swz & 1;
          c.v_swz = (swz >> 1) & 1;
          c.hkv = hkv;
          c.T = T;
          c.pages = (T + 127) / 128 + 1;
          c.k_scale = swz == 0 ? 1.0f : 0.0123f;
          c.v_scale = swz == 0 ? 1.0f : 7.0f;
          c.seed = seed++;
          check_kv_case(c);
        }
}

TEST(CudaCacheInsert, LargeAndFullPages) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    KvCase c;
    c.fmt = f;
    c.layout = f == KvFormat::nvfp4 ? Layout::head_slot : Layout::packed;
    c.v_swz = true;
    c.hkv = 4;
    c.T = 8191;
    c.pages = 64;  // every slot of 64 pages is a candidate
    c.k_scale = f == KvFormat::bf16 ? 1.0f : 0.25f;
    c.v_scale = f == KvFormat::bf16 ? 1.0f : 0.5f;
    c.seed = 7;
    check_kv_case(c);
  }
}

TEST(CudaCacheInsert, EmptyAndValidation) {
  REQUIRE_GPU();
  KvCase c;
  c.fmt = KvFormat::fp8;
  c.layout = Layout::packed;
  Rng rng(3);
  std::vector<HostTensor> bufs = make_buffers(c, rng);
  DeviceTensor cache(bufs[0]);
  const PagedKvCache kv = make_cache(c, {cache.view()});
  HostTensor k(DType::bf16, {3, c.hkv, 128}), sm(DType::i32, {3}), empty_sm(DType::i32, {0});
  DeviceTensor dk(k), dsm(sm), dempty(empty_sm);
  TensorView k0 = dk.view();
  k0.shape[0] = 0;
  EXPECT_TRUE(cache_insert(k0, k0, dempty.view(), kv).ok());  // T = 0: nothing launched
  TensorView mis = dk.view();
  mis.data = static_cast<std::uint8_t*>(mis.data) + 2;
  mis.shape[0] = 2;
  TensorView sm2 = dsm.view();
  sm2.shape[0] = 2;
  Status st = cache_insert(mis, mis, sm2, kv);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'k'"), std::string::npos) << st.message();
  st = cache_insert(dk.view(), dk.view(), sm.view(), kv);  // slot_mapping on the host
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'slot_mapping'"), std::string::npos) << st.message();
}

// ---------------------------------------------------------------------------
// index_cache_insert

void check_index_case(KvFormat f, int T, int pages, float gs, std::uint64_t seed) {
  SCOPED_TRACE(std::string("index ") + kv_format_name(f) + " T " + std::to_string(T));
  Rng rng(seed);
  HostTensor src(DType::bf16, {T, 3, 128});  // index_k = head 1 of a [T, 3, 128] buffer
  fill_bf16_wide(src, rng);
  const TensorView x = make_strided_view(src.data<std::uint16_t>() + 128, DType::bf16, {T, 128}, {3 * 128, 1});
  HostTensor slots_gpu, slots_cpu;
  make_slots(T, pages, true, rng, &slots_gpu, &slots_cpu);
  HostTensor data(f == KvFormat::bf16 ? DType::bf16 : f == KvFormat::fp8 ? DType::e4m3 : DType::u8,
                  {pages, 128, f == KvFormat::nvfp4 ? 64 : 128});
  HostTensor scale(DType::e4m3, {f == KvFormat::nvfp4 ? pages : 0, 128, 8});
  fill_bytes_random(data, rng);
  fill_bytes_random(scale, rng);
  DeviceTensor d_data(data), d_scale(scale), d_src(src), d_slots(slots_gpu);
  IndexKCache cc, gc;
  cc.format = gc.format = f;
  cc.data = data.view();
  gc.data = d_data.view();
  if (f == KvFormat::nvfp4) {
    cc.block_scale = scale.view();
    gc.block_scale = d_scale.view();
    cc.global_scale = gc.global_scale = gs;
  }
  Status st = index_cache_insert(x, slots_cpu.view(), cc);
  ASSERT_TRUE(st.ok()) << st.message();
  st = index_cache_insert(on_device(x, static_cast<std::uint16_t*>(d_src.view().data) + 128), d_slots.view(), gc);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  HostTensor gd = clone(data), gsc = clone(scale);
  d_data.download(gd);
  d_scale.download(gsc);
  expect_same_bytes(gd, data, "index data");
  expect_same_bytes(gsc, scale, "index scales");
}

TEST(CudaIndexCacheInsert, AllFormats) {
  REQUIRE_GPU();
  std::uint64_t seed = 500;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4})
    for (int T : {1, 129, 777, 4097}) {
      check_index_case(f, T, (T + 127) / 128 + 1, 1.0f, seed++);
      if (f == KvFormat::nvfp4) check_index_case(f, T, (T + 127) / 128 + 1, 0.0625f, seed++);
    }
}

// ---------------------------------------------------------------------------
// quantize_query_e4m3

void check_quantize(const HostTensor& q, float q_scale, int out_heads, const std::string& what) {
  SCOPED_TRACE(what);
  const std::int64_t T = q.view().shape[0], H = q.view().shape[1];
  HostTensor outbuf(DType::e4m3, {T, out_heads, 128});  // out may be a head slice
  Rng rng(11);
  fill_bytes_random(outbuf, rng);
  HostTensor gpu_out = clone(outbuf);
  const TensorView out = make_strided_view(outbuf.view().data, DType::e4m3, {T, H, 128}, {out_heads * 128, 128, 1});
  DeviceTensor dq(q), dout(outbuf);
  Status st = quantize_query_e4m3(q.view(), q_scale, out);
  ASSERT_TRUE(st.ok()) << st.message();
  st = quantize_query_e4m3(dq.view(), q_scale, on_device(out, dout.view().data));
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dout.download(gpu_out);
  expect_same_bytes(gpu_out, outbuf, what);
}

TEST(CudaQuantizeQuery, EveryBf16Pattern) {
  REQUIRE_GPU();
  HostTensor q(DType::bf16, {512, 1, 128});
  for (int i = 0; i < 65536; ++i) q.data<std::uint16_t>()[i] = static_cast<std::uint16_t>(i);
  // Non-power-of-two scales exercise the division-free quotient (quant_device.cuh).
  for (float s : {1.0f, 0.0625f, 0.37f, 3.1e-3f, 1000.0f, 1e-30f, 0.05f, 0.03f, 0.7f, 3.0e38f})
    check_quantize(q, s, 1, "all bf16 / " + std::to_string(s));
}

TEST(CudaQuantizeQuery, RandomHeadsStridedOut) {
  REQUIRE_GPU();
  Rng rng(12);
  HostTensor q(DType::bf16, {37, 64, 128});
  fill_bf16_wide(q, rng);
  check_quantize(q, 0.05f, 65, "37 x 64 heads, out head stride 65");
  HostTensor q1(DType::bf16, {1, 16, 128});
  fill_bf16_wide(q1, rng);
  check_quantize(q1, 1.0f, 16, "1 x 16");
}

// ---------------------------------------------------------------------------
// nvfp4_to_fp8

void check_nvfp4_to_fp8(const HostTensor& packed, const HostTensor& scalebuf, const TensorView& scale,
                        const std::string& what) {
  SCOPED_TRACE(what);
  const std::int64_t R = packed.view().shape[0];
  HostTensor out(DType::e4m3, {R, 128});
  Rng rng(13);
  fill_bytes_random(out, rng);
  HostTensor gpu_out = clone(out);
  DeviceTensor dp(packed), ds(scalebuf), dout(out);
  Status st = nvfp4_to_fp8(packed.view(), scale, out.view());
  ASSERT_TRUE(st.ok()) << st.message();
  const std::ptrdiff_t off = static_cast<const std::uint8_t*>(scale.data) - scalebuf.data<std::uint8_t>();
  st = nvfp4_to_fp8(dp.view(), on_device(scale, static_cast<std::uint8_t*>(ds.view().data) + off), dout.view());
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dout.download(gpu_out);
  expect_same_bytes(gpu_out, out, what);
}

TEST(CudaNvfp4ToFp8, EveryCodeScalePair) {
  REQUIRE_GPU();
  // Row r: scale byte r % 256 in all 8 groups, packed bytes (r / 256) * 64 + i: over the
  // 1024 rows every (byte, scale) pair, i.e. every code in both nibbles x every scale.
  HostTensor packed(DType::u8, {1024, 64}), scale(DType::u8, {1024, 8});
  for (int r = 0; r < 1024; ++r) {
    for (int i = 0; i < 64; ++i) packed.data<std::uint8_t>()[r * 64 + i] = static_cast<std::uint8_t>((r / 256) * 64 + i);
    for (int g = 0; g < 8; ++g) scale.data<std::uint8_t>()[r * 8 + g] = static_cast<std::uint8_t>(r % 256);
  }
  check_nvfp4_to_fp8(packed, scale, scale.view(), "all pairs");
}

TEST(CudaNvfp4ToFp8, RandomStridedScales) {
  REQUIRE_GPU();
  Rng rng(14);
  HostTensor packed(DType::u8, {333, 64}), scalebuf(DType::e4m3, {333, 16});
  fill_bytes_random(packed, rng);
  fill_bytes_random(scalebuf, rng);
  const TensorView scale = make_strided_view(scalebuf.data<std::uint8_t>() + 3, DType::e4m3, {333, 8}, {16, 1});
  check_nvfp4_to_fp8(packed, scalebuf, scale, "333 rows, scale row stride 16, offset 3");
}

}  // namespace
}  // namespace flashmsa

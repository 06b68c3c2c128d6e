// fused_qknorm_rope_insert on the CPU (spec 1.3, 2.1, 6.2; flashmsa/fused.h).
//
// A hand-worked case (constant vectors: the norm gives (1 + w) exactly after BF16
// rounding, RoPE at position 0 is the identity, position 3 rotates pair (j, j+32) by
// 3 * inv_freq_j), random cases against an independent double-precision implementation
// written here (atol = rtol = 1e-2 after BF16 rounding; E4M3 outputs within their
// rounding; V bytes exact; untouched cache rows keep their poison), NVFP4 caches equal
// to cache_insert of the BF16 K, and validation errors that name the argument.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/fused.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"
#include "fused_case.h"

namespace {

using namespace flashmsa;
using flashmsa::testing::FusedCase;

// ---------------------------------------------------------------------------
// Independent reference: FP64 Gemma RMSNorm + partial NeoX RoPE (spec 2.1).
void ref_norm_rope(const std::uint16_t* x, const std::uint16_t* w, const std::uint16_t* cs,
                   double eps, double* y) {
  double ss = 0.0;
  for (int d = 0; d < 128; ++d) {
    const double v = bf16_to_float(x[d]);
    ss += v * v;
  }
  const double r = 1.0 / std::sqrt(ss / 128.0 + eps);
  double z[128];
  for (int d = 0; d < 128; ++d) z[d] = bf16_to_float(x[d]) * r * (1.0 + bf16_to_float(w[d]));
  for (int d = 0; d < 128; ++d) y[d] = z[d];
  for (int j = 0; j < 32; ++j) {
    const double c = bf16_to_float(cs[j]), s = bf16_to_float(cs[32 + j]);
    y[j] = z[j] * c - z[j + 32] * s;
    y[j + 32] = z[j + 32] * c + z[j] * s;
  }
}

bool close_bf16(double got, double ref) { return std::fabs(got - ref) <= 1e-2 + 1e-2 * std::fabs(ref); }
// E4M3 keeps 3 mantissa bits: half an ulp is 2^-4 relative (plus the BF16 step before it).
bool close_e4m3(double got, double ref) { return std::fabs(got - ref) <= 1e-2 + 0.07 * std::fabs(ref); }

double out_value(const HostTensor& t, std::int64_t i, std::int64_t h, int d, float scale) {
  const std::int64_t off = (i * t.view().shape[1] + h) * 128 + d;
  if (t.view().dtype == DType::bf16) return bf16_to_float(t.data<std::uint16_t>()[off]);
  return static_cast<double>(e4m3_to_float(t.data<std::uint8_t>()[off])) * scale;
}

// Element (page, head, tok, d) of a cache side (bf16 or e4m3) as bytes / value.
const std::uint8_t* side_row(const PagedCacheSide& s, std::int64_t page, std::int64_t h,
                             std::int64_t tok) {
  const TensorView& d = s.data;
  return static_cast<const std::uint8_t*>(d.data) +
         (page * d.stride[0] + h * d.stride[1] + tok * d.stride[2]) * dtype_size(d.dtype);
}
double side_value(const PagedCacheSide& s, const std::uint8_t* row, int d) {
  if (s.data.dtype == DType::bf16) {
    std::uint16_t b;
    std::memcpy(&b, row + 2 * d, 2);
    return bf16_to_float(b);
  }
  return static_cast<double>(e4m3_to_float(row[d])) * s.global_scale;
}

// Checks every output of a finished run of `c` against the FP64 reference.
void check_against_reference(const FusedCase& c, const std::string& what) {
  const std::int64_t vecs = c.row() / 128;
  const auto* qkv = c.qkv.data<std::uint16_t>();
  const auto* cs = c.cos_sin.data<std::uint16_t>();
  const bool q8 = c.q_dtype == DType::e4m3, iq8 = c.iq_dtype == DType::e4m3;
  const bool kv8 = c.kv_fmt == KvFormat::fp8, ik8 = c.idx_fmt == KvFormat::fp8;
  std::int64_t bad = 0;
  std::string first;
  auto expect = [&](bool ok, const std::string& where, double got, double ref) {
    if (!ok && bad++ == 0) first = where + ": got " + std::to_string(got) + " ref " + std::to_string(ref);
  };
  std::set<std::int64_t> kv_written, ik_written;
  double y[128];
  for (int i = 0; i < c.t; ++i) {
    const std::uint16_t* row = qkv + i * vecs * 128;
    const std::uint16_t* csr = cs + static_cast<std::int64_t>(c.positions.data<std::int32_t>()[i]) * 64;
    const std::string tok = what + " token " + std::to_string(i);
    for (int h = 0; h < c.hq; ++h) {
      ref_norm_rope(row + h * 128, c.wq.data<std::uint16_t>(), csr, 1e-6, y);
      for (int d = 0; d < 128; ++d) {
        const double g = out_value(c.q_out, i, h, d, c.q_scale);
        expect(q8 ? close_e4m3(g, y[d]) : close_bf16(g, y[d]),
               tok + " q head " + std::to_string(h) + " dim " + std::to_string(d), g, y[d]);
      }
    }
    for (int h = 0; h < c.hkv; ++h) {
      ref_norm_rope(row + (c.hq + 2 * c.hkv + h) * 128, c.wiq.data<std::uint16_t>(), csr, 1e-6, y);
      for (int d = 0; d < 128; ++d) {
        const double g = out_value(c.iq_out, i, h, d, 1.0f);
        expect(iq8 ? close_e4m3(g, y[d]) : close_bf16(g, y[d]),
               tok + " index q head " + std::to_string(h) + " dim " + std::to_string(d), g, y[d]);
      }
    }
    const std::int32_t s = c.slots.data<std::int32_t>()[i];
    if (s >= 0) {
      kv_written.insert(s);
      for (int h = 0; h < c.hkv; ++h) {
        ref_norm_rope(row + (c.hq + h) * 128, c.wk.data<std::uint16_t>(), csr, 1e-6, y);
        const std::uint8_t* kr = side_row(c.kv.k, s / 128, h, s % 128);
        const std::uint8_t* vr = side_row(c.kv.v, s / 128, h, s % 128);
        const std::uint16_t* vsrc = row + (c.hq + c.hkv + h) * 128;
        for (int d = 0; d < 128; ++d) {
          const double g = side_value(c.kv.k, kr, d);
          expect(kv8 ? close_e4m3(g, y[d]) : close_bf16(g, y[d]),
                 tok + " K head " + std::to_string(h) + " dim " + std::to_string(d), g, y[d]);
          bool v_ok;
          if (kv8) {
            v_ok = vr[d] == float_to_e4m3_sat(bf16_to_float(vsrc[d]) / c.v_scale);
          } else {
            std::uint16_t b;
            std::memcpy(&b, vr + 2 * d, 2);
            v_ok = b == vsrc[d];
          }
          expect(v_ok, tok + " V head " + std::to_string(h) + " dim " + std::to_string(d), 0, 0);
        }
      }
    }
    const std::int32_t is = c.islots.data<std::int32_t>()[i];
    if (is >= 0) {
      ik_written.insert(is);
      ref_norm_rope(row + (c.hq + 3 * c.hkv) * 128, c.wik.data<std::uint16_t>(), csr, 1e-6, y);
      const auto* ir = static_cast<const std::uint8_t*>(c.ik.data.data) +
                       (static_cast<std::int64_t>(is) * 128) * dtype_size(c.ik.data.dtype);
      for (int d = 0; d < 128; ++d) {
        double g;
        if (ik8) {
          g = e4m3_to_float(ir[d]);
        } else {
          std::uint16_t b;
          std::memcpy(&b, ir + 2 * d, 2);
          g = bf16_to_float(b);
        }
        expect(ik8 ? close_e4m3(g, y[d]) : close_bf16(g, y[d]),
               tok + " index K dim " + std::to_string(d), g, y[d]);
      }
    }
  }
  // Rows nobody wrote keep the poison.
  for (std::int64_t s = 0; s < static_cast<std::int64_t>(c.pages) * 128; ++s) {
    if (kv_written.count(s)) continue;
    for (int h = 0; h < c.hkv; ++h)
      for (const PagedCacheSide* side : {&c.kv.k, &c.kv.v}) {
        const std::uint8_t* r = side_row(*side, s / 128, h, s % 128);
        for (std::size_t b = 0; b < 128 * dtype_size(side->data.dtype); ++b)
          expect(r[b] == 0xAB, what + " untouched K/V slot " + std::to_string(s), r[b], 0xAB);
      }
  }
  for (std::int64_t s = 0; s < static_cast<std::int64_t>(c.index_pages) * 128; ++s) {
    if (ik_written.count(s)) continue;
    const std::size_t es = dtype_size(c.ik.data.dtype);
    const auto* r = static_cast<const std::uint8_t*>(c.ik.data.data) + s * 128 * es;
    for (std::size_t b = 0; b < 128 * es; ++b)
      expect(r[b] == 0xAB, what + " untouched index slot " + std::to_string(s), r[b], 0xAB);
  }
  EXPECT_EQ(bad, 0) << first;
}

// ---------------------------------------------------------------------------

TEST(FusedQkNormRope, HandWorkedConstantVectors) {
  FusedCase c;
  c.hq = 1;
  c.hkv = 1;
  c.t = 2;
  c.max_pos = 8;
  c.pages = 2;
  c.index_pages = 1;
  c.build();
  // Every input value 2.0: mean(x^2) = 4, y = 2 / sqrt(4 + 1e-6) * (1 + w) -> (1 + w) in BF16.
  for (std::int64_t k = 0; k < c.qkv.numel(); ++k) c.qkv.data<std::uint16_t>()[k] = float_to_bf16(2.0f);
  const float w[4] = {0.0f, 0.5f, 1.0f, -0.5f};  // q, k, index q, index k
  HostTensor* ws[4] = {&c.wq, &c.wk, &c.wiq, &c.wik};
  for (int b = 0; b < 4; ++b)
    for (int d = 0; d < 128; ++d) ws[b]->data<std::uint16_t>()[d] = float_to_bf16(w[b]);
  c.positions.data<std::int32_t>()[0] = 0;
  c.positions.data<std::int32_t>()[1] = 3;
  c.slots.data<std::int32_t>()[0] = 0;
  c.slots.data<std::int32_t>()[1] = 129;  // page 1, token 1
  c.islots.data<std::int32_t>()[0] = 5;
  c.islots.data<std::int32_t>()[1] = -1;  // skipped
  ASSERT_TRUE(fused_qknorm_rope_insert(c.args()).ok());

  auto q = [&](int i, int d) { return bf16_to_float(c.q_out.data<std::uint16_t>()[i * 128 + d]); };
  auto iq = [&](int i, int d) { return bf16_to_float(c.iq_out.data<std::uint16_t>()[i * 128 + d]); };
  auto kc = [&](std::int64_t s, int d) {
    std::uint16_t b;
    std::memcpy(&b, side_row(c.kv.k, s / 128, 0, s % 128) + 2 * d, 2);
    return bf16_to_float(b);
  };
  auto vc = [&](std::int64_t s, int d) {
    std::uint16_t b;
    std::memcpy(&b, side_row(c.kv.v, s / 128, 0, s % 128) + 2 * d, 2);
    return b;
  };
  // Position 0: cos 1, sin 0 -> identity; values are exactly (1 + w).
  for (int d = 0; d < 128; ++d) {
    EXPECT_EQ(q(0, d), 1.0f) << d;
    EXPECT_EQ(kc(0, d), 1.5f) << d;
    EXPECT_EQ(iq(0, d), 2.0f) << d;
    EXPECT_EQ(vc(0, d), float_to_bf16(2.0f)) << d;  // V raw
    std::uint16_t b;
    std::memcpy(&b, static_cast<const std::uint8_t*>(c.ik.data.data) + (5 * 128 + d) * 2, 2);
    EXPECT_EQ(bf16_to_float(b), 0.5f) << d;
  }
  // Position 3: pair (j, j+32) of a constant vector a becomes a(cos - sin), a(cos + sin),
  // angle 3 * 5e6^(-2j/64); dims 64..127 unchanged.
  for (int j = 0; j < 32; ++j) {
    const double ang = 3.0 * std::pow(5.0e6, -2.0 * j / 64.0);
    const double cm = std::cos(ang) - std::sin(ang), cp = std::cos(ang) + std::sin(ang);
    EXPECT_NEAR(q(1, j), cm, 1e-2) << j;
    EXPECT_NEAR(q(1, j + 32), cp, 1e-2) << j;
    EXPECT_NEAR(kc(129, j), 1.5 * cm, 1.5e-2) << j;
    EXPECT_NEAR(kc(129, j + 32), 1.5 * cp, 1.5e-2) << j;
    EXPECT_NEAR(iq(1, j), 2.0 * cm, 2e-2) << j;
  }
  EXPECT_NEAR(q(1, 0), std::cos(3.0) - std::sin(3.0), 1e-2);  // -1.1311
  EXPECT_NEAR(q(1, 32), std::cos(3.0) + std::sin(3.0), 1e-2);  // -0.8489
  for (int d = 64; d < 128; ++d) {
    EXPECT_EQ(q(1, d), 1.0f);
    EXPECT_EQ(kc(129, d), 1.5f);
  }
  // The skipped index token wrote nothing: the index cache is poison except row 5.
  const auto* ib = static_cast<const std::uint8_t*>(c.ik.data.data);
  for (std::int64_t b = 0; b < 128 * 128 * 2; ++b)
    if (b / 256 != 5) ASSERT_EQ(ib[b], 0xAB) << b;
}

TEST(FusedQkNormRope, RandomAgainstFp64Reference) {
  const flashmsa::testing::FusedCombo combos[] = {
      {16, 1, 37, KvFormat::bf16, KvFormat::bf16, DType::bf16, DType::bf16, false},
      {16, 1, 37, KvFormat::fp8, KvFormat::fp8, DType::e4m3, DType::e4m3, false},
      {64, 4, 29, KvFormat::bf16, KvFormat::fp8, DType::bf16, DType::e4m3, true},
      {64, 4, 29, KvFormat::fp8, KvFormat::bf16, DType::e4m3, DType::bf16, true},
      {8, 8, 19, KvFormat::fp8, KvFormat::bf16, DType::bf16, DType::bf16, false},
      {16, 2, 130, KvFormat::bf16, KvFormat::bf16, DType::bf16, DType::e4m3, false},
  };
  int n = 0;
  for (const auto& k : combos) {
    FusedCase c;
    k.configure(c, 100 + n);
    c.build();
    const Status s = fused_qknorm_rope_insert(c.args());
    ASSERT_TRUE(s.ok()) << s.message();
    check_against_reference(c, "combo " + std::to_string(n));
    ++n;
  }
}

// The NVFP4 case of Nvfp4CachesEqualCacheInsertOfBf16K (same inputs as its bf16 `ref`).
void build_nvfp4(FusedCase& c) {
  c.hq = 16;
  c.hkv = 2;
  c.t = 41;
  c.seed = 7;
  c.kv_fmt = KvFormat::nvfp4;
  c.idx_fmt = KvFormat::nvfp4;
  c.k_scale = 0.02f;
  c.v_scale = 0.5f;
  c.build();
  c.ik.global_scale = 0.25f;
}

TEST(FusedQkNormRope, Nvfp4CachesEqualCacheInsertOfBf16K) {
  FusedCase ref;  // bf16 caches: gives the BF16 K rows and index keys
  ref.hq = 16;
  ref.hkv = 2;
  ref.t = 41;
  ref.seed = 7;
  ref.build();
  ASSERT_TRUE(fused_qknorm_rope_insert(ref.args()).ok());

  FusedCase c;
  build_nvfp4(c);
  const Status s = fused_qknorm_rope_insert(c.args());
  ASSERT_TRUE(s.ok()) << s.message();

  // Expected: cache_insert / index_cache_insert of the BF16 rows into fresh caches.
  FusedCase e;
  build_nvfp4(e);
  HostTensor k(DType::bf16, {e.t, e.hkv, 128}), ik(DType::bf16, {e.t, 128});
  const std::int64_t vecs = e.row() / 128;
  for (int i = 0; i < e.t; ++i) {
    const std::int32_t sl = e.slots.data<std::int32_t>()[i];
    if (sl >= 0)
      for (int h = 0; h < e.hkv; ++h)
        std::memcpy(k.data<std::uint16_t>() + (i * e.hkv + h) * 128,
                    side_row(ref.kv.k, sl / 128, h, sl % 128), 256);
    const std::int32_t is = e.islots.data<std::int32_t>()[i];
    if (is >= 0)
      std::memcpy(ik.data<std::uint16_t>() + i * 128,
                  static_cast<const std::uint8_t*>(ref.ik.data.data) + is * 256, 256);
  }
  TensorView v = make_strided_view(e.qkv.data<std::uint16_t>() + (e.hq + e.hkv) * 128, DType::bf16,
                                   {e.t, e.hkv, 128}, {vecs * 128, 128, 1});
  ASSERT_TRUE(cache_insert(k.view(), v, e.slots.view(), e.kv).ok());
  ASSERT_TRUE(index_cache_insert(ik.view(), e.islots.view(), e.ik).ok());
  EXPECT_EQ(std::memcmp(c.k_data4.view().data, e.k_data4.view().data, c.k_data4.bytes()), 0);
  EXPECT_EQ(std::memcmp(c.v_data4.view().data, e.v_data4.view().data, c.v_data4.bytes()), 0);
  EXPECT_EQ(std::memcmp(c.k_scale4.view().data, e.k_scale4.view().data, c.k_scale4.bytes()), 0);
  EXPECT_EQ(std::memcmp(c.v_scale4.view().data, e.v_scale4.view().data, c.v_scale4.bytes()), 0);
  EXPECT_EQ(std::memcmp(c.index_buf.view().data, e.index_buf.view().data, c.index_buf.bytes()), 0);
  EXPECT_EQ(std::memcmp(c.index_scale.view().data, e.index_scale.view().data, c.index_scale.bytes()), 0);
  // q / index q do not depend on the cache format.
  EXPECT_EQ(std::memcmp(c.q_out.view().data, ref.q_out.view().data, c.q_out.bytes()), 0);
  EXPECT_EQ(std::memcmp(c.iq_out.view().data, ref.iq_out.view().data, c.iq_out.bytes()), 0);
}

TEST(FusedQkNormRope, ZeroTokensIsANoOp) {
  FusedCase c;
  c.t = 0;
  c.build();
  EXPECT_TRUE(fused_qknorm_rope_insert(c.args()).ok());
}

// ---------------------------------------------------------------------------
// Validation

void expect_rejects(const FusedQkvInsertArgs& a, const std::string& arg,
                    StatusCode code = StatusCode::kInvalidArgument) {
  const Status s = fused_qknorm_rope_insert(a);
  EXPECT_EQ(s.code(), code) << arg << ": " << s.message();
  EXPECT_NE(s.message().find("argument '" + arg + "'"), std::string::npos)
      << "expected the message to name '" << arg << "': " << s.message();
  EXPECT_NE(s.message().find("fused_qknorm_rope_insert"), std::string::npos) << s.message();
}

TEST(FusedQkNormRope, ValidationNamesTheArgument) {
  FusedCase c;
  c.hq = 16;
  c.hkv = 1;
  c.t = 9;
  c.build();
  const FusedQkvInsertArgs good = c.args();
  ASSERT_TRUE(fused_qknorm_rope_insert(good).ok());

  FusedQkvInsertArgs a = good;
  a.qkv.shape[1] -= 128;
  expect_rejects(a, "qkv");
  a = good;
  a.qkv.dtype = DType::f16;
  expect_rejects(a, "qkv");
  a = good;
  a.qkv.data = static_cast<std::uint8_t*>(a.qkv.data) + 2;
  expect_rejects(a, "qkv");
  a = good;
  a.q_norm_weight.shape[0] = 64;
  expect_rejects(a, "q_norm_weight");
  a = good;
  a.index_k_norm_weight = TensorView{};
  expect_rejects(a, "index_k_norm_weight");
  a = good;
  a.k_norm_weight.dtype = DType::f32;
  expect_rejects(a, "k_norm_weight");
  a = good;
  a.cos_sin_cache.shape[1] = 32;
  expect_rejects(a, "cos_sin_cache");
  a = good;
  a.positions.dtype = DType::f32;
  expect_rejects(a, "positions");
  a = good;
  a.num_index_heads = 2;
  expect_rejects(a, "num_index_heads");
  a = good;
  a.num_kv_heads = 9;
  expect_rejects(a, "num_kv_heads");
  a = good;
  a.num_q_heads = 48;
  expect_rejects(a, "num_q_heads / num_kv_heads");
  a = good;
  a.eps = -1.0f;
  expect_rejects(a, "eps");
  a = good;
  a.eps = std::numeric_limits<float>::quiet_NaN();
  expect_rejects(a, "eps");
  a = good;
  a.q_scale = 2.0f;  // bf16 q_out
  expect_rejects(a, "q_scale");
  a = good;
  a.q_out.shape[1] = 8;
  expect_rejects(a, "q_out");
  a = good;
  a.index_q_out.dtype = DType::f32;
  expect_rejects(a, "index_q_out");
  a = good;
  a.slot_mapping.shape[0] = 8;
  expect_rejects(a, "slot_mapping");
  a = good;
  a.kv.k.global_scale = 2.0f;  // bf16 cache
  expect_rejects(a, "kv.k.global_scale");
  a = good;
  a.index_k.data.shape[1] = 64;
  expect_rejects(a, "index_k.data");

  FusedCase two;  // a cache with 2 KV heads does not fit num_kv_heads = 1
  two.hq = 16;
  two.hkv = 2;
  two.t = 9;
  two.build();
  a = good;
  a.kv = two.kv;
  expect_rejects(a, "kv.k.data");

  // Mixed devices: the first tensor differing from qkv is named.
  a = good;
  a.q_out.device = Device::cuda;
  expect_rejects(a, "q_out");
  a = good;
  a.qkv.device = Device::cuda;
  expect_rejects(a, "q_norm_weight");

  // e4m3 q_out needs a finite q_scale > 0.
  FusedCase q8;
  q8.t = 9;
  q8.q_dtype = DType::e4m3;
  q8.build();
  a = q8.args();
  a.q_scale = 0.0f;
  expect_rejects(a, "q_scale");
}

TEST(FusedQkNormRope, BadValuesAreRejectedBeforeAnyWrite) {
  FusedCase c;
  c.t = 9;
  c.max_pos = 100;
  c.build();
  const std::vector<std::uint8_t> q_before(c.q_out.data<std::uint8_t>(),
                                           c.q_out.data<std::uint8_t>() + c.q_out.bytes());
  const std::vector<std::uint8_t> kv_before(c.kv_buf.data<std::uint8_t>(),
                                            c.kv_buf.data<std::uint8_t>() + c.kv_buf.bytes());
  auto* pos = c.positions.data<std::int32_t>();
  const std::int32_t p2 = pos[2];
  pos[2] = 100;  // == max_pos
  expect_rejects(c.args(), "positions[2]");
  pos[2] = -1;
  expect_rejects(c.args(), "positions[2]");
  pos[2] = p2;
  auto* sl = c.slots.data<std::int32_t>();
  const std::int32_t s4 = sl[4];
  sl[4] = c.pages * 128;
  expect_rejects(c.args(), "slot_mapping[4]");
  sl[4] = s4;
  c.islots.data<std::int32_t>()[1] = c.index_pages * 128 + 5;
  expect_rejects(c.args(), "index_slot_mapping[1]");
  EXPECT_EQ(std::memcmp(q_before.data(), c.q_out.view().data, q_before.size()), 0);
  EXPECT_EQ(std::memcmp(kv_before.data(), c.kv_buf.view().data, kv_before.size()), 0);
}

}  // namespace

// Tests of the CPU block-sparse attention (prefill + decode plan/run) and of the FP64
// dense reference (spec 3, D1, D3-D10).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "flashmsa/attention.h"
#include "flashmsa/version.h"
#include "flashmsa/cache.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"
#include "reference/dense_reference.h"
#include "test_util.h"

namespace {

using namespace flashmsa;
using flashmsa::testing::Rng;

// ---------------------------------------------------------------------------
// Builders

void set_i32(const TensorView& t, std::int64_t i, std::int64_t j, std::int64_t k, std::int32_t v) {
  t.ptr<std::int32_t>()[i * t.stride[0] + j * t.stride[1] + k * t.stride[2]] = v;
}
std::int32_t get_i32(const TensorView& t, std::int64_t i, std::int64_t j, std::int64_t k) {
  return t.ptr<const std::int32_t>()[i * t.stride[0] + j * t.stride[1] + k * t.stride[2]];
}

/// Owning paged K/V cache with separate K and V tensors.
struct CacheData {
  KvFormat format = KvFormat::bf16;
  std::int64_t pages = 0, hkv = 0;
  HostTensor k, v, ks, vs;  // ks / vs: nvfp4 block scales
  float k_gs = 1.0f, v_gs = 1.0f;

  PagedKvCache view() const {
    PagedKvCache c;
    c.format = format;
    c.k.data = k.view();
    c.v.data = v.view();
    if (format == KvFormat::nvfp4) {
      c.k.block_scale = ks.view();
      c.v.block_scale = vs.view();
      c.k.block_scale.dtype = DType::e4m3;
      c.v.block_scale.dtype = DType::e4m3;
    }
    c.k.global_scale = k_gs;
    c.v.global_scale = v_gs;
    return c;
  }
};

/// Fills one cache side with sensible random values: bf16 N(0,1); fp8 E4M3_sat(N(0,1)/gs);
/// nvfp4 random codes with block scales in 0x30..0x40 (0.5 .. 2).
void fill_side(KvFormat f, HostTensor& data, HostTensor& scale, float gs, Rng& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  if (f == KvFormat::bf16) {
    flashmsa::testing::fill_bf16_normal(data, rng);
  } else if (f == KvFormat::fp8) {
    auto* p = data.data<std::uint8_t>();
    for (std::int64_t i = 0; i < data.numel(); ++i) p[i] = float_to_e4m3_sat(nd(rng) / gs);
  } else {
    std::uniform_int_distribution<int> byte(0, 255), sc(0x30, 0x40);
    auto* p = data.data<std::uint8_t>();
    for (std::int64_t i = 0; i < data.numel(); ++i) p[i] = static_cast<std::uint8_t>(byte(rng));
    auto* s = scale.data<std::uint8_t>();
    for (std::int64_t i = 0; i < scale.numel(); ++i) s[i] = static_cast<std::uint8_t>(sc(rng));
  }
}

CacheData make_cache(KvFormat f, std::int64_t pages, std::int64_t hkv, Rng& rng,
                     float k_gs = 1.0f, float v_gs = 1.0f) {
  CacheData c;
  c.format = f;
  c.pages = pages;
  c.hkv = hkv;
  if (f != KvFormat::bf16) {
    c.k_gs = k_gs;
    c.v_gs = v_gs;
  }
  const DType dt = f == KvFormat::bf16 ? DType::bf16 : f == KvFormat::fp8 ? DType::e4m3 : DType::u8;
  const std::int64_t w = f == KvFormat::nvfp4 ? 64 : 128;
  c.k.reset(dt, {pages, hkv, 128, w});
  c.v.reset(dt, {pages, hkv, 128, w});
  if (f == KvFormat::nvfp4) {
    c.ks.reset(DType::u8, {pages, hkv, 128, 8});
    c.vs.reset(DType::u8, {pages, hkv, 128, 8});
  }
  fill_side(f, c.k, c.ks, c.k_gs, rng);
  fill_side(f, c.v, c.vs, c.v_gs, rng);
  return c;
}

/// Overwrites tokens [from, 128) of physical page `page` (all heads, K and V, data and
/// scales) with `byte`, or with random bytes when byte < 0.
void scribble_tokens(CacheData& c, std::int64_t page, int from, int byte, Rng& rng) {
  std::uniform_int_distribution<int> rb(0, 255);
  auto scribble = [&](HostTensor& t) {
    if (!t.view().defined()) return;
    const TensorView v = t.view();
    auto* base = static_cast<std::uint8_t*>(v.data);
    const std::size_t es = dtype_size(v.dtype);
    for (std::int64_t h = 0; h < v.shape[1]; ++h)
      for (int tok = from; tok < 128; ++tok) {
        std::uint8_t* row = base + (page * v.stride[0] + h * v.stride[1] + tok * v.stride[2]) * es;
        for (std::int64_t i = 0; i < v.shape[3] * static_cast<std::int64_t>(es); ++i)
          row[i] = static_cast<std::uint8_t>(byte >= 0 ? byte : rb(rng));
      }
  };
  scribble(c.k);
  scribble(c.v);
  scribble(c.ks);
  scribble(c.vs);
}

/// A top-k row for position p: every visible page when p//128 + 1 <= K (shuffled), else the
/// local page plus K-1 random distinct history pages (shuffled); padded with -1.
std::vector<std::int32_t> random_topk_row(std::int64_t p, int K, Rng& rng) {
  std::vector<std::int32_t> row;
  if (p >= 0) {
    const std::int32_t L = static_cast<std::int32_t>(p / 128);
    std::vector<std::int32_t> hist = flashmsa::testing::random_permutation(L, rng);
    row.push_back(L);
    for (std::int32_t h : hist) {
      if (static_cast<int>(row.size()) >= K) break;
      row.push_back(h);
    }
    std::shuffle(row.begin(), row.end(), rng);
  }
  row.resize(static_cast<std::size_t>(K), -1);
  return row;
}

std::vector<std::int32_t> rows_i32(const std::vector<int>& v) {
  return std::vector<std::int32_t>(v.begin(), v.end());
}

/// Everything a prefill (or decode) call needs, with row positions.
struct Problem {
  int hq = 8, hkv = 2, K = 16;
  DType q_dtype = DType::bf16;
  float q_scale = 1.0f, softmax_scale = kDefaultSoftmaxScale;
  std::vector<int> seq_lens, q_lens;
  std::vector<std::int64_t> pos;  // per row
  CacheData cache;
  HostTensor q, topk, block_table, cu, seq, out, lse;
  std::int64_t T = 0;

  SparseAttentionPrefillArgs prefill_args() const {
    SparseAttentionPrefillArgs a;
    a.q = q.view();
    a.kv = cache.view();
    a.topk_indices = topk.view();
    a.block_table = block_table.view();
    a.cu_seqlens_q = cu.view();
    a.seq_lens = seq.view();
    a.softmax_scale = softmax_scale;
    a.q_scale = q_scale;
    a.out = out.view();
    a.lse = lse.view();
    return a;
  }
  DecodeRunArgs decode_args() const {
    DecodeRunArgs a;
    a.q = q.view();
    a.kv = cache.view();
    a.topk_indices = topk.view();
    a.block_table = block_table.view();
    a.seq_lens = seq.view();
    a.softmax_scale = softmax_scale;
    a.q_scale = q_scale;
    a.out = out.view();
    a.lse = lse.view();
    return a;
  }
  DecodePlanArgs plan_args(int Q, int threads = 0) const {
    DecodePlanArgs p;
    p.batch_size = static_cast<int>(seq_lens.size());
    p.queries_per_request = Q;
    p.num_q_heads = hq;
    p.num_kv_heads = hkv;
    p.max_pages_per_request = static_cast<int>(block_table.view().shape[1]);
    p.topk = K;
    p.kv_format = cache.format;
    p.q_dtype = q_dtype;
    p.num_threads = threads;
    return p;
  }
};

/// Builds a problem: requests with the given seq_lens / q_lens (decode: q_len = Q for all,
/// positions seq_len - Q + j, possibly negative). Physical pages are a random permutation
/// plus `extra_pages` garbage pages; unused block-table entries are -1.
Problem make_problem(KvFormat f, int hq, int hkv, const std::vector<int>& seq_lens,
                     const std::vector<int>& q_lens, Rng& rng, int K = 16, int extra_pages = 2,
                     int table_width = 0) {
  Problem pr;
  pr.hq = hq;
  pr.hkv = hkv;
  pr.K = K;
  pr.seq_lens = seq_lens;
  pr.q_lens = q_lens;
  pr.q_dtype = f == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
  const std::int64_t B = static_cast<std::int64_t>(seq_lens.size());
  std::int64_t total_pages = extra_pages, width = 1;
  for (int s : seq_lens) {
    total_pages += (s + 127) / 128;
    width = std::max<std::int64_t>(width, (s + 127) / 128);
  }
  width = std::max<std::int64_t>(width, table_width);
  pr.cache = make_cache(f, total_pages, hkv, rng, f == KvFormat::bf16 ? 1.0f : 0.5f,
                        f == KvFormat::bf16 ? 1.0f : 0.25f);
  // Block table.
  pr.block_table.reset(DType::i32, {B, width});
  pr.block_table.fill_bytes(0xff);
  const auto perm = flashmsa::testing::random_permutation(static_cast<std::int32_t>(total_pages), rng);
  std::size_t next = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (int j = 0; j < (seq_lens[b] + 127) / 128; ++j)
      pr.block_table.data<std::int32_t>()[b * width + j] = perm[next++];
  // Rows and positions.
  pr.cu.reset(DType::i32, {B + 1});
  pr.seq.reset(DType::i32, {B});
  for (std::int64_t b = 0; b < B; ++b) {
    pr.seq.data<std::int32_t>()[b] = seq_lens[b];
    pr.cu.data<std::int32_t>()[b + 1] = pr.cu.data<std::int32_t>()[b] + q_lens[b];
    for (int j = 0; j < q_lens[b]; ++j) pr.pos.push_back(seq_lens[b] - q_lens[b] + j);
  }
  pr.T = static_cast<std::int64_t>(pr.pos.size());
  // Queries.
  pr.q.reset(pr.q_dtype, {pr.T, hq, 128});
  if (pr.q_dtype == DType::bf16) {
    flashmsa::testing::fill_bf16_normal(pr.q, rng);
  } else {
    pr.q_scale = 0.125f;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto* p = pr.q.data<std::uint8_t>();
    for (std::int64_t i = 0; i < pr.q.numel(); ++i) p[i] = float_to_e4m3_sat(nd(rng) / pr.q_scale);
  }
  // Top-k (token-major).
  pr.topk.reset(DType::i32, {pr.T, hkv, K});
  for (std::int64_t r = 0; r < pr.T; ++r)
    for (int g = 0; g < hkv; ++g) {
      const auto row = random_topk_row(pr.pos[r], K, rng);
      for (int k = 0; k < K; ++k) set_i32(pr.topk.view(), r, g, k, row[k]);
    }
  pr.out.reset(DType::bf16, {pr.T, hq, 128});
  pr.lse.reset(DType::f32, {pr.T, hq});
  flashmsa::testing::poison(pr.out);
  flashmsa::testing::poison(pr.lse);
  return pr;
}

Problem make_decode_problem(KvFormat f, int hq, int hkv, const std::vector<int>& seq_lens, int Q,
                            Rng& rng, int K = 16, int table_width = 0) {
  return make_problem(f, hq, hkv, seq_lens, std::vector<int>(seq_lens.size(), Q), rng, K, 2,
                      table_width);
}

std::vector<std::uint8_t> bytes_of(const HostTensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.view().data);
  return std::vector<std::uint8_t>(p, p + t.bytes());
}

void expect_ok(const Status& s) { ASSERT_TRUE(s.ok()) << s.message(); }

reference::Comparison check_against_reference(const Problem& pr, bool dense,
                                              reference::ProbRounding rounding,
                                              const reference::Tolerance& tol) {
  reference::ReferenceOptions opt;
  opt.dense = dense;
  opt.rounding = rounding;
  std::vector<double> ro, rl;
  const Status s = reference::reference_prefill(pr.prefill_args(), opt, &ro, &rl);
  EXPECT_TRUE(s.ok()) << s.message();
  return reference::compare(reference::to_double(pr.out.view()), ro,
                            reference::to_double(pr.lse.view()), rl, tol);
}

reference::Comparison check_decode_against_reference(const Problem& pr, int Q) {
  std::vector<double> ro, rl;
  const Status s = reference::reference_decode(pr.decode_args(), Q, {}, &ro, &rl);
  EXPECT_TRUE(s.ok()) << s.message();
  return reference::compare(reference::to_double(pr.out.view()), ro,
                            reference::to_double(pr.lse.view()), rl,
                            reference::Tolerance::for_q_dtype(pr.q_dtype));
}

KvFormat kFormats[] = {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4};

// ---------------------------------------------------------------------------
// Hand-worked cases (one query at p = 1, two keys, Hq = Hkv = 1).

struct Tiny {
  HostTensor q, k, v, ks, vs, topk, bt, cu, seq, out, lse;
  SparseAttentionPrefillArgs args(KvFormat f, float sm) {
    SparseAttentionPrefillArgs a;
    a.q = q.view();
    a.kv.format = f;
    a.kv.k.data = k.view();
    a.kv.v.data = v.view();
    a.topk_indices = topk.view();
    a.block_table = bt.view();
    a.cu_seqlens_q = cu.view();
    a.seq_lens = seq.view();
    a.softmax_scale = sm;
    a.out = out.view();
    a.lse = lse.view();
    return a;
  }
};

Tiny make_tiny(DType dt) {
  Tiny t;
  t.q.reset(dt, {1, 1, 128});
  t.k.reset(dt, {1, 1, 128, 128});
  t.v.reset(dt, {1, 1, 128, 128});
  t.topk.reset(DType::i32, {1, 1, 1});  // page 0
  t.bt.reset(DType::i32, {1, 1});       // logical 0 -> physical 0
  t.cu.reset(DType::i32, {2});
  t.cu.data<std::int32_t>()[1] = 1;
  t.seq.reset(DType::i32, {1});
  t.seq.data<std::int32_t>()[0] = 2;  // q_len 1, seq_len 2 -> p = 1: keys t = 0, 1
  t.out.reset(DType::bf16, {1, 1, 128});
  t.lse.reset(DType::f32, {1, 1});
  // Garbage in tokens 2.. of the page must be ignored (t <= p).
  auto* kb = static_cast<std::uint8_t*>(t.k.view().data);
  auto* vb = static_cast<std::uint8_t*>(t.v.view().data);
  const std::size_t es = dtype_size(dt);
  std::memset(kb + 2 * 128 * es, 0x7e, (128 - 2) * 128 * es);
  std::memset(vb + 2 * 128 * es, 0x7e, (128 - 2) * 128 * es);
  return t;
}

TEST(AttentionHand, Bf16EqualLogitsAverageValues) {
  // q = e0, k0 = k1 = 2*e0, softmax_scale 1 -> z0 = z1 = 2: weights 1/2, 1/2.
  // v0 = (2, 4, 0...), v1 = (4, 8, 0...) -> out = (3, 6, 0...); lse = 2 + ln 2.
  Tiny t = make_tiny(DType::bf16);
  t.q.data<std::uint16_t>()[0] = float_to_bf16(1.0f);
  t.k.data<std::uint16_t>()[0] = float_to_bf16(2.0f);
  t.k.data<std::uint16_t>()[128] = float_to_bf16(2.0f);
  t.v.data<std::uint16_t>()[0] = float_to_bf16(2.0f);
  t.v.data<std::uint16_t>()[1] = float_to_bf16(4.0f);
  t.v.data<std::uint16_t>()[128] = float_to_bf16(4.0f);
  t.v.data<std::uint16_t>()[129] = float_to_bf16(8.0f);
  expect_ok(sparse_attention_prefill(t.args(KvFormat::bf16, 1.0f)));
  EXPECT_EQ(bf16_to_float(t.out.data<std::uint16_t>()[0]), 3.0f);
  EXPECT_EQ(bf16_to_float(t.out.data<std::uint16_t>()[1]), 6.0f);
  for (int d = 2; d < 128; ++d) EXPECT_EQ(bf16_to_float(t.out.data<std::uint16_t>()[d]), 0.0f);
  EXPECT_NEAR(t.lse.data<float>()[0], 2.0 + std::log(2.0), 1e-6);
}

TEST(AttentionHand, Bf16OneThirdWeightIsRoundedToBf16) {
  // softmax_scale = ln 3, q = e0, k0 = 0, k1 = e0 -> z0 = 0, z1 = ln 3, m = ln 3.
  // P0 = exp(-ln 3) = 1/3 -> PV operand bf16(1/3) = 0.333984375; P1 = 1. sum = 4/3.
  // v0 = 4, v1 = 8: acc = 4*0.333984375 + 8 = 9.3359375; / (4/3) = 7.00195...
  // -> bf16 7.0 (step 1/32 in [4, 8)). Exact softmax: 4/4 + 8*3/4 = 7.  lse = ln 4.
  Tiny t = make_tiny(DType::bf16);
  t.q.data<std::uint16_t>()[0] = float_to_bf16(1.0f);
  t.k.data<std::uint16_t>()[128] = float_to_bf16(1.0f);
  t.v.data<std::uint16_t>()[0] = float_to_bf16(4.0f);
  t.v.data<std::uint16_t>()[128] = float_to_bf16(8.0f);
  expect_ok(sparse_attention_prefill(t.args(KvFormat::bf16, static_cast<float>(std::log(3.0)))));
  EXPECT_EQ(bf16_to_float(t.out.data<std::uint16_t>()[0]), 7.0f);
  EXPECT_NEAR(t.lse.data<float>()[0], std::log(4.0), 1e-6);
}

TEST(AttentionHand, Fp8ProbabilityContract) {
  // Same logits in the Q8KV8 path: s0 = 0, s1 = 1, m_s = 1, c2 = ln3 * log2(e) = log2 3.
  // p448_1 = 2^(log2 448) = 448 -> E4M3 448; p448_0 = 448/3 = 149.33 -> E4M3 144 (step 16
  // in [128, 256)). sum = 597.33; acc = 144*4 + 448*8 = 4160; 4160 / 597.33 = 6.9643
  // -> bf16 6.96875 (exact softmax gives 7). lse = ln3 + ln(597.33/448) = ln 4.
  Tiny t = make_tiny(DType::e4m3);
  t.q.data<std::uint8_t>()[0] = float_to_e4m3_sat(1.0f);
  t.k.data<std::uint8_t>()[128] = float_to_e4m3_sat(1.0f);
  t.v.data<std::uint8_t>()[0] = float_to_e4m3_sat(4.0f);
  t.v.data<std::uint8_t>()[128] = float_to_e4m3_sat(8.0f);
  expect_ok(sparse_attention_prefill(t.args(KvFormat::fp8, static_cast<float>(std::log(3.0)))));
  EXPECT_EQ(bf16_to_float(t.out.data<std::uint16_t>()[0]), 6.96875f);
  EXPECT_NEAR(t.lse.data<float>()[0], std::log(4.0), 1e-5);
  // The FP64 reference modelling the same rounding point agrees; the exact one gives 7.
  auto a = t.args(KvFormat::fp8, static_cast<float>(std::log(3.0)));
  std::vector<double> ro, rl;
  reference::ReferenceOptions opt;
  opt.rounding = reference::ProbRounding::e4m3_448;
  expect_ok(reference::reference_prefill(a, opt, &ro, &rl));
  // (softmax_scale is float(ln 3), hence the 1e-6 slack.)
  EXPECT_NEAR(ro[0], 4160.0 / (448.0 * 4.0 / 3.0), 1e-6);
  opt.rounding = reference::ProbRounding::none;
  expect_ok(reference::reference_prefill(a, opt, &ro, &rl));
  EXPECT_NEAR(ro[0], 7.0, 1e-6);
  EXPECT_NEAR(rl[0], std::log(4.0), 1e-6);
}

TEST(AttentionHand, ScalesFoldIntoLogitsAndOutput) {
  // Q8KV8 with q_scale 2, k_scale 0.5, v_scale 4: c = sm * 2 * 0.5 = sm, out scaled by 4.
  // Equal logits -> weights 1/2: v0 = 1, v1 = 2 (stored) -> out = 1.5 * 4 = 6.
  Tiny t = make_tiny(DType::e4m3);
  t.q.data<std::uint8_t>()[0] = float_to_e4m3_sat(1.0f);
  t.k.data<std::uint8_t>()[0] = float_to_e4m3_sat(2.0f);
  t.k.data<std::uint8_t>()[128] = float_to_e4m3_sat(2.0f);
  t.v.data<std::uint8_t>()[0] = float_to_e4m3_sat(1.0f);
  t.v.data<std::uint8_t>()[128] = float_to_e4m3_sat(2.0f);
  auto a = t.args(KvFormat::fp8, 1.0f);
  a.q_scale = 2.0f;
  a.kv.k.global_scale = 0.5f;
  a.kv.v.global_scale = 4.0f;
  expect_ok(sparse_attention_prefill(a));
  EXPECT_EQ(bf16_to_float(t.out.data<std::uint16_t>()[0]), 6.0f);
  // z = 1 * 2 * 0.5 * (1*2) = 2 for both keys -> lse = 2 + ln 2.
  EXPECT_NEAR(t.lse.data<float>()[0], 2.0 + std::log(2.0), 1e-5);
}

// ---------------------------------------------------------------------------
// Property: selecting every visible page equals the FP64 dense causal reference.

class AttentionFormats : public ::testing::TestWithParam<KvFormat> {};

TEST_P(AttentionFormats, AllVisiblePagesMatchDenseReference) {
  const KvFormat f = GetParam();
  Rng rng(100 + static_cast<int>(f));
  // Contexts <= 16 pages so the top-k selects every visible page; includes a seq_len
  // multiple of 128, a partial last page and a one-token request.
  Problem pr = make_problem(f, 8, 2, {2048, 1000, 1, 300}, {24, 40, 1, 300}, rng);
  expect_ok(sparse_attention_prefill(pr.prefill_args()));
  const auto tol = reference::Tolerance::for_q_dtype(pr.q_dtype);
  const auto dense = check_against_reference(pr, true, reference::ProbRounding::none, tol);
  EXPECT_TRUE(dense.pass) << dense.summary();
  // Sparse semantics of the reference agree too (the top-k covers everything here).
  const auto sparse = check_against_reference(pr, false, reference::ProbRounding::none, tol);
  EXPECT_TRUE(sparse.pass) << sparse.summary();
  // Modelling the P rounding point tightens the agreement.
  const auto modelled = check_against_reference(
      pr, false, f == KvFormat::bf16 ? reference::ProbRounding::bf16 : reference::ProbRounding::e4m3_448,
      reference::Tolerance{1e-2, 1e-2, 0.99999, 1e-4});
  EXPECT_TRUE(modelled.pass) << modelled.summary();
}

TEST_P(AttentionFormats, SparseSelectionMatchesReference) {
  const KvFormat f = GetParam();
  Rng rng(200 + static_cast<int>(f));
  // Long contexts (> 16 pages): local page + 15 random history pages, K = 16 and K = 5.
  for (int K : {16, 5}) {
    Problem pr = make_problem(f, 8, 2, {5000, 2500}, {8, 8}, rng, K);
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    const auto cmp = check_against_reference(pr, false, reference::ProbRounding::none,
                                             reference::Tolerance::for_q_dtype(pr.q_dtype));
    EXPECT_TRUE(cmp.pass) << "K=" << K << " " << cmp.summary();
  }
}

TEST_P(AttentionFormats, DecodeMatchesPrefillBitwiseAndReference) {
  const KvFormat f = GetParam();
  Rng rng(300 + static_cast<int>(f));
  for (int Q : {1, 3, 8, 32}) {
    Problem pr = make_decode_problem(f, 8, 2, {700, 129, 2100}, Q, rng, 16, 20);
    SparseDecodePlan plan;
    expect_ok(plan.plan(pr.plan_args(Q)));
    expect_ok(plan.run(pr.decode_args()));
    const auto dec_out = bytes_of(pr.out), dec_lse = bytes_of(pr.lse);
    const auto cmp = check_decode_against_reference(pr, Q);
    EXPECT_TRUE(cmp.pass) << "Q=" << Q << " " << cmp.summary();
    // Prefill of the same last-Q rows (cu_seqlens = b*Q) gives identical bits.
    flashmsa::testing::poison(pr.out);
    flashmsa::testing::poison(pr.lse);
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    EXPECT_EQ(bytes_of(pr.out), dec_out) << "Q=" << Q;
    EXPECT_EQ(bytes_of(pr.lse), dec_lse) << "Q=" << Q;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, AttentionFormats,
                         ::testing::Values(KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4),
                         [](const ::testing::TestParamInfo<KvFormat>& i) {
                           return std::string(kv_format_name(i.param));
                         });

// ---------------------------------------------------------------------------
// GQA geometries.

TEST(Attention, GqaGroupsMatchReference) {
  const int shapes[][2] = {{64, 4}, {32, 2}, {16, 1}, {8, 1}, {8, 8}, {8, 4}, {16, 4}};
  Rng rng(7);
  for (const auto& s : shapes) {
    for (KvFormat f : {KvFormat::bf16, KvFormat::nvfp4}) {
      Problem pr = make_problem(f, s[0], s[1], {600, 200}, {3, 2}, rng);
      expect_ok(sparse_attention_prefill(pr.prefill_args()));
      const auto cmp = check_against_reference(pr, false, reference::ProbRounding::none,
                                               reference::Tolerance::for_q_dtype(pr.q_dtype));
      EXPECT_TRUE(cmp.pass) << s[0] << "/" << s[1] << " " << kv_format_name(f) << " "
                            << cmp.summary();
    }
  }
}

// ---------------------------------------------------------------------------
// Chunked prefill == one-shot prefill (rows are independent).

TEST(Attention, ChunkedPrefillEqualsOneShot) {
  for (KvFormat f : kFormats) {
    Rng rng(11);
    const int S = 700;
    Problem full = make_problem(f, 8, 2, {S}, {S}, rng);
    expect_ok(sparse_attention_prefill(full.prefill_args()));
    const auto full_out = bytes_of(full.out), full_lse = bytes_of(full.lse);
    const std::size_t row_out = 8 * 128 * 2, row_lse = 8 * 4;
    // Chunks [0, 256), [256, 300), [300, 700): seq_len = chunk end, q rows offset.
    const int bounds[] = {0, 256, 300, S};
    for (int c = 0; c < 3; ++c) {
      const int b0 = bounds[c], b1 = bounds[c + 1], n = b1 - b0;
      HostTensor cu(DType::i32, {2}), seq(DType::i32, {1}), out(DType::bf16, {n, 8, 128}),
          lse(DType::f32, {n, 8});
      cu.data<std::int32_t>()[1] = n;
      seq.data<std::int32_t>()[0] = b1;
      SparseAttentionPrefillArgs a = full.prefill_args();
      a.q.data = full.q.data<std::uint8_t>() + static_cast<std::size_t>(b0) * 8 * 128 * dtype_size(a.q.dtype);
      a.q.shape[0] = n;
      a.topk_indices.data = full.topk.data<std::int32_t>() + static_cast<std::size_t>(b0) * 2 * 16;
      a.topk_indices.shape[0] = n;
      a.cu_seqlens_q = cu.view();
      a.seq_lens = seq.view();
      a.out = out.view();
      a.lse = lse.view();
      expect_ok(sparse_attention_prefill(a));
      EXPECT_EQ(0, std::memcmp(out.view().data, full_out.data() + b0 * row_out, n * row_out))
          << kv_format_name(f) << " chunk " << c;
      EXPECT_EQ(0, std::memcmp(lse.view().data, full_lse.data() + b0 * row_lse, n * row_lse))
          << kv_format_name(f) << " chunk " << c;
    }
  }
}

// ---------------------------------------------------------------------------
// Layout equivalences.

TEST(Attention, HeadMajorTopkEqualsTokenMajor) {
  Rng rng(12);
  Problem pr = make_problem(KvFormat::fp8, 16, 4, {3000, 500}, {20, 30}, rng);
  expect_ok(sparse_attention_prefill(pr.prefill_args()));
  const auto ref_out = bytes_of(pr.out), ref_lse = bytes_of(pr.lse);
  // Head-major storage [Hkv, T, K] viewed as [T, Hkv, K].
  const std::int64_t T = pr.T, H = 4, K = 16;
  HostTensor hm(DType::i32, {H, T, K});
  for (std::int64_t r = 0; r < T; ++r)
    for (std::int64_t g = 0; g < H; ++g)
      for (std::int64_t k = 0; k < K; ++k)
        hm.data<std::int32_t>()[(g * T + r) * K + k] = get_i32(pr.topk.view(), r, g, k);
  auto a = pr.prefill_args();
  a.topk_indices = make_strided_view(hm.view().data, DType::i32, {T, H, K}, {K, T * K, 1});
  flashmsa::testing::poison(pr.out);
  expect_ok(sparse_attention_prefill(a));
  EXPECT_EQ(bytes_of(pr.out), ref_out);
  EXPECT_EQ(bytes_of(pr.lse), ref_lse);
  // A permuted order of every top-k row changes nothing either.
  for (std::int64_t r = 0; r < T; ++r)
    for (std::int64_t g = 0; g < H; ++g)
      std::reverse(hm.data<std::int32_t>() + (g * T + r) * K, hm.data<std::int32_t>() + (g * T + r + 1) * K);
  expect_ok(sparse_attention_prefill(a));
  EXPECT_EQ(bytes_of(pr.out), ref_out);
}

TEST(Attention, PackedKvViewsEqualSeparateCaches) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
    Rng rng(13);
    Problem pr = make_problem(f, 8, 2, {900, 130}, {10, 5}, rng);
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    const auto ref_out = bytes_of(pr.out), ref_lse = bytes_of(pr.lse);
    const std::int64_t P = pr.cache.pages, H = 2;
    const std::size_t es = f == KvFormat::bf16 ? 2 : 1;
    const DType dt = f == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
    // Packed [P, H, 128, 256]: K in columns 0..127, V in 128..255 (HND).
    HostTensor packed(dt, {P, H, 128, 256});
    auto* dst = static_cast<std::uint8_t*>(packed.view().data);
    const auto* ks = static_cast<const std::uint8_t*>(pr.cache.k.view().data);
    const auto* vs = static_cast<const std::uint8_t*>(pr.cache.v.view().data);
    for (std::int64_t row = 0; row < P * H * 128; ++row) {
      std::memcpy(dst + row * 256 * es, ks + row * 128 * es, 128 * es);
      std::memcpy(dst + (row * 256 + 128) * es, vs + row * 128 * es, 128 * es);
    }
    auto a = pr.prefill_args();
    a.kv.k.data = make_strided_view(dst, dt, {P, H, 128, 128}, {H * 128 * 256, 128 * 256, 256, 1});
    a.kv.v.data = make_strided_view(dst + 128 * es, dt, {P, H, 128, 128},
                                    {H * 128 * 256, 128 * 256, 256, 1});
    flashmsa::testing::poison(pr.out);
    expect_ok(sparse_attention_prefill(a));
    EXPECT_EQ(bytes_of(pr.out), ref_out) << kv_format_name(f);
    EXPECT_EQ(bytes_of(pr.lse), ref_lse) << kv_format_name(f);
    // NHD strides of the same packed bytes ([P, 128, H, 256] storage) work as well.
    HostTensor nhd(dt, {P, 128, H, 256});
    auto* n = static_cast<std::uint8_t*>(nhd.view().data);
    for (std::int64_t p = 0; p < P; ++p)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t t = 0; t < 128; ++t)
          std::memcpy(n + ((p * 128 + t) * H + h) * 256 * es, dst + ((p * H + h) * 128 + t) * 256 * es,
                      256 * es);
    a.kv.k.data = make_strided_view(n, dt, {P, H, 128, 128}, {128 * H * 256, 256, H * 256, 1});
    a.kv.v.data = make_strided_view(n + 128 * es, dt, {P, H, 128, 128}, {128 * H * 256, 256, H * 256, 1});
    flashmsa::testing::poison(pr.out);
    expect_ok(sparse_attention_prefill(a));
    EXPECT_EQ(bytes_of(pr.out), ref_out) << kv_format_name(f) << " NHD";
  }
}

TEST(Attention, SwizzledNvfp4ScalesEqualLinear) {
  Rng rng(14);
  Problem pr = make_problem(KvFormat::nvfp4, 8, 2, {1500}, {12}, rng);
  expect_ok(sparse_attention_prefill(pr.prefill_args()));
  const auto ref_out = bytes_of(pr.out);
  // Rewrite both scale planes in swizzled order.
  auto swizzle = [](HostTensor& s) {
    const std::int64_t planes = s.numel() / 1024;
    std::vector<std::uint8_t> tmp(1024);
    for (std::int64_t pl = 0; pl < planes; ++pl) {
      auto* p = s.data<std::uint8_t>() + pl * 1024;
      for (int t = 0; t < 128; ++t)
        for (int g = 0; g < 8; ++g) tmp[nvfp4_scale_offset(t, g, true)] = p[t * 8 + g];
      std::memcpy(p, tmp.data(), 1024);
    }
  };
  swizzle(pr.cache.ks);
  swizzle(pr.cache.vs);
  auto a = pr.prefill_args();
  a.kv.k.scale_swizzled = true;
  a.kv.v.scale_swizzled = true;
  flashmsa::testing::poison(pr.out);
  expect_ok(sparse_attention_prefill(a));
  EXPECT_EQ(bytes_of(pr.out), ref_out);
}

// ---------------------------------------------------------------------------
// Top-k robustness (D1).

TEST(Attention, InvalidTopkEntriesAreIgnored) {
  for (KvFormat f : kFormats) {
    Rng rng(15);
    // Request 0: 10 pages, chunk of 300 rows (positions 980..1279, local pages 7..9).
    Problem pr = make_problem(f, 8, 2, {1280, 400}, {300, 4}, rng, 16, 2);
    // Clean rows: <= 8 valid entries, rest -1.
    std::uniform_int_distribution<int> keep(1, 8);
    for (std::int64_t r = 0; r < pr.T; ++r)
      for (int g = 0; g < 2; ++g) {
        auto row = random_topk_row(pr.pos[r], keep(rng), rng);
        row.resize(16, -1);
        for (int k = 0; k < 16; ++k) set_i32(pr.topk.view(), r, g, k, row[k]);
      }
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    const auto clean_out = bytes_of(pr.out), clean_lse = bytes_of(pr.lse);
    // Dirty rows: fill the -1 slots with duplicates, negatives, out-of-range pages,
    // pages beyond the request (but < num_pages) and future pages of the chunk.
    const std::int32_t junk[] = {-1, -7, std::numeric_limits<std::int32_t>::min(), 10, 11,
                                 std::numeric_limits<std::int32_t>::max(), 1 << 20, 9, 8, 4};
    std::uniform_int_distribution<int> pick(0, 9);
    for (std::int64_t r = 0; r < pr.T; ++r)
      for (int g = 0; g < 2; ++g) {
        const std::int32_t first = get_i32(pr.topk.view(), r, g, 0);
        const std::int64_t L = pr.pos[r] / 128;
        for (int k = 0; k < 16; ++k) {
          if (get_i32(pr.topk.view(), r, g, k) >= 0) continue;
          std::int32_t v = (k % 3 == 0) ? first : junk[pick(rng)];
          if (v >= 0 && v <= L && v < 10 && v != first) v = -1;  // keep only invalid / dup
          set_i32(pr.topk.view(), r, g, k, v);
        }
      }
    flashmsa::testing::poison(pr.out);
    flashmsa::testing::poison(pr.lse);
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    EXPECT_EQ(bytes_of(pr.out), clean_out) << kv_format_name(f);
    EXPECT_EQ(bytes_of(pr.lse), clean_lse) << kv_format_name(f);
  }
}

TEST(Attention, GarbageBeyondSeqLenChangesNothing) {
  for (KvFormat f : kFormats) {
    Rng rng(16);
    // 1000 = 7 pages + 104 tokens: partial last page; 1024: exact multiple of 128.
    Problem pr = make_problem(f, 8, 2, {1000, 1024}, {50, 50}, rng);
    const std::int64_t last0 = pr.block_table.data<std::int32_t>()[0 * pr.block_table.view().shape[1] + 7];
    scribble_tokens(pr.cache, last0, 1000 % 128, -1, rng);  // random bytes
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    const auto out1 = bytes_of(pr.out), lse1 = bytes_of(pr.lse);
    const auto c1 = check_against_reference(pr, true, reference::ProbRounding::none,
                                            reference::Tolerance::for_q_dtype(pr.q_dtype));
    EXPECT_TRUE(c1.pass) << c1.summary();
    scribble_tokens(pr.cache, last0, 1000 % 128, 0xff, rng);  // NaN codes
    flashmsa::testing::poison(pr.out);
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    EXPECT_EQ(bytes_of(pr.out), out1) << kv_format_name(f);
    EXPECT_EQ(bytes_of(pr.lse), lse1) << kv_format_name(f);
  }
}

TEST(Attention, UnusedPagesAndFutureTokensAreNeverRead) {
  Rng rng(17);
  Problem pr = make_problem(KvFormat::bf16, 8, 2, {600}, {600}, rng, 16, 3);
  expect_ok(sparse_attention_prefill(pr.prefill_args()));
  const auto out1 = bytes_of(pr.out);
  // Poison the 3 extra physical pages (those not in the block table).
  std::vector<bool> used(static_cast<std::size_t>(pr.cache.pages), false);
  for (int j = 0; j < 5; ++j) used[static_cast<std::size_t>(pr.block_table.data<std::int32_t>()[j])] = true;
  for (std::int64_t p = 0; p < pr.cache.pages; ++p)
    if (!used[static_cast<std::size_t>(p)]) scribble_tokens(pr.cache, p, 0, 0xff, rng);
  flashmsa::testing::poison(pr.out);
  expect_ok(sparse_attention_prefill(pr.prefill_args()));
  EXPECT_EQ(bytes_of(pr.out), out1);
}

// ---------------------------------------------------------------------------
// Decode specifics.

TEST(AttentionDecode, PaddingRowsGiveZerosAndMinusInf) {
  for (KvFormat f : kFormats) {
    Rng rng(18);
    const int Q = 4;
    // Request 1 is padding (seq_len 0); request 2 has seq_len 2 < Q: rows 0, 1 empty.
    Problem pr = make_decode_problem(f, 8, 2, {300, 0, 2}, Q, rng);
    SparseDecodePlan plan;
    expect_ok(plan.plan(pr.plan_args(Q)));
    expect_ok(plan.run(pr.decode_args()));
    const auto* out = pr.out.data<std::uint16_t>();
    const auto* lse = pr.lse.data<float>();
    for (std::int64_t r = 0; r < pr.T; ++r) {
      const bool empty = pr.pos[r] < 0;
      EXPECT_EQ(empty, r >= 4 && r < 10) << r;
      for (int h = 0; h < 8; ++h) {
        const float l = lse[r * 8 + h];
        EXPECT_FALSE(std::isnan(l));
        if (empty) {
          EXPECT_TRUE(std::isinf(l) && l < 0) << r;
          for (int d = 0; d < 128; ++d) EXPECT_EQ(out[(r * 8 + h) * 128 + d], 0u);
        } else {
          EXPECT_TRUE(std::isfinite(l));
          for (int d = 0; d < 128; ++d) EXPECT_FALSE(std::isnan(bf16_to_float(out[(r * 8 + h) * 128 + d])));
        }
      }
    }
    const auto cmp = check_decode_against_reference(pr, Q);
    EXPECT_TRUE(cmp.pass) << cmp.summary();
  }
}

TEST(AttentionDecode, RowWithOnlyInvalidEntriesIsEmpty) {
  Rng rng(19);
  Problem pr = make_decode_problem(KvFormat::bf16, 8, 2, {500}, 1, rng);
  for (int g = 0; g < 2; ++g)
    for (int k = 0; k < 16; ++k) set_i32(pr.topk.view(), 0, g, k, g == 0 ? -1 : 9);
  SparseDecodePlan plan;
  expect_ok(plan.plan(pr.plan_args(1)));
  expect_ok(plan.run(pr.decode_args()));
  for (int h = 0; h < 8; ++h) {
    EXPECT_TRUE(std::isinf(pr.lse.data<float>()[h]));
    for (int d = 0; d < 128; ++d) EXPECT_EQ(pr.out.data<std::uint16_t>()[h * 128 + d], 0u);
  }
}

TEST(AttentionDecode, OnePlanServesTwoLayers) {
  Rng rng(20);
  const int Q = 3;
  Problem l0 = make_decode_problem(KvFormat::fp8, 16, 2, {1000, 3000}, Q, rng);
  Problem layer1 = make_decode_problem(KvFormat::fp8, 16, 2, {1000, 3000}, Q, rng);
  SparseDecodePlan plan;
  expect_ok(plan.plan(l0.plan_args(Q)));
  // Layer 1 shares l0's metadata but has its own cache, q and top-k.
  auto a1 = layer1.decode_args();
  a1.block_table = l0.block_table.view();
  a1.seq_lens = l0.seq.view();
  layer1.cache = make_cache(KvFormat::fp8, l0.cache.pages, 2, rng, 0.5f, 0.25f);
  a1.kv = layer1.cache.view();
  expect_ok(plan.run(l0.decode_args()));
  expect_ok(plan.run(a1));
  const auto out0 = bytes_of(l0.out), out1 = bytes_of(layer1.out);
  EXPECT_NE(out0, out1);
  // Fresh plans per layer give the same bits.
  SparseDecodePlan p0, p1;
  expect_ok(p0.plan(l0.plan_args(Q)));
  expect_ok(p1.plan(l0.plan_args(Q)));
  flashmsa::testing::poison(l0.out);
  flashmsa::testing::poison(layer1.out);
  expect_ok(p1.run(a1));
  expect_ok(p0.run(l0.decode_args()));
  EXPECT_EQ(bytes_of(l0.out), out0);
  EXPECT_EQ(bytes_of(layer1.out), out1);
  EXPECT_GT(plan.workspace_bytes(), 0u);
}

// ---------------------------------------------------------------------------
// Determinism (D9).

TEST(Attention, BitwiseDeterministicAcrossRunsAndThreadCounts) {
  Rng rng(21);
  Problem pr = make_problem(KvFormat::nvfp4, 16, 2, {4000, 700}, {40, 40}, rng);
  const char* old = std::getenv("FLASHMSA_NUM_THREADS");
  const std::string saved = old ? old : "";
  std::vector<std::vector<std::uint8_t>> outs;
  for (const char* n : {"1", "2", "2", "3"}) {
    setenv("FLASHMSA_NUM_THREADS", n, 1);
    flashmsa::testing::poison(pr.out);
    expect_ok(sparse_attention_prefill(pr.prefill_args()));
    outs.push_back(bytes_of(pr.out));
    const auto lse_bytes = bytes_of(pr.lse);
    outs.back().insert(outs.back().end(), lse_bytes.begin(), lse_bytes.end());
  }
  if (old) setenv("FLASHMSA_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("FLASHMSA_NUM_THREADS");
  for (std::size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[i], outs[0]) << i;
  // Decode with explicit thread counts.
  Problem dp = make_decode_problem(KvFormat::bf16, 8, 2, {900, 40, 2000}, 2, rng);
  std::vector<std::vector<std::uint8_t>> douts;
  for (int threads : {1, 2, 5}) {
    SparseDecodePlan plan;
    expect_ok(plan.plan(dp.plan_args(2, threads)));
    flashmsa::testing::poison(dp.out);
    expect_ok(plan.run(dp.decode_args()));
    douts.push_back(bytes_of(dp.out));
  }
  EXPECT_EQ(douts[1], douts[0]);
  EXPECT_EQ(douts[2], douts[0]);
}

TEST(Attention, LseIsOptional) {
  Rng rng(22);
  Problem pr = make_problem(KvFormat::bf16, 8, 2, {300}, {5}, rng);
  expect_ok(sparse_attention_prefill(pr.prefill_args()));
  const auto out1 = bytes_of(pr.out);
  auto a = pr.prefill_args();
  a.lse = TensorView{};
  flashmsa::testing::poison(pr.out);
  expect_ok(sparse_attention_prefill(a));
  EXPECT_EQ(bytes_of(pr.out), out1);
}

// ---------------------------------------------------------------------------
// Validation: each rejection names the argument.

class AttentionValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    Rng rng(30);
    pr = make_problem(KvFormat::bf16, 8, 2, {300, 200}, {4, 3}, rng);
    fp8 = make_problem(KvFormat::fp8, 8, 2, {300, 200}, {4, 3}, rng);
  }
  static void expect_error(const Status& s, StatusCode code, const std::string& needle) {
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
  Problem pr, fp8;
};

TEST_F(AttentionValidation, QDtype) {
  auto a = pr.prefill_args();
  a.q.dtype = DType::f32;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'q'");
}
TEST_F(AttentionValidation, QShape) {
  auto a = pr.prefill_args();
  a.q.shape[2] = 64;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'q'");
}
TEST_F(AttentionValidation, QInnerStride) {
  auto a = pr.prefill_args();
  a.q.stride[2] = 2;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'q'");
}
TEST_F(AttentionValidation, QAlignment) {
  auto a = pr.prefill_args();
  a.q.data = static_cast<std::uint8_t*>(a.q.data) + 2;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'q'");
}
TEST_F(AttentionValidation, KvCacheShape) {
  auto a = pr.prefill_args();
  a.kv.v.data.shape[0] -= 1;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'kv.v.data'");
}
TEST_F(AttentionValidation, KvMissing) {
  auto a = pr.prefill_args();
  a.kv.k.data.data = nullptr;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'kv.k.data'");
}
TEST_F(AttentionValidation, FormatPairBf16QueryFp8Cache) {
  auto a = fp8.prefill_args();
  a.q = pr.q.view();
  a.q_scale = 1.0f;
  expect_error(sparse_attention_prefill(a), StatusCode::kUnsupported, "q dtype bf16 with a fp8");
}
TEST_F(AttentionValidation, FormatPairE4m3QueryBf16Cache) {
  auto a = pr.prefill_args();
  a.q = fp8.q.view();
  a.q_scale = 0.5f;
  expect_error(sparse_attention_prefill(a), StatusCode::kUnsupported, "q dtype e4m3 with a bf16");
}
TEST_F(AttentionValidation, GqaGroupSize) {
  Rng rng(31);
  Problem g3 = make_problem(KvFormat::bf16, 6, 2, {200}, {2}, rng);
  expect_error(sparse_attention_prefill(g3.prefill_args()), StatusCode::kInvalidArgument,
               "'num_q_heads / num_kv_heads'");
}
TEST_F(AttentionValidation, QScaleMustBeOneForBf16) {
  auto a = pr.prefill_args();
  a.q_scale = 2.0f;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'q_scale'");
}
TEST_F(AttentionValidation, QScalePositiveForE4m3) {
  auto a = fp8.prefill_args();
  a.q_scale = 0.0f;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'q_scale'");
  a.q_scale = std::numeric_limits<float>::infinity();
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'q_scale'");
}
TEST_F(AttentionValidation, SoftmaxScale) {
  auto a = pr.prefill_args();
  a.softmax_scale = std::numeric_limits<float>::quiet_NaN();
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'softmax_scale'");
  a.softmax_scale = -1.0f;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'softmax_scale'");
}
TEST_F(AttentionValidation, KvGlobalScale) {
  auto a = fp8.prefill_args();
  a.kv.v.global_scale = 0.0f;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'kv.v.global_scale'");
}
TEST_F(AttentionValidation, TopkDtype) {
  auto a = pr.prefill_args();
  a.topk_indices.dtype = DType::f32;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'topk_indices'");
}
TEST_F(AttentionValidation, TopkTooWide) {
  HostTensor wide(DType::i32, {pr.T, 2, 17});
  auto a = pr.prefill_args();
  a.topk_indices = wide.view();
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'topk_indices'");
}
TEST_F(AttentionValidation, TopkHeads) {
  auto a = pr.prefill_args();
  a.topk_indices.shape[1] = 1;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'topk_indices'");
}
TEST_F(AttentionValidation, TopkNegativeStride) {
  auto a = pr.prefill_args();
  a.topk_indices.stride[0] = -32;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'topk_indices'");
}
TEST_F(AttentionValidation, OutDtype) {
  auto a = pr.prefill_args();
  a.out.dtype = DType::f32;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'out'");
}
TEST_F(AttentionValidation, OutMissing) {
  auto a = pr.prefill_args();
  a.out = TensorView{};
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'out'");
}
TEST_F(AttentionValidation, LseShape) {
  auto a = pr.prefill_args();
  a.lse.shape[1] = 4;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'lse'");
}
TEST_F(AttentionValidation, CuSeqlens) {
  auto a = pr.prefill_args();
  pr.cu.data<std::int32_t>()[2] = 6;  // != T = 7
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "cu_seqlens_q");
}
TEST_F(AttentionValidation, SeqLenShorterThanQueries) {
  auto a = pr.prefill_args();
  pr.seq.data<std::int32_t>()[1] = 2;  // q_len 3
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'seq_lens[1]'");
}
TEST_F(AttentionValidation, BlockTableEntry) {
  auto a = pr.prefill_args();
  pr.block_table.data<std::int32_t>()[1] = 1000;
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'block_table[0, 1]'");
}
TEST_F(AttentionValidation, CudaDeviceRules) {
  auto a = pr.prefill_args();
  a.q.device = Device::cuda;  // mixed devices: the first host tensor is named
  expect_error(sparse_attention_prefill(a), StatusCode::kInvalidArgument, "'topk_indices'");
  if (!built_with_cuda()) {   // all on cuda in a CPU-only build: Unsupported
    for (TensorView* v : {&a.topk_indices, &a.block_table, &a.cu_seqlens_q, &a.seq_lens, &a.out,
                          &a.lse, &a.kv.k.data, &a.kv.v.data})
      v->device = Device::cuda;
    expect_error(sparse_attention_prefill(a), StatusCode::kUnsupported, "device cuda");
  }
}
TEST_F(AttentionValidation, EmptyBatchIsFine) {
  HostTensor q(DType::bf16, {0, 8, 128}), topk(DType::i32, {0, 2, 16}), out(DType::bf16, {0, 8, 128});
  HostTensor cu(DType::i32, {1}), seq(DType::i32, {0}), bt(DType::i32, {0, 1});
  auto a = pr.prefill_args();
  a.q = q.view();
  a.topk_indices = topk.view();
  a.out = out.view();
  a.lse = TensorView{};
  a.cu_seqlens_q = cu.view();
  a.seq_lens = seq.view();
  a.block_table = bt.view();
  // HostTensor of zero elements still has a non-null buffer.
  expect_ok(sparse_attention_prefill(a));
}

TEST_F(AttentionValidation, PlanArguments) {
  DecodePlanArgs p = pr.plan_args(1);
  SparseDecodePlan plan;
  expect_ok(SparseDecodePlan::can_implement(p));
  auto bad = p;
  bad.batch_size = 0;
  expect_error(plan.plan(bad), StatusCode::kInvalidArgument, "'batch_size'");
  EXPECT_FALSE(plan.planned());
  bad = p;
  bad.queries_per_request = 33;
  expect_error(plan.plan(bad), StatusCode::kInvalidArgument, "'queries_per_request'");
  bad = p;
  bad.topk = 17;
  expect_error(plan.plan(bad), StatusCode::kInvalidArgument, "'topk'");
  bad = p;
  bad.max_pages_per_request = 8193;
  expect_error(plan.plan(bad), StatusCode::kInvalidArgument, "'max_pages_per_request'");
  bad = p;
  bad.num_kv_heads = 9;
  bad.num_q_heads = 18;
  expect_error(plan.plan(bad), StatusCode::kInvalidArgument, "'num_kv_heads'");
  bad = p;
  bad.num_q_heads = 12;
  bad.num_kv_heads = 4;
  expect_error(plan.plan(bad), StatusCode::kInvalidArgument, "'num_q_heads / num_kv_heads'");
  bad = p;
  bad.kv_format = KvFormat::nvfp4;
  expect_error(plan.plan(bad), StatusCode::kUnsupported, "q dtype bf16 with a nvfp4");
  bad = p;
  bad.device = Device::cuda;
  {
    // Unsupported in a CPU-only build; a CUDA build may plan (or report no device).
    SparseDecodePlan cuda_plan;
    const Status s = cuda_plan.plan(bad);
    std::string msg = s.message();
    for (char& ch : msg) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (!s.ok()) EXPECT_NE(msg.find("cuda"), std::string::npos) << s.message();
    else EXPECT_TRUE(cuda_plan.planned());
  }
  bad = p;
  bad.num_threads = -1;
  expect_error(plan.plan(bad), StatusCode::kInvalidArgument, "'num_threads'");
}

class DecodeValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    Rng rng(40);
    pr = make_decode_problem(KvFormat::bf16, 8, 2, {300, 200}, 2, rng, 16, 4);
    ASSERT_TRUE(plan.plan(pr.plan_args(2)).ok());
  }
  static void expect_error(const Status& s, StatusCode code, const std::string& needle) {
    EXPECT_EQ(s.code(), code) << s.message();
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  }
  Problem pr;
  SparseDecodePlan plan;
};

TEST_F(DecodeValidation, NotPlanned) {
  SparseDecodePlan fresh;
  expect_error(fresh.run(pr.decode_args()), StatusCode::kInvalidArgument, "'plan'");
}
TEST_F(DecodeValidation, Succeeds) { expect_ok(plan.run(pr.decode_args())); }
TEST_F(DecodeValidation, RowsMismatchPlan) {
  auto a = pr.decode_args();
  a.q.shape[0] = 3;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'q'");
}
TEST_F(DecodeValidation, QDtypeMismatchPlan) {
  auto a = pr.decode_args();
  a.q.dtype = DType::e4m3;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'q'");
}
TEST_F(DecodeValidation, FormatMismatchPlan) {
  Rng rng(41);
  CacheData c = make_cache(KvFormat::fp8, pr.cache.pages, 2, rng);
  auto a = pr.decode_args();
  a.kv = c.view();
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'kv.format'");
}
TEST_F(DecodeValidation, KvHeadsMismatchPlan) {
  Rng rng(42);
  CacheData c = make_cache(KvFormat::bf16, pr.cache.pages, 1, rng);
  HostTensor topk(DType::i32, {4, 1, 16});
  auto a = pr.decode_args();
  a.kv = c.view();
  a.topk_indices = topk.view();
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'kv.k.data'");
}
TEST_F(DecodeValidation, TopkWidthMismatchPlan) {
  auto a = pr.decode_args();
  a.topk_indices.shape[2] = 8;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'topk_indices'");
}
TEST_F(DecodeValidation, SeqLenBeyondCapacity) {
  auto a = pr.decode_args();
  pr.seq.data<std::int32_t>()[1] = 4 * 128 + 1;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'seq_lens[1]'");
}
TEST_F(DecodeValidation, NegativeSeqLen) {
  auto a = pr.decode_args();
  pr.seq.data<std::int32_t>()[0] = -1;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'seq_lens[0]'");
}
TEST_F(DecodeValidation, BlockTableNarrowerThanPlan) {
  auto a = pr.decode_args();
  a.block_table.shape[1] = 3;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'block_table'");
}
TEST_F(DecodeValidation, BlockTableEntryOutOfRange) {
  auto a = pr.decode_args();
  pr.block_table.data<std::int32_t>()[0] = -5;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'block_table[0, 0]'");
}
TEST_F(DecodeValidation, BatchMismatchPlan) {
  auto a = pr.decode_args();
  a.seq_lens.shape[0] = 1;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'seq_lens'");
}
TEST_F(DecodeValidation, LseDtype) {
  auto a = pr.decode_args();
  a.lse.dtype = DType::bf16;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'lse'");
}
TEST_F(DecodeValidation, TensorOnOtherDeviceThanPlan) {
  auto a = pr.decode_args();
  a.out.device = Device::cuda;
  expect_error(plan.run(a), StatusCode::kInvalidArgument, "'out'");
}
TEST_F(DecodeValidation, MovedPlanStillRuns) {
  SparseDecodePlan moved(std::move(plan));
  EXPECT_FALSE(plan.planned());
  expect_ok(moved.run(pr.decode_args()));
  expect_error(plan.run(pr.decode_args()), StatusCode::kInvalidArgument, "'plan'");
}

// ---------------------------------------------------------------------------
// The reference helpers themselves.

TEST(Reference, CompareAppliesD8Policy) {
  using reference::compare;
  using reference::Tolerance;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> b = {1.0, -2.0, 0.5, 0.0};
  std::vector<double> a = {1.05, -2.0, 0.5, 0.0};  // |err| 0.05 <= 0.03 + 0.03 * 1
  auto r = compare(a, b, {0.0, -inf}, {0.0005, -inf}, Tolerance::bf16());
  EXPECT_FALSE(r.pass);  // every element within tolerance, but cosine 0.99981 < 0.9999
  EXPECT_EQ(r.num_mismatch, 0);
  EXPECT_NEAR(r.cosine, 0.99981, 1e-5);
  r = compare(a, b, {0.0, -inf}, {0.0005, -inf}, Tolerance{3e-2, 3e-2, 0.999, 1e-3});
  EXPECT_TRUE(r.pass) << r.summary();
  a[0] = 1.07;  // 0.07 > 0.06
  r = compare(a, b, {}, {}, Tolerance::bf16());
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.worst_index, 0);
  EXPECT_EQ(r.num_mismatch, 1);
  EXPECT_NEAR(r.max_abs_err, 0.07, 1e-12);
  EXPECT_TRUE(compare(a, b, {}, {}, Tolerance::fp8()).pass);
  // NaN positions must agree; LSE difference beyond 1e-3 fails.
  a[0] = 1.0;
  a[3] = std::nan("");
  EXPECT_FALSE(compare(a, b, {}, {}, Tolerance::fp8()).pass);
  a[3] = 0.0;
  EXPECT_FALSE(compare(a, b, {1.0}, {1.002}, Tolerance::bf16()).pass);
  EXPECT_TRUE(compare(a, b, {1.0}, {1.002}, Tolerance::fp8()).pass);
  EXPECT_FALSE(compare(a, b, {-inf}, {0.0}, Tolerance::fp8()).pass);
  // Cosine: a sign flip of a large element fails even within a loose atol.
  EXPECT_FALSE(compare({1.0, 1.0}, {1.0, -1.0}, {}, {}, Tolerance{10, 10, 0.999, 1}).pass);
  EXPECT_FALSE(compare({1.0}, {1.0, 2.0}, {}, {}, Tolerance::fp8()).pass);
}

TEST(Reference, DequantizeRequestKvAppliesBlockTable) {
  Rng rng(50);
  Problem pr = make_problem(KvFormat::nvfp4, 8, 2, {300}, {1}, rng);
  reference::DenseKv dense;
  expect_ok(reference::dequantize_request_kv(pr.cache.view(), pr.block_table.view(), 0, 300, &dense));
  EXPECT_EQ(dense.seq_len, 300);
  EXPECT_EQ(dense.num_kv_heads, 2);
  EXPECT_EQ(dense.k_scale, 0.5f);
  EXPECT_EQ(dense.v_scale, 0.25f);
  // Token 200 of head 1 = physical page block_table[0][1], offset 72, dims 0 and 1.
  const std::int64_t phys = pr.block_table.data<std::int32_t>()[1];
  const std::uint8_t byte = pr.cache.v.data<std::uint8_t>()[((phys * 2 + 1) * 128 + 72) * 64];
  const std::uint8_t scale = pr.cache.vs.data<std::uint8_t>()[((phys * 2 + 1) * 128 + 72) * 8];
  EXPECT_EQ(dense.v_row(1, 200)[0], e4m3_to_float(nvfp4_to_e4m3(byte & 0xf, scale)));
  EXPECT_EQ(dense.v_row(1, 200)[1], e4m3_to_float(nvfp4_to_e4m3(byte >> 4, scale)));
  // Errors name the argument.
  Status s = reference::dequantize_request_kv(pr.cache.view(), pr.block_table.view(), 0, 1000, &dense);
  EXPECT_NE(s.message().find("'block_table'"), std::string::npos) << s.message();
  s = reference::dequantize_request_kv(pr.cache.view(), pr.block_table.view(), 3, 10, &dense);
  EXPECT_NE(s.message().find("'request'"), std::string::npos) << s.message();
}

TEST(Reference, RowsSubsetLeavesOthersNan) {
  Rng rng(51);
  Problem pr = make_problem(KvFormat::bf16, 8, 2, {300, 200}, {3, 2}, rng);
  expect_ok(sparse_attention_prefill(pr.prefill_args()));
  reference::ReferenceOptions opt;
  opt.rows = {1, 4};
  std::vector<double> ro, rl;
  expect_ok(reference::reference_prefill(pr.prefill_args(), opt, &ro, &rl));
  EXPECT_TRUE(std::isnan(ro[0]));
  EXPECT_FALSE(std::isnan(ro[1 * 8 * 128]));
  EXPECT_FALSE(std::isnan(rl[4 * 8]));
  const auto got = reference::to_double(pr.out.view());
  for (int d = 0; d < 128; ++d) EXPECT_NEAR(got[4 * 8 * 128 + d], ro[4 * 8 * 128 + d], 0.03);
  opt.rows = {7};
  EXPECT_FALSE(reference::reference_prefill(pr.prefill_args(), opt, &ro, &rl).ok());
}

}  // namespace

// Tests of the lightning indexer: indexer_prefill, indexer_decode, topk_select
// (spec 2.2-2.8, D1, D2, D4, D5, D9, D10).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/version.h"
#include "flashmsa/indexer.h"
#include "flashmsa/memory.h"
#include "flashmsa/numerics.h"
#include "cpu/indexer_cpu.h"
#include "test_util.h"

namespace flashmsa {
namespace {

using testing::Rng;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------
// Test-side index-K cache: written byte by byte with the numerics functions and
// decoded independently of the library's CPU backend.

struct TestIndexCache {
  KvFormat format;
  std::int64_t pages;
  float global_scale;
  HostTensor data, scale;
  IndexKCache view;

  TestIndexCache(KvFormat f, std::int64_t num_pages, float gs = 1.0f)
      : format(f), pages(num_pages), global_scale(f == KvFormat::nvfp4 ? gs : 1.0f) {
    if (f == KvFormat::nvfp4) {
      data.reset(DType::u8, {num_pages, 128, 64});
      scale.reset(DType::e4m3, {num_pages, 128, 8});
      view.block_scale = scale.view();
      view.global_scale = global_scale;
    } else {
      data.reset(f == KvFormat::bf16 ? DType::bf16 : DType::e4m3, {num_pages, 128, 128});
    }
    view.format = f;
    view.data = data.view();
  }

  // Stores one token's 128-dim key x (quantised per the format).
  void set_row(std::int64_t page, int tok, const float* x) {
    const std::int64_t r = page * 128 + tok;
    switch (format) {
      case KvFormat::bf16:
        for (int d = 0; d < 128; ++d) data.data<std::uint16_t>()[r * 128 + d] = float_to_bf16(x[d]);
        break;
      case KvFormat::fp8:
        for (int d = 0; d < 128; ++d) data.data<std::uint8_t>()[r * 128 + d] = float_to_e4m3_sat(x[d]);
        break;
      case KvFormat::nvfp4:
        for (int g = 0; g < 8; ++g)
          nvfp4_quantize_block16(x + 16 * g, global_scale, data.data<std::uint8_t>() + r * 64 + 8 * g,
                                 scale.data<std::uint8_t>() + r * 8 + g);
        break;
    }
  }

  void fill_random(Rng& rng, float stddev = 1.0f) {
    std::normal_distribution<float> dist(0.0f, stddev);
    float x[128];
    for (std::int64_t p = 0; p < pages; ++p)
      for (int t = 0; t < 128; ++t) {
        for (float& v : x) v = dist(rng);
        set_row(p, t, x);
      }
  }

  // Decoded key value WITHOUT the global scale (naive, from the spec formulas).
  void decode_row(std::int64_t page, int tok, float* out) const {
    const std::int64_t r = page * 128 + tok;
    for (int d = 0; d < 128; ++d) {
      switch (format) {
        case KvFormat::bf16: out[d] = bf16_to_float(data.data<std::uint16_t>()[r * 128 + d]); break;
        case KvFormat::fp8: out[d] = e4m3_to_float(data.data<std::uint8_t>()[r * 128 + d]); break;
        case KvFormat::nvfp4: {
          const std::uint8_t byte = data.data<std::uint8_t>()[r * 64 + d / 2];
          const std::uint8_t code = d % 2 ? byte >> 4 : byte & 0xf;
          out[d] = e4m3_to_float(nvfp4_to_e4m3(code, scale.data<std::uint8_t>()[r * 8 + d / 16]));
          break;
        }
      }
    }
  }
};

// Query row values as float.
std::vector<float> q_row(const HostTensor& q, std::int64_t row, std::int64_t h) {
  const TensorView& v = q.view();
  std::vector<float> out(128);
  for (int d = 0; d < 128; ++d) {
    const std::int64_t i = row * v.stride[0] + h * v.stride[1] + d;
    out[d] = v.dtype == DType::bf16 ? bf16_to_float(q.data<std::uint16_t>()[i])
                                    : e4m3_to_float(q.data<std::uint8_t>()[i]);
  }
  return out;
}

// Naive indexer for one (row, head): page scores of b < L and the D1 top-k.
struct NaiveIndexer {
  const TestIndexCache& cache;
  std::vector<float> decoded;  // [pages, 128, 128]
  explicit NaiveIndexer(const TestIndexCache& c) : cache(c) {
    decoded.resize(static_cast<std::size_t>(c.pages * 128 * 128));
    for (std::int64_t p = 0; p < c.pages; ++p)
      for (int t = 0; t < 128; ++t) c.decode_row(p, t, &decoded[(p * 128 + t) * 128]);
  }

  // max over the page's 128 tokens of the raw FP32 dot (sequential over d); NaN ignored.
  float page_score(const std::vector<float>& q, std::int64_t phys) const {
    float best = kNaN;
    for (int t = 0; t < 128; ++t) {
      const float* k = &decoded[(phys * 128 + t) * 128];
      float s = 0.0f;
      for (int d = 0; d < 128; ++d) s += q[d] * k[d];
      if (cache.format == KvFormat::nvfp4) s *= cache.global_scale;
      if (!std::isnan(s) && (std::isnan(best) || s > best)) best = s;
    }
    return best;
  }

  // bt: block-table row (logical -> physical).
  void run(const std::vector<float>& q, std::int64_t pos, const std::vector<std::int32_t>& bt, int K,
           std::vector<float>* scores, std::vector<std::int32_t>* topk) const {
    topk->assign(K, -1);
    scores->clear();
    if (pos < 0) return;
    const std::int64_t L = pos / 128;
    std::vector<float> memo(static_cast<std::size_t>(cache.pages));
    std::vector<char> have(static_cast<std::size_t>(cache.pages), 0);
    for (std::int64_t b = 0; b < L; ++b) {
      const std::int32_t ph = bt[b];
      if (!have[ph]) {
        memo[ph] = page_score(q, ph);
        have[ph] = 1;
      }
      scores->push_back(memo[ph]);
    }
    if (L + 1 <= K) {
      for (std::int64_t j = 0; j <= L; ++j) (*topk)[j] = static_cast<std::int32_t>(j);
      return;
    }
    std::vector<std::int32_t> ids(static_cast<std::size_t>(L));
    for (std::int64_t b = 0; b < L; ++b) ids[b] = static_cast<std::int32_t>(b);
    const std::vector<float>& s = *scores;
    std::stable_sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
      const bool na = std::isnan(s[a]), nb = std::isnan(s[b]);
      if (na != nb) return nb;  // the non-NaN one first
      if (na) return a < b;
      if (s[a] != s[b]) return s[a] > s[b];
      return a < b;
    });
    for (int j = 0; j < K - 1; ++j) (*topk)[j] = ids[j];
    (*topk)[K - 1] = static_cast<std::int32_t>(L);
  }
};

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b;
}

// One request of a test problem: rows, final KV length and its block table row.
struct Req {
  std::int64_t q_len;
  std::int64_t seq_len;
};

// A prefill problem with random data; holds every tensor.
struct PrefillCase {
  std::vector<Req> reqs;
  std::int64_t H, K, T = 0, width = 0;
  TestIndexCache cache;
  HostTensor q, block_table, cu, seq_lens, topk, scores;

  PrefillCase(std::vector<Req> r, std::int64_t heads, int k, KvFormat f, DType q_dtype, Rng& rng,
              float gs = 1.0f, std::int64_t extra_pages = 3)
      : reqs(std::move(r)), H(heads), K(k), cache(f, count_pages(reqs) + extra_pages, gs) {
    cache.fill_random(rng);
    for (const Req& x : reqs) {
      T += x.q_len;
      width = std::max(width, (x.seq_len + 127) / 128);
    }
    const std::int64_t B = static_cast<std::int64_t>(reqs.size());
    q.reset(q_dtype, {T, H, 128});
    if (q_dtype == DType::bf16) testing::fill_bf16_normal(q, rng);
    else testing::fill_random_e4m3(q, rng);
    block_table.reset(DType::i32, {B, std::max<std::int64_t>(width, 1)});
    std::vector<std::int32_t> perm = testing::random_permutation(static_cast<std::int32_t>(cache.pages), rng);
    std::int64_t next = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < block_table.view().shape[1]; ++j)
        block_table.data<std::int32_t>()[b * block_table.view().shape[1] + j] =
            j < (reqs[b].seq_len + 127) / 128 ? perm[next++] : 0;
    cu.reset(DType::i32, {B + 1});
    seq_lens.reset(DType::i32, {B});
    for (std::int64_t b = 0; b < B; ++b) {
      cu.data<std::int32_t>()[b + 1] = static_cast<std::int32_t>(cu.data<std::int32_t>()[b] + reqs[b].q_len);
      seq_lens.data<std::int32_t>()[b] = static_cast<std::int32_t>(reqs[b].seq_len);
    }
    topk.reset(DType::i32, {T, H, K});
    scores.reset(DType::f32, {T, H, std::max<std::int64_t>(width, 1)});
    testing::poison(topk);
    testing::poison(scores);
  }

  static std::int64_t count_pages(const std::vector<Req>& r) {
    std::int64_t n = 0;
    for (const Req& x : r) n += (x.seq_len + 127) / 128;
    return n;
  }

  IndexerPrefillArgs args(bool with_scores = true) const {
    IndexerPrefillArgs a;
    a.q = q.view();
    a.index_k = cache.view;
    a.block_table = block_table.view();
    a.cu_seqlens_q = cu.view();
    a.seq_lens = seq_lens.view();
    a.topk_indices = topk.view();
    if (with_scores) a.page_scores = scores.view();
    return a;
  }

  std::vector<std::int32_t> bt_row(std::int64_t b) const {
    const std::int64_t w = block_table.view().shape[1];
    return std::vector<std::int32_t>(block_table.data<std::int32_t>() + b * w,
                                     block_table.data<std::int32_t>() + (b + 1) * w);
  }

  // Checks topk (and page scores when `check_scores`) of every row against the naive indexer.
  void expect_matches_naive(bool check_scores) const {
    NaiveIndexer naive(cache);
    std::vector<float> s;
    std::vector<std::int32_t> tk;
    const std::int64_t W = scores.view().shape[2];
    std::int64_t row = 0;
    for (std::size_t b = 0; b < reqs.size(); ++b) {
      const std::vector<std::int32_t> bt = bt_row(static_cast<std::int64_t>(b));
      for (std::int64_t j = 0; j < reqs[b].q_len; ++j, ++row) {
        const std::int64_t pos = reqs[b].seq_len - reqs[b].q_len + j;
        for (std::int64_t h = 0; h < H; ++h) {
          naive.run(q_row(q, row, h), pos, bt, static_cast<int>(K), &s, &tk);
          for (std::int64_t k = 0; k < K; ++k)
            ASSERT_EQ(topk.data<std::int32_t>()[(row * H + h) * K + k], tk[k])
                << "row " << row << " head " << h << " slot " << k << " pos " << pos;
          if (!check_scores) continue;
          for (std::int64_t p = 0; p < W; ++p) {
            const float got = scores.data<float>()[(row * H + h) * W + p];
            const float want = p < static_cast<std::int64_t>(s.size()) ? s[p] : -kInf;
            ASSERT_TRUE(same_float(got, want))
                << "row " << row << " head " << h << " page " << p << ": " << got << " vs " << want;
          }
        }
      }
    }
  }
};

// Runs topk_select on one row.
std::vector<std::int32_t> select_row(const std::vector<float>& scores, std::int32_t L, int K) {
  std::vector<float> s = scores;
  if (s.empty()) s.push_back(0.0f);
  std::int32_t lp = L;
  std::vector<std::int32_t> out(K, 12345);
  TensorView sv = make_view(s.data(), DType::f32, {1, static_cast<std::int64_t>(s.size())});
  TensorView lv = make_view(&lp, DType::i32, {1});
  TensorView ov = make_view(out.data(), DType::i32, {1, K});
  Status st = topk_select(sv, lv, ov);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// ---------------------------------------------------------------------------
// topk_select: the selection rule

TEST(TopkSelect, KnownAnswer) {
  // 20 history pages, local page 20: 15 best by score, then 20.
  std::vector<float> s = {0.5f, 3.0f, -1.0f, 7.0f, 2.0f, 9.0f, 0.0f, 4.0f, 8.0f, 1.0f,
                          6.0f, 5.0f, -2.0f, 10.0f, -3.0f, 11.0f, 12.0f, 2.5f, 1.5f, -0.5f};
  EXPECT_EQ(select_row(s, 20, 16),
            (std::vector<std::int32_t>{16, 15, 13, 5, 8, 3, 10, 11, 7, 1, 17, 4, 18, 9, 0, 20}));
  // K = 4: 3 best then L.
  EXPECT_EQ(select_row(s, 20, 4), (std::vector<std::int32_t>{16, 15, 13, 20}));
  // L smaller than the scores row: only b < L is ranked.
  EXPECT_EQ(select_row(s, 6, 4), (std::vector<std::int32_t>{5, 3, 1, 6}));
}

TEST(TopkSelect, RejectsMoreThan8192HistoryPages) {
  // D10: at most 8,192 pages per row; wider score rows are an error, not a truncation.
  std::vector<float> s(8193, 1.0f);
  std::int32_t lp = 8192;
  std::vector<std::int32_t> out(16, 0);
  const Status st = topk_select(make_view(s.data(), DType::f32, {1, 8193}), make_view(&lp, DType::i32, {1}),
                                make_view(out.data(), DType::i32, {1, 16}));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'scores'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("8192"), std::string::npos) << st.message();
}

TEST(TopkSelect, ExactTiesOrderByPageIdAscending) {
  std::vector<float> all_equal(40, 1.25f);
  EXPECT_EQ(select_row(all_equal, 40, 16),
            (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 40}));
  // Ties among the best: id ascending within equal scores; +0 and -0 are equal.
  std::vector<float> s(30, 0.0f);
  s[29] = 5.0f; s[3] = 5.0f; s[17] = 5.0f; s[8] = 4.0f; s[2] = 4.0f; s[20] = -0.0f;
  EXPECT_EQ(select_row(s, 30, 8), (std::vector<std::int32_t>{3, 17, 29, 2, 8, 0, 1, 30}));
  EXPECT_EQ(select_row(s, 30, 16),
            (std::vector<std::int32_t>{3, 17, 29, 2, 8, 0, 1, 4, 5, 6, 7, 9, 10, 11, 12, 30}));
}

TEST(TopkSelect, NaNRanksBelowEverything) {
  std::vector<float> s = {kNaN, 1.0f, kNaN, -kInf, 2.0f, kNaN, -5.0f, kInf};
  // 5 history pages ranked by K = 6... L = 8: 5 best then 8.
  EXPECT_EQ(select_row(s, 8, 6), (std::vector<std::int32_t>{7, 4, 1, 6, 3, 8}));
  // NaNs last, among themselves by id.
  EXPECT_EQ(select_row(s, 8, 8), (std::vector<std::int32_t>{7, 4, 1, 6, 3, 0, 2, 8}));
  std::vector<float> nan_all(20, kNaN);
  EXPECT_EQ(select_row(nan_all, 20, 4), (std::vector<std::int32_t>{0, 1, 2, 20}));
  std::vector<float> one_finite(20, kNaN);
  one_finite[19] = -1e30f;
  EXPECT_EQ(select_row(one_finite, 20, 4), (std::vector<std::int32_t>{19, 0, 1, 20}));
}

TEST(TopkSelect, ShortRowsAndSmallK) {
  std::vector<float> s(40, 0.0f);
  for (int i = 0; i < 40; ++i) s[i] = static_cast<float>(i);
  // n = L + 1 <= K: 0..L ascending (scores ignored), then -1.
  EXPECT_EQ(select_row(s, 0, 16), (std::vector<std::int32_t>{0, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                              -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(select_row(s, 5, 16), (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, -1, -1, -1, -1, -1,
                                                              -1, -1, -1, -1, -1}));
  EXPECT_EQ(select_row(s, 15, 16), (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                               12, 13, 14, 15}));
  EXPECT_EQ(select_row(s, 16, 16), (std::vector<std::int32_t>{15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5,
                                                               4, 3, 2, 1, 16}));
  EXPECT_EQ(select_row(s, 3, 4), (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(select_row(s, 4, 4), (std::vector<std::int32_t>{3, 2, 1, 4}));
  EXPECT_EQ(select_row(s, 2, 4), (std::vector<std::int32_t>{0, 1, 2, -1}));
  // K = 1: only the local page.
  EXPECT_EQ(select_row(s, 0, 1), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(select_row(s, 30, 1), (std::vector<std::int32_t>{30}));
  // Empty row (p < 0).
  EXPECT_EQ(select_row(s, -1, 5), (std::vector<std::int32_t>{-1, -1, -1, -1, -1}));
}

TEST(TopkSelect, RandomRowsMatchSortAndStridedViews) {
  Rng rng(7);
  const std::int64_t R = 200, W = 300;
  std::vector<float> scores(R * W * 2);  // column stride 2
  std::vector<std::int32_t> local(R);
  std::uniform_int_distribution<int> small(0, 6);  // many exact ties
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> lp(-2, static_cast<int>(W));
  for (std::int64_t r = 0; r < R; ++r) {
    local[r] = lp(rng);
    for (std::int64_t b = 0; b < W; ++b)
      scores[(r * W + b) * 2] = r % 2 ? static_cast<float>(small(rng)) : normal(rng);
    if (r % 7 == 0) scores[(r * W + 3) * 2] = kNaN;
  }
  for (int K : {1, 5, 16}) {
    // Output transposed: topk[r, k] at k * R + r.
    std::vector<std::int32_t> out(K * R, 777);
    Status st = topk_select(make_strided_view(scores.data(), DType::f32, {R, W}, {W * 2, 2}),
                            make_view(local.data(), DType::i32, {R}),
                            make_strided_view(out.data(), DType::i32, {R, K}, {1, R}));
    ASSERT_TRUE(st.ok()) << st.message();
    for (std::int64_t r = 0; r < R; ++r) {
      std::vector<float> row(W);
      for (std::int64_t b = 0; b < W; ++b) row[b] = scores[(r * W + b) * 2];
      std::vector<std::int32_t> want(K, -1);
      const std::int32_t L = local[r];
      if (L >= 0 && L + 1 <= K) {
        for (int j = 0; j <= L; ++j) want[j] = j;
      } else if (L >= 0) {
        std::vector<std::int32_t> ids(L);
        for (int b = 0; b < L; ++b) ids[b] = b;
        std::sort(ids.begin(), ids.end(), [&](int a, int b) {
          const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
          if (na != nb) return nb;
          if (!na && row[a] != row[b]) return row[a] > row[b];
          return a < b;
        });
        for (int j = 0; j < K - 1; ++j) want[j] = ids[j];
        want[K - 1] = L;
      }
      for (int k = 0; k < K; ++k) ASSERT_EQ(out[k * R + r], want[k]) << "row " << r << " K " << K;
    }
  }
}

// ---------------------------------------------------------------------------
// The page-score kernel: runtime-dispatched (AVX2) and baseline builds both equal a
// sequential scalar loop, bit for bit.

TEST(IndexerKernel, DispatchedAndBaselineMatchSequentialLoop) {
  Rng rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> kt(128 * 128), q(11 * 128);
  for (float& x : kt) x = nd(rng);
  for (float& x : q) x = nd(rng);
  // Query 9 is all NaN (page score NaN); query 10 gives -inf products with one token.
  for (int d = 0; d < 128; ++d) q[9 * 128 + d] = kNaN;
  q[10 * 128 + 5] = kInf;
  kt[5 * 128 + 77] = -1.0f;
  // Token 3 has a NaN key (ignored by the max).
  for (int d = 0; d < 128; ++d) kt[d * 128 + 3] = kNaN;
  for (int nv : {1, 2, 3, 4, 5, 8, 11}) {
    std::vector<float> a(nv * 2, 1.0f), b(nv * 2, 2.0f);
    cpu::page_max_scores(kt.data(), q.data(), nv, a.data(), 2);
    cpu::page_max_scores_baseline(kt.data(), q.data(), nv, b.data(), 2);
    for (int v = 0; v < nv; ++v) {
      float want = kNaN;
      for (int t = 0; t < 128; ++t) {
        float s = 0.0f;
        for (int d = 0; d < 128; ++d) s += q[v * 128 + d] * kt[d * 128 + t];
        if (!std::isnan(s) && (std::isnan(want) || s > want)) want = s;
      }
      EXPECT_TRUE(same_float(a[v * 2], want)) << nv << " " << v << ": " << a[v * 2] << " vs " << want;
      EXPECT_TRUE(same_float(b[v * 2], want)) << nv << " " << v << ": " << b[v * 2] << " vs " << want;
      EXPECT_EQ(a[v * 2 + 1], 1.0f);  // stride respected
    }
  }
}

// ---------------------------------------------------------------------------
// Prefill / decode against the naive indexer

class PageScoresVsNaive : public ::testing::TestWithParam<std::tuple<KvFormat, DType>> {};

TEST_P(PageScoresVsNaive, Prefill) {
  const auto [fmt, qt] = GetParam();
  Rng rng(100 + static_cast<int>(fmt) * 3 + static_cast<int>(qt));
  // Requests with short rows (n <= 16), page-straddling chunks, exact multiples of 128.
  PrefillCase c({{5, 5}, {40, 2200}, {130, 4096}, {1, 128 * 17}, {0, 300}, {64, 128 * 20 + 7}}, 2, 16,
                fmt, qt, rng, fmt == KvFormat::nvfp4 ? 0.37f : 1.0f);
  Status st = indexer_prefill(c.args());
  ASSERT_TRUE(st.ok()) << st.message();
  c.expect_matches_naive(true);
}

TEST_P(PageScoresVsNaive, DecodeSmallK) {
  const auto [fmt, qt] = GetParam();
  Rng rng(200 + static_cast<int>(fmt) * 3 + static_cast<int>(qt));
  // Decode = prefill with q_len = Q for every request; checked via the decode entry point.
  const int Q = 3;
  PrefillCase c({{Q, 3000}, {Q, 1000}, {Q, 129}}, 3, 5, fmt, qt, rng, fmt == KvFormat::nvfp4 ? 2.0f : 1.0f);
  IndexerDecodeArgs a;
  a.q = c.q.view();
  a.index_k = c.cache.view;
  a.block_table = c.block_table.view();
  a.seq_lens = c.seq_lens.view();
  a.queries_per_request = Q;
  a.topk_indices = c.topk.view();
  a.page_scores = c.scores.view();
  Status st = indexer_decode(a);
  ASSERT_TRUE(st.ok()) << st.message();
  c.expect_matches_naive(true);
}

INSTANTIATE_TEST_SUITE_P(Formats, PageScoresVsNaive,
                         ::testing::Combine(::testing::Values(KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4),
                                            ::testing::Values(DType::bf16, DType::e4m3)),
                         [](const ::testing::TestParamInfo<PageScoresVsNaive::ParamType>& info) {
                           return std::string("k_") + kv_format_name(std::get<0>(info.param)) + "_q_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST(Indexer, MtpDraftsStraddlingAPageBoundary) {
  Rng rng(11);
  // Q = 8 drafts at positions 2555..2562: drafts 0-4 have local page 19, drafts 5-7 page 20.
  const int Q = 8;
  PrefillCase c({{Q, 128 * 20 + 3}, {Q, 128 * 40}}, 4, 16, KvFormat::bf16, DType::bf16, rng);
  IndexerDecodeArgs a;
  a.q = c.q.view();
  a.index_k = c.cache.view;
  a.block_table = c.block_table.view();
  a.seq_lens = c.seq_lens.view();
  a.queries_per_request = Q;
  a.topk_indices = c.topk.view();
  a.page_scores = c.scores.view();
  ASSERT_TRUE(indexer_decode(a).ok());
  c.expect_matches_naive(true);
  for (std::int64_t h = 0; h < 4; ++h) {
    EXPECT_EQ(c.topk.data<std::int32_t>()[(4 * 4 + h) * 16 + 15], 19);
    EXPECT_EQ(c.topk.data<std::int32_t>()[(5 * 4 + h) * 16 + 15], 20);
    // Draft 5 ranks page 19, which draft 4 cannot (its local page).
    EXPECT_FALSE(std::isinf(c.scores.data<float>()[(5 * 4 + h) * c.scores.view().shape[2] + 19]));
    EXPECT_EQ(c.scores.data<float>()[(4 * 4 + h) * c.scores.view().shape[2] + 19], -kInf);
  }
}

TEST(Indexer, DecodePaddingRowsAreMinusOne) {
  Rng rng(12);
  const int Q = 4;
  // seq_len 0 (padding), a normal request, seq_len 2 < Q (rows at p = -2, -1, 0, 1).
  PrefillCase c({{Q, 0}, {Q, 5000}, {Q, 2}}, 2, 16, KvFormat::fp8, DType::e4m3, rng);
  IndexerDecodeArgs a;
  a.q = c.q.view();
  a.index_k = c.cache.view;
  a.block_table = c.block_table.view();
  a.seq_lens = c.seq_lens.view();
  a.queries_per_request = Q;
  a.topk_indices = c.topk.view();
  a.page_scores = c.scores.view();
  ASSERT_TRUE(indexer_decode(a).ok());
  c.expect_matches_naive(true);
  const std::int64_t W = c.scores.view().shape[2];
  for (std::int64_t row : {0, 1, 2, 3, 8, 9}) {
    for (std::int64_t h = 0; h < 2; ++h) {
      for (int k = 0; k < 16; ++k) EXPECT_EQ(c.topk.data<std::int32_t>()[(row * 2 + h) * 16 + k], -1);
      for (std::int64_t b = 0; b < W; ++b) EXPECT_EQ(c.scores.data<float>()[(row * 2 + h) * W + b], -kInf);
    }
  }
  EXPECT_EQ(c.topk.data<std::int32_t>()[(10 * 2) * 16 + 0], 0);
  EXPECT_EQ(c.topk.data<std::int32_t>()[(10 * 2) * 16 + 1], -1);
}

TEST(Indexer, GarbageInUnusedSlotsOfThePartialLastPageIsIgnored) {
  for (KvFormat fmt : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Rng rng(13);
    // Last page of each request is partial (seq_len % 128 != 0).
    PrefillCase c({{20, 128 * 18 + 50}, {3, 128 * 30 + 1}}, 2, 16, fmt, DType::bf16, rng);
    auto write_garbage = [&](std::uint8_t byte, std::uint64_t seed) {
      Rng g(seed);
      std::uniform_int_distribution<int> any(0, 255);
      for (std::size_t b = 0; b < c.reqs.size(); ++b) {
        const std::int64_t last = (c.reqs[b].seq_len - 1) / 128;
        const std::int32_t phys = c.bt_row(static_cast<std::int64_t>(b))[last];
        const int used = static_cast<int>(c.reqs[b].seq_len - last * 128);
        const std::int64_t row_bytes = fmt == KvFormat::nvfp4 ? 64 : (fmt == KvFormat::bf16 ? 256 : 128);
        auto* base = c.cache.data.data<std::uint8_t>() + phys * 128 * row_bytes;
        for (std::int64_t i = used * row_bytes; i < 128 * row_bytes; ++i)
          base[i] = byte ? byte : static_cast<std::uint8_t>(any(g));
        if (fmt == KvFormat::nvfp4) {
          auto* sc = c.cache.scale.data<std::uint8_t>() + phys * 128 * 8;
          for (int i = used * 8; i < 128 * 8; ++i) sc[i] = byte ? byte : static_cast<std::uint8_t>(any(g));
        }
      }
    };
    write_garbage(0xff, 0);  // NaN bytes
    ASSERT_TRUE(indexer_prefill(c.args()).ok());
    c.expect_matches_naive(true);
    std::vector<std::int32_t> topk1(c.topk.data<std::int32_t>(), c.topk.data<std::int32_t>() + c.topk.numel());
    std::vector<float> s1(c.scores.data<float>(), c.scores.data<float>() + c.scores.numel());
    write_garbage(0, 99);  // random bytes
    testing::poison(c.topk);
    testing::poison(c.scores);
    ASSERT_TRUE(indexer_prefill(c.args()).ok());
    EXPECT_EQ(0, std::memcmp(topk1.data(), c.topk.data<std::int32_t>(), c.topk.bytes()));
    EXPECT_EQ(0, std::memcmp(s1.data(), c.scores.data<float>(), c.scores.bytes()));
  }
}

TEST(Indexer, SeqLenExactMultipleOf128) {
  Rng rng(14);
  // Decode Q = 1 at seq_len 128k: p = 128k - 1, L = k - 1 (the full last page is local).
  PrefillCase c({{1, 128 * 16}, {1, 128 * 17}, {1, 128 * 33}, {2, 128 * 25}}, 1, 16, KvFormat::bf16,
                DType::bf16, rng);
  ASSERT_TRUE(indexer_prefill(c.args()).ok());
  c.expect_matches_naive(true);
  EXPECT_EQ(c.topk.data<std::int32_t>()[0 * 16 + 15], 15);  // n = 16 <= 16: 0..15
  EXPECT_EQ(c.topk.data<std::int32_t>()[0 * 16 + 0], 0);
  EXPECT_EQ(c.topk.data<std::int32_t>()[1 * 16 + 15], 16);
  EXPECT_EQ(c.topk.data<std::int32_t>()[2 * 16 + 15], 32);
  EXPECT_EQ(c.topk.data<std::int32_t>()[3 * 16 + 15], 24);  // p = 128*25 - 2
  EXPECT_EQ(c.topk.data<std::int32_t>()[4 * 16 + 15], 24);  // p = 128*25 - 1
}

TEST(Indexer, MillionTokenContext) {
  // 8,192 logical pages (1,048,576 tokens) mapped onto 512 physical pages: many logical
  // pages share a physical page, so exact score ties are frequent (id ascending wins).
  Rng rng(15);
  const std::int64_t phys_pages = 512, logical = 8192;
  TestIndexCache cache(KvFormat::fp8, phys_pages);
  cache.fill_random(rng);
  HostTensor bt(DType::i32, {1, logical});
  std::uniform_int_distribution<int> pick(0, static_cast<int>(phys_pages) - 1);
  for (std::int64_t j = 0; j < logical; ++j) bt.data<std::int32_t>()[j] = pick(rng);
  const int Q = 3;
  HostTensor q(DType::bf16, {Q, 1, 128});
  testing::fill_bf16_normal(q, rng);
  HostTensor seq(DType::i32, {1});
  seq.data<std::int32_t>()[0] = kMaxContext;
  HostTensor topk(DType::i32, {Q, 1, 16});
  HostTensor scores(DType::f32, {Q, 1, logical});
  IndexerDecodeArgs a;
  a.q = q.view();
  a.index_k = cache.view;
  a.block_table = bt.view();
  a.seq_lens = seq.view();
  a.queries_per_request = Q;
  a.topk_indices = topk.view();
  a.page_scores = scores.view();
  Status st = indexer_decode(a);
  ASSERT_TRUE(st.ok()) << st.message();
  NaiveIndexer naive(cache);
  std::vector<std::int32_t> bt_row(bt.data<std::int32_t>(), bt.data<std::int32_t>() + logical);
  std::vector<float> s;
  std::vector<std::int32_t> tk;
  for (int j = 0; j < Q; ++j) {
    const std::int64_t pos = kMaxContext - Q + j;
    naive.run(q_row(q, j, 0), pos, bt_row, 16, &s, &tk);
    for (int k = 0; k < 16; ++k) ASSERT_EQ(topk.data<std::int32_t>()[j * 16 + k], tk[k]) << j << " " << k;
    EXPECT_EQ(tk[15], 8191);
    for (std::int64_t b = 0; b < 8191; ++b)
      ASSERT_TRUE(same_float(scores.data<float>()[j * logical + b], s[b]));
    EXPECT_EQ(scores.data<float>()[j * logical + 8191], -kInf);
  }
}

TEST(Indexer, TokenMajorAndHeadMajorViewsAgree) {
  Rng rng(16);
  PrefillCase c({{37, 3000}, {9, 900}}, 4, 16, KvFormat::nvfp4, DType::e4m3, rng);
  ASSERT_TRUE(indexer_prefill(c.args(false)).ok());
  const std::int64_t T = c.T, H = 4, K = 16;
  // Head-major buffer [H, T, K], seen as [T, H, K].
  std::vector<std::int32_t> hm(H * T * K, 555);
  IndexerPrefillArgs a = c.args(false);
  a.topk_indices = make_strided_view(hm.data(), DType::i32, {T, H, K}, {K, T * K, 1});
  ASSERT_TRUE(indexer_prefill(a).ok());
  // A fully transposed, padded view: [T, H, K] with K innermost stride 3.
  std::vector<std::int32_t> odd(T * H * K * 3, 555);
  a.topk_indices = make_strided_view(odd.data(), DType::i32, {T, H, K}, {3, T * 3, T * H * 3});
  ASSERT_TRUE(indexer_prefill(a).ok());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int32_t want = c.topk.data<std::int32_t>()[(t * H + h) * K + k];
        ASSERT_EQ(hm[(h * T + t) * K + k], want);
        ASSERT_EQ(odd[(k * T * H + h * T + t) * 3], want);
      }
  c.expect_matches_naive(false);
}

TEST(Indexer, ChunkedPrefillMatchesDecodeOnTheSamePositions) {
  for (KvFormat fmt : {KvFormat::bf16, KvFormat::nvfp4}) {
    Rng rng(17);
    // Request 0: prefix 2900, 100 new rows; request 1: prefix 1990, 10 new rows.
    PrefillCase c({{100, 3000}, {10, 2000}}, 2, 16, fmt, DType::bf16, rng, 0.5f);
    ASSERT_TRUE(indexer_prefill(c.args()).ok());
    // Decode Q = 16 on the last 16 rows of request 0 (rows 84..99).
    const int Q = 16;
    IndexerDecodeArgs a;
    a.q = make_strided_view(c.q.data<std::uint16_t>() + 84 * 2 * 128, DType::bf16, {Q, 2, 128},
                            {2 * 128, 128, 1});
    a.index_k = c.cache.view;
    a.block_table = make_strided_view(c.block_table.data<std::int32_t>(), DType::i32,
                                      {1, c.block_table.view().shape[1]}, {c.block_table.view().shape[1], 1});
    a.seq_lens = make_view(c.seq_lens.data<std::int32_t>(), DType::i32, {1});
    a.queries_per_request = Q;
    HostTensor topk(DType::i32, {Q, 2, 16});
    HostTensor scores(DType::f32, c.scores.view().shape[2] > 0 ? std::vector<std::int64_t>{Q, 2, c.scores.view().shape[2]}
                                                                : std::vector<std::int64_t>{Q, 2, 1});
    a.topk_indices = topk.view();
    a.page_scores = scores.view();
    Status st = indexer_decode(a);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(0, std::memcmp(topk.data<std::int32_t>(), c.topk.data<std::int32_t>() + 84 * 2 * 16, topk.bytes()));
    EXPECT_EQ(0, std::memcmp(scores.data<float>(), c.scores.data<float>() + 84 * 2 * c.scores.view().shape[2],
                             scores.bytes()));
  }
}

TEST(Indexer, BitwiseDeterministicAcrossRunsAndThreadCounts) {
  Rng rng(18);
  PrefillCase c({{300, 9000}, {17, 17}, {50, 4000}, {2, 128 * 12}}, 3, 16, KvFormat::bf16, DType::bf16, rng);
  const char* old = std::getenv("FLASHMSA_NUM_THREADS");
  const std::string saved = old ? old : "";
  std::vector<std::vector<std::uint8_t>> results;
  for (const char* threads : {"1", "2", "2", "3"}) {
    setenv("FLASHMSA_NUM_THREADS", threads, 1);
    testing::poison(c.topk);
    testing::poison(c.scores);
    ASSERT_TRUE(indexer_prefill(c.args()).ok());
    std::vector<std::uint8_t> r(c.topk.bytes() + c.scores.bytes());
    std::memcpy(r.data(), c.topk.data<std::uint8_t>(), c.topk.bytes());
    std::memcpy(r.data() + c.topk.bytes(), c.scores.data<std::uint8_t>(), c.scores.bytes());
    results.push_back(std::move(r));
  }
  if (old) setenv("FLASHMSA_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("FLASHMSA_NUM_THREADS");
  for (std::size_t i = 1; i < results.size(); ++i) EXPECT_TRUE(results[i] == results[0]) << "run " << i;
  c.expect_matches_naive(true);
}

TEST(Indexer, NaNQueryValuesGiveNaNScoresRankedLast) {
  Rng rng(19);
  PrefillCase c({{2, 128 * 30 + 5}}, 2, 16, KvFormat::bf16, DType::bf16, rng);
  // Head 1 of row 0: NaN query -> every page score NaN -> pages 0..14 then 30.
  for (int d = 0; d < 128; ++d) c.q.data<std::uint16_t>()[(0 * 2 + 1) * 128 + d] = 0x7fc0;
  // Page 3 of the request holds one NaN key token: its score ignores that token.
  const std::int32_t phys3 = c.bt_row(0)[3];
  for (int d = 0; d < 128; ++d) c.cache.data.data<std::uint16_t>()[(phys3 * 128 + 7) * 128 + d] = 0x7fc0;
  ASSERT_TRUE(indexer_prefill(c.args()).ok());
  c.expect_matches_naive(true);
  for (int k = 0; k < 15; ++k) EXPECT_EQ(c.topk.data<std::int32_t>()[(0 * 2 + 1) * 16 + k], k);
  EXPECT_EQ(c.topk.data<std::int32_t>()[(0 * 2 + 1) * 16 + 15], 30);
  EXPECT_TRUE(std::isnan(c.scores.data<float>()[(0 * 2 + 1) * 31 + 0]));
  EXPECT_FALSE(std::isnan(c.scores.data<float>()[(0 * 2 + 0) * 31 + 3]));
}

TEST(Indexer, CachesWrittenByIndexCacheInsert) {
  // The same keys written by index_cache_insert and by the test's byte writer give the
  // same bytes, and the indexer on the inserted cache matches the naive indexer.
  for (KvFormat fmt : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Rng rng(23);
    PrefillCase c({{24, 128 * 21 + 9}}, 2, 16, fmt, DType::bf16, rng, 0.75f);
    const std::int64_t S = c.reqs[0].seq_len;
    HostTensor keys(DType::bf16, {S, 128});
    testing::fill_bf16_normal(keys, rng);
    HostTensor slots(DType::i32, {S});
    const std::vector<std::int32_t> bt = c.bt_row(0);
    for (std::int64_t t = 0; t < S; ++t)
      slots.data<std::int32_t>()[t] = static_cast<std::int32_t>(bt[t / 128] * 128 + t % 128);
    Status st = index_cache_insert(keys.view(), slots.view(), c.cache.view);
    ASSERT_TRUE(st.ok()) << st.message();
    TestIndexCache mine(fmt, c.cache.pages, 0.75f);
    float x[128];
    for (std::int64_t t = 0; t < S; ++t) {
      for (int d = 0; d < 128; ++d) x[d] = bf16_to_float(keys.data<std::uint16_t>()[t * 128 + d]);
      mine.set_row(bt[t / 128], static_cast<int>(t % 128), x);
    }
    const std::int64_t row_bytes = fmt == KvFormat::nvfp4 ? 64 : (fmt == KvFormat::bf16 ? 256 : 128);
    for (std::int64_t t = 0; t < S; ++t) {
      const std::int64_t r = bt[t / 128] * 128 + t % 128;
      ASSERT_EQ(0, std::memcmp(c.cache.data.data<std::uint8_t>() + r * row_bytes,
                               mine.data.data<std::uint8_t>() + r * row_bytes, row_bytes))
          << kv_format_name(fmt) << " token " << t;
      if (fmt == KvFormat::nvfp4)
        ASSERT_EQ(0, std::memcmp(c.cache.scale.data<std::uint8_t>() + r * 8,
                                 mine.scale.data<std::uint8_t>() + r * 8, 8));
    }
    ASSERT_TRUE(indexer_prefill(c.args()).ok());
    c.expect_matches_naive(true);
  }
}

// ---------------------------------------------------------------------------
// Validation: every rejection names its argument

struct SmallCase {
  Rng rng{20};
  PrefillCase c{{{4, 300}}, 2, 16, KvFormat::bf16, DType::bf16, rng};
};

void expect_invalid(const Status& st, const std::string& arg) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("argument '" + arg + "'"), std::string::npos) << st.message();
}

TEST(IndexerValidation, BaselineIsValid) {
  SmallCase s;
  Status st = indexer_prefill(s.c.args());
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(IndexerValidation, QWrongDtype) {
  SmallCase s;
  HostTensor q(DType::f32, {4, 2, 128});
  IndexerPrefillArgs a = s.c.args();
  a.q = q.view();
  expect_invalid(indexer_prefill(a), "q");
}

TEST(IndexerValidation, QWrongRank) {
  SmallCase s;
  IndexerPrefillArgs a = s.c.args();
  a.q = make_view(s.c.q.data<std::uint16_t>(), DType::bf16, {4, 256});
  expect_invalid(indexer_prefill(a), "q");
}

TEST(IndexerValidation, TooManyHeads) {
  SmallCase s;
  HostTensor q(DType::bf16, {4, 9, 128});
  HostTensor topk(DType::i32, {4, 9, 16});
  IndexerPrefillArgs a = s.c.args(false);
  a.q = q.view();
  a.topk_indices = topk.view();
  expect_invalid(indexer_prefill(a), "q");
}

TEST(IndexerValidation, TopkTooWide) {
  SmallCase s;
  HostTensor topk(DType::i32, {4, 2, 17});
  IndexerPrefillArgs a = s.c.args();
  a.topk_indices = topk.view();
  expect_invalid(indexer_prefill(a), "topk_indices");
  HostTensor wrong(DType::f32, {4, 2, 16});
  a.topk_indices = wrong.view();
  expect_invalid(indexer_prefill(a), "topk_indices");
}

TEST(IndexerValidation, CuSeqlensNonMonotone) {
  Rng rng(21);
  PrefillCase c({{2, 300}, {2, 400}}, 1, 16, KvFormat::bf16, DType::bf16, rng);
  c.cu.data<std::int32_t>()[1] = 5;  // [0, 5, 4]
  expect_invalid(indexer_prefill(c.args()), "cu_seqlens_q");
}

TEST(IndexerValidation, CuSeqlensLastIsNotT) {
  SmallCase s;
  s.c.cu.data<std::int32_t>()[1] = 3;
  expect_invalid(indexer_prefill(s.c.args()), "cu_seqlens_q[B]");
}

TEST(IndexerValidation, SeqLenShorterThanQueryLength) {
  SmallCase s;
  s.c.seq_lens.data<std::int32_t>()[0] = 3;
  expect_invalid(indexer_prefill(s.c.args()), "seq_lens[0]");
}

TEST(IndexerValidation, BlockTableTooNarrow) {
  SmallCase s;  // seq_len 300 needs 3 pages
  IndexerPrefillArgs a = s.c.args();
  a.block_table = make_view(s.c.block_table.data<std::int32_t>(), DType::i32, {1, 2});
  expect_invalid(indexer_prefill(a), "block_table");
}

TEST(IndexerValidation, PhysicalPageOutOfRange) {
  SmallCase s;
  s.c.block_table.data<std::int32_t>()[1] = static_cast<std::int32_t>(s.c.cache.pages);
  expect_invalid(indexer_prefill(s.c.args()), "block_table[0, 1]");
  s.c.block_table.data<std::int32_t>()[1] = -3;
  expect_invalid(indexer_prefill(s.c.args()), "block_table[0, 1]");
}

TEST(IndexerValidation, PageScoresTooNarrow) {
  SmallCase s;  // rows at p = 296..299: L = 2
  HostTensor narrow(DType::f32, {4, 2, 1});
  IndexerPrefillArgs a = s.c.args();
  a.page_scores = narrow.view();
  expect_invalid(indexer_prefill(a), "page_scores");
  HostTensor exact(DType::f32, {4, 2, 2});
  a.page_scores = exact.view();
  EXPECT_TRUE(indexer_prefill(a).ok());
}

TEST(IndexerValidation, IndexKWrongDtype) {
  SmallCase s;
  IndexerPrefillArgs a = s.c.args();
  a.index_k.format = KvFormat::fp8;  // data is bf16
  expect_invalid(indexer_prefill(a), "index_k.data");
}

TEST(IndexerValidation, DecodeTooManyQueriesPerRequest) {
  Rng rng(22);
  PrefillCase c({{17, 300}}, 1, 16, KvFormat::bf16, DType::bf16, rng);
  IndexerDecodeArgs a;
  a.q = c.q.view();
  a.index_k = c.cache.view;
  a.block_table = c.block_table.view();
  a.seq_lens = c.seq_lens.view();
  a.queries_per_request = 17;
  a.topk_indices = c.topk.view();
  expect_invalid(indexer_decode(a), "queries_per_request");
  a.queries_per_request = 0;
  expect_invalid(indexer_decode(a), "queries_per_request");
}

TEST(IndexerValidation, DecodeRowsMustBeBTimesQ) {
  SmallCase s;  // 4 rows, 1 request
  IndexerDecodeArgs a;
  a.q = s.c.q.view();
  a.index_k = s.c.cache.view;
  a.block_table = s.c.block_table.view();
  a.seq_lens = s.c.seq_lens.view();
  a.queries_per_request = 3;
  a.topk_indices = s.c.topk.view();
  expect_invalid(indexer_decode(a), "q");
  a.queries_per_request = 4;
  EXPECT_TRUE(indexer_decode(a).ok());
}

TEST(IndexerValidation, CudaDeviceRules) {
  SmallCase s;
  IndexerPrefillArgs a = s.c.args();
  a.q.device = Device::cuda;  // mixed devices: the first tensor on the other device is named
  Status st = indexer_prefill(a);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("'index_k.data'"), std::string::npos) << st.message();
  IndexerDecodeArgs d;
  d.q = s.c.q.view();
  d.index_k = s.c.cache.view;
  d.block_table = s.c.block_table.view();
  d.seq_lens = s.c.seq_lens.view();
  d.queries_per_request = 4;
  d.topk_indices = s.c.topk.view();
  d.topk_indices.device = Device::cuda;
  st = indexer_decode(d);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("'topk_indices'"), std::string::npos) << st.message();
  if (!built_with_cuda()) {  // all on cuda in a CPU-only build: Unsupported
    for (TensorView* v : {&a.q, &a.index_k.data, &a.index_k.block_scale, &a.block_table,
                          &a.cu_seqlens_q, &a.seq_lens, &a.topk_indices, &a.page_scores})
      v->device = Device::cuda;
    st = indexer_prefill(a);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.message();
    EXPECT_NE(st.message().find("cuda"), std::string::npos);
    for (TensorView* v : {&d.q, &d.index_k.data, &d.index_k.block_scale, &d.block_table,
                          &d.seq_lens, &d.topk_indices, &d.page_scores})
      v->device = Device::cuda;
    EXPECT_EQ(indexer_decode(d).code(), StatusCode::kUnsupported);
  }
}

TEST(IndexerValidation, DecodePlanCpu) {
  // The plan on cpu is indexer_decode within a capacity; capacity and plan errors.
  IndexerDecodePlan plan;
  HostTensor q(DType::bf16, {4, 1, 128}), k(DType::bf16, {4, 128, 128}), bt(DType::i32, {2, 2}),
      seq(DType::i32, {2}), topk(DType::i32, {4, 1, 16});
  for (int i = 0; i < 4; ++i) bt.data<std::int32_t>()[i] = i;
  seq.data<std::int32_t>()[0] = 200;
  seq.data<std::int32_t>()[1] = 0;
  IndexerDecodeArgs a;
  a.q = q.view();
  a.index_k.data = k.view();
  a.block_table = bt.view();
  a.seq_lens = seq.view();
  a.queries_per_request = 2;
  a.topk_indices = topk.view();
  expect_invalid(plan.run(a), "plan");
  IndexerDecodePlanArgs pa;
  pa.device = Device::cpu;
  pa.max_batch = 2;
  pa.queries_per_request = 2;
  pa.heads = 1;
  pa.max_pages_per_request = 2;
  pa.heads = 9;
  expect_invalid(plan.plan(pa), "heads");
  pa.heads = 1;
  pa.queries_per_request = 17;
  expect_invalid(plan.plan(pa), "queries_per_request");
  pa.queries_per_request = 2;
  ASSERT_TRUE(plan.plan(pa).ok());
  Status st = plan.run(a);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(topk.data<std::int32_t>()[0], 0);
  EXPECT_EQ(topk.data<std::int32_t>()[1], 1);
  EXPECT_EQ(topk.data<std::int32_t>()[2], -1);
  EXPECT_EQ(topk.data<std::int32_t>()[3 * 16], -1);  // padding request
  pa.max_pages_per_request = 1;
  ASSERT_TRUE(plan.plan(pa).ok());
  expect_invalid(plan.run(a), "block_table");
  pa.max_pages_per_request = 2;
  pa.max_batch = 1;
  ASSERT_TRUE(plan.plan(pa).ok());
  expect_invalid(plan.run(a), "seq_lens");
}

TEST(IndexerValidation, TopkSelectLocalPageBeyondScores) {
  std::vector<float> s(10, 0.0f);
  std::int32_t lp = 11;
  std::vector<std::int32_t> out(16);
  Status st = topk_select(make_view(s.data(), DType::f32, {1, 10}), make_view(&lp, DType::i32, {1}),
                          make_view(out.data(), DType::i32, {1, 16}));
  // L + 1 = 12 <= 16: scores unused, accepted.
  EXPECT_TRUE(st.ok()) << st.message();
  lp = 20;
  expect_invalid(topk_select(make_view(s.data(), DType::f32, {1, 10}), make_view(&lp, DType::i32, {1}),
                             make_view(out.data(), DType::i32, {1, 16})),
                 "local_page[0]");
  std::vector<std::int32_t> wide(17);
  lp = 3;
  expect_invalid(topk_select(make_view(s.data(), DType::f32, {1, 10}), make_view(&lp, DType::i32, {1}),
                             make_view(wide.data(), DType::i32, {1, 17})),
                 "topk");
}

// No workspace pool exists before a CUDA call (and none in a CPU-only build): Ok, nothing
// to release (the CUDA test CudaIndexer.ReleaseCachedWorkspace covers a live pool).
TEST(Memory, ReleaseCachedWorkspaceWithoutPool) {
  const Status st = release_cached_workspace();
  EXPECT_TRUE(st.ok()) << st.message();
}

}  // namespace
}  // namespace flashmsa

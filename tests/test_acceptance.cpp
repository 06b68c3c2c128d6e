// Acceptance tests closing gaps of issue 2's test list (sections 3 and 4) that the
// per-component suites do not cover:
//   - a tiny indexer case worked by hand (page scores, D1 order, exact tie);
//   - indexer chunked prefill == one-shot prefill;
//   - the full pipeline (cache_insert + index_cache_insert -> indexer -> sparse attention):
//     decode of the last Q tokens == prefill of them, bitwise, with seq_len exactly a
//     multiple of 128 and a partial last page, for bf16 / fp8 / nvfp4 caches;
//   - sparse attention (prefill and decode) over contexts of 8,192 pages, checked against
//     an FP64 computation over the selected pages;
//   - validation rules of section 3 not exercised elsewhere (cu_seqlens[0], non-monotone
//     cu_seqlens for attention, block table too narrow for attention prefill and decode
//     indexer, contexts beyond 8,192 pages, metadata dtypes, alignment / strides of the
//     indexer and of attention caches, the exact message format).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "flashmsa/attention.h"
#include "flashmsa/cache.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/indexer.h"
#include "flashmsa/numerics.h"
#include "reference/dense_reference.h"
#include "test_util.h"

namespace {

using namespace flashmsa;
using flashmsa::testing::Rng;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<std::uint8_t> bytes_of(const HostTensor& t) {
  const auto* p = static_cast<const std::uint8_t*>(t.view().data);
  return std::vector<std::uint8_t>(p, p + t.bytes());
}

void fill_random_bytes(HostTensor& t, Rng& rng) {
  std::uniform_int_distribution<int> b(0, 255);
  auto* p = static_cast<std::uint8_t*>(t.view().data);
  for (std::size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<std::uint8_t>(b(rng));
}

// Copies rows [row0, row0 + n) of a [T, H, 128] tensor into rows [dst0, ..) of `dst`.
void copy_rows(const HostTensor& src, std::int64_t row0, std::int64_t n, HostTensor& dst,
               std::int64_t dst0) {
  const std::size_t row_bytes = static_cast<std::size_t>(src.view().shape[1] * src.view().shape[2]) *
                                dtype_size(src.view().dtype);
  std::memcpy(static_cast<std::uint8_t*>(dst.view().data) + dst0 * row_bytes,
              static_cast<const std::uint8_t*>(src.view().data) + row0 * row_bytes, n * row_bytes);
}

// ---------------------------------------------------------------------------
// 4 / tiny case worked by hand: the indexer (spec 2.2, D1, D2).

TEST(AcceptanceIndexer, TinyHandWorkedCase) {
  // One request, seq_len = 3*128 + 1 = 385, one query row at p = 384 (D4): L = 3, history
  // pages 0, 1, 2. Logical -> physical pages: 0->2, 1->0, 2->3, 3->1. Keys are zero except
  //   page 0 token 5:   +1 * e0        page 1 token 0: +3 * e0     page 1 token 1: -10 * e0
  //   page 2 token 127: +2 * e0
  // Head 0: q = +2 e0 -> token scores 2 | 6, -20 | 4 (others 0):
  //   B(0) = max(0, 2) = 2, B(1) = max(0, 6, -20) = 6, B(2) = max(0, 4) = 4.
  // Head 1: q = -1 e0 -> B(0) = max(0, -1) = 0, B(1) = max(0, -3, 10) = 10, B(2) = max(0, -2) = 0
  //   (exact tie between pages 0 and 2: page id ascending).
  // K = 3 < n = 4: 2 best history pages by (score desc, id asc), then L = 3:
  //   head 0 -> {1, 2, 3}; head 1 -> {1, 0, 3}.
  // K = 16 >= n: 0, 1, 2, 3, then -1.
  // Token 1.. of the local page (page 3, beyond p) hold garbage: never read.
  HostTensor cache(DType::bf16, {4, 128, 128});
  const std::int32_t phys[4] = {2, 0, 3, 1};
  auto key = [&](int logical, int tok) {
    return cache.data<std::uint16_t>() + (phys[logical] * 128 + tok) * 128;
  };
  key(0, 5)[0] = float_to_bf16(1.0f);
  key(1, 0)[0] = float_to_bf16(3.0f);
  key(1, 1)[0] = float_to_bf16(-10.0f);
  key(2, 127)[0] = float_to_bf16(2.0f);
  for (int t = 1; t < 128; ++t)
    for (int d = 0; d < 128; ++d) key(3, t)[d] = float_to_bf16(1e4f);
  HostTensor q(DType::bf16, {1, 2, 128});
  q.data<std::uint16_t>()[0] = float_to_bf16(2.0f);
  q.data<std::uint16_t>()[128] = float_to_bf16(-1.0f);
  HostTensor bt(DType::i32, {1, 4}), cu(DType::i32, {2}), seq(DType::i32, {1});
  for (int j = 0; j < 4; ++j) bt.data<std::int32_t>()[j] = phys[j];
  cu.data<std::int32_t>()[1] = 1;
  seq.data<std::int32_t>()[0] = 385;
  IndexKCache ik;
  ik.format = KvFormat::bf16;
  ik.data = cache.view();

  for (int K : {3, 16}) {
    HostTensor topk(DType::i32, {1, 2, K}), scores(DType::f32, {1, 2, 5});
    flashmsa::testing::poison(topk);
    flashmsa::testing::poison(scores);
    IndexerPrefillArgs a;
    a.q = q.view();
    a.index_k = ik;
    a.block_table = bt.view();
    a.cu_seqlens_q = cu.view();
    a.seq_lens = seq.view();
    a.topk_indices = topk.view();
    a.page_scores = scores.view();
    Status st = indexer_prefill(a);
    ASSERT_TRUE(st.ok()) << st.message();
    const std::int32_t* tk = topk.data<std::int32_t>();
    const float* s = scores.data<float>();
    // Page scores (entries b >= L are -inf).
    const float want_s[2][5] = {{2.0f, 6.0f, 4.0f, -kInf, -kInf}, {0.0f, 10.0f, 0.0f, -kInf, -kInf}};
    for (int h = 0; h < 2; ++h)
      for (int b = 0; b < 5; ++b) EXPECT_EQ(s[h * 5 + b], want_s[h][b]) << "K " << K << " h " << h << " b " << b;
    if (K == 3) {
      EXPECT_EQ(std::vector<std::int32_t>(tk, tk + 3), (std::vector<std::int32_t>{1, 2, 3}));
      EXPECT_EQ(std::vector<std::int32_t>(tk + 3, tk + 6), (std::vector<std::int32_t>{1, 0, 3}));
    } else {
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 16; ++k) EXPECT_EQ(tk[h * 16 + k], k <= 3 ? k : -1) << h << " " << k;
    }
    // The decode entry point (Q = 1, p = seq_len - 1 = 384) gives the same answer.
    HostTensor topk_d(DType::i32, {1, 2, K});
    IndexerDecodeArgs d;
    d.q = q.view();
    d.index_k = ik;
    d.block_table = bt.view();
    d.seq_lens = seq.view();
    d.queries_per_request = 1;
    d.topk_indices = topk_d.view();
    st = indexer_decode(d);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(bytes_of(topk_d), bytes_of(topk)) << "K " << K;
  }
}

// ---------------------------------------------------------------------------
// 4 / property: chunked indexer prefill == one-shot indexer prefill.

TEST(AcceptanceIndexer, ChunkedPrefillEqualsOneShot) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
    Rng rng(500 + static_cast<int>(f));
    const std::int64_t S = 1500, H = 2, pages = 12 + 2, W = 12;
    HostTensor cache(f == KvFormat::bf16 ? DType::bf16 : DType::e4m3, {pages, 128, 128});
    if (f == KvFormat::bf16) flashmsa::testing::fill_bf16_normal(cache, rng);
    else flashmsa::testing::fill_random_e4m3(cache, rng);
    IndexKCache ik;
    ik.format = f;
    ik.data = cache.view();
    HostTensor q(DType::bf16, {S, H, 128});
    flashmsa::testing::fill_bf16_normal(q, rng);
    HostTensor bt(DType::i32, {1, W});
    const auto perm = flashmsa::testing::random_permutation(static_cast<std::int32_t>(pages), rng);
    for (int j = 0; j < W; ++j) bt.data<std::int32_t>()[j] = perm[j];

    auto run = [&](std::int64_t b0, std::int64_t b1, HostTensor* topk, HostTensor* scores) {
      HostTensor cu(DType::i32, {2}), seq(DType::i32, {1});
      cu.data<std::int32_t>()[1] = static_cast<std::int32_t>(b1 - b0);
      seq.data<std::int32_t>()[0] = static_cast<std::int32_t>(b1);
      IndexerPrefillArgs a;
      a.q = make_view(q.data<std::uint16_t>() + b0 * H * 128, DType::bf16, {b1 - b0, H, 128});
      a.index_k = ik;
      a.block_table = bt.view();
      a.cu_seqlens_q = cu.view();
      a.seq_lens = seq.view();
      a.topk_indices = make_view(topk->data<std::int32_t>() + b0 * H * 16, DType::i32, {b1 - b0, H, 16});
      a.page_scores = make_view(scores->data<float>() + b0 * H * W, DType::f32, {b1 - b0, H, W});
      const Status st = indexer_prefill(a);
      ASSERT_TRUE(st.ok()) << st.message();
    };
    HostTensor t1(DType::i32, {S, H, 16}), s1(DType::f32, {S, H, W});
    HostTensor t2(DType::i32, {S, H, 16}), s2(DType::f32, {S, H, W});
    flashmsa::testing::poison(t1);
    flashmsa::testing::poison(s1);
    flashmsa::testing::poison(t2);
    flashmsa::testing::poison(s2);
    run(0, S, &t1, &s1);
    // Chunks end on a page boundary (256 = 2*128), mid-page, and at the end.
    const std::int64_t bounds[] = {0, 256, 300, 1290, S};
    for (int c = 0; c + 1 < 5; ++c) run(bounds[c], bounds[c + 1], &t2, &s2);
    EXPECT_EQ(bytes_of(t1), bytes_of(t2)) << kv_format_name(f);
    EXPECT_EQ(bytes_of(s1), bytes_of(s2)) << kv_format_name(f);
    // Sanity: the last row (p = 1499, L = 11, n = 12 <= 16) lists 0..11 then -1 (D1).
    const std::int32_t* last = t1.data<std::int32_t>() + (S - 1) * H * 16;
    for (int k = 0; k < 16; ++k) EXPECT_EQ(last[k], k < 12 ? k : -1);
  }
}

// ---------------------------------------------------------------------------
// 4 / property: full pipeline, decode of the last Q tokens == prefill of them.

struct Pipeline {
  KvFormat kvf = KvFormat::bf16, idxf = KvFormat::bf16;
  DType q_dtype = DType::bf16, iq_dtype = DType::bf16;
  int hq = 16, hkv = 2;
  std::vector<int> seq_lens, q_lens;
  std::int64_t pages = 0, width = 0, T = 0;
  float q_scale = 1.0f;
  HostTensor kd, vd, ksc, vsc, icd, ics;  // caches
  PagedKvCache kv;
  IndexKCache ik;
  HostTensor bt, cu, seq, q, iq;
  std::vector<std::int64_t> row_end;  // cu[r + 1]

  Pipeline(KvFormat kv_format, KvFormat index_format, DType iq_type, std::vector<int> seqs,
           std::vector<int> qls, Rng& rng)
      : kvf(kv_format), idxf(index_format), iq_dtype(iq_type), seq_lens(std::move(seqs)),
        q_lens(std::move(qls)) {
    q_dtype = kvf == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
    const std::int64_t B = static_cast<std::int64_t>(seq_lens.size());
    pages = 2;
    std::int64_t S_all = 0;
    for (int s : seq_lens) {
      pages += (s + 127) / 128;
      width = std::max<std::int64_t>(width, (s + 127) / 128);
      S_all += s;
    }
    width += 1;  // one unused column (-1) per row
    // Caches, poisoned with random bytes first (garbage in every unwritten slot).
    const float kgs = kvf == KvFormat::bf16 ? 1.0f : 0.5f, vgs = kvf == KvFormat::bf16 ? 1.0f : 0.25f;
    const DType kdt = kvf == KvFormat::bf16 ? DType::bf16 : kvf == KvFormat::fp8 ? DType::e4m3 : DType::u8;
    kd.reset(kdt, {pages, hkv, 128, kvf == KvFormat::nvfp4 ? 64 : 128});
    vd.reset(kdt, {pages, hkv, 128, kvf == KvFormat::nvfp4 ? 64 : 128});
    fill_random_bytes(kd, rng);
    fill_random_bytes(vd, rng);
    kv.format = kvf;
    kv.k.data = kd.view();
    kv.v.data = vd.view();
    kv.k.global_scale = kgs;
    kv.v.global_scale = vgs;
    if (kvf == KvFormat::nvfp4) {
      ksc.reset(DType::e4m3, {pages, hkv, 128, 8});
      vsc.reset(DType::e4m3, {pages, hkv, 128, 8});
      fill_random_bytes(ksc, rng);
      fill_random_bytes(vsc, rng);
      kv.k.block_scale = ksc.view();
      kv.v.block_scale = vsc.view();
    }
    const DType idt = idxf == KvFormat::bf16 ? DType::bf16 : idxf == KvFormat::fp8 ? DType::e4m3 : DType::u8;
    icd.reset(idt, {pages, 128, idxf == KvFormat::nvfp4 ? 64 : 128});
    fill_random_bytes(icd, rng);
    ik.format = idxf;
    ik.data = icd.view();
    if (idxf == KvFormat::nvfp4) {
      ics.reset(DType::e4m3, {pages, 128, 8});
      fill_random_bytes(ics, rng);
      ik.block_scale = ics.view();
      ik.global_scale = 0.75f;
    }
    // Block table: random permutation of physical pages, unused entries -1.
    bt.reset(DType::i32, {B, width});
    bt.fill_bytes(0xff);
    const auto perm = flashmsa::testing::random_permutation(static_cast<std::int32_t>(pages), rng);
    std::size_t next = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (int j = 0; j < (seq_lens[b] + 127) / 128; ++j) bt.data<std::int32_t>()[b * width + j] = perm[next++];
    // Every token of every request goes through cache_insert / index_cache_insert,
    // plus two skipped tokens (slot -1).
    const std::int64_t n_ins = S_all + 2;
    HostTensor k(DType::bf16, {n_ins, hkv, 128}), v(DType::bf16, {n_ins, hkv, 128}),
        ikey(DType::bf16, {n_ins, 128}), slots(DType::i32, {n_ins});
    flashmsa::testing::fill_bf16_normal(k, rng);
    flashmsa::testing::fill_bf16_normal(v, rng);
    flashmsa::testing::fill_bf16_normal(ikey, rng);
    std::int64_t i = 0;
    slots.data<std::int32_t>()[i++] = -1;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < seq_lens[b]; ++t)
        slots.data<std::int32_t>()[i++] =
            static_cast<std::int32_t>(bt.data<std::int32_t>()[b * width + t / 128] * 128 + t % 128);
    slots.data<std::int32_t>()[i++] = -7;
    Status st = cache_insert(k.view(), v.view(), slots.view(), kv);
    EXPECT_TRUE(st.ok()) << st.message();
    st = index_cache_insert(ikey.view(), slots.view(), ik);
    EXPECT_TRUE(st.ok()) << st.message();
    // Metadata of the prefill chunk.
    cu.reset(DType::i32, {B + 1});
    seq.reset(DType::i32, {B});
    for (std::int64_t b = 0; b < B; ++b) {
      cu.data<std::int32_t>()[b + 1] = cu.data<std::int32_t>()[b] + q_lens[b];
      seq.data<std::int32_t>()[b] = seq_lens[b];
      row_end.push_back(cu.data<std::int32_t>()[b + 1]);
    }
    T = cu.data<std::int32_t>()[B];
    // Queries: bf16, or E4M3 through quantize_query_e4m3 (D7).
    HostTensor qb(DType::bf16, {T, hq, 128});
    flashmsa::testing::fill_bf16_normal(qb, rng);
    q.reset(q_dtype, {T, hq, 128});
    if (q_dtype == DType::bf16) {
      std::memcpy(q.view().data, qb.view().data, qb.bytes());
    } else {
      q_scale = 0.125f;
      st = quantize_query_e4m3(qb.view(), q_scale, q.view());
      EXPECT_TRUE(st.ok()) << st.message();
    }
    HostTensor iqb(DType::bf16, {T, hkv, 128});
    flashmsa::testing::fill_bf16_normal(iqb, rng);
    iq.reset(iq_dtype, {T, hkv, 128});
    if (iq_dtype == DType::bf16) {
      std::memcpy(iq.view().data, iqb.view().data, iqb.bytes());
    } else {
      st = quantize_query_e4m3(iqb.view(), 1.0f, iq.view());  // index q: no scale (spec 2.1)
      EXPECT_TRUE(st.ok()) << st.message();
    }
  }
};

TEST(AcceptancePipeline, DecodeOfLastQTokensEqualsPrefill) {
  struct Combo {
    KvFormat kv, idx;
    DType iq;
  };
  const Combo combos[] = {{KvFormat::bf16, KvFormat::bf16, DType::bf16},
                          {KvFormat::fp8, KvFormat::fp8, DType::e4m3},
                          {KvFormat::nvfp4, KvFormat::nvfp4, DType::bf16}};
  for (const Combo& cb : combos) {
    Rng rng(600 + static_cast<int>(cb.kv));
    // 2560 = 20 * 128 and 128: seq_len exactly a multiple of 128; 2500: partial last page.
    Pipeline pl(cb.kv, cb.idx, cb.iq, {2560, 2500, 128}, {300, 40, 128}, rng);
    const std::string tag = std::string(kv_format_name(cb.kv)) + "/" + kv_format_name(cb.idx);
    // Prefill: indexer -> top-k -> sparse attention.
    HostTensor topk(DType::i32, {pl.T, pl.hkv, 16});
    flashmsa::testing::poison(topk);
    IndexerPrefillArgs ia;
    ia.q = pl.iq.view();
    ia.index_k = pl.ik;
    ia.block_table = pl.bt.view();
    ia.cu_seqlens_q = pl.cu.view();
    ia.seq_lens = pl.seq.view();
    ia.topk_indices = topk.view();
    Status st = indexer_prefill(ia);
    ASSERT_TRUE(st.ok()) << st.message();
    // Every row's valid prefix ends with its local page (D1).
    for (std::int64_t b = 0, row = 0; b < 3; ++b)
      for (int j = 0; j < pl.q_lens[b]; ++j, ++row) {
        const std::int64_t p = pl.seq_lens[b] - pl.q_lens[b] + j;
        const std::int64_t n = std::min<std::int64_t>(16, p / 128 + 1);
        for (int g = 0; g < pl.hkv; ++g) {
          const std::int32_t* r = topk.data<std::int32_t>() + (row * pl.hkv + g) * 16;
          ASSERT_EQ(r[n - 1], p / 128) << tag << " row " << row;
          if (n < 16) ASSERT_EQ(r[n], -1);
        }
      }
    HostTensor out(DType::bf16, {pl.T, pl.hq, 128}), lse(DType::f32, {pl.T, pl.hq});
    flashmsa::testing::poison(out);
    flashmsa::testing::poison(lse);
    SparseAttentionPrefillArgs aa;
    aa.q = pl.q.view();
    aa.kv = pl.kv;
    aa.topk_indices = topk.view();
    aa.block_table = pl.bt.view();
    aa.cu_seqlens_q = pl.cu.view();
    aa.seq_lens = pl.seq.view();
    aa.q_scale = pl.q_scale;
    aa.out = out.view();
    aa.lse = lse.view();
    st = sparse_attention_prefill(aa);
    ASSERT_TRUE(st.ok()) << st.message();
    // Against the FP64 reference on the indexer's selection (D8 tolerances).
    {
      std::vector<double> ro, rl;
      reference::ReferenceOptions opt;
      st = reference::reference_prefill(aa, opt, &ro, &rl);
      ASSERT_TRUE(st.ok()) << st.message();
      const auto cmp = reference::compare(reference::to_double(out.view()), ro,
                                          reference::to_double(lse.view()), rl,
                                          reference::Tolerance::for_q_dtype(pl.q_dtype));
      EXPECT_TRUE(cmp.pass) << tag << " " << cmp.summary();
    }
    // Decode of the last Q rows of every request: same top-k and same output bits.
    for (int Q : {1, 4}) {
      const std::int64_t B = 3, R = B * Q;
      HostTensor qd(pl.q_dtype, {R, pl.hq, 128}), iqd(pl.iq_dtype, {R, pl.hkv, 128});
      for (std::int64_t b = 0; b < B; ++b) {
        copy_rows(pl.q, pl.row_end[b] - Q, Q, qd, b * Q);
        copy_rows(pl.iq, pl.row_end[b] - Q, Q, iqd, b * Q);
      }
      HostTensor topk_d(DType::i32, {R, pl.hkv, 16});
      flashmsa::testing::poison(topk_d);
      IndexerDecodeArgs id;
      id.q = iqd.view();
      id.index_k = pl.ik;
      id.block_table = pl.bt.view();
      id.seq_lens = pl.seq.view();
      id.queries_per_request = Q;
      id.topk_indices = topk_d.view();
      st = indexer_decode(id);
      ASSERT_TRUE(st.ok()) << st.message();
      SparseDecodePlan plan;
      DecodePlanArgs pa;
      pa.batch_size = static_cast<int>(B);
      pa.queries_per_request = Q;
      pa.num_q_heads = pl.hq;
      pa.num_kv_heads = pl.hkv;
      pa.max_pages_per_request = static_cast<int>(pl.width);
      pa.topk = 16;
      pa.kv_format = pl.kvf;
      pa.q_dtype = pl.q_dtype;
      st = plan.plan(pa);
      ASSERT_TRUE(st.ok()) << st.message();
      HostTensor outd(DType::bf16, {R, pl.hq, 128}), lsed(DType::f32, {R, pl.hq});
      flashmsa::testing::poison(outd);
      flashmsa::testing::poison(lsed);
      DecodeRunArgs ra;
      ra.q = qd.view();
      ra.kv = pl.kv;
      ra.topk_indices = topk_d.view();
      ra.block_table = pl.bt.view();
      ra.seq_lens = pl.seq.view();
      ra.q_scale = pl.q_scale;
      ra.out = outd.view();
      ra.lse = lsed.view();
      st = plan.run(ra);
      ASSERT_TRUE(st.ok()) << st.message();
      for (std::int64_t b = 0; b < B; ++b) {
        const std::int64_t r0 = pl.row_end[b] - Q;
        EXPECT_EQ(0, std::memcmp(topk_d.data<std::int32_t>() + b * Q * pl.hkv * 16,
                                 topk.data<std::int32_t>() + r0 * pl.hkv * 16,
                                 static_cast<std::size_t>(Q * pl.hkv * 16) * 4))
            << tag << " Q " << Q << " request " << b << " top-k";
        EXPECT_EQ(0, std::memcmp(outd.data<std::uint16_t>() + b * Q * pl.hq * 128,
                                 out.data<std::uint16_t>() + r0 * pl.hq * 128,
                                 static_cast<std::size_t>(Q * pl.hq * 128) * 2))
            << tag << " Q " << Q << " request " << b << " out";
        EXPECT_EQ(0, std::memcmp(lsed.data<float>() + b * Q * pl.hq, lse.data<float>() + r0 * pl.hq,
                                 static_cast<std::size_t>(Q * pl.hq) * 4))
            << tag << " Q " << Q << " request " << b << " lse";
      }
    }
  }
}

// ---------------------------------------------------------------------------
// 4 / edge case: contexts of 8,192 pages (1,048,576 tokens) for sparse attention,
// prefill and decode, with junk top-k entries; checked against an FP64 computation over
// the selected pages only (the dense reference would need GBs).

TEST(AcceptanceAttention, ContextsOf8192Pages) {
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
    Rng rng(700 + static_cast<int>(f));
    const int hq = 16, hkv = 2, K = 16, Q = 3, G = hq / hkv;
    const std::int64_t phys = 48, W = 8192;
    // Request 0: 8,192 full pages. Request 1: 8,191 pages + 1 token (partial last page).
    const std::vector<int> seq_lens = {kMaxContext, kMaxContext - 127};
    const std::int64_t B = 2, R = B * Q;
    const DType dt = f == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
    const float kgs = f == KvFormat::bf16 ? 1.0f : 0.5f, vgs = f == KvFormat::bf16 ? 1.0f : 0.25f;
    const float q_scale = f == KvFormat::bf16 ? 1.0f : 0.125f;
    HostTensor kc(dt, {phys, hkv, 128, 128}), vc(dt, {phys, hkv, 128, 128});
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto fill = [&](HostTensor& t, float gs) {
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        if (dt == DType::bf16) t.data<std::uint16_t>()[i] = float_to_bf16(nd(rng));
        else t.data<std::uint8_t>()[i] = float_to_e4m3_sat(nd(rng) / gs);
      }
    };
    fill(kc, kgs);
    fill(vc, vgs);
    PagedKvCache kv;
    kv.format = f;
    kv.k.data = kc.view();
    kv.v.data = vc.view();
    kv.k.global_scale = kgs;
    kv.v.global_scale = vgs;
    HostTensor bt(DType::i32, {B, W});
    std::uniform_int_distribution<int> pick(0, static_cast<int>(phys) - 1);
    for (std::int64_t i = 0; i < B * W; ++i) bt.data<std::int32_t>()[i] = pick(rng);
    HostTensor q(dt, {R, hq, 128});
    for (std::int64_t i = 0; i < q.numel(); ++i) {
      if (dt == DType::bf16) q.data<std::uint16_t>()[i] = float_to_bf16(nd(rng));
      else q.data<std::uint8_t>()[i] = float_to_e4m3_sat(nd(rng) / q_scale);
    }
    // Top-k: local page + 14 distinct random history pages + one junk entry, shuffled.
    HostTensor topk(DType::i32, {R, hkv, K});
    std::vector<std::int64_t> pos(R);
    const std::int32_t junk[] = {-1, -5, 8192, std::numeric_limits<std::int32_t>::max(), 0};
    for (std::int64_t b = 0; b < B; ++b)
      for (int j = 0; j < Q; ++j) {
        const std::int64_t r = b * Q + j;
        pos[r] = seq_lens[b] - Q + j;
        const std::int32_t L = static_cast<std::int32_t>(pos[r] / 128);
        for (int g = 0; g < hkv; ++g) {
          std::set<std::int32_t> hist;
          std::uniform_int_distribution<std::int32_t> hp(0, L - 1);
          while (hist.size() < 14) hist.insert(hp(rng));
          std::vector<std::int32_t> row(hist.begin(), hist.end());
          row.push_back(L);
          // Junk: an invalid id, or L + 1 (future page; beyond the request for request 0),
          // or a duplicate of the first history page.
          const int jsel = static_cast<int>((r + g) % 6);
          row.push_back(jsel < 4 ? junk[jsel] : jsel == 4 ? L + 1 : row[0]);
          std::shuffle(row.begin(), row.end(), rng);
          for (int k = 0; k < K; ++k) topk.data<std::int32_t>()[(r * hkv + g) * K + k] = row[k];
        }
      }
    HostTensor cu(DType::i32, {B + 1}), seq(DType::i32, {B});
    for (std::int64_t b = 0; b < B; ++b) {
      cu.data<std::int32_t>()[b + 1] = static_cast<std::int32_t>((b + 1) * Q);
      seq.data<std::int32_t>()[b] = seq_lens[b];
    }
    HostTensor out(DType::bf16, {R, hq, 128}), lse(DType::f32, {R, hq});
    flashmsa::testing::poison(out);
    flashmsa::testing::poison(lse);
    SparseAttentionPrefillArgs a;
    a.q = q.view();
    a.kv = kv;
    a.topk_indices = topk.view();
    a.block_table = bt.view();
    a.cu_seqlens_q = cu.view();
    a.seq_lens = seq.view();
    a.q_scale = q_scale;
    a.out = out.view();
    a.lse = lse.view();
    Status st = sparse_attention_prefill(a);
    ASSERT_TRUE(st.ok()) << st.message();

    // FP64 over the visible keys of the valid, distinct selected pages (D1, spec 3.1).
    auto val = [&](const HostTensor& t, std::int64_t i) -> double {
      return dt == DType::bf16 ? bf16_to_float(t.data<std::uint16_t>()[i])
                               : e4m3_to_float(t.data<std::uint8_t>()[i]);
    };
    const double c = static_cast<double>(kDefaultSoftmaxScale) * q_scale * kgs;
    std::vector<double> ref_out(static_cast<std::size_t>(R * hq * 128)), ref_lse(static_cast<std::size_t>(R * hq));
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t b = r / Q, p = pos[r], L = p / 128, npages = (seq_lens[b] + 127) / 128;
      for (int h = 0; h < hq; ++h) {
        const int g = h / G;
        std::set<std::int32_t> sel;
        for (int k = 0; k < K; ++k) {
          const std::int32_t e = topk.data<std::int32_t>()[(r * hkv + g) * K + k];
          if (e >= 0 && e <= L && e < npages) sel.insert(e);
        }
        std::vector<double> z;
        std::vector<std::int64_t> vrow;
        for (std::int32_t e : sel) {
          const std::int64_t ph = bt.data<std::int32_t>()[b * W + e];
          for (std::int64_t t = e * 128LL; t < e * 128LL + 128 && t <= p; ++t) {
            const std::int64_t kr = ((ph * hkv + g) * 128 + t % 128) * 128;
            double s = 0.0;
            for (int d = 0; d < 128; ++d) s += val(q, (r * hq + h) * 128 + d) * val(kc, kr + d);
            z.push_back(c * s);
            vrow.push_back(kr);
          }
        }
        const double m = *std::max_element(z.begin(), z.end());
        double sum = 0.0;
        std::vector<double> acc(128, 0.0);
        for (std::size_t i = 0; i < z.size(); ++i) {
          const double w = std::exp(z[i] - m);
          sum += w;
          for (int d = 0; d < 128; ++d) acc[d] += w * val(vc, vrow[i] + d);
        }
        for (int d = 0; d < 128; ++d) ref_out[(r * hq + h) * 128 + d] = acc[d] / sum * vgs;
        ref_lse[r * hq + h] = m + std::log(sum);
      }
    }
    const auto cmp = reference::compare(reference::to_double(out.view()), ref_out,
                                        reference::to_double(lse.view()), ref_lse,
                                        reference::Tolerance::for_q_dtype(dt));
    EXPECT_TRUE(cmp.pass) << kv_format_name(f) << " " << cmp.summary();

    // Decode over the same 8,192-page block table: bitwise equal to prefill.
    SparseDecodePlan plan;
    DecodePlanArgs pa;
    pa.batch_size = static_cast<int>(B);
    pa.queries_per_request = Q;
    pa.num_q_heads = hq;
    pa.num_kv_heads = hkv;
    pa.max_pages_per_request = static_cast<int>(W);
    pa.topk = K;
    pa.kv_format = f;
    pa.q_dtype = dt;
    st = plan.plan(pa);
    ASSERT_TRUE(st.ok()) << st.message();
    HostTensor outd(DType::bf16, {R, hq, 128}), lsed(DType::f32, {R, hq});
    flashmsa::testing::poison(outd);
    DecodeRunArgs ra;
    ra.q = q.view();
    ra.kv = kv;
    ra.topk_indices = topk.view();
    ra.block_table = bt.view();
    ra.seq_lens = seq.view();
    ra.q_scale = q_scale;
    ra.out = outd.view();
    ra.lse = lsed.view();
    st = plan.run(ra);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(bytes_of(outd), bytes_of(out)) << kv_format_name(f);
    EXPECT_EQ(bytes_of(lsed), bytes_of(lse)) << kv_format_name(f);
  }
}

// ---------------------------------------------------------------------------
// 3 / validation rules not exercised by the component suites.

void expect_invalid(const Status& st, const std::string& arg) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("argument '" + arg + "'"), std::string::npos) << st.message();
}

// A small valid prefill problem shared by the attention and indexer rejections:
// one request, seq_len 300 (3 pages), 4 query rows, Hq 8, Hkv = index heads 2.
struct Small {
  HostTensor q, iq, k, v, ks, vs, icache, topk, bt, cu, seq, out, lse;
  Small() {
    Rng rng(800);
    q.reset(DType::bf16, {4, 8, 128});
    iq.reset(DType::bf16, {4, 2, 128});
    flashmsa::testing::fill_bf16_normal(q, rng);
    flashmsa::testing::fill_bf16_normal(iq, rng);
    k.reset(DType::bf16, {4, 2, 128, 128});
    v.reset(DType::bf16, {4, 2, 128, 128});
    flashmsa::testing::fill_bf16_normal(k, rng);
    flashmsa::testing::fill_bf16_normal(v, rng);
    icache.reset(DType::bf16, {4, 128, 128});
    flashmsa::testing::fill_bf16_normal(icache, rng);
    topk.reset(DType::i32, {4, 2, 16});
    topk.fill_bytes(0xff);
    for (int r = 0; r < 4; ++r)
      for (int g = 0; g < 2; ++g)
        for (int j = 0; j < 3; ++j) topk.data<std::int32_t>()[(r * 2 + g) * 16 + j] = j;
    bt.reset(DType::i32, {1, 3});
    bt.data<std::int32_t>()[0] = 2;
    bt.data<std::int32_t>()[1] = 0;
    bt.data<std::int32_t>()[2] = 3;
    cu.reset(DType::i32, {2});
    cu.data<std::int32_t>()[1] = 4;
    seq.reset(DType::i32, {1});
    seq.data<std::int32_t>()[0] = 300;
    out.reset(DType::bf16, {4, 8, 128});
    lse.reset(DType::f32, {4, 8});
  }
  SparseAttentionPrefillArgs attn() const {
    SparseAttentionPrefillArgs a;
    a.q = q.view();
    a.kv.format = KvFormat::bf16;
    a.kv.k.data = k.view();
    a.kv.v.data = v.view();
    a.topk_indices = topk.view();
    a.block_table = bt.view();
    a.cu_seqlens_q = cu.view();
    a.seq_lens = seq.view();
    a.out = out.view();
    a.lse = lse.view();
    return a;
  }
  IndexerPrefillArgs idx() const {
    IndexerPrefillArgs a;
    a.q = iq.view();
    a.index_k.format = KvFormat::bf16;
    a.index_k.data = icache.view();
    a.block_table = bt.view();
    a.cu_seqlens_q = cu.view();
    a.seq_lens = seq.view();
    a.topk_indices = topk.view();
    return a;
  }
  IndexerDecodeArgs idx_decode() const {
    IndexerDecodeArgs a;
    a.q = iq.view();
    a.index_k.format = KvFormat::bf16;
    a.index_k.data = icache.view();
    a.block_table = bt.view();
    a.seq_lens = seq.view();
    a.queries_per_request = 4;
    a.topk_indices = topk.view();
    return a;
  }
};

TEST(AcceptanceValidation, BaselinesAreValid) {
  Small s;
  Status st = sparse_attention_prefill(s.attn());
  EXPECT_TRUE(st.ok()) << st.message();
  st = indexer_prefill(s.idx());
  EXPECT_TRUE(st.ok()) << st.message();
  st = indexer_decode(s.idx_decode());
  EXPECT_TRUE(st.ok()) << st.message();
}

TEST(AcceptanceValidation, MessageNamesOpArgumentExpectedAndGiven) {
  Small s;
  auto a = s.attn();
  a.q.dtype = DType::f32;
  const Status st = sparse_attention_prefill(a);
  EXPECT_EQ(st.message(),
            "flashmsa::sparse_attention_prefill: argument 'q': expected dtype bf16 or e4m3, got dtype f32");
  auto i = s.idx();
  i.block_table = make_view(s.bt.data<std::int32_t>(), DType::i32, {1, 2});
  const Status si = indexer_prefill(i);
  EXPECT_EQ(si.message().rfind("flashmsa::indexer_prefill: argument 'block_table': expected ", 0), 0u)
      << si.message();
  EXPECT_NE(si.message().find(", got "), std::string::npos) << si.message();
}

TEST(AcceptanceValidation, CuSeqlensMustStartAtZero) {
  Small s;
  s.cu.data<std::int32_t>()[0] = 1;
  expect_invalid(sparse_attention_prefill(s.attn()), "cu_seqlens_q[0]");
  expect_invalid(indexer_prefill(s.idx()), "cu_seqlens_q[0]");
}

TEST(AcceptanceValidation, AttentionCuSeqlensNonMonotone) {
  // Two requests; cu = [0, 5, 4] (decreasing), T = 4.
  Small s;
  HostTensor cu(DType::i32, {3}), seq(DType::i32, {2}), bt(DType::i32, {2, 3});
  cu.data<std::int32_t>()[1] = 5;
  cu.data<std::int32_t>()[2] = 4;
  seq.data<std::int32_t>()[0] = 300;
  seq.data<std::int32_t>()[1] = 300;
  for (int i = 0; i < 6; ++i) bt.data<std::int32_t>()[i] = i % 4;
  auto a = s.attn();
  a.cu_seqlens_q = cu.view();
  a.seq_lens = seq.view();
  a.block_table = bt.view();
  expect_invalid(sparse_attention_prefill(a), "cu_seqlens_q");
}

TEST(AcceptanceValidation, AttentionPrefillBlockTableTooNarrow) {
  Small s;  // seq_len 300 needs 3 pages
  auto a = s.attn();
  a.block_table = make_view(s.bt.data<std::int32_t>(), DType::i32, {1, 2});
  expect_invalid(sparse_attention_prefill(a), "block_table");
}

TEST(AcceptanceValidation, ContextBeyond8192PagesIsRejected) {
  Small s;
  // 8,192 pages + 1 token; the block table is wide enough, so the length rule fires.
  HostTensor bt(DType::i32, {1, 8193});
  auto a = s.attn();
  a.block_table = bt.view();
  s.seq.data<std::int32_t>()[0] = kMaxContext + 1;
  expect_invalid(sparse_attention_prefill(a), "seq_lens[0]");
  auto i = s.idx();
  i.block_table = bt.view();
  expect_invalid(indexer_prefill(i), "seq_lens[0]");
  auto d = s.idx_decode();
  d.block_table = bt.view();
  expect_invalid(indexer_decode(d), "seq_lens[0]");
}

TEST(AcceptanceValidation, AttentionMetadataDtypesAndRanks) {
  Small s;
  auto a = s.attn();
  a.seq_lens.dtype = DType::f32;
  expect_invalid(sparse_attention_prefill(a), "seq_lens");
  a = s.attn();
  a.cu_seqlens_q.dtype = DType::u8;
  expect_invalid(sparse_attention_prefill(a), "cu_seqlens_q");
  a = s.attn();
  a.block_table.dtype = DType::f32;
  expect_invalid(sparse_attention_prefill(a), "block_table");
  a = s.attn();
  a.q = make_view(s.q.view().data, DType::bf16, {4, 8 * 128});
  expect_invalid(sparse_attention_prefill(a), "q");
  a = s.attn();
  a.topk_indices = TensorView{};
  expect_invalid(sparse_attention_prefill(a), "topk_indices");
  a = s.attn();
  a.lse.dtype = DType::bf16;
  expect_invalid(sparse_attention_prefill(a), "lse");
  a = s.attn();
  a.out.stride[2] = 2;
  expect_invalid(sparse_attention_prefill(a), "out");
}

TEST(AcceptanceValidation, AttentionCacheLayoutRules) {
  Small s;
  // 16-byte alignment of the cache data.
  auto a = s.attn();
  a.kv.k.data.data = static_cast<std::uint8_t*>(a.kv.k.data.data) + 2;
  expect_invalid(sparse_attention_prefill(a), "kv.k.data");
  // Innermost stride 1.
  a = s.attn();
  a.kv.v.data.stride[3] = 2;
  expect_invalid(sparse_attention_prefill(a), "kv.v.data");
  // Cache dtype vs format.
  a = s.attn();
  a.kv.k.data.dtype = DType::f16;
  expect_invalid(sparse_attention_prefill(a), "kv.k.data");
  // num_kv_heads 9 (D10).
  HostTensor k9(DType::bf16, {1, 9, 128, 128}), q9(DType::bf16, {4, 9, 128});
  a = s.attn();
  a.q = q9.view();
  a.kv.k.data = k9.view();
  a.kv.v.data = k9.view();
  expect_invalid(sparse_attention_prefill(a), "kv.k.data");
  // head_dim 64 (D10).
  a = s.attn();
  a.kv.k.data.shape[3] = 64;
  expect_invalid(sparse_attention_prefill(a), "kv.k.data");
  // NVFP4 cache without block scales.
  HostTensor k4(DType::u8, {4, 2, 128, 64}), q8(DType::e4m3, {4, 8, 128});
  a = s.attn();
  a.q = q8.view();
  a.kv.format = KvFormat::nvfp4;
  a.kv.k.data = k4.view();
  a.kv.v.data = k4.view();
  expect_invalid(sparse_attention_prefill(a), "kv.k.block_scale");
}

TEST(AcceptanceValidation, IndexerStridesAlignmentAndOutputs) {
  Small s;
  auto a = s.idx();
  a.q.stride[2] = 2;
  expect_invalid(indexer_prefill(a), "q");
  a = s.idx();
  a.q.data = static_cast<std::uint8_t*>(a.q.data) + 2;
  expect_invalid(indexer_prefill(a), "q");
  a = s.idx();
  a.q = TensorView{};
  expect_invalid(indexer_prefill(a), "q");
  a = s.idx();
  a.topk_indices.stride[0] = -32;
  expect_invalid(indexer_prefill(a), "topk_indices");
  a = s.idx();
  a.index_k.data.data = static_cast<std::uint8_t*>(a.index_k.data.data) + 4;
  expect_invalid(indexer_prefill(a), "index_k.data");
  a = s.idx();
  a.index_k.data.shape[2] = 64;
  expect_invalid(indexer_prefill(a), "index_k.data");
  HostTensor ps_i32(DType::i32, {4, 2, 4}), ps_r2(DType::f32, {8, 4});
  a = s.idx();
  a.page_scores = ps_i32.view();
  expect_invalid(indexer_prefill(a), "page_scores");
  a.page_scores = ps_r2.view();
  expect_invalid(indexer_prefill(a), "page_scores");
  // NVFP4 index-K cache without block scales, and with a zero global scale.
  HostTensor d4(DType::u8, {4, 128, 64}), s4(DType::e4m3, {4, 128, 8});
  a = s.idx();
  a.index_k.format = KvFormat::nvfp4;
  a.index_k.data = d4.view();
  expect_invalid(indexer_prefill(a), "index_k.block_scale");
  a.index_k.block_scale = s4.view();
  a.index_k.global_scale = 0.0f;
  expect_invalid(indexer_prefill(a), "index_k.global_scale");
}

TEST(AcceptanceValidation, IndexerDecodeMetadata) {
  Small s;
  auto d = s.idx_decode();
  d.block_table = make_view(s.bt.data<std::int32_t>(), DType::i32, {1, 2});
  expect_invalid(indexer_decode(d), "block_table");
  d = s.idx_decode();
  s.bt.data<std::int32_t>()[2] = 4;  // num_pages = 4
  expect_invalid(indexer_decode(d), "block_table[0, 2]");
  s.bt.data<std::int32_t>()[2] = 3;
  s.seq.data<std::int32_t>()[0] = -1;
  expect_invalid(indexer_decode(d), "seq_lens[0]");
  s.seq.data<std::int32_t>()[0] = 300;
  HostTensor wide(DType::i32, {4, 2, 17});
  d.topk_indices = wide.view();
  expect_invalid(indexer_decode(d), "topk_indices");
  d = s.idx_decode();
  HostTensor narrow(DType::f32, {4, 2, 1});  // L = 2 for rows at p = 296..299
  d.page_scores = narrow.view();
  expect_invalid(indexer_decode(d), "page_scores");
}

TEST(AcceptanceValidation, TopkSelectArguments) {
  std::vector<float> sc(10, 0.0f);
  std::vector<std::int32_t> lp = {12}, out(16);
  expect_invalid(topk_select(make_view(sc.data(), DType::i32, {1, 10}), make_view(lp.data(), DType::i32, {1}),
                             make_view(out.data(), DType::i32, {1, 16})),
                 "scores");
  expect_invalid(topk_select(make_view(sc.data(), DType::f32, {1, 10}), make_view(lp.data(), DType::f32, {1}),
                             make_view(out.data(), DType::i32, {1, 16})),
                 "local_page");
  expect_invalid(topk_select(make_view(sc.data(), DType::f32, {2, 5}), make_view(lp.data(), DType::i32, {1}),
                             make_view(out.data(), DType::i32, {1, 16})),
                 "scores");
  expect_invalid(topk_select(make_view(sc.data(), DType::f32, {1, 10}), make_view(lp.data(), DType::i32, {1}),
                             make_view(out.data(), DType::i32, {2, 8})),
                 "topk");
}

}  // namespace

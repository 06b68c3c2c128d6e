// GPU indexer (indexer_prefill / indexer_decode on cuda tensors) against the CPU backend,
// policy D8: page scores within 2e-4 relative (of max(|cpu|, the row's largest |cpu|
// score); tensor-core sums are not bit-identical to the CPU's sequential FP32 sums), NaN
// and -inf positions identical; top-k: rows with n <= K, empty and padding rows exactly
// equal; ranked rows: local page last, K-1 distinct history pages, the same set as the
// CPU wherever the (K-1)-th and K-th best CPU scores differ by more than the tolerance
// (otherwise every chosen page within the tolerance of the cut), ordered by the GPU's
// own page scores (desc, page id asc); exact-tie cases (every page a copy of one page:
// the GPU scores tie bitwise) must equal the CPU top-k exactly. Every case runs twice on
// the GPU and must be bitwise identical (D9). Decode (Q 1/8/16, heads 1..8, seq lens
// 1/127/128/129, padding 0, MTP drafts across a page boundary, 8,191 history pages),
// varlen prefill (prefix 0, mid-page, chunked, 1M context), bf16 / e4m3 index q,
// bf16 / e4m3 / nvfp4 index-K caches, exact ties, NaN scores, head-major top-k views.
// GPU outputs are poisoned before each run.
// Skips without a CUDA device; run on the H200 with build/test_cuda_indexer.
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
#include "cuda/sm90/indexer_kernels.h"
#include "flashmsa/memory.h"
#include "flashmsa/flashmsa.h"
#include "test_util.h"

namespace flashmsa {
namespace {

using namespace cudatest;
using testing::Rng;

struct Case {
  bool decode = false;
  std::vector<int> seq_lens;       // per request (final KV length)
  std::vector<int> q_lens;         // prefill: rows per request
  int Q = 1;                       // decode
  int H = 1;
  int K = 16;
  DType q_dtype = DType::bf16;
  KvFormat format = KvFormat::bf16;
  bool page_scores = true;
  bool head_major = false;
  bool ties = false;               // every page a copy of physical page 0 (all scores tie)
  bool nans = false;               // NaN keys: some pages all-NaN, some partly NaN
  int extra_width = 0;             // block-table columns beyond the need
  // GPU only: history pages 3 (-> -1) and 5 (-> num_pages + 7) of every request long
  // enough are unmapped in the GPU's block table; they must score NaN (rank last, D2)
  // and the CPU reference is patched to match.
  bool unmapped = false;
  // NVFP4 only: the codes viewed out of [pages, 128, 80] bytes and the block scales out of
  // [pages, 128, 16] (token strides 80 and 16, not the dense 64 and 8).
  bool padded = false;
  bool host_cache = false;  // index-K cache (and NVFP4 scales) in pinned host memory: copies land late
  std::uint64_t seed = 1;
  // Adversarial E4M3 data for the FP8 scoring paths (q e4m3, K fp8 / nvfp4):
  // 1 = every value positive with exponents spread over the whole E4M3 range (large
  // same-sign sums of products of very different sizes), 2 = random signs, large
  // magnitudes (cancellation: scores far below the sum of |products|).
  int adversarial = 0;
  // Measure only: the worst |gpu - cpu| / max(|cpu|, row max |cpu|) over the page scores
  // goes to *worst (max with its value), no checks.
  double* worst = nullptr;
  // Page-score tolerance relative to max(|score|, the row's largest |score|): D8's 2e-4,
  // or a looser bound for the opt-in QGMMA paths (cuda::Fp8Qk::kE4m3), which D8 does not
  // cover.
  float rel_tol = 2e-4f;
};

// E4M3 byte with exponent field in [e_lo, e_hi], any mantissa (never NaN), positive or
// of random sign.
std::uint8_t adversarial_e4m3(Rng& rng, int e_lo, int e_hi, bool random_sign) {
  std::uniform_int_distribution<int> e(e_lo, e_hi), m(0, 7), sg(0, 1);
  int b = (e(rng) << 3) | m(rng);
  if (b == 0x7f) b = 0x7e;
  if (random_sign && sg(rng)) b |= 0x80;
  return static_cast<std::uint8_t>(b);
}

void fill_adversarial(HostTensor& t, Rng& rng, int mode, bool nvfp4_codes) {
  auto* p = static_cast<std::uint8_t*>(t.view().data);
  std::uniform_int_distribution<int> d(0, 255);
  for (std::size_t i = 0; i < t.bytes(); ++i) {
    if (nvfp4_codes) {  // two e2m1 codes; mode 1: both positive
      p[i] = static_cast<std::uint8_t>(mode == 1 ? d(rng) & 0x77 : d(rng));
    } else {
      p[i] = mode == 1 ? adversarial_e4m3(rng, 1, 15, false) : adversarial_e4m3(rng, 10, 15, true);
    }
  }
}

std::string describe(const Case& c) {
  std::string s = c.decode ? "decode Q" + std::to_string(c.Q) : "prefill";
  s += " H" + std::to_string(c.H) + " K" + std::to_string(c.K) + " q " +
       (c.q_dtype == DType::bf16 ? "bf16" : "e4m3") + " k " +
       (c.format == KvFormat::bf16 ? "bf16" : c.format == KvFormat::fp8 ? "fp8" : "nvfp4") + " seq";
  for (int l : c.seq_lens) s += " " + std::to_string(l);
  if (!c.decode) {
    s += " qlen";
    for (int l : c.q_lens) s += " " + std::to_string(l);
  }
  if (c.adversarial) s += " adversarial" + std::to_string(c.adversarial);
  if (c.ties) s += " ties";
  if (c.nans) s += " nans";
  if (c.unmapped) s += " unmapped";
  if (c.padded) s += " padded";
  if (c.head_major) s += " head-major";
  return s;
}

// indexer_decode or indexer_prefill of case `c` on the given views (cpu or cuda).
Status call_indexer(const Case& c, const TensorView& q, const IndexKCache& cache, const TensorView& bt,
                    const TensorView& cu, const TensorView& seq, const TensorView& topk,
                    const TensorView& ps) {
  if (c.decode) {
    IndexerDecodeArgs a;
    a.q = q;
    a.index_k = cache;
    a.block_table = bt;
    a.seq_lens = seq;
    a.queries_per_request = c.Q;
    a.topk_indices = topk;
    a.page_scores = ps;
    return indexer_decode(a);
  }
  IndexerPrefillArgs a;
  a.q = q;
  a.index_k = cache;
  a.block_table = bt;
  a.cu_seqlens_q = cu;
  a.seq_lens = seq;
  a.topk_indices = topk;
  a.page_scores = ps;
  return indexer_prefill(a);
}

void run_case(const Case& c) {
  SCOPED_TRACE(describe(c));
  Rng rng(c.seed);
  const int B = static_cast<int>(c.seq_lens.size());
  int T = 0;
  HostTensor cu(DType::i32, {B + 1}), seq(DType::i32, {B});
  int width = 1, total_pages = 0;
  for (int b = 0; b < B; ++b) {
    const int s = c.seq_lens[b];
    seq.data<std::int32_t>()[b] = s;
    const int ql = c.decode ? c.Q : c.q_lens[b];
    T += ql;
    cu.data<std::int32_t>()[b + 1] = T;
    width = std::max(width, (s + 127) / 128);
    total_pages += (s + 127) / 128;
  }
  width += c.extra_width;
  const int num_pages = total_pages + 2;
  std::vector<std::int32_t> perm = testing::random_permutation(num_pages, rng);
  HostTensor bt(DType::i32, {B, width});
  int next = 0;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < width; ++j)
      bt.data<std::int32_t>()[b * width + j] =
          j < (c.seq_lens[b] + 127) / 128 ? perm[next++] : perm[num_pages - 1];

  // Index q.
  HostTensor q(c.q_dtype, {T, c.H, 128});
  if (c.q_dtype == DType::bf16) fill_bf16_uniform(q, c.seed * 7 + 1);
  else testing::fill_random_e4m3(q, rng);

  // Index-K cache.
  HostTensor kd, ks;
  IndexKCache cache;
  cache.format = c.format;
  if (c.format == KvFormat::bf16) {
    kd.reset(DType::bf16, {num_pages, 128, 128});
    fill_bf16_uniform(kd, c.seed * 13 + 5);
  } else if (c.format == KvFormat::fp8) {
    kd.reset(DType::e4m3, {num_pages, 128, 128});
    testing::fill_random_e4m3(kd, rng);
  } else {
    kd.reset(DType::u8, {num_pages, 128, c.padded ? 80 : 64});
    testing::fill_random_e4m3(kd, rng);  // any byte is two valid e2m1 codes
    ks.reset(DType::e4m3, {num_pages, 128, c.padded ? 16 : 8});
    testing::fill_random_e4m3(ks, rng);
    cache.global_scale = 0.375f;
  }
  // The views the indexer gets: padded storage narrowed to [pages, 128, 64] / [.., 8].
  auto narrow = [](TensorView v, std::int64_t last) {
    v.shape[2] = last;
    return v;
  };
  const std::size_t page_bytes = kd.bytes() / static_cast<std::size_t>(num_pages);
  auto* kbytes = static_cast<std::uint8_t*>(kd.view().data);
  if (c.ties) {
    for (int p = 1; p < num_pages; ++p) std::memcpy(kbytes + p * page_bytes, kbytes, page_bytes);
    if ((c.format == KvFormat::nvfp4)) {
      auto* sb = static_cast<std::uint8_t*>(ks.view().data);
      const std::size_t spb = ks.bytes() / static_cast<std::size_t>(num_pages);
      for (int p = 1; p < num_pages; ++p) std::memcpy(sb + p * spb, sb, spb);
    }
  }
  if (c.nans) {
    // Physical page p % 3 == 0: every token has a NaN element (page score NaN);
    // p % 3 == 1: tokens 0..63 NaN (ignored by the page max). Not for nvfp4 (no NaN codes).
    for (int p = 0; p < num_pages; ++p) {
      if (p % 3 == 2) continue;
      const int ntok = p % 3 == 0 ? 128 : 64;
      for (int t = 0; t < ntok; ++t) {
        std::uint8_t* row = kbytes + p * page_bytes + t * (page_bytes / 128);
        if (c.format == KvFormat::bf16) {
          const std::uint16_t nan = 0x7fc0;
          std::memcpy(row + 2 * (t % 128), &nan, 2);
        } else {
          row[t % 128] = 0x7f;
        }
      }
    }
  }
  if (c.adversarial) {
    fill_adversarial(q, rng, c.adversarial, false);
    fill_adversarial(kd, rng, c.adversarial, c.format == KvFormat::nvfp4);
    if (c.format == KvFormat::nvfp4) {  // block scales: positive, large
      auto* sp = static_cast<std::uint8_t*>(ks.view().data);
      for (std::size_t i = 0; i < ks.bytes(); ++i) sp[i] = adversarial_e4m3(rng, 8, 15, false);
      cache.global_scale = 1.0f;
    }
  }
  cache.data = c.format == KvFormat::nvfp4 ? narrow(kd.view(), 64) : kd.view();
  if ((c.format == KvFormat::nvfp4)) cache.block_scale = narrow(ks.view(), 8);

  // Outputs: token-major or head-major storage, viewed as [T, H, K].
  const int K = c.K;
  HostTensor topk_cpu(DType::i32, {T, c.H, K});
  HostTensor topk_gpu_store(DType::i32, c.head_major ? std::vector<std::int64_t>{c.H, T, K}
                                                      : std::vector<std::int64_t>{T, c.H, K});
  const int ps_width = width + 3;
  HostTensor ps_cpu(DType::f32, {T, c.H, ps_width}), ps_gpu(DType::f32, {T, c.H, ps_width});

  // CPU reference (page scores always: the top-k checks below use them).
  {
    Status st = call_indexer(c, q.view(), cache, bt.view(), cu.view(), seq.view(), topk_cpu.view(),
                             ps_cpu.view());
    ASSERT_TRUE(st.ok()) << st.message();
  }

  // Unmapped history pages (GPU table only): (request, page) pairs.
  std::vector<std::pair<int, int>> unmapped;
  if (c.unmapped)
    for (int b = 0; b < B; ++b)
      for (int pg : {3, 5})
        if (pg < (c.seq_lens[b] + 127) / 128 - 1) {
          bt.data<std::int32_t>()[b * width + pg] = pg == 3 ? -1 : num_pages + 7;
          unmapped.emplace_back(b, pg);
        }

  // GPU, twice (D9: bitwise identical runs).
  DeviceTensor dq(q), dkd(kd), dbt(bt), dcu(cu), dseq(seq), dtopk(topk_gpu_store), dps(ps_gpu);
  std::unique_ptr<DeviceTensor> dks;
  if ((c.format == KvFormat::nvfp4)) dks = std::make_unique<DeviceTensor>(ks);
  std::unique_ptr<HostMappedTensor> hkd, hks;
  if (c.host_cache) {
    hkd = std::make_unique<HostMappedTensor>(kd);
    if (c.format == KvFormat::nvfp4) hks = std::make_unique<HostMappedTensor>(ks);
  }
  IndexKCache dcache = cache;
  const TensorView kd_view = hkd ? hkd->view() : dkd.view();
  dcache.data = c.format == KvFormat::nvfp4 ? narrow(kd_view, 64) : kd_view;
  if (dks) dcache.block_scale = narrow(hks ? hks->view() : dks->view(), 8);
  TensorView dtopk_view = dtopk.view();
  if (c.head_major) {  // storage [H, T, K] viewed as [T, H, K]
    dtopk_view.shape[0] = T;
    dtopk_view.shape[1] = c.H;
    dtopk_view.stride[0] = K;
    dtopk_view.stride[1] = static_cast<std::int64_t>(T) * K;
    dtopk_view.stride[2] = 1;
  }
  auto run_gpu = [&](HostTensor& topk_out, HostTensor& ps_out) {
    ASSERT_EQ(cudaMemset(const_cast<void*>(dtopk.view().data), 0x55, topk_gpu_store.bytes()), cudaSuccess);
    ASSERT_EQ(cudaMemset(const_cast<void*>(dps.view().data), 0x55, ps_gpu.bytes()), cudaSuccess);
    Status st = call_indexer(c, dq.view(), dcache, dbt.view(), dcu.view(), dseq.view(), dtopk_view,
                             c.page_scores ? dps.view() : TensorView());
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dtopk.download(topk_out);
    dps.download(ps_out);
  };
  run_gpu(topk_gpu_store, ps_gpu);
  if (::testing::Test::HasFatalFailure()) return;
  {
    HostTensor topk2(DType::i32, c.head_major ? std::vector<std::int64_t>{c.H, T, K}
                                               : std::vector<std::int64_t>{T, c.H, K});
    HostTensor ps2(DType::f32, {T, c.H, ps_width});
    run_gpu(topk2, ps2);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(std::memcmp(topk2.data<std::int32_t>(), topk_gpu_store.data<std::int32_t>(), topk2.bytes()), 0)
        << "top-k differs between two GPU runs";
    if (c.page_scores)
      EXPECT_EQ(std::memcmp(ps2.data<float>(), ps_gpu.data<float>(), ps2.bytes()), 0)
          << "page scores differ between two GPU runs";
  }

  if (c.worst != nullptr) {
    const float* g = ps_gpu.data<float>();
    const float* y = ps_cpu.data<float>();
    for (int r = 0; r < T; ++r)
      for (int h = 0; h < c.H; ++h) {
        const std::int64_t o = (static_cast<std::int64_t>(r) * c.H + h) * ps_width;
        float row_mag = 0.f;
        for (int b = 0; b < ps_width; ++b)
          if (std::isfinite(y[o + b])) row_mag = std::max(row_mag, std::fabs(y[o + b]));
        for (int b = 0; b < ps_width; ++b) {
          if (!std::isfinite(y[o + b])) continue;
          const double den = std::max(std::fabs(y[o + b]), row_mag);
          const double e = den > 0 ? std::fabs(static_cast<double>(g[o + b]) - y[o + b]) / den
                                   : (g[o + b] == 0.f ? 0.0 : 1.0);
          *c.worst = std::max(*c.worst, std::isfinite(g[o + b]) ? e : 1.0);
        }
      }
    return;
  }

  // Positions (D4) of every row.
  std::vector<long long> row_pos(T, -1);
  {
    int r0 = 0;
    for (int b = 0; b < B; ++b) {
      const int ql = c.decode ? c.Q : c.q_lens[b];
      for (int j = 0; j < ql; ++j) {
        row_pos[r0 + j] = static_cast<long long>(c.seq_lens[b]) - ql + j;
        for (const auto& u : unmapped)  // the expected score of an unmapped history page: NaN
          if (u.first == b && row_pos[r0 + j] >= 0 && u.second < row_pos[r0 + j] / 128)
            for (int h = 0; h < c.H; ++h)
              ps_cpu.data<float>()[(static_cast<std::int64_t>(r0 + j) * c.H + h) * ps_width + u.second] =
                  std::numeric_limits<float>::quiet_NaN();
      }
      r0 += ql;
    }
  }
  const float* gs = ps_gpu.data<float>();
  const float* cs = ps_cpu.data<float>();
  auto cpu_score = [&](int r, int h, int b) { return cs[(static_cast<std::int64_t>(r) * c.H + h) * ps_width + b]; };
  auto gpu_score = [&](int r, int h, int b) { return gs[(static_cast<std::int64_t>(r) * c.H + h) * ps_width + b]; };
  // D2 rank order with page id ties: true when (sa, a) ranks before (sb, b).
  auto before = [](float sa, int a, float sb, int b) {
    if (std::isnan(sa) != std::isnan(sb)) return std::isnan(sb);
    if (!std::isnan(sa) && sa != sb) return sa > sb;
    return a < b;
  };

  std::int64_t bad = 0;
  for (int r = 0; r < T; ++r)
    for (int h = 0; h < c.H; ++h) {
      const long long L = row_pos[r] < 0 ? -1 : row_pos[r] / 128;
      // Row tolerance: rel_tol (D8: 2e-4) of the row's largest |cpu score| (and of each score itself).
      float row_mag = 0.f;
      for (long long b = 0; b < L; ++b)
        if (std::isfinite(cpu_score(r, h, static_cast<int>(b)))) row_mag = std::max(row_mag, std::fabs(cpu_score(r, h, static_cast<int>(b))));
      const float tol = c.rel_tol * row_mag;
      std::vector<std::int32_t> want(K), got(K);
      for (int k = 0; k < K; ++k) {
        want[k] = topk_cpu.data<std::int32_t>()[(r * c.H + h) * K + k];
        const std::int64_t gi = c.head_major ? (static_cast<std::int64_t>(h) * T + r) * K + k
                                             : (static_cast<std::int64_t>(r) * c.H + h) * K + k;
        got[k] = topk_gpu_store.data<std::int32_t>()[gi];
      }
      auto fail = [&](const std::string& why) {
        if (bad++ < 5) {
          std::string g, w;
          for (int k = 0; k < K; ++k) {
            g += " " + std::to_string(got[k]);
            w += " " + std::to_string(want[k]);
          }
          ADD_FAILURE() << "row " << r << " head " << h << " L " << L << ": " << why << "; gpu" << g << " cpu" << w;
        }
      };
      if (c.ties || L < 0 || L + 1 <= K) {
        if (got != want) fail("top-k differs (exact rows)");
        continue;
      }
      if (got[K - 1] != L) {
        fail("local page not last");
        continue;
      }
      if (K == 1) continue;  // only the local page is kept: no history cut to compare
      std::vector<int> order(static_cast<std::size_t>(L));
      for (int b = 0; b < L; ++b) order[b] = b;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return before(cpu_score(r, h, a), a, cpu_score(r, h, b), b);
      });
      if (c.unmapped)  // the CPU ran on the mapped table: expect the patched scores' order
        for (int k = 0; k + 1 < K; ++k) want[k] = order[k];
      const float cut = cpu_score(r, h, order[K - 2]);   // (K-1)-th best
      const float next = cpu_score(r, h, order[K - 1]);  // K-th best
      std::vector<char> chosen(static_cast<std::size_t>(L), 0);
      bool ok = true;
      for (int k = 0; k + 1 < K; ++k) {
        if (got[k] < 0 || got[k] >= L || chosen[got[k]]) {
          ok = false;
          break;
        }
        chosen[got[k]] = 1;
      }
      if (!ok) {
        fail("history entries not distinct pages < L");
        continue;
      }
      const bool separated = std::isnan(next) ? !std::isnan(cut)
                                              : (!std::isnan(cut) && cut - next > 2 * tol);
      if (separated) {
        std::vector<int> a(got.begin(), got.end() - 1), b(want.begin(), want.end() - 1);
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a != b) fail("top-k set differs where the cut is separated");
      } else {
        for (int k = 0; k + 1 < K; ++k) {
          const float sc = cpu_score(r, h, got[k]);
          const bool near = std::isnan(cut) || (!std::isnan(sc) && sc >= cut - 2 * tol);
          if (!near) fail("chosen page " + std::to_string(got[k]) + " scores below the cut");
        }
        for (int b = 0; b < L; ++b)
          if (!chosen[b] && !std::isnan(cpu_score(r, h, b)) && (std::isnan(cut) || cpu_score(r, h, b) > cut + 2 * tol))
            fail("page " + std::to_string(b) + " above the cut not chosen");
      }
      if (c.page_scores)  // order by the GPU's own scores
        for (int k = 0; k + 2 < K; ++k)
          if (!before(gpu_score(r, h, got[k]), got[k], gpu_score(r, h, got[k + 1]), got[k + 1]))
            fail("not ordered by the GPU page scores (desc, id asc)");
    }
  EXPECT_EQ(bad, 0);
  if (c.page_scores) {
    std::int64_t bad_s = 0;
    for (int r = 0; r < T; ++r)
      for (int h = 0; h < c.H; ++h) {
        float row_mag = 0.f;
        for (int b = 0; b < ps_width; ++b)
          if (std::isfinite(cpu_score(r, h, b))) row_mag = std::max(row_mag, std::fabs(cpu_score(r, h, b)));
        for (int b = 0; b < ps_width; ++b) {
          const float x = gpu_score(r, h, b), y = cpu_score(r, h, b);
          bool same;
          if (std::isnan(y) || std::isinf(y)) same = std::isnan(y) ? std::isnan(x) : x == y;
          else same = std::isfinite(x) && std::fabs(x - y) <= c.rel_tol * std::max(std::fabs(y), row_mag);
          if (!same && bad_s++ < 5)
            ADD_FAILURE() << "page_scores[" << r << "," << h << "," << b << "]: gpu " << x << " cpu " << y
                          << " (row max |score| " << row_mag << ")";
        }
      }
    EXPECT_EQ(bad_s, 0);
  }
}

Case decode_case(std::vector<int> seq, int Q, int H, KvFormat f = KvFormat::bf16,
                 DType qd = DType::bf16) {
  Case c;
  c.decode = true;
  c.seq_lens = std::move(seq);
  c.Q = Q;
  c.H = H;
  c.format = f;
  c.q_dtype = qd;
  return c;
}

Case prefill_case(std::vector<int> q_lens, std::vector<int> prefix, int H,
                  KvFormat f = KvFormat::bf16, DType qd = DType::bf16) {
  Case c;
  c.q_lens = q_lens;
  for (std::size_t i = 0; i < q_lens.size(); ++i) c.seq_lens.push_back(q_lens[i] + prefix[i]);
  c.H = H;
  c.format = f;
  c.q_dtype = qd;
  return c;
}

const KvFormat kFormats[] = {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4};
const DType kQTypes[] = {DType::bf16, DType::e4m3};

// E4M3 q x E4M3 / NVFP4 K on adversarial data, for each scoring path (cuda::Fp8Qk): the
// worst page-score error relative to the row max, printed per path. The default path
// (exact) and the one FLASHMSA_FP8_QK selects must be within D8's 2e-4; the others are
// measured and reported (a line
// "e4m3_split ... HOLDS" means the split variant stayed within 2e-4 on this data).
TEST(CudaIndexer, Fp8QkPrecision) {
  REQUIRE_GPU();
  using cuda::Fp8Qk;
  struct Restore {
    ~Restore() { cuda::set_indexer_fp8_qk_default(Fp8Qk::kDefault); }
  } restore;
  const Fp8Qk env_default = cuda::indexer_fp8_qk_default();
  for (Fp8Qk mode : {Fp8Qk::kExact, Fp8Qk::kE4m3Split, Fp8Qk::kE4m3}) {
    cuda::set_indexer_fp8_qk_default(mode);
    double worst = 0.0;
    for (int adv : {1, 2})
      for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4}) {
        Case d = decode_case({33000, 9000, 130}, 8, 4, f, DType::e4m3);
        Case pf = prefill_case({100, 3}, {12000, 300}, 4, f, DType::e4m3);
        for (Case* c : {&d, &pf}) {
          c->adversarial = adv;
          c->worst = &worst;
          c->seed = 11 + adv;
          run_case(*c);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    std::printf("[ Fp8QkPrecision ] path %-10s worst page-score error %.3e of the row max: %s (D8: 2e-4)\n",
                cuda::fp8_qk_name(mode), worst, worst <= 2e-4 ? "HOLDS" : "FAILS");
    RecordProperty(std::string("worst_") + cuda::fp8_qk_name(mode), std::to_string(worst));
    // The path in use (default exact, or the one FLASHMSA_FP8_QK selects) must hold.
    if (mode == Fp8Qk::kExact || mode == env_default)
      EXPECT_LE(worst, 2e-4) << "path " << cuda::fp8_qk_name(mode) << " in use";
  }
}

// Runs cases on the opt-in QGMMA scoring path (Fp8Qk::kE4m3, restored at scope exit) with
// page scores checked to 2e-3 of the row max, each with the next seed, and checks that the
// expected scoring kernel ran.
class QgmmaCases {
 public:
  explicit QgmmaCases(std::uint64_t seed) : seed_(seed) { cuda::set_indexer_fp8_qk_default(cuda::Fp8Qk::kE4m3); }
  ~QgmmaCases() { cuda::set_indexer_fp8_qk_default(cuda::Fp8Qk::kDefault); }
  QgmmaCases(const QgmmaCases&) = delete;
  QgmmaCases& operator=(const QgmmaCases&) = delete;
  void operator()(Case c, cuda::IndexerScoreKernel want) {
    c.rel_tol = 2e-3f;
    c.seed = seed_++;
    run_case(c);
    EXPECT_EQ(static_cast<int>(cuda::indexer_last_score_kernel()), static_cast<int>(want))
        << "seed " << c.seed << ": not the expected scoring kernel";
  }

 private:
  std::uint64_t seed_;
};

// The opt-in QGMMA decode scorer (FLASHMSA_FP8_QK=e4m3 over an NVFP4 index K:
// decode_score_wg_kernel<NT, true>, session 31): the shapes, boundaries, ties, unmapped
// pages and many-pages-per-group cases of the exact kernels, with page scores checked to
// 2e-3 of the row max (QGMMA does not accumulate in FP32; Fp8QkPrecision measures its
// error on adversarial data) and top-k sets where the cut is separated by that bound.
TEST(CudaIndexer, DecodeNvfp4Qgmma) {
  REQUIRE_GPU();
  QgmmaCases go(3100);
  constexpr auto kWgQ8 = cuda::IndexerScoreKernel::kDecodeWgQ8;
  for (int Q : {1, 3, 8, 16})
    for (int H : {1, 2, 4, 8}) {  // 8, 16, 32 and 64-row tiles; beyond 64 the score kernel
      Case c = decode_case({1, 127, 128, 129, 0, 2, 2100, 5000 + 37 * Q, 16 * 128 + 1, 17 * 128}, Q, H,
                           KvFormat::nvfp4, DType::e4m3);
      c.extra_width = 2;
      go(c, Q * H <= 64 ? kWgQ8 : cuda::IndexerScoreKernel::kTile);
    }
  {
    Case c = decode_case({3000, 129, 4000}, 8, 4, KvFormat::nvfp4, DType::e4m3);
    c.ties = true;
    go(c, kWgQ8);
  }
  {
    Case c = decode_case({3000, 129, 9000, 700, 0}, 8, 4, KvFormat::nvfp4, DType::e4m3);
    c.unmapped = true;
    go(c, kWgQ8);
  }
  for (int Q : {1, 8}) {  // padded code and scale rows (strides 80 and 16 bytes per token)
    Case c = decode_case({3000, 129, 9000, 700}, Q, 4, KvFormat::nvfp4, DType::e4m3);
    c.padded = true;
    go(c, kWgQ8);
  }
  for (int Q : {4, 8, 16}) {
    std::vector<int> lens;
    const int nreq = Q == 16 ? 24 : 40;
    for (int i = 0; i < nreq; ++i) lens.push_back(4000 + (i * 104729) % 12000);
    Case c = decode_case(lens, Q, 4, KvFormat::nvfp4, DType::e4m3);
    c.unmapped = Q == 8;
    go(c, kWgQ8);
  }
  {
    std::vector<int> lens;
    for (int i = 0; i < 1100; ++i) lens.push_back(1 + (i * 7919) % 6000);
    lens.push_back(900000);
    go(decode_case(lens, 1, 4, KvFormat::nvfp4, DType::e4m3), kWgQ8);
  }
}

// The opt-in QGMMA prefill scorer over an E4M3 index K (FLASHMSA_FP8_QK=e4m3): 256-row
// wide tiles since session 31 (score_kernel<true, kCopy, false, kWideRows>). Varlen with
// prefixes (mid-page, chunked on a page boundary), q_len 1, empty requests, 1, 2, 4 and 8
// heads, several tiles per request, unmapped pages and all-equal scores; page scores
// checked to 2e-3 of the row max (QGMMA does not accumulate in FP32).
TEST(CudaIndexer, PrefillE4m3Qgmma) {
  REQUIRE_GPU();
  QgmmaCases go(3200);
  constexpr auto kWide = cuda::IndexerScoreKernel::kWide;
  for (int H : {1, 2, 4, 8})
    go(prefill_case({300, 1, 200, 77, 0, 130, 700}, {0, 1000, 64 + 3 * 128, 2048, 500, 127, 9000}, H,
                    KvFormat::fp8, DType::e4m3),
       kWide);
  {
    Case c = prefill_case({500, 260}, {4000, 3000}, 4, KvFormat::fp8, DType::e4m3);
    c.unmapped = true;
    go(c, kWide);
  }
  {
    Case c = prefill_case({400}, {3000}, 2, KvFormat::fp8, DType::e4m3);
    c.ties = true;
    go(c, kWide);
  }
}

TEST(CudaIndexer, DecodeShapes) {
  REQUIRE_GPU();
  std::uint64_t seed = 1;
  for (int Q : {1, 8, 16})
    for (int H : {1, 2, 4, 8}) {
      // seq 0 = padding; seq < Q gives p < 0 rows; 1, 127, 128, 129; long rows.
      Case c = decode_case({1, 127, 128, 129, 0, 5, 2100, 5000 + 37 * Q, 16 * 128 + 1, 17 * 128},
                           Q, H);
      c.seed = seed++;
      run_case(c);
    }
}

TEST(CudaIndexer, DecodeFormats) {
  REQUIRE_GPU();
  std::uint64_t seed = 100;
  for (KvFormat f : kFormats)
    for (DType qd : kQTypes)
      for (int Q : {1, 4}) {
        Case c = decode_case({3000, 129, 0, 4000, 20 * 128 + 64}, Q, 4, f, qd);
        c.seed = seed++;
        run_case(c);
      }
}

// E4M3 index q over E4M3 / NVFP4 index K: the decode MMA kernel (Q x H <= 64 score rows:
// 8, 16, 32 and 64-row tiles) and, beyond 64 rows (16 x 8), the general score kernel;
// contexts of 1, 127, 128, 129 tokens, padding rows, rows with p < 0, unmapped pages
// (extra width), all-equal scores.
TEST(CudaIndexer, DecodeE4m3Shapes) {
  REQUIRE_GPU();
  std::uint64_t seed = 1000;
  for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4})
    for (int Q : {1, 3, 8, 16})
      for (int H : {1, 2, 4, 8}) {
        Case c = decode_case({1, 127, 128, 129, 0, 2, 2100, 5000 + 37 * Q, 16 * 128 + 1, 17 * 128}, Q, H, f,
                             DType::e4m3);
        c.extra_width = 2;
        c.seed = seed++;
        run_case(c);
      }
  for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4}) {
    Case c = decode_case({3000, 129, 4000}, 8, 4, f, DType::e4m3);
    c.ties = true;
    c.seed = seed++;
    run_case(c);
  }
  // Unmapped block-table entries on history pages (both kernels: E4M3 q and BF16 q).
  for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4})
    for (DType qd : kQTypes) {
      Case c = decode_case({3000, 129, 9000, 700, 0}, 8, 4, f, qd);
      c.unmapped = true;
      c.seed = seed++;
      run_case(c);
    }
  // 1100 requests (the page prefix's per-thread runs exceed one request with 384 and 512
  // threads) and one long request split over many warps, both index-K formats.
  for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4}) {
    std::vector<int> lens;
    for (int i = 0; i < 1100; ++i) lens.push_back(1 + (i * 7919) % 6000);
    lens.push_back(900000);
    Case c = decode_case(lens, 1, 4, f, DType::e4m3);
    c.seed = seed++;
    run_case(c);
  }
  // NVFP4 with padded code and scale rows (token strides 80 and 16 bytes): the per-warp
  // kernel's copies and block-scale reads take the strides, not the dense 64 / 8.
  for (int Q : {1, 8}) {
    Case c = decode_case({3000, 129, 9000, 700}, Q, 4, KvFormat::nvfp4, DType::e4m3);
    c.padded = true;
    c.seed = seed++;
    run_case(c);
    EXPECT_EQ(static_cast<int>(cuda::indexer_last_score_kernel()), static_cast<int>(cuda::IndexerScoreKernel::kDecodeWarp));
  }
}

// Many pages per warp (group): about 1,900-3,100 history pages over 24-40 requests, so
// that each warpgroup of the E4M3 kernel (528 on 132 SMs) and each warp of the NVFP4
// kernel scores several pages, reuses its ring slots and page-max buffers and crosses
// request boundaries inside its range; 16, 32 and 64 score rows; unmapped pages.
// Late page copies: the index-K cache (and NVFP4 block scales) in pinned host memory, so
// every cp.async of a page lands microseconds late and a kernel that reads a ring slot
// before its copy completed scores stale bytes. Decode (the E4M3 warpgroup and NVFP4
// per-warp kernels, many pages per warp, and the BF16 general path) and prefill (every
// index format, both query dtypes).
TEST(CudaIndexer, PageCopiesLandingLate) {
  REQUIRE_GPU();
  std::uint64_t seed = 1700;
  for (KvFormat f : kFormats)
    for (DType qd : kQTypes) {
      std::vector<int> lens;
      for (int i = 0; i < 24; ++i) lens.push_back(4000 + (i * 104729) % 12000);
      Case d = decode_case(lens, 8, 4, f, qd);
      d.host_cache = true;
      d.seed = seed++;
      run_case(d);
      Case pf = prefill_case({300, 200}, {5000, 2000}, 4, f, qd);
      pf.host_cache = true;
      pf.seed = seed++;
      run_case(pf);
    }
}

TEST(CudaIndexer, DecodeManyPagesPerWarp) {
  REQUIRE_GPU();
  std::uint64_t seed = 1500;
  for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4})
    for (int Q : {4, 8, 16}) {
      std::vector<int> lens;
      const int nreq = Q == 16 ? 24 : 40;
      for (int i = 0; i < nreq; ++i) lens.push_back(4000 + (i * 104729) % 12000);
      Case c = decode_case(lens, Q, 4, f, DType::e4m3);
      c.unmapped = Q == 8;
      c.seed = seed++;
      run_case(c);
    }
}

TEST(CudaIndexer, DecodeSmallKAndNoScores) {
  REQUIRE_GPU();
  for (int K : {1, 2, 7, 16}) {
    Case c = decode_case({3000, 129, 640, 4000}, 2, 2);
    c.K = K;
    c.page_scores = K % 2 == 0;
    c.extra_width = 3;
    c.seed = 200 + K;
    run_case(c);
  }
}

TEST(CudaIndexer, DecodeLongContext) {
  REQUIRE_GPU();
  // 8,191 history pages (the D10 maximum context), one head, one query.
  Case c = decode_case({8191 * 128 + 5}, 1, 1);
  c.seed = 300;
  run_case(c);
  Case c2 = decode_case({kMaxContext, 8000 * 128}, 2, 1, KvFormat::fp8, DType::e4m3);
  c2.seed = 301;
  run_case(c2);
}

TEST(CudaIndexer, PrefillVarlen) {
  REQUIRE_GPU();
  std::uint64_t seed = 400;
  for (KvFormat f : kFormats)
    for (DType qd : kQTypes)
      for (int H : {1, 4, 8}) {
        // prefix 0, prefix mid-page, chunked (prefix on a page boundary), q_len 1, empty
        Case c = prefill_case({300, 1, 200, 77, 0, 130}, {0, 1000, 64 + 3 * 128, 2048, 500, 127},
                              H, f, qd);
        c.seed = seed++;
        run_case(c);
      }
}

// One index head over an E4M3 index-K with 4 or more 256-row tiles per request on
// average: the pre-converted BF16 copy path (session 29's rule), both index-q types.
TEST(CudaIndexer, PrefillOneHeadPreconverted) {
  REQUIRE_GPU();
  std::uint64_t seed = 420;
  for (DType qd : kQTypes) {
    Case c = prefill_case({1100, 1030}, {5000, 300}, 1, KvFormat::fp8, qd);
    c.seed = seed++;
    run_case(c);
  }
}

// The launchers' workspaces come from FlashMSA's private pool (workspace_pool.h), which
// keeps its memory between calls; release_cached_workspace() returns it, and the next
// call allocates again and gives the same results.
TEST(CudaIndexer, ReleaseCachedWorkspace) {
  REQUIRE_GPU();
  Case c = prefill_case({300, 77}, {1000, 2048}, 4);
  c.seed = 450;
  run_case(c);
  const Status st = release_cached_workspace();
  EXPECT_TRUE(st.ok()) << st.message();
  run_case(c);
  EXPECT_TRUE(release_cached_workspace().ok());
}

TEST(CudaIndexer, PrefillLarge) {
  REQUIRE_GPU();
  Case c = prefill_case({1024, 700}, {20000, 0}, 4);
  c.seed = 500;
  run_case(c);
}

TEST(CudaIndexer, ExactTies) {
  REQUIRE_GPU();
  std::uint64_t seed = 600;
  for (KvFormat f : kFormats) {
    Case c = decode_case({3000, 129, 4000}, 2, 2, f);
    c.ties = true;
    c.seed = seed++;
    run_case(c);
    Case p = prefill_case({200, 50}, {2000, 0}, 2, f);
    p.ties = true;
    p.seed = seed++;
    run_case(p);
  }
}

TEST(CudaIndexer, NaNScores) {
  REQUIRE_GPU();
  std::uint64_t seed = 700;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8})
    for (DType qd : kQTypes) {
      Case c = decode_case({3000, 129, 6000}, 2, 2, f, qd);
      c.nans = true;
      c.seed = seed++;
      run_case(c);
      Case p = prefill_case({200, 50}, {3000, 0}, 2, f, qd);
      p.nans = true;
      p.seed = seed++;
      run_case(p);
    }
}

TEST(CudaIndexer, HeadMajorTopk) {
  REQUIRE_GPU();
  Case c = decode_case({3000, 129, 0, 4000}, 4, 4, KvFormat::fp8, DType::e4m3);
  c.head_major = true;
  c.seed = 800;
  run_case(c);
  Case p = prefill_case({300, 40}, {1000, 0}, 8, KvFormat::nvfp4);
  p.head_major = true;
  p.seed = 801;
  run_case(p);
}

TEST(CudaIndexer, DecodeMtpAcrossPageBoundary) {
  REQUIRE_GPU();
  std::uint64_t seed = 900;
  // Drafts of one request straddle a page boundary: different local pages per draft.
  for (int Q : {2, 8, 16})
    for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4}) {
      Case c = decode_case({20 * 128 + 3, 33 * 128 + 1, 17 * 128 + Q / 2, 16 * 128 + 1}, Q, 4, f, DType::e4m3);
      c.seed = seed++;
      run_case(c);
    }
}

TEST(CudaIndexer, PrefillMaxContext) {
  REQUIRE_GPU();
  // 8,192 pages: a short chunk at the end of a 1M-token context, E4M3.
  Case c = prefill_case({16}, {kMaxContext - 16}, 1, KvFormat::fp8, DType::e4m3);
  c.seed = 1000;
  run_case(c);
}

TEST(CudaIndexer, TiesAtMaxContext) {
  REQUIRE_GPU();
  // All-equal scores over 8,191 history pages: the 15 lowest page ids, local page last.
  Case c = decode_case({kMaxContext, 4096 * 128 + 7}, 2, 2, KvFormat::fp8, DType::e4m3);
  c.ties = true;
  c.seed = 1001;
  run_case(c);
}

TEST(CudaIndexer, DecodePlanGraphReplay) {
  REQUIRE_GPU();
  // One plan, one captured graph; seq_lens updated in place between replays must give
  // exactly what a direct indexer_decode gives on the new lengths (same kernels).
  Rng rng(1100);
  const int B = 4, Q = 4, H = 2, width = 32, num_pages = B * width;
  HostTensor q(DType::e4m3, {B * Q, H, 128}), kd(DType::e4m3, {num_pages, 128, 128});
  testing::fill_random_e4m3(q, rng);
  testing::fill_random_e4m3(kd, rng);
  HostTensor bt(DType::i32, {B, width}), seq(DType::i32, {B});
  std::vector<std::int32_t> perm = testing::random_permutation(num_pages, rng);
  for (int i = 0; i < B * width; ++i) bt.data<std::int32_t>()[i] = perm[i];
  const int lens_a[B] = {3000, 129, 2000, 0}, lens_b[B] = {2900, 4000, 1, 2500};
  for (int b = 0; b < B; ++b) seq.data<std::int32_t>()[b] = lens_a[b];
  HostTensor topk(DType::i32, {B * Q, H, 16}), topk_ref(DType::i32, {B * Q, H, 16});
  DeviceTensor dq(q), dkd(kd), dbt(bt), dseq(seq), dtopk(topk), dref(topk_ref);
  IndexerDecodePlan plan;
  IndexerDecodePlanArgs pa;
  pa.max_batch = B;
  pa.queries_per_request = Q;
  pa.heads = H;
  pa.max_pages_per_request = width;
  ASSERT_TRUE(plan.plan(pa).ok());
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  IndexerDecodeArgs a;
  a.q = dq.view();
  a.index_k.format = KvFormat::fp8;
  a.index_k.data = dkd.view();
  a.block_table = dbt.view();
  a.seq_lens = dseq.view();
  a.queries_per_request = Q;
  a.topk_indices = dtopk.view();
  a.stream = s;
  ASSERT_TRUE(plan.run(a).ok());  // outside capture first (kernel attributes)
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  Status st = plan.run(a);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (const int* lens : {lens_a, lens_b}) {
    for (int b = 0; b < B; ++b) seq.data<std::int32_t>()[b] = lens[b];
    dseq.upload(seq);
    dtopk.poison();
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    IndexerDecodeArgs r = a;
    r.topk_indices = dref.view();
    r.stream = nullptr;
    ASSERT_TRUE(indexer_decode(r).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dtopk.download(topk);
    dref.download(topk_ref);
    EXPECT_EQ(std::memcmp(topk.data<std::int32_t>(), topk_ref.data<std::int32_t>(), topk.bytes()), 0)
        << "graph replay with seq_lens[0] = " << lens[0];
  }
  // Beyond the capacity: rejected.
  IndexerDecodeArgs big = a;
  big.queries_per_request = Q + 1;
  EXPECT_EQ(plan.run(big).code(), StatusCode::kInvalidArgument);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
}

TEST(CudaIndexer, TopkSelectDevice) {
  REQUIRE_GPU();
  // topk_select on cuda tensors equals the CPU helper (exact: same scores), including
  // all-equal rows, NaN rows, -0 / +0 ties, n <= K rows and empty rows; widths for 1 to 8
  // warps per row (40, 1000, 1024: one; 1025, 3000: two and three; 8192: eight), odd
  // widths (rows not 16-byte aligned: the scalar load path).
  for (const int W : {8192, 3000, 1025, 1024, 1000, 40}) {
    SCOPED_TRACE("width " + std::to_string(W));
    Rng rng(1200 + W);
    const int R = 12, K = 16;
    HostTensor sc(DType::f32, {R, W}), lp(DType::i32, {R}), out_cpu(DType::i32, {R, K}),
        out_gpu(DType::i32, {R, K});
    std::uniform_real_distribution<float> u(-4.f, 4.f);
    for (int r = 0; r < R; ++r)
      for (int b = 0; b < W; ++b) {
        float v = u(rng);
        if (r == 1) v = 2.5f;                                                    // all equal
        if (r == 2 && b % 3 == 0) v = std::numeric_limits<float>::quiet_NaN();  // NaNs
        if (r == 3) v = std::numeric_limits<float>::quiet_NaN();                // all NaN
        if (r == 4) v = (b % 2) ? 0.0f : -0.0f;                                  // signed zeros tie
        if (r == 5) v = std::round(v);                                           // many ties
        if (r == 11) v = (b % 7 == 0) ? 3.0f : -1.0f;                            // ties above the rest
        sc.data<float>()[r * W + b] = v;
      }
    const int lps[R] = {2999, 8192, 1500, 200, 700, 3000, 15, 16, 0, -1, 17, 8191};
    for (int r = 0; r < R; ++r) lp.data<std::int32_t>()[r] = std::min(lps[r], W);
    ASSERT_TRUE(topk_select(sc.view(), lp.view(), out_cpu.view()).ok());
    DeviceTensor dsc(sc), dlp(lp), dout(out_gpu);
    dout.poison();
    Status st = topk_select(dsc.view(), dlp.view(), dout.view());
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    dout.download(out_gpu);
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < K; ++k)
        EXPECT_EQ(out_gpu.data<std::int32_t>()[r * K + k], out_cpu.data<std::int32_t>()[r * K + k])
            << "row " << r << " slot " << k;
  }
}

TEST(CudaIndexer, EmptyAndDeviceRules) {
  REQUIRE_GPU();
  HostTensor q(DType::bf16, {2, 1, 128}), k(DType::bf16, {1, 128, 128}), bt(DType::i32, {2, 1}),
      seq(DType::i32, {2}), topk(DType::i32, {2, 1, 16});
  DeviceTensor dq(q), dk(k), dbt(bt), dseq(seq), dtopk(topk);
  IndexerDecodeArgs a;
  a.q = dq.view();
  a.index_k.data = dk.view();
  a.block_table = dbt.view();
  a.seq_lens = dseq.view();
  a.topk_indices = dtopk.view();
  EXPECT_TRUE(indexer_decode(a).ok());  // seq 0: rows of -1
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  dtopk.download(topk);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(topk.data<std::int32_t>()[i], -1);
  a.seq_lens = seq.view();  // host tensor among cuda ones
  Status st = indexer_decode(a);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'seq_lens'"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace flashmsa

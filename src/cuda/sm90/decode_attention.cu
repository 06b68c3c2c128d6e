// SM90 sparse attention for decode and prefill (see decode_attention.h for the design).
#include "cuda/sm90/decode_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda/sm90/attn_tile.cuh"
#include "cuda/sm90/pdl.cuh"

namespace flashmsa::cuda {
namespace {

namespace at = ::flashmsa::cuda::sm90::attn;
namespace gm = ::flashmsa::cuda::sm90::gmma;

constexpr int kMaxTopkEntries = 16;
constexpr int kMaxSplits = 16;  // choose_num_splits never returns more
// Largest (tile rows x splits) whose merge the attention kernel's last CTA does itself:
// 256 x 516 bytes of partials = 132 KB read from L2 by one SM (e.g. Q 8 x 16 heads per
// KV head with 2 splits). Larger merges go to the combine kernel.
constexpr int kFoldMaxRowSplits = 256;
// ... and only up to this many splits: on the H200, b1 Q1 4K (16 splits) took 17.2 us
// folded and 14.9 us with the combine kernel, while b32 Q8 10K (2 splits) gained with
// the fold (130 vs 135 us, BF16).
constexpr int kFoldMaxSplits = 4;
// choose_decode_schedule: the warp-MMA kernel when its one-row CTAs fit one wave
// (rows x KV heads <= SMs), or at Q 1 (the tile kernel's M tile is then the G <= 16 heads
// of one query, at most 16 of its 128 rows). At Q > 1 the tile kernel loads a request's
// pages once for all its queries and the warp-MMA kernel once per query row, so past one
// wave it keeps the tile kernel even where Q x G is small (not measured). H200, session 15
// (docs/bench/h200-2026-11-29-s15, default plan of session 14 vs the warp-MMA kernel,
// us, BF16 / FP8 / NVFP4):
//   b2 Q8 4K 64/4 (64 row CTAs):      26.8 / 27.7 / 28.7  vs  20.2 / 14.8 / 22.2
//   b4 Q8 4K 64/4 (128 row CTAs):     31.5 / 34.6 / 38.4  vs  30.3 / 20.0 / 34.0
//   b32 Q1 10K 64/4 (128, M = 16):    55.3 / 69.0 / 84.4  vs  38.5 / 22.9 / 36.6
//   b128 Q1 10K 64/4 (512, M = 16):   156 / 220 / 290     vs  141 / 86 / 140
//   b8 Q8 10K 64/4 (256, M = 128):    48.9 / 53.5 / 57.7  vs  59.6 / 39.0 / 67.8
//   b32 Q8 10K 64/4 (1024, M = 128):  116 / 135 / 157     vs  233 / 152 / 263
// so past one wave only the M = 16 tile (Q 1 with 16 heads per KV head) loses.

using at::ex2_approx;
using at::kBf16;
using at::kLog2e;
using at::kFp8;
using at::kNvfp4;

// Tile rows (draft x head) per CTA: 64 (one warpgroup) or 128 (two), 64 rows each.
// Shared memory: the Q tile (SW128 K-major), two page stages (cp.async targets) and one
// conversion region (attn_tile.cuh PageBytes). QK16: FP8 paths run Q K^T on exact F16
// images (see attn_tile.cuh) instead of E4M3 QGMMA.
template <int FMT, bool QK16, int ROWS>
struct Layout {
  using Page = at::PageBytes<FMT, QK16>;
  static constexpr int kThreads = ROWS * 2;
  static constexpr int kQBytes = ROWS * Page::kQRow;
  static constexpr int kStageBytes = Page::kStage;
  static constexpr int kSmemBytes = kQBytes + 2 * kStageBytes + Page::kConv + 1024;  // + alignment slack
};

constexpr int kMaxCand = 32 * kMaxTopkEntries;  // drafts x top-k entries of one CTA

// Prefill query row -> (request b, position p) (D4): the last b with cu[b] <= row, at
// p = seq_len - q_len + (row - cu[b]). Never reads outside [0, batch). (Decode rows
// b*Q + j at p = seq_len - Q + j are located in the kernel.)
__device__ __forceinline__ void locate_row(const DecodeParams& p, long long qrow, int* b,
                                           long long* pos) {
  int lo = 0, hi = p.batch - 1;
  while (lo < hi) {  // last b with cu[b] <= qrow
    const int mid = (lo + hi + 1) / 2;
    if (p.cu_seqlens[mid * p.cu_stride] <= qrow) lo = mid;
    else hi = mid - 1;
  }
  *b = lo;
  const long long start = p.cu_seqlens[lo * p.cu_stride];
  const long long q_len = p.cu_seqlens[(lo + 1) * p.cu_stride] - start;
  const long long seq_len = p.seq_lens[static_cast<long long>(lo) * p.seq_lens_stride];
  *pos = seq_len - q_len + (qrow - start);
}

// Split merge of float4 slots [0, nslots): slot i is dims [4(i % 32), 4(i % 32) + 4) of
// the (row, head) pair pair_of(i / 32) = row * Hq + head, so a warp covers one pair.
// Thread t owns slots t, t + kThreads, ..., kPass per pass. A pass issues every partial
// load of its slots first (S LSEs and S float4 of O each, all independent, from L2 via
// __ldcg), then combines them in split order 0..S-1: the bits do not depend on which CTA
// merges (D9). Splits that saw nothing carry LSE -inf and O 0; a pair with no split left
// stays 0 with LSE -inf (D5).
template <int kThreads, class PairOf>
__device__ __forceinline__ void merge_splits(const DecodeParams& p, int nslots, int tid, PairOf pair_of) {
  constexpr int kPass = 2;
  const int S = p.num_splits;
  for (int first = 0; first < nslots; first += kPass * kThreads) {
    float ls[kPass][kMaxSplits];
    float4 os[kPass][kMaxSplits];
    long long pair[kPass];
#pragma unroll
    for (int u = 0; u < kPass; ++u) {
      const int slot = first + u * kThreads + tid;
      pair[u] = slot < nslots ? pair_of(slot >> 5) : 0;
      const std::int64_t base = pair[u] * S;  // partial (pair, split 0)
      const float4* o4 = reinterpret_cast<const float4*>(p.o_partial + base * 128) + (slot & 31);
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s) {
        const bool ld = slot < nslots && s < S;
        ls[u][s] = ld ? __ldcg(p.lse_partial + base + s) : -INFINITY;
        os[u][s] = ld ? __ldcg(o4 + s * 32) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    }
#pragma unroll
    for (int u = 0; u < kPass; ++u) {
      const int slot = first + u * kThreads + tid;
      if (slot >= nslots) continue;
      float M = -INFINITY;
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s) M = fmaxf(M, ls[u][s]);
      float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      float lse_v = -INFINITY;
      if (M != -INFINITY) {
        float W = 0.0f;
#pragma unroll
        for (int s = 0; s < kMaxSplits; ++s) {
          if (s >= S) break;
          const float w = expf(ls[u][s] - M);
          W += w;
          acc.x += w * os[u][s].x;
          acc.y += w * os[u][s].y;
          acc.z += w * os[u][s].z;
          acc.w += w * os[u][s].w;
        }
        acc = make_float4(acc.x / W, acc.y / W, acc.z / W, acc.w / W);
        lse_v = M + logf(W);
      }
      const long long qrow = pair[u] / p.num_q_heads;
      const int h = static_cast<int>(pair[u] % p.num_q_heads), d = (slot & 31) * 4;
      std::uint16_t* out = p.out + qrow * p.out_row_stride + h * p.out_head_stride + d;
      reinterpret_cast<__nv_bfloat162*>(out)[0] = __floats2bfloat162_rn(acc.x * p.v_global, acc.y * p.v_global);
      reinterpret_cast<__nv_bfloat162*>(out)[1] = __floats2bfloat162_rn(acc.z * p.v_global, acc.w * p.v_global);
      if (d == 0 && p.lse != nullptr) p.lse[qrow * p.lse_row_stride + h * p.lse_head_stride] = lse_v;
    }
  }
}

// One CTA = (block of R consecutive query rows of the flattened batch, KV head g, KV
// split). Tile rows: r -> query row q0 + r / G, head g*G + r % G (R*G <= ROWS, R <= 32).
// The CTA stages each page of the union of its rows' selections once (keyed by
// (request, logical page), sorted); warpgroup w owns tile rows [64w, 64w+64) and every
// token of the page (wgmma), so each row runs its own online softmax with no
// cross-warpgroup merge. FMT selects the page format; the FP8 formats take an E4M3 query.
template <int FMT, bool QK16, int ROWS>
__global__ void __launch_bounds__(Layout<FMT, QK16, ROWS>::kThreads, 1)
    sparse_attention_kernel(const DecodeParams p, bool fold_merge) {
  using L = Layout<FMT, QK16, ROWS>;
  using Page = typename L::Page;
  constexpr bool FP8P = FMT != kBf16;
  constexpr int kThreads = L::kThreads;
  constexpr int kQRow = Page::kQRow;
  extern __shared__ unsigned char smem_raw[];
  // PDL (pdl.cuh): launched as a programmatic dependent of whatever ran before on the
  // stream, so nothing global is touched before the wait; the combine kernel may launch
  // right away (it waits for this grid).
  sm90::pdl_wait();
  sm90::pdl_launch_dependents();
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~static_cast<std::uintptr_t>(1023));
  unsigned char* sQ = smem;                  // [ROWS] x kQRow, SW128
  unsigned char* body = smem + L::kQBytes;   // two page stages
  unsigned char* conv = body + 2 * L::kStageBytes;  // converted tiles (FP8 / NVFP4)
  __shared__ long long s_cand[kMaxCand];     // (request << 32) | logical page, -1 invalid
  __shared__ int s_cand_phys[kMaxCand];
  __shared__ unsigned char s_first[kMaxCand];
  __shared__ long long s_key[kMaxCand];      // sorted union
  __shared__ int s_phys[kMaxCand];
  __shared__ int s_valid[kMaxCand];          // tokens of the page below seq_len
  __shared__ unsigned s_mask[kMaxCand];      // bit j: query row q0 + j selected the page
  __shared__ int s_qb[32];
  __shared__ long long s_qpos[32];
  __shared__ int s_count;
  __shared__ int s_last;                     // split merge: this CTA arrived last

  const int G = p.num_q_heads / p.num_kv_heads;
  const int R = p.queries_per_cta;
  const int nqb = (p.num_rows + R - 1) / R;
  const int qb = blockIdx.x % nqb;
  const int g = blockIdx.x / nqb;
  const int split = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, warp = (tid >> 5) & 3;  // warpgroup, warp inside it
  const long long q0 = static_cast<long long>(qb) * R;
  const int nq = static_cast<int>(min(static_cast<long long>(R), p.num_rows - q0));
  const int nrows = nq * G;  // valid tile rows
  const int K = p.topk_k;

  const bool decode = p.cu_seqlens == nullptr;
  // Candidates: slot c = j * 16 + k for query row q0 + j and top-k entry k (< K; slots
  // k >= K stay invalid), so rows and entries come from shifts, not divisions by K.
  constexpr int kE = kMaxTopkEntries;
  const int ncand = nq * kE;
  // D1: entry e of row j (request b at position pos, request length seq_len) is kept when
  // 0 <= e < the request's pages, e <= the row's local page, e < the block-table width and
  // its physical page lies in [0, num_pages); key (b << 32) | e, else -1.
  auto store_candidate = [&](int c, int b, long long pos, long long seq_len, long long e, int phys) {
    const long long req_pages = (seq_len + 127) / 128;
    const bool keep = pos >= 0 && e >= 0 && e < req_pages && e <= pos / 128 && e < p.bt_width && phys >= 0 &&
                      phys < p.num_pages;
    s_cand[c] = keep ? (static_cast<long long>(b) << 32) | e : -1;
    s_cand_phys[c] = phys;
  };
  // Decode: row q0 + j belongs to request (q0 + j) / Q, so nothing waits on seq_lens: the
  // top-k entries and the lengths load together, then the block-table entries right after
  // the top-k entries (read for any 0 <= e < bt_width, always inside the table; the D1
  // checks apply afterwards). Two dependent round trips before the first barrier instead
  // of three (seq_lens, top-k, block table). kPer candidate slots per thread, in registers.
  constexpr int kPer = kMaxCand / kThreads;  // ncand <= 32 * 16 = kMaxCand
  const unsigned Q = static_cast<unsigned>(p.queries_per_request);
  int cand_e[kPer], cand_len[kPer];
  unsigned cand_b[kPer];  // request of the slot's row (rows < num_rows: unsigned arithmetic)
  if (decode) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = tid + i * kThreads;
      cand_e[i] = -1;
      cand_len[i] = 0;
      cand_b[i] = 0;
      if (c < ncand) {
        const unsigned row = static_cast<unsigned>(q0) + (c / kE);
        cand_b[i] = row / Q;
        if (c % kE < K) cand_e[i] = p.topk[row * p.topk_stride[0] + g * p.topk_stride[1] + (c % kE) * p.topk_stride[2]];
        cand_len[i] = p.seq_lens[cand_b[i] * p.seq_lens_stride];
      }
    }
  }
  if (tid == 0) s_count = 0;
  // Q tile (cp.async, first commit group): rows >= nrows zero.
  {
    constexpr int kChunks = 16;  // 16-byte tile chunks per row (BF16 / F16) or 8 (E4M3)
    const unsigned char* qbase = static_cast<const unsigned char*>(p.q);
    for (int c = tid; c < ROWS * kChunks; c += kThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      const bool ok = r < nrows;
      const long long qrow = q0 + (ok ? r / G : 0);
      const std::int64_t off = qrow * p.q_row_stride + (g * G + (ok ? r % G : 0)) * p.q_head_stride;
      if constexpr (QK16) at::load_q_chunk_e4m3_as_f16(sQ, ROWS, r, ch, qbase + off, ok);
      else if (ch < kQRow / 16) at::copy_q_chunk(sQ, ROWS, r, ch, qbase + off * (FP8P ? 1 : 2), ok);
    }
    at::cp_async_commit();
  }
  if (decode) {
    // 1. Candidates (decode), from the registers loaded above.
    int cand_phys[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      cand_phys[i] = -1;
      if (cand_e[i] >= 0 && cand_e[i] < p.bt_width)  // only slots c < ncand, k < K hold e >= 0
        cand_phys[i] = p.block_table[cand_b[i] * p.bt_stride[0] + cand_e[i] * p.bt_stride[1]];
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = tid + i * kThreads;
      if (c >= ncand) continue;
      const unsigned row = static_cast<unsigned>(q0) + (c / kE);
      const long long pos = static_cast<long long>(cand_len[i]) - Q + (row - cand_b[i] * Q);
      store_candidate(c, static_cast<int>(cand_b[i]), pos, cand_len[i], cand_e[i], cand_phys[i]);
      if (c % kE == 0) {  // the row's first slot locates the row
        s_qb[c / kE] = static_cast<int>(cand_b[i]);
        s_qpos[c / kE] = pos;
      }
    }
  } else if (tid < nq) {
    int b;
    long long pos;
    locate_row(p, q0 + tid, &b, &pos);
    s_qb[tid] = b;
    s_qpos[tid] = pos;
  }
  __syncthreads();
  if (!decode) {
    // 1. Candidates (prefill): rows located above.
    for (int c = tid; c < ncand; c += kThreads) {
      const int j = c / kE, k = c % kE;
      const int b = s_qb[j];
      const long long seq_len = p.seq_lens[static_cast<long long>(b) * p.seq_lens_stride];
      const long long e =
          k < K ? p.topk[(q0 + j) * p.topk_stride[0] + g * p.topk_stride[1] + k * p.topk_stride[2]] : -1;
      int phys = -1;
      if (e >= 0 && e < p.bt_width) phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
      store_candidate(c, b, s_qpos[j], seq_len, e, phys);
    }
    __syncthreads();
  }
  // 2. First occurrence of each key.
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = s_cand[c];
    bool first = e >= 0;
    for (int k = 0; k < c && first; ++k) first = s_cand[k] != e;
    s_first[c] = first;
  }
  __syncthreads();
  // 3. Sorted union: rank of a key = number of distinct smaller keys; row masks.
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = s_cand[c];
    if (e < 0) continue;
    int rank = 0;
    for (int k = 0; k < ncand; ++k) rank += (s_first[k] && s_cand[k] < e) ? 1 : 0;
    if (s_first[c]) {
      const int b = static_cast<int>(e >> 32);
      const long long seq_len = p.seq_lens[static_cast<long long>(b) * p.seq_lens_stride];
      s_key[rank] = e;
      s_phys[rank] = s_cand_phys[c];
      s_valid[rank] = static_cast<int>(min(128LL, seq_len - 128 * (e & 0xffffffffLL)));
      s_mask[rank] = 0u;
      atomicAdd(&s_count, 1);
    }
  }
  __syncthreads();
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = s_cand[c];
    if (e < 0) continue;
    int rank = 0;
    for (int k = 0; k < ncand; ++k) rank += (s_first[k] && s_cand[k] < e) ? 1 : 0;
    atomicOr(&s_mask[rank], 1u << (c / kE));
  }
  __syncthreads();

  const int n = s_count;
  const int per = (n + p.num_splits - 1) / p.num_splits;
  const int begin = split * per;
  const int end = min(n, begin + per);
  const float c2 = p.c * kLog2e;

  // This thread's two tile rows (r0 = lane/4, r1 = r0 + 8 of the warp's 16).
  int rj[2], rlast[2];
  long long rlocal[2];
  bool rvalid[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int gr = wg * 64 + warp * 16 + (lane >> 2) + 8 * r;
    rvalid[r] = gr < nrows;
    rj[r] = rvalid[r] ? gr / G : 0;
    const long long pos = s_qpos[rj[r]];
    rlocal[r] = pos >= 0 ? ((static_cast<long long>(s_qb[rj[r]]) << 32) | (pos / 128)) : -2;
    rlast[r] = pos >= 0 ? static_cast<int>(pos % 128) : -1;
    if (pos < 0) rvalid[r] = false;
  }
  // Query rows (bits of s_mask) this warpgroup covers; it skips pages none of them chose.
  const int wg_row0 = wg * 64;
  const bool wg_has_rows = wg_row0 < nrows;
  unsigned wg_bits = 0u;
  if (wg_has_rows) {
    const int j0 = wg_row0 / G, j1 = min(nrows - 1, wg_row0 + 63) / G;
    wg_bits = (j1 >= 31 ? 0xffffffffu : ((1u << (j1 + 1)) - 1u)) & ~((1u << j0) - 1u);
  }

  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  bool o_live = false;  // o holds a value written by a wgmma (else the first PV overwrites)

  auto page_src = [&](int i) {
    at::PageSrc src;
    const int phys = s_phys[i];
    const int eb = FMT == kBf16 ? 2 : 1;
    src.k = static_cast<const std::uint8_t*>(p.k_data) + (phys * p.k_stride[0] + g * p.k_stride[1]) * eb;
    src.v = static_cast<const std::uint8_t*>(p.v_data) + (phys * p.v_stride[0] + g * p.v_stride[1]) * eb;
    src.k_tok = p.k_stride[2] * eb;
    src.v_tok = p.v_stride[2] * eb;
    if (FMT == kNvfp4) {
      src.ks = p.k_scale + phys * p.ks_stride[0] + g * p.ks_stride[1];
      src.vs = p.v_scale + phys * p.vs_stride[0] + g * p.vs_stride[1];
      src.ks_tok = p.ks_stride[2];
      src.vs_tok = p.vs_stride[2];
      src.k_swz = p.k_swizzled;
      src.v_swz = p.v_swizzled;
    }
    return src;
  };

  // Pipeline: each page's K and V are one cp.async group, issued one page ahead (a
  // variant with separate K and V groups and the V conversion overlapping the QK wgmma
  // measured slower on the H200: more barriers per page).
  if (begin < end) {
    at::issue_page_copy<FMT, QK16, kThreads>(page_src(begin), body, s_valid[begin], tid);
    at::cp_async_commit();
    for (int i = begin; i < end; ++i) {
      unsigned char* stage = body + ((i - begin) & 1) * L::kStageBytes;
      if (i + 1 < end)
        at::issue_page_copy<FMT, QK16, kThreads>(page_src(i + 1), body + ((i + 1 - begin) & 1) * L::kStageBytes,
                                                 s_valid[i + 1], tid);
      at::cp_async_commit();
      at::cp_async_wait<1>();
      at::fence_view_async_shared();
      __syncthreads();
      if constexpr (FMT != kBf16) {
        at::convert_page<FMT, QK16, kThreads>(page_src(i), stage, conv, s_valid[i], tid);
        __syncthreads();
      }
      const long long key = s_key[i];
      const unsigned mask = s_mask[i];
      const bool active = wg_has_rows && (mask & wg_bits) != 0u;
      if (active) {
        // S = Q K^T: 64 rows x 128 tokens per warpgroup.
        float s[64];
        at::wg_qk<FMT, QK16>(gm::smem_addr(sQ) + wg_row0 * 128, ROWS * 128, gm::smem_addr(Page::k_tile(stage, conv)),
                             s);
        gm::wait<0>();
        gm::fence_operands(s);
        // Visible tokens of this page for the thread's rows: t <= limit (-1: none).
        int limit[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const bool sees = rvalid[r] && ((mask >> rj[r]) & 1u);
          // Never past the page's valid tokens, whatever the metadata says.
          limit[r] = !sees ? -1 : min(key == rlocal[r] ? rlast[r] : 127, s_valid[i] - 1);
        }
        if (limit[0] < 127 || limit[1] < 127) {  // a local page, a short page or an unselected row
#pragma unroll
          for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
              const int tk = j * 8 + (lane & 3) * 2 + (jj & 1);
              if (tk > limit[jj >> 1]) s[4 * j + jj] = -INFINITY;
            }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int i2 = 0; i2 < 64; ++i2) mx[(i2 >> 1) & 1] = fmaxf(mx[(i2 >> 1) & 1], s[i2]);
        float alpha[2], bias[2];
        at::online_softmax_step<FP8P>(mx, m, l, c2, alpha, bias);
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
          for (int dt = 0; dt < 16; ++dt) {
            o[4 * dt + 2 * r] *= alpha[r];
            o[4 * dt + 2 * r + 1] *= alpha[r];
          }
        // P (masked -> 0) with the unrounded normaliser, then the PV operand: bf16(p) or
        // E4M3_sat(p448) held exactly in f16 (D7).
#pragma unroll
        for (int i2 = 0; i2 < 64; ++i2) {
          const float e = ex2_approx(fmaf(s[i2], c2, bias[(i2 >> 1) & 1]));  // spec 3.4: ex2.approx.ftz
          l[(i2 >> 1) & 1] += e;
          s[i2] = e;
        }
        std::uint32_t pa[8][4];
#pragma unroll
        for (int st = 0; st < 8; ++st) {
          if constexpr (FP8P) {
#pragma unroll
            for (int h = 0; h < 4; ++h) {
              std::uint16_t q8;
              asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(q8) : "f"(s[8 * st + 2 * h + 1]), "f"(s[8 * st + 2 * h]));
              pa[st][h] = gm::e4m3x2_to_f16x2(q8);
            }
          } else {
            gm::bf16_a_from_acc(s, st, pa[st]);
          }
        }
        at::wg_pv<FMT>(pa, gm::smem_addr(Page::v_tile(stage, conv)), o, o_live);
        gm::wait<0>();
        gm::fence_operands(o);
        o_live = true;
      }
      __syncthreads();  // the stage and conv regions are reused next iteration
    }
  }

  at::cp_async_wait<0>();
  // Epilogue: each thread finalises its two rows (quad lanes share a row).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int gr = wg_row0 + warp * 16 + (lane >> 2) + 8 * r;
    if (!wg_has_rows || gr >= nrows) continue;
    const long long qrow = q0 + gr / G;
    const int h = g * G + gr % G;
    const bool empty = m[r] == -INFINITY;
    const float inv = empty ? 0.0f : 1.0f / l[r];
    const float lse_v = empty ? -INFINITY : m[r] * p.c + logf(FP8P ? l[r] / 448.0f : l[r]);
    if (p.num_splits == 1) {
      std::uint16_t* out = p.out + qrow * p.out_row_stride + h * p.out_head_stride;
#pragma unroll
      for (int dt = 0; dt < 16; ++dt) {
        const int d = dt * 8 + (lane & 3) * 2;
        const __nv_bfloat162 v2 = __floats2bfloat162_rn(o[4 * dt + 2 * r] * inv * p.v_global,
                                                        o[4 * dt + 2 * r + 1] * inv * p.v_global);
        *reinterpret_cast<__nv_bfloat162*>(out + d) = v2;
      }
      if ((lane & 3) == 0 && p.lse != nullptr) p.lse[qrow * p.lse_row_stride + h * p.lse_head_stride] = lse_v;
    } else {
      const std::int64_t slot = (qrow * p.num_q_heads + h) * p.num_splits + split;
      float* op = p.o_partial + slot * 128;
#pragma unroll
      for (int dt = 0; dt < 16; ++dt) {
        const int d = dt * 8 + (lane & 3) * 2;
        *reinterpret_cast<float2*>(op + d) = make_float2(o[4 * dt + 2 * r] * inv, o[4 * dt + 2 * r + 1] * inv);
      }
      if ((lane & 3) == 0) p.lse_partial[slot] = lse_v;
    }
  }
  if (p.num_splits == 1 || !fold_merge) return;
  // Split merge, folded in, with the synchronisation of cooperative groups' grid sync
  // (sm_70+): the barrier orders every thread's partial stores before thread 0's
  // release-acquire atomic on the counter of this (query block, KV head); release
  // publishes this CTA's partials, acquire makes the earlier CTAs' partials visible to
  // the last one, and the next barrier hands them to all its threads. inc wraps at
  // num_splits - 1 back to 0: the CTA that reads num_splits - 1 is the last, and the
  // counter is zero again for the next launch or graph replay. The merge reads the
  // partials from L2 (__ldcg: never a stale L1 line).
  __syncthreads();
  if (tid == 0) {
    unsigned prev;
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
                 : "=r"(prev)
                 : "l"(p.split_counters + blockIdx.x), "r"(static_cast<unsigned>(p.num_splits - 1))
                 : "memory");
    s_last = prev == static_cast<unsigned>(p.num_splits - 1);
  }
  __syncthreads();
  if (s_last)
    merge_splits<kThreads>(p, nrows * 32, tid,
                           [&](int r) { return (q0 + r / G) * p.num_q_heads + g * G + r % G; });
}

// Split merge as a kernel of its own, for launches whose per-tile merge is too big for one
// CTA (launch_rows): kCombinePairs (row, head) pairs per CTA of 128 threads (one pass).
constexpr int kCombinePairs = 8;
__global__ void __launch_bounds__(128) sparse_attention_combine(const DecodeParams p) {
  sm90::pdl_wait();  // the attention grid's partials (pdl.cuh)
  const long long first = static_cast<long long>(blockIdx.x) * kCombinePairs;
  const long long pairs = static_cast<long long>(p.num_rows) * p.num_q_heads;
  const int n = static_cast<int>(min(static_cast<long long>(kCombinePairs), pairs - first));
  merge_splits<128>(p, n * 32, threadIdx.x, [&](int r) { return first + r; });
}

// Benchmark hook FLASHMSA_DECODE_MERGE=combine: every split merge in the combine kernel
// (to compare with the folded merge); logged once.
bool merge_in_combine_kernel() {
  static const bool on = [] {
    const char* v = std::getenv("FLASHMSA_DECODE_MERGE");
    const bool combine = v != nullptr && std::strcmp(v, "combine") == 0;
    if (combine) std::fprintf(stderr, "flashmsa: FLASHMSA_DECODE_MERGE=combine: split merges in the combine kernel\n");
    return combine;
  }();
  return on;
}

template <int FMT, bool QK16, int ROWS>
cudaError_t launch_rows(const DecodeParams& p, cudaStream_t stream) {
  using L = Layout<FMT, QK16, ROWS>;
  constexpr int smem = L::kSmemBytes;
  // The shared-memory opt-in is per device: set it once per device ordinal (retried
  // after a failure).
  static bool configured[64] = {};
  int dev = 0;
  cudaError_t err0 = cudaGetDevice(&dev);
  if (err0 != cudaSuccess) return err0;
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    err0 = cudaFuncSetAttribute(sparse_attention_kernel<FMT, QK16, ROWS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                smem);
    if (err0 != cudaSuccess) return err0;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  const long long nqb = (static_cast<long long>(p.num_rows) + p.queries_per_cta - 1) / p.queries_per_cta;
  dim3 grid(static_cast<unsigned>(nqb * p.num_kv_heads), p.num_splits);
  // Split merge: folded into the attention kernel (the last CTA of each (query block, KV
  // head) merges its tile) unless that CTA would read more than kFoldMaxRowSplits
  // (tile row, split) partials (516 bytes each, from L2 on one SM); then the combine
  // kernel spreads the merge over the GPU.
  const bool fold = p.num_splits <= kFoldMaxSplits &&
                    p.queries_per_cta * (p.num_q_heads / p.num_kv_heads) * p.num_splits <= kFoldMaxRowSplits &&
                    !merge_in_combine_kernel();
  // Both kernels are programmatic dependents of their predecessor (pdl.cuh): their launch
  // overlaps the previous kernel's tail.
  cudaError_t err = sm90::launch_pdl(sparse_attention_kernel<FMT, QK16, ROWS>, grid, dim3(L::kThreads), smem, stream,
                                     true, p, fold);
  if (err != cudaSuccess || p.num_splits == 1 || fold) return err;
  return static_cast<cudaError_t>(launch_split_combine(p, stream));
}

template <int FMT, bool QK16>
cudaError_t launch(const DecodeParams& p, cudaStream_t stream) {
  const int G = p.num_q_heads / p.num_kv_heads;
  return p.queries_per_cta * G > 64 ? launch_rows<FMT, QK16, 128>(p, stream) : launch_rows<FMT, QK16, 64>(p, stream);
}

}  // namespace

int launch_split_combine(const DecodeParams& p, void* stream) {
  const long long pairs = static_cast<long long>(p.num_rows) * p.num_q_heads;
  return sm90::launch_pdl(sparse_attention_combine, dim3(static_cast<unsigned>((pairs + kCombinePairs - 1) / kCombinePairs)),
                          dim3(128), 0, static_cast<cudaStream_t>(stream), true, p);
}

bool fp8_qk_on_e4m3_mma() {
  static const bool on = [] {
    const char* v = std::getenv("FLASHMSA_FP8_QK");
    const bool e4m3 = v != nullptr && std::strcmp(v, "e4m3") == 0;
    if (e4m3)
      std::fprintf(stderr, "flashmsa: FLASHMSA_FP8_QK=e4m3: FP8 attention runs Q K^T on E4M3 wgmma "
                           "(reduced-precision accumulation, outside spec D7)\n");
    return e4m3;
  }();
  return on;
}

int queries_per_cta(bool prefill, int queries_per_request, int group) {
  const int fit = 128 / group;  // query rows whose G heads fill a 128-row tile
  if (!prefill && queries_per_request <= fit) return queries_per_request;  // one request per CTA
  return fit < 32 ? fit : 32;
}

int launch_sparse_attention(const DecodeParams& p, int kv_format, bool q_is_e4m3, void* stream) {
  if (p.num_rows == 0) return 0;
  const int G = p.num_q_heads / p.num_kv_heads;
  if (p.queries_per_cta < 1 || p.queries_per_cta > 32 || p.queries_per_cta * G > 128)
    return cudaErrorInvalidValue;
  if (p.num_splits < 1 || p.num_splits > kMaxSplits ||
      (p.num_splits > 1 && (p.o_partial == nullptr || p.lse_partial == nullptr || p.split_counters == nullptr)))
    return cudaErrorInvalidValue;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (kv_format) {
    case kBf16: return q_is_e4m3 ? cudaErrorInvalidValue : launch<kBf16, false>(p, s);
    case kFp8:
      if (!q_is_e4m3) return cudaErrorInvalidValue;
      return fp8_qk_on_e4m3_mma() ? launch<kFp8, false>(p, s) : launch<kFp8, true>(p, s);
    case kNvfp4:
      if (!q_is_e4m3) return cudaErrorInvalidValue;
      return fp8_qk_on_e4m3_mma() ? launch<kNvfp4, false>(p, s) : launch<kNvfp4, true>(p, s);
    default: return cudaErrorInvalidValue;
  }
}

int choose_num_splits(long long num_rows, int queries_per_cta, int num_kv_heads, int num_sms) {
  const long long ctas = (num_rows + queries_per_cta - 1) / queries_per_cta * num_kv_heads;
  if (ctas <= 0) return 1;
  if (ctas * kMaxSplits <= num_sms) return kMaxSplits;  // one page per CTA, still one wave
  long long splits = (num_sms + ctas - 1) / ctas;       // one CTA per SM: fill one wave
  if (splits < 1) splits = 1;
  if (splits > 8) splits = 8;  // >= 2 pages per split for a full top-16 row
  return static_cast<int>(splits);
}

namespace {
// FLASHMSA_DECODE_KERNEL=warp_mma|tile replaces the kernel heuristic of
// choose_decode_schedule (benchmarks, and the GPU tests that run every shape on both
// kernels). Read at every plan (host side, outside graph capture); logged once per value.
// 0: not set, 1: warp_mma (token split), 2: tile, 3: warp_mma_dsplit.
int forced_decode_kernel() {
  static std::atomic<int> logged{0};
  const char* v = std::getenv("FLASHMSA_DECODE_KERNEL");
  int r = 0;
  if (v != nullptr && std::strcmp(v, "warp_mma") == 0) r = 1;
  if (v != nullptr && std::strcmp(v, "tile") == 0) r = 2;
  if (v != nullptr && std::strcmp(v, "warp_mma_dsplit") == 0) r = 3;
  if (r != 0 && logged.exchange(r) != r)
    std::fprintf(stderr, "flashmsa: FLASHMSA_DECODE_KERNEL=%s: decode plans use that kernel\n", v);
  return r;
}
}  // namespace

bool warp_mma_dims_split(int num_splits, bool bf16) { return num_splits == 16 || (num_splits == 8 && bf16); }

DecodeSchedule choose_decode_schedule(int batch, int queries_per_request, int num_q_heads, int num_kv_heads,
                                      int num_sms, bool bf16) {
  DecodeSchedule s;
  const long long rows = static_cast<long long>(batch) * queries_per_request;
  const long long row_ctas = rows * num_kv_heads;  // warp-MMA kernel CTAs before splitting
  const int forced = forced_decode_kernel();
  s.warp_mma = forced == 1 || forced == 3 || (forced == 0 && (row_ctas <= num_sms || queries_per_request == 1));
  s.kernel_forced = forced != 0;
  if (s.warp_mma) {
    s.queries_per_cta = 1;
    long long splits = row_ctas > 0 ? num_sms / row_ctas : 1;
    splits = splits < 1 ? 1 : (splits > kMaxSplits ? kMaxSplits : splits);
    const long long per = (kMaxTopkEntries + splits - 1) / splits;  // pages per split of a full row
    s.num_splits = static_cast<int>((kMaxTopkEntries + per - 1) / per);  // no split left without pages
    s.dims_split = forced == 3 || (forced == 0 && warp_mma_dims_split(s.num_splits, bf16));
  } else {
    s.queries_per_cta = queries_per_cta(false, queries_per_request, num_q_heads / num_kv_heads);
    s.num_splits = choose_num_splits(rows, s.queries_per_cta, num_kv_heads, num_sms);
  }
  return s;
}

std::int64_t decode_workspace_floats(int num_rows, int num_q_heads, int num_kv_heads, int queries_per_cta,
                                     int num_splits) {
  if (num_splits <= 1) return 0;
  const std::int64_t nqb = (static_cast<std::int64_t>(num_rows) + queries_per_cta - 1) / queries_per_cta;
  return static_cast<std::int64_t>(num_rows) * num_q_heads * num_splits * 129  // o_partial, lse_partial
         + nqb * num_kv_heads;                                                 // split counters (i32)
}

int device_malloc(void** ptr, std::int64_t bytes) {
  return cudaMalloc(ptr, static_cast<size_t>(bytes));
}
int device_free(void* ptr) { return ptr ? cudaFree(ptr) : 0; }
int device_zero(void* ptr, std::int64_t bytes) {
  // cudaMemset runs on the default stream, which non-blocking streams do not wait for.
  const cudaError_t e = cudaMemset(ptr, 0, static_cast<size_t>(bytes));
  return e != cudaSuccess ? e : cudaStreamSynchronize(nullptr);
}
int device_ordinal(int* ordinal) { return cudaGetDevice(ordinal); }
int device_sm_count(int* count) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  return cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, dev);
}
const char* error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }
bool is_out_of_memory(int err) { return err == static_cast<int>(cudaErrorMemoryAllocation); }

}  // namespace flashmsa::cuda

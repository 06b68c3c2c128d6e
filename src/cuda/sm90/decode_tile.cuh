// The query-outer tile kernels' shared pieces (decode_attention.cu): the page union of a
// CTA's query rows, the per-row state, one page's Q K^T + softmax, the row epilogue and
// the split merge. Spec 3.1-3.4, 3.6, D1, D4-D7; design in decode_attention.h.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "cuda/sm90/attn_tile.cuh"
#include "cuda/sm90/decode_attention.h"

namespace flashmsa::cuda::decode_tile {

namespace at = ::flashmsa::cuda::sm90::attn;
namespace gm = ::flashmsa::cuda::sm90::gmma;

constexpr int kMaxTopkEntries = 16;
constexpr int kMaxSplits = 16;                    // choose_num_splits never returns more
constexpr int kMaxCand = 32 * kMaxTopkEntries;    // drafts x top-k entries of one CTA

// Prefill query row -> (request b, position p) (D4): the last b with cu[b] <= row, at
// p = seq_len - q_len + (row - cu[b]). Never reads outside [0, batch). (Decode rows
// b*Q + j at p = seq_len - Q + j are located in build_page_union.)
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

/// What one CTA of a tile kernel covers: blockIdx.x = query block qb + nqb x KV head g,
/// blockIdx.y = KV split; query rows [q0, q0 + nq), tile rows nq x G (row r = query row
/// q0 + r / G, head g G + r % G).
struct CtaTile {
  int G;         // query heads per KV head
  int g;         // KV head
  int split;     // KV split
  long long q0;  // first query row of the flattened batch
  int nq;        // query rows (<= queries_per_cta)
  int nrows;     // valid tile rows, nq x G
};

__device__ __forceinline__ CtaTile cta_tile(const DecodeParams& p) {
  CtaTile t;
  t.G = p.num_q_heads / p.num_kv_heads;
  const int R = p.queries_per_cta;
  const int nqb = (p.num_rows + R - 1) / R;
  t.g = static_cast<int>(blockIdx.x) / nqb;
  t.split = static_cast<int>(blockIdx.y);
  t.q0 = static_cast<long long>(static_cast<int>(blockIdx.x) % nqb) * R;
  t.nq = static_cast<int>(min(static_cast<long long>(R), p.num_rows - t.q0));
  t.nrows = t.nq * t.G;
  return t;
}

/// The page union of one CTA (static shared memory): its rows' valid top-k candidates,
/// then the sorted union of distinct (request, logical page) keys with, per union page,
/// its physical page, valid tokens and the bit mask of query rows that selected it.
struct UnionSmem {
  long long cand[kMaxCand];     // (request << 32) | logical page, -1 invalid
  int cand_phys[kMaxCand];
  int cand_valid[kMaxCand];     // tokens of the candidate page below seq_len (kept ones)
  long long dkey[kMaxCand];     // the key at its first occurrence, else LLONG_MAX
  long long key[kMaxCand];      // sorted union
  int phys[kMaxCand];
  int valid[kMaxCand];          // tokens of the page below seq_len
  unsigned mask[kMaxCand];      // bit j: query row q0 + j selected the page
  int qb[32];                   // request of query row q0 + j
  long long qpos[32];           // its position (-1 and below: a padding row)
  int count;                    // union pages
};

/// Builds `u` for query rows [q0, q0 + nq) and KV head g, with all kThreads threads of
/// the CTA (CTA barriers inside; ends with one). `q_issue()` issues the Q tile's loads
/// where they overlap the metadata round trips, and `q_finish()` (before the first
/// barrier) stores what they loaded.
template <int kThreads, class QIssue, class QFinish>
__device__ __forceinline__ void build_page_union(const DecodeParams& p, UnionSmem& u, long long q0, int nq, int g,
                                                 int tid, QIssue q_issue, QFinish q_finish) {
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
    u.cand[c] = keep ? (static_cast<long long>(b) << 32) | e : -1;
    u.cand_phys[c] = phys;
    u.cand_valid[c] = static_cast<int>(min(128LL, seq_len - 128 * e));
  };
  // Decode: row q0 + j belongs to request (q0 + j) / Q, so nothing waits on seq_lens: the
  // top-k entries and the lengths load together, then the block-table entries right after
  // the top-k entries (read for any 0 <= e < bt_width, always inside the table; the D1
  // checks apply afterwards). Two dependent round trips before the first barrier instead
  // of three (seq_lens, top-k, block table). kPer candidate slots per thread, in registers.
  constexpr int kPer = (kMaxCand + kThreads - 1) / kThreads;  // ncand <= 32 * 16 = kMaxCand
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
  if (tid == 0) u.count = 0;
  q_issue();  // the Q tile: its loads overlap the candidates' round trips
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
        u.qb[c / kE] = static_cast<int>(cand_b[i]);
        u.qpos[c / kE] = pos;
      }
    }
  } else if (tid < nq) {
    int b;
    long long pos;
    locate_row(p, q0 + tid, &b, &pos);
    u.qb[tid] = b;
    u.qpos[tid] = pos;
  }
  q_finish();
  __syncthreads();
  if (!decode) {
    // 1. Candidates (prefill): rows located above.
    for (int c = tid; c < ncand; c += kThreads) {
      const int j = c / kE, k = c % kE;
      const int b = u.qb[j];
      const long long seq_len = p.seq_lens[static_cast<long long>(b) * p.seq_lens_stride];
      const long long e =
          k < K ? p.topk[(q0 + j) * p.topk_stride[0] + g * p.topk_stride[1] + k * p.topk_stride[2]] : -1;
      int phys = -1;
      if (e >= 0 && e < p.bt_width) phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
      store_candidate(c, b, u.qpos[j], seq_len, e, phys);
    }
    __syncthreads();
  }
  // 2. First occurrence of each key: dkey[c] = its key, or LLONG_MAX for invalid slots and
  // repeats; the masks of every union slot start at zero. No early exit, so the loop
  // unrolls (the union passes were a fifth of the warp-specialised kernel's stall samples
  // at b128 x 10K, ncu, session 32).
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = u.cand[c];
    bool first = e >= 0;
#pragma unroll 8
    for (int k = 0; k < c; ++k) first &= u.cand[k] != e;
    u.dkey[c] = first ? e : LLONG_MAX;
    u.mask[c] = 0u;
  }
  __syncthreads();
  // 3. Sorted union: rank of a key = number of distinct smaller keys; the first
  // occurrence stores the page, every occurrence sets its query row's bit.
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = u.cand[c];
    if (e < 0) continue;
    int rank = 0;
#pragma unroll 8
    for (int k = 0; k < ncand; ++k) rank += u.dkey[k] < e ? 1 : 0;
    if (u.dkey[c] == e) {
      u.key[rank] = e;
      u.phys[rank] = u.cand_phys[c];
      u.valid[rank] = u.cand_valid[c];
      atomicAdd(&u.count, 1);
    }
    atomicOr(&u.mask[rank], 1u << (c / kE));
  }
  __syncthreads();
}

/// A thread's two accumulator rows (r0 = lane/4, r1 = r0 + 8 of its warp's 16) of the
/// warpgroup owning tile rows [row0, row0 + 64), and which query rows the warpgroup covers.
struct RowState {
  int rj[2], rlast[2];   // query row in the CTA; causal limit inside the local page
  long long rlocal[2];   // (request << 32) | local page, -2 for a padding row
  bool rvalid[2];
  bool has_rows;         // the warpgroup has valid tile rows
  unsigned bits;         // query rows (bits of UnionSmem::mask) it covers
};

__device__ __forceinline__ RowState row_state(const UnionSmem& u, int row0, int warp, int lane, int nrows, int G) {
  RowState s;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int gr = row0 + warp * 16 + (lane >> 2) + 8 * r;
    s.rvalid[r] = gr < nrows;
    s.rj[r] = s.rvalid[r] ? gr / G : 0;
    const long long pos = u.qpos[s.rj[r]];
    s.rlocal[r] = pos >= 0 ? ((static_cast<long long>(u.qb[s.rj[r]]) << 32) | (pos / 128)) : -2;
    s.rlast[r] = pos >= 0 ? static_cast<int>(pos % 128) : -1;
    if (pos < 0) s.rvalid[r] = false;
  }
  s.has_rows = row0 < nrows;
  s.bits = 0u;
  if (s.has_rows) {
    const int j0 = row0 / G, j1 = min(nrows - 1, row0 + 63) / G;
    s.bits = (j1 >= 31 ? 0xffffffffu : ((1u << (j1 + 1)) - 1u)) & ~((1u << j0) - 1u);
  }
  return s;
}

/// Where union page i lives in global memory for KV head g.
template <int FMT>
__device__ __forceinline__ at::PageSrc page_src(const DecodeParams& p, const UnionSmem& u, int i, int g) {
  at::PageSrc src;
  const int phys = u.phys[i];
  const int eb = FMT == at::kBf16 ? 2 : 1;
  src.k = static_cast<const std::uint8_t*>(p.k_data) + (phys * p.k_stride[0] + g * p.k_stride[1]) * eb;
  src.v = static_cast<const std::uint8_t*>(p.v_data) + (phys * p.v_stride[0] + g * p.v_stride[1]) * eb;
  src.k_tok = p.k_stride[2] * eb;
  src.v_tok = p.v_stride[2] * eb;
  if (FMT == at::kNvfp4) {
    src.ks = p.k_scale + phys * p.ks_stride[0] + g * p.ks_stride[1];
    src.vs = p.v_scale + phys * p.vs_stride[0] + g * p.vs_stride[1];
    src.ks_tok = p.ks_stride[2];
    src.vs_tok = p.vs_stride[2];
    src.k_swz = p.k_swizzled;
    src.v_swz = p.v_swizzled;
  }
  return src;
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

/// The online-softmax step of one page on the warpgroup's raw scores s (64 rows x 128
/// tokens, wgmma accumulator layout): masks tokens beyond each row's limit (a row that did
/// not select the page, the causal limit in the local page, the page's valid tokens),
/// updates the running max m and sum l (l rescaled by alpha, then the page's unrounded
/// probabilities added), and leaves in s the probabilities p = 2^(c2 s + bias) (p448 for
/// the FP8 formats). The caller rescales O by alpha (rescale_o) and forms the P V operand
/// (p_operand). Spec 3.4.
template <bool FP8P>
__device__ __forceinline__ void softmax_page(float (&s)[64], const RowState& rs, long long key, unsigned mask,
                                             int valid, int lane, float c2, float (&m)[2], float (&l)[2],
                                             float (&alpha)[2]) {
  // Visible tokens of this page for the thread's rows: t <= limit (-1: none).
  int limit[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool sees = rs.rvalid[r] && ((mask >> rs.rj[r]) & 1u);
    // Never past the page's valid tokens, whatever the metadata says.
    limit[r] = !sees ? -1 : min(key == rs.rlocal[r] ? rs.rlast[r] : 127, valid - 1);
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
  float bias[2];
  at::online_softmax_step<FP8P>(mx, m, l, c2, alpha, bias);
  // P (masked -> 0) with the unrounded normaliser.
#pragma unroll
  for (int i2 = 0; i2 < 64; ++i2) {
    const float e = at::ex2_approx(fmaf(s[i2], c2, bias[(i2 >> 1) & 1]));  // spec 3.4: ex2.approx.ftz
    l[(i2 >> 1) & 1] += e;
    s[i2] = e;
  }
}

/// O *= alpha per row (after every P V wgmma writing o has completed).
__device__ __forceinline__ void rescale_o(float (&o)[64], const float (&alpha)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int dt = 0; dt < 16; ++dt) {
      o[4 * dt + 2 * r] *= alpha[r];
      o[4 * dt + 2 * r + 1] *= alpha[r];
    }
}

/// The P V operand from the probabilities: bf16(p), or E4M3_sat(p448) held exactly in F16
/// (D7).
template <bool FP8P>
__device__ __forceinline__ void p_operand(const float (&s)[64], std::uint32_t (&pa)[8][4]) {
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
}

/// One page's S = Q K^T (issued and waited here) and softmax step for the warpgroup of
/// `rs`: softmax_page, O rescaled, the P V operand in pa. `q_addr` / `q_panel` / `k_addr`:
/// as at::wg_qk.
template <int FMT, bool QK16>
__device__ __forceinline__ void qk_softmax(std::uint32_t q_addr, std::uint32_t q_panel, std::uint32_t k_addr,
                                           const RowState& rs, long long key, unsigned mask, int valid, int lane,
                                           float c2, float (&m)[2], float (&l)[2], float (&o)[64],
                                           std::uint32_t (&pa)[8][4]) {
  constexpr bool FP8P = FMT != at::kBf16;
  float s[64];  // S = Q K^T: 64 rows x 128 tokens per warpgroup
  at::wg_qk<FMT, QK16>(q_addr, q_panel, k_addr, s);
  gm::wait<0>();
  gm::fence_operands(s);
  float alpha[2];
  softmax_page<FP8P>(s, rs, key, mask, valid, lane, c2, m, l, alpha);
  rescale_o(o, alpha);
  p_operand<FP8P>(s, pa);
}

/// Row epilogue of the warpgroup owning tile rows [row0, row0 + 64): each thread
/// finalises its two rows (quad lanes share a row) into the output and LSE (one split)
/// or into its split's partial (O normalised by its own sum, LSE; -inf where empty, D5).
template <bool FP8P>
__device__ __forceinline__ void store_rows(const DecodeParams& p, const float (&o)[64], const float (&m)[2],
                                           float (&l)[2], long long q0, int g, int G, int row0, int warp, int lane,
                                           int nrows, int split) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int gr = row0 + warp * 16 + (lane >> 2) + 8 * r;
    if (row0 >= nrows || gr >= nrows) continue;
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
}

}  // namespace flashmsa::cuda::decode_tile

// SM90 sparse decode for small batches: one CTA per (query row, KV head, KV split), the
// G query heads of the KV head as the M = 16 side of warp-level mma.sync (spec 3.1-3.4,
// D1, D4-D7). See decode_attention.h (launch_sparse_attention_warp_mma) for when the
// plan picks it.
//
// Why a second decode kernel: at batch 1-4 with one query per request the wgmma tile
// kernel (decode_attention.cu) pads 16 rows to 64, stages whole pages through a shared
// tile with a CTA barrier per step and builds a sorted page union; measured on the H200
// it took 13.7 us for b1 Q1 4K (BF16) where a plain Triton split-KV kernel took 7.0 us
// (bench/triton_decode_peer.py, same run). Here nothing waits on a CTA barrier between
// the metadata and the end of the page loop:
//   - warp 0 reads the row's top-k entries and length (one round trip), drops invalid
//     and duplicate entries (D1, __match_any_sync), ranks the valid ones, and reads the
//     block-table entries of this split's share (the second round trip);
//   - warp w (of 8) owns tokens [16w, 16w + 16) of every page of the split: each thread
//     cp.asyncs exactly the K and V bytes its own MMA fragments need into a private
//     two-stage ring (slots [stage][chunk][thread], 16 bytes each: no bank conflicts and
//     no barrier, a thread waits only on its own copies), so page i + 1 is in flight
//     while page i computes;
//   - S(16 x 16) = Q K^T and O(16 x 128) += P V with m16n8k16 (BF16, or F16 on the exact
//     images of E4M3 / E4M3_sat(e2m1 x scale) values: spec D7's FP32 accumulation), an
//     online softmax per warp, then one merge of the 8 warps through shared memory.
// With several splits the split CTAs of a (row, KV head) merge inside their thread-block
// cluster through distributed shared memory when the plan found that every cluster of
// the launch fits on the GPU at once (DecodeParams::cluster_merge); otherwise each CTA
// writes its (O, LSE) partial and the combine kernel of decode_attention.cu merges them
// (launched as a programmatic dependent).
//
// Fragment layouts (thread = (g, c) = (lane / 4, lane % 4)). The reduction dimension of
// each MMA may be permuted freely as long as both operands agree, and so may the output
// columns; the permutations below give every thread contiguous bytes to load:
//   Q K^T: logical k = 2c + e + 8h of k-step kk is head dim 32c + 4kk + 2h + e, so a
//          thread's Q rows (g, g + 8) and K tokens cover dims [32c, 32c + 32);
//          n = token 16w + 8nt + g.
//   P V:   k = token 16w + 8h + 2c + e (the S accumulator layout, no shuffle);
//          n-tile nt, column n = head dim 16n + nt, so a thread's V tokens cover dims
//          [16g, 16g + 16) and its O accumulators dims 32c + 16e + nt.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <atomic>
#include <mutex>
#ifdef FLASHMSA_WMMA_TRACE
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#endif

#include <cooperative_groups.h>
#include <cute/arch/mma_sm80.hpp>

#include "cuda/sm90/attn_tile.cuh"
#include "cuda/sm90/decode_attention.h"
#include "cuda/sm90/gmma.cuh"
#include "cuda/sm90/pdl.cuh"

namespace flashmsa::cuda {
namespace {

namespace at = ::flashmsa::cuda::sm90::attn;
namespace gm = ::flashmsa::cuda::sm90::gmma;
namespace cg = ::cooperative_groups;
using at::ex2_approx;
using at::kLog2e;
using at::kLog2_448;
using gm::f16x2_pair;

constexpr int kWarps = 8;              // 16 tokens of each page per warp
constexpr int kThreads = kWarps * 32;
constexpr int kStages = 2;             // per-thread cp.async ring: page i + 1 lands while page i computes
constexpr int kMergeRow = 132;         // floats per (warp, row) in the merge buffer (padded)
constexpr int kMaxClusterSplits = 16;  // splits merged through a thread-block cluster
static_assert(kStages == 2, "the page loop prefetches exactly one page ahead (issue(i + 1), wait_group 1)");

// 16-byte ring slots one thread fills per page: K then V.
template <int FMT>
struct Slots {
  // K: 2 tokens x dims [32c, 32c + 32): BF16 64 B, E4M3 32 B, NVFP4 16 B of codes.
  static constexpr int kK = FMT == at::kBf16 ? 8 : (FMT == at::kFp8 ? 4 : 2);
  // V: 4 tokens x dims [16g, 16g + 16): BF16 32 B, E4M3 16 B, NVFP4 8 B (half a slot).
  static constexpr int kV = FMT == at::kBf16 ? 8 : 4;
  static constexpr int kAll = kK + kV;
  static constexpr int kRingBytes = kStages * kAll * kThreads * 16;
  static constexpr int kMergeBytes = kWarps * 16 * kMergeRow * 4;
  static constexpr int kSmem = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;
};

// cp.async through L1 (.ca): measured on the H200 (b1 Q1 4K BF16, cluster merge)
// 10.2 us against 11.9 us with .cg.
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(gm::smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async8_zfill(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(gm::smem_addr(dst)), "l"(src),
               "r"(valid ? 8 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit_mem() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// cp.async.wait_group with a compiler barrier: the ring reads that follow stay after it.
template <int N>
__device__ __forceinline__ void cp_async_wait_mem() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
using gm::prmt;

// mma.sync m16n8k16, FP32 accumulate: BF16 operands, or F16 (exact images of E4M3).
template <bool kF16>
__device__ __forceinline__ void mma16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  if constexpr (kF16)
    cute::SM80_16x8x16_F32F16F16F32_TN::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b0, b1, d[0], d[1],
                                            d[2], d[3]);
  else
    cute::SM80_16x8x16_F32BF16BF16F32_TN::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b0, b1, d[0], d[1],
                                              d[2], d[3]);
}

// P (A, F16) times V for two n8 blocks from E4M3 bytes: `lo` holds the B fragment's
// tokens of k rows 0-7, `hi` those of rows 8-15; bytes 0-1 of each belong to the block
// accumulated in d0, bytes 2-3 to the block in d1.
__device__ __forceinline__ void mma16816_e4m3_b2(float (&d0)[4], float (&d1)[4], const std::uint32_t (&a)[4],
                                                 std::uint32_t lo, std::uint32_t hi) {
  std::uint32_t b0[2], b1[2];  // f16x2 of bytes 0-1 / 2-3 of lo and hi
  f16x2_pair(lo, b0[0], b1[0]);
  f16x2_pair(hi, b0[1], b1[1]);
  mma16816<true>(d0, a, b0[0], b0[1]);
  mma16816<true>(d1, a, b1[0], b1[1]);
}

// Warp 0 of a CTA: the row's top-k entries and length (one round trip), invalid and
// duplicate entries dropped (D1, __match_any_sync), the valid ones ranked, and this
// split's share of them resolved through the block table (the second round trip):
// s_phys[i] / s_limit[i] (last visible token, -1: unmapped page) for i < *s_n.
__device__ __forceinline__ void resolve_split_pages(const DecodeParams& p, long long row, int kv, int split, int lane,
                                                    int* s_phys, int* s_limit, int* s_n) {
  const int Q = p.queries_per_request;
  const long long b = row / Q;
  const long long seq_len = p.seq_lens[b * p.seq_lens_stride];
  const long long pos = seq_len - Q + row % Q;  // D4
  int e = -1;
  if (lane < p.topk_k) e = p.topk[row * p.topk_stride[0] + kv * p.topk_stride[1] + lane * p.topk_stride[2]];
  // D1: 0 <= e < the request's pages, e <= the local page, inside the block table.
  bool ok = pos >= 0 && e >= 0 && e < (seq_len + 127) / 128 && e <= pos / 128 && e < p.bt_width;
  // Duplicates count once: the first lane holding each valid entry keeps it.
  const unsigned same = __match_any_sync(0xffffffffu, ok ? e : -1 - lane);
  ok = ok && (__ffs(same) - 1) == lane;
  const unsigned valid = __ballot_sync(0xffffffffu, ok);
  const int n = __popc(valid), rank = __popc(valid & ((1u << lane) - 1u));
  const int per = (n + p.num_splits - 1) / p.num_splits;
  const int first = split * per;
  const int mine = max(0, min(n, first + per) - first);
  if (ok && rank >= first && rank < first + per) {
    const int phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
    const bool live = phys >= 0 && phys < p.num_pages;
    s_phys[rank - first] = live ? phys : 0;
    // Last visible token: the causal limit on the local page, never past seq_len.
    s_limit[rank - first] = live ? static_cast<int>(min(127LL, pos - 128LL * e)) : -1;
  }
  if (lane == 0) *s_n = mine;
}

// Q fragments of rows g, g + 8 (heads kv*G + r; rows >= G are zero), F16 or BF16 pairs:
// word j of a row holds dims 32c + 2j, +1; qa[kk] is the A fragment of k-step kk.
template <bool kFp8P>
__device__ __forceinline__ void load_q_fragments(const DecodeParams& p, long long row, int kv, int G, int g, int c,
                                                 std::uint32_t (&qa)[8][4]) {
  std::uint32_t qw[2][16];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int hr = g + 8 * r;
    const bool live = hr < G;
    const long long off = row * p.q_row_stride + static_cast<long long>(kv * G + (live ? hr : 0)) * p.q_head_stride;
    if constexpr (!kFp8P) {
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.q) + off + 32 * c);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint4 v = live ? __ldg(src + i) : make_uint4(0u, 0u, 0u, 0u);
        qw[r][4 * i] = v.x; qw[r][4 * i + 1] = v.y; qw[r][4 * i + 2] = v.z; qw[r][4 * i + 3] = v.w;
      }
    } else {
      const uint4* src = reinterpret_cast<const uint4*>(static_cast<const std::uint8_t*>(p.q) + off + 32 * c);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint4 v = live ? __ldg(src + i) : make_uint4(0u, 0u, 0u, 0u);
        const std::uint32_t x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          f16x2_pair(x[k], qw[r][8 * i + 2 * k], qw[r][8 * i + 2 * k + 1]);
        }
      }
    }
  }
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    qa[kk][0] = qw[0][2 * kk];
    qa[kk][1] = qw[1][2 * kk];
    qa[kk][2] = qw[0][2 * kk + 1];
    qa[kk][3] = qw[1][2 * kk + 1];
  }
}

// A warp-MMA CTA's coordinates: (query row, KV head, split) from blockIdx, the thread's
// warp and its mma fragment position.
struct RowCta {
  int lane, w, g, c;  // lane, warp, fragment row g = lane / 4 and column pair c = lane % 4
  int G, kv, split;   // query heads per KV head, KV head, split (blockIdx.y)
  long long row;      // query row
};

// The prologue both warp-MMA kernels share (after the PDL wait): warp 0 resolves the
// split's pages into s_phys / s_limit / *s_n while every thread loads its Q fragments
// (issued before the barrier so they load meanwhile); returns after the barrier that
// publishes the pages.
template <bool kFp8P>
__device__ __forceinline__ RowCta begin_row_cta(const DecodeParams& p, int tid, int* s_phys, int* s_limit, int* s_n,
                                                std::uint32_t (&qa)[8][4]) {
  RowCta rc;
  rc.lane = tid & 31;
  rc.w = tid >> 5;
  rc.g = rc.lane >> 2;
  rc.c = rc.lane & 3;
  const int Hkv = p.num_kv_heads;
  rc.G = p.num_q_heads / Hkv;
  rc.row = blockIdx.x / Hkv;
  rc.kv = static_cast<int>(blockIdx.x % Hkv);
  rc.split = blockIdx.y;
  if (rc.w == 0) resolve_split_pages(p, rc.row, rc.kv, rc.split, rc.lane, s_phys, s_limit, s_n);
  load_q_fragments<kFp8P>(p, rc.row, rc.kv, rc.G, rc.g, rc.c, qa);
  __syncthreads();
  return rc;
}

// Split merge inside the thread-block cluster of the (row, KV head): every CTA has
// published its (M, L, unnormalised O) in cta_o / s_cta_m / s_cta_l; CTA `split` merges
// heads split, split + S, ... from all S CTAs' shared memory (DSMEM), in split order
// 0..S-1 (D9), and writes the output and LSE. The caller keeps its shared memory alive
// with a final cluster barrier.
template <bool kFp8P>
__device__ __forceinline__ void cluster_merge_splits(const DecodeParams& p, float* cta_o, float* s_cta_m, float* s_cta_l,
                                                     long long row, int kv, int G, int split, int tid, float c2) {
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int S = p.num_splits;
  const int dd = 2 * (tid & 63);  // dims dd, dd + 1 of heads split + S (tid / 64 + 4j)
  for (int hl = split + S * (tid >> 6); hl < G; hl += 4 * S) {
    // Every remote load first (independent DSMEM round trips), then the merge.
    float ms[kMaxClusterSplits], ls[kMaxClusterSplits];
    float2 os[kMaxClusterSplits];
#pragma unroll
    for (int r = 0; r < kMaxClusterSplits; ++r) {
      ms[r] = -INFINITY;
      ls[r] = 0.0f;
      os[r] = make_float2(0.0f, 0.0f);
      if (r < S) {  // only real ranks: every load issued here is consumed below
        ms[r] = *cluster.map_shared_rank(&s_cta_m[hl], r);
        ls[r] = *cluster.map_shared_rank(&s_cta_l[hl], r);
        os[r] = *reinterpret_cast<const float2*>(cluster.map_shared_rank(cta_o + hl * 128 + dd, r));
      }
    }
    float MM = -INFINITY;
#pragma unroll
    for (int r = 0; r < kMaxClusterSplits; ++r)
      if (r < S) MM = fmaxf(MM, ms[r]);
    float LL = 0.0f, ox = 0.0f, oy = 0.0f;
    if (MM != -INFINITY) {
#pragma unroll
      for (int r = 0; r < kMaxClusterSplits; ++r) {
        if (r >= S || ms[r] == -INFINITY) continue;
        const float wk = ex2_approx((ms[r] - MM) * c2);
        LL += wk * ls[r];
        ox += wk * os[r].x;
        oy += wk * os[r].y;
      }
    }
    const bool none = MM == -INFINITY;
    const float iv = none ? 0.0f : 1.0f / LL;
    const int h = kv * G + hl;
    std::uint16_t* out = p.out + row * p.out_row_stride + h * p.out_head_stride + dd;
    *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(ox * iv * p.v_global, oy * iv * p.v_global);
    if (dd == 0 && p.lse != nullptr)
      p.lse[row * p.lse_row_stride + h * p.lse_head_stride] =
          none ? -INFINITY : MM * p.c + logf(kFp8P ? LL / 448.0f : LL);
  }
}

#ifdef FLASHMSA_WMMA_TRACE  // timeline instrumentation (benchmark variant builds only)
constexpr int kTraceSlots = 1 << 16;
__device__ unsigned long long g_trace[kTraceSlots][8];
__device__ unsigned g_trace_n;
__device__ __forceinline__ unsigned long long gtime() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
#define WTRACE(k) \
  if (tid == 0) ts[k] = gtime()
#define WTRACE_FLUSH()                                                  \
  if (tid == 0) {                                                       \
    ts[7] = gtime();                                                    \
    const unsigned slot = atomicAdd(&g_trace_n, 1u);                    \
    if (slot < kTraceSlots)                                             \
      for (int k = 0; k < 8; ++k) g_trace[slot][k] = ts[k];             \
  }
#else
#define WTRACE(k)
#define WTRACE_FLUSH()
#endif

// S (16 x 16) = Q K^T for the warp's tokens t0 + 8nt + {2c, 2c + 1} (rows g, g + 8; see
// the fragment layouts above). The thread's K bytes sit in slots k0[i * kThreads], i =
// nt * (slots per token / 2) + j: BF16 8 slots, E4M3 4, NVFP4 2 (one token's 32 codes of
// dims [32c, 32c + 32) per slot); NVFP4 with the block scales scale_k[nt] (blocks 2c,
// 2c + 1 in bytes 0, 1). FP8 and NVFP4 K become exact F16 images (spec D7).
template <int FMT>
__device__ __forceinline__ void qk_fragments(const uint4* k0, const std::uint32_t (&scale_k)[2],
                                             const std::uint32_t (&qa)[8][4], float (&s)[2][4]) {
  constexpr bool kFp8P = FMT != at::kBf16;
  auto slot = [k0](int i) { return k0 + i * kThreads; };
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    std::uint32_t kw[16];  // word j: dims 32c + 2j, +1 (BF16 / F16 pair)
    if constexpr (FMT == at::kBf16) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 v = *slot(nt * 4 + j);
        kw[4 * j] = v.x; kw[4 * j + 1] = v.y; kw[4 * j + 2] = v.z; kw[4 * j + 3] = v.w;
      }
    } else {
      std::uint32_t x[8];  // E4M3 bytes of dims 32c + 4j .. + 3
      if constexpr (FMT == at::kFp8) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const uint4 v = *slot(nt * 2 + j);
          x[4 * j] = v.x; x[4 * j + 1] = v.y; x[4 * j + 2] = v.z; x[4 * j + 3] = v.w;
        }
      } else {
        const uint4 v = *slot(nt);  // 32 codes, byte j = dims 32c + 2j, +1
        const std::uint32_t cw[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // block scale of dims 32c + 16h ..
          const gm::Nvfp4Lut tab = gm::nvfp4_lut((scale_k[nt] >> (8 * h)) & 0xffu);
#pragma unroll
          for (int k = 0; k < 2; ++k) {
            gm::nvfp4x8_lookup(cw[2 * h + k], tab, x[4 * h + 2 * k], x[4 * h + 2 * k + 1]);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        f16x2_pair(x[j], kw[2 * j], kw[2 * j + 1]);
      }
    }
    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) mma16816<kFp8P>(s[nt], qa[kk], kw[2 * kk], kw[2 * kk + 1]);
  }
}

template <int FMT>
__global__ void __launch_bounds__(kThreads, 1) warp_mma_decode_kernel(const DecodeParams p) {
  using S = Slots<FMT>;
  constexpr bool kFp8P = FMT != at::kBf16;  // E4M3 query, P = E4M3_sat(p448), F16 MMAs
  extern __shared__ uint4 ring[];            // [stage][slot][thread]; later the warp merge
  __shared__ int s_phys[16];                 // this split's pages, in top-k order
  __shared__ int s_limit[16];                // last visible token of the page (0..127)
  __shared__ int s_n;
  __shared__ float s_m[kWarps][16], s_l[kWarps][16];
  __shared__ float4 s_cta_o[16 * 128 / 4];   // cluster merge: this CTA's unnormalised O
  __shared__ float s_cta_m[16], s_cta_l[16];  // ... and its row max and sum

#ifdef FLASHMSA_WMMA_TRACE
  unsigned long long ts[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const int tid = threadIdx.x;
  WTRACE(0);
#endif
  sm90::pdl_wait();  // nothing global is touched before (pdl.cuh)
  sm90::pdl_launch_dependents();
  WTRACE(1);

#ifndef FLASHMSA_WMMA_TRACE
  const int tid = threadIdx.x;
#endif
  // 1. Metadata (warp 0): top-k entries and the length together, then the block table;
  // the Q fragments meanwhile.
  std::uint32_t qa[8][4];
  const RowCta rc = begin_row_cta<kFp8P>(p, tid, s_phys, s_limit, &s_n, qa);
  const int w = rc.w, g = rc.g, c = rc.c, G = rc.G, kv = rc.kv, split = rc.split;
  const long long row = rc.row;
  const int n = s_n;
  WTRACE(2);
  const int t0 = 16 * w;  // this warp's first token of every page

  // 2. The ring: page i goes to stage i % kStages, one commit group per page.
  const int eb = FMT == at::kBf16 ? 2 : 1;
  auto slot = [&](int stage, int i) { return ring + (stage * S::kAll + i) * kThreads + tid; };
  auto issue = [&](int i) {
    const int stage = i % kStages;
    const int phys = s_phys[i], lim = s_limit[i];
    const std::uint8_t* kb =
        static_cast<const std::uint8_t*>(p.k_data) + (phys * p.k_stride[0] + kv * p.k_stride[1]) * eb;
    const std::uint8_t* vb =
        static_cast<const std::uint8_t*>(p.v_data) + (phys * p.v_stride[0] + kv * p.v_stride[1]) * eb;
    const long long ktok = p.k_stride[2] * eb, vtok = p.v_stride[2] * eb;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {  // K tokens t0 + 8nt + g
      const int t = t0 + 8 * nt + g;
      const bool ok = t <= lim;
      const std::uint8_t* src = kb + (ok ? t : 0) * ktok + (FMT == at::kBf16 ? 64 : (FMT == at::kFp8 ? 32 : 16)) * c;
#pragma unroll
      for (int j = 0; j < S::kK / 2; ++j) cp_async16_zfill(slot(stage, nt * (S::kK / 2) + j), src + 16 * j, ok);
    }
#pragma unroll
    for (int v = 0; v < 4; ++v) {  // V tokens t0 + 8h + 2c + e, v = 2h + e
      const int t = t0 + 8 * (v >> 1) + 2 * c + (v & 1);
      const bool ok = t <= lim;
      if constexpr (FMT == at::kBf16) {
        const std::uint8_t* src = vb + (ok ? t : 0) * vtok + 32 * g;
        cp_async16_zfill(slot(stage, S::kK + 2 * v), src, ok);
        cp_async16_zfill(slot(stage, S::kK + 2 * v + 1), src + 16, ok);
      } else if constexpr (FMT == at::kFp8) {
        cp_async16_zfill(slot(stage, S::kK + v), vb + (ok ? t : 0) * vtok + 16 * g, ok);
      } else {
        cp_async8_zfill(slot(stage, S::kK + v), vb + (ok ? t : 0) * vtok + 8 * g, ok);
      }
    }
    cp_async_commit_mem();
  };

  const float c2 = p.c * kLog2e;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[16][4];
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

  if (n > 0) issue(0);
  for (int i = 0; i < n; ++i) {
    if (i + 1 < n) issue(i + 1);
    else cp_async_commit_mem();  // keeps "the newest group is page i + 1" true
    cp_async_wait_mem<1>();
    if (i == 0) WTRACE(3);
    const int lim = s_limit[i];
    if (t0 > lim) continue;  // none of this warp's tokens is visible (warp-uniform)
    const int stage = i % kStages;
    std::uint32_t scale_k[2] = {0u, 0u}, scale_v[4] = {0u, 0u, 0u, 0u};
    if constexpr (FMT == at::kNvfp4) {  // block scales: plain loads (they are 1-2 bytes)
      const int phys = s_phys[i];
      const std::uint8_t* ks = p.k_scale + phys * p.ks_stride[0] + kv * p.ks_stride[1];
      const std::uint8_t* vs = p.v_scale + phys * p.vs_stride[0] + kv * p.vs_stride[1];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int t = t0 + 8 * nt + g;
        if (t <= lim)
          scale_k[nt] = at::nvfp4_scale(ks, p.ks_stride[2], p.k_swizzled, t, 2 * c) |
                        (static_cast<std::uint32_t>(at::nvfp4_scale(ks, p.ks_stride[2], p.k_swizzled, t, 2 * c + 1)) << 8);
      }
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        const int t = t0 + 8 * (v >> 1) + 2 * c + (v & 1);
        if (t <= lim) scale_v[v] = at::nvfp4_scale(vs, p.vs_stride[2], p.v_swizzled, t, g);
      }
    }
    // S = Q K^T for tokens t0 + 8nt + {2c, 2c + 1} (rows g, g + 8).
    float s[2][4];
    qk_fragments<FMT>(slot(stage, 0), scale_k, qa, s);
    // Online softmax (per warp): mask tokens past the limit, then P.
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (t0 + 8 * nt + 2 * c + (k & 1) > lim) s[nt][k] = -INFINITY;
        mx[k >> 1] = fmaxf(mx[k >> 1], s[nt][k]);
      }
    float alpha[2], bias[2];
    at::online_softmax_step<kFp8P>(mx, m, l, c2, alpha, bias);
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        o[nt][2 * r] *= alpha[r];
        o[nt][2 * r + 1] *= alpha[r];
      }
    std::uint32_t pa[4];  // A fragment of P: (row g | g + 8) x tokens (nt 0 | nt 1)
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float e0 = ex2_approx(fmaf(s[nt][2 * r], c2, bias[r]));  // spec 3.4: ex2.approx.ftz
        const float e1 = ex2_approx(fmaf(s[nt][2 * r + 1], c2, bias[r]));
        l[r] += e0 + e1;
        if constexpr (kFp8P) {
          std::uint16_t q8;
          asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(q8) : "f"(e1), "f"(e0));
          pa[2 * nt + r] = gm::e4m3x2_to_f16x2(q8);
        } else {
          const __nv_bfloat162 v2 = __floats2bfloat162_rn(e0, e1);
          pa[2 * nt + r] = *reinterpret_cast<const std::uint32_t*>(&v2);
        }
      }
    // O += P V: V tokens t0 + 8h + 2c + e (v = 2h + e), dims 16g + nt.
    if constexpr (FMT == at::kBf16) {
      std::uint32_t vw[4][8];  // word j: dims 16g + 2j, +1
#pragma unroll
      for (int v = 0; v < 4; ++v)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const uint4 x = *slot(stage, S::kK + 2 * v + j);
          vw[v][4 * j] = x.x; vw[v][4 * j + 1] = x.y; vw[v][4 * j + 2] = x.z; vw[v][4 * j + 3] = x.w;
        }
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        const std::uint32_t sel = (nt & 1) ? 0x7632u : 0x5410u;
        mma16816<false>(o[nt], pa, prmt(vw[0][nt >> 1], vw[1][nt >> 1], sel), prmt(vw[2][nt >> 1], vw[3][nt >> 1], sel));
      }
    } else {
      std::uint32_t vw[4][4];  // word j: E4M3 bytes of dims 16g + 4j .. + 3
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        if constexpr (FMT == at::kFp8) {
          const uint4 x = *slot(stage, S::kK + v);
          vw[v][0] = x.x; vw[v][1] = x.y; vw[v][2] = x.z; vw[v][3] = x.w;
        } else {
          const uint2 x = *reinterpret_cast<const uint2*>(slot(stage, S::kK + v));  // 16 codes
          const uint4 e = gm::nvfp4x16_lookup(x, gm::nvfp4_lut(scale_v[v]));
          vw[v][0] = e.x; vw[v][1] = e.y; vw[v][2] = e.z; vw[v][3] = e.w;
        }
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int hb = 0; hb < 2; ++hb) {  // bytes 2hb, 2hb + 1 of word j: nt = 4j + 2hb, + 1
          const std::uint32_t sel = (2 * hb) | ((2 * hb + 4) << 4) | ((2 * hb + 1) << 8) | ((2 * hb + 5) << 12);
          const std::uint32_t lo = prmt(vw[0][j], vw[1][j], sel);  // tokens 2c, 2c + 1
          const std::uint32_t hi = prmt(vw[2][j], vw[3][j], sel);  // tokens 8 + 2c, 9 + 2c
          mma16816_e4m3_b2(o[4 * j + 2 * hb], o[4 * j + 2 * hb + 1], pa, lo, hi);
        }
    }
  }
  cp_async_wait_mem<0>();
  WTRACE(4);

  // 3. Merge the 8 warps: each writes its (m, l, unnormalised O) to shared memory (the
  // ring is free once every thread's copies landed and every warp left the loop).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  __syncthreads();
#ifdef FLASHMSA_WMMA_TRACE
  if (tid == 0) ts[4] = gtime();  // every warp is done with its pages
#endif
  float* mo = reinterpret_cast<float*>(ring);  // [warp][row][kMergeRow]
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int hr = g + 8 * r;
    float* dst = mo + (w * 16 + hr) * kMergeRow + 32 * c;
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int q4 = 0; q4 < 4; ++q4)  // dims 32c + 16e + 4q4 .. + 3 = n-tiles 4q4 .. 4q4 + 3
        *reinterpret_cast<float4*>(dst + 16 * e + 4 * q4) =
            make_float4(o[4 * q4][2 * r + e], o[4 * q4 + 1][2 * r + e], o[4 * q4 + 2][2 * r + e],
                        o[4 * q4 + 3][2 * r + e]);
    if (c == 0) {
      s_m[w][hr] = m[r];
      s_l[w][hr] = l[r];
    }
  }
  __syncthreads();
  // Thread t finalises row t / 16 (head kv*G + row), dims [8 (t % 16), + 8).
  const int hr = tid >> 4, d0 = (tid & 15) * 8;
  float M = -INFINITY;
#pragma unroll
  for (int k = 0; k < kWarps; ++k) M = fmaxf(M, s_m[k][hr]);
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  float L = 0.0f;
  if (M != -INFINITY) {
#pragma unroll
    for (int k = 0; k < kWarps; ++k) {
      if (s_m[k][hr] == -INFINITY) continue;
      const float wk = ex2_approx((s_m[k][hr] - M) * c2);
      L += wk * s_l[k][hr];
      const float* src = mo + (k * 16 + hr) * kMergeRow + d0;
      const float4 x0 = *reinterpret_cast<const float4*>(src), x1 = *reinterpret_cast<const float4*>(src + 4);
      acc[0] += wk * x0.x; acc[1] += wk * x0.y; acc[2] += wk * x0.z; acc[3] += wk * x0.w;
      acc[4] += wk * x1.x; acc[5] += wk * x1.y; acc[6] += wk * x1.z; acc[7] += wk * x1.w;
    }
  }
  WTRACE(5);
  if (p.cluster_merge) {
    // 4. Split merge inside the thread-block cluster of the (row, KV head): every CTA
    // publishes its (M, L, unnormalised O) in its own shared memory, then CTA `split`
    // merges heads split, split + S, ... from all S CTAs' shared memory (DSMEM), in split
    // order 0..S-1 (D9). The second cluster barrier keeps every CTA's shared memory alive
    // until the others have read it.
    float* cta_o = reinterpret_cast<float*>(s_cta_o);
    *reinterpret_cast<float4*>(cta_o + hr * 128 + d0) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    *reinterpret_cast<float4*>(cta_o + hr * 128 + d0 + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
    if (d0 == 0) {
      s_cta_m[hr] = M;
      s_cta_l[hr] = L;
    }
    cluster_merge_splits<kFp8P>(p, cta_o, s_cta_m, s_cta_l, row, kv, G, split, tid, c2);
    WTRACE(6);
    // Keeps every CTA's shared memory alive until the others have read it. Every remote
    // load above was consumed (the output stores depend on them), so no release fence is
    // needed here, unlike cluster.sync() (measured 0.45 us with it).
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
    WTRACE_FLUSH();
    return;
  }
  WTRACE(6);
  WTRACE_FLUSH();
  if (hr >= G) return;
  const bool empty = M == -INFINITY;
  const float inv = empty ? 0.0f : 1.0f / L;
  const float lse_v = empty ? -INFINITY : M * p.c + logf(kFp8P ? L / 448.0f : L);
  const int h = kv * G + hr;
  if (p.num_splits == 1) {
    std::uint16_t* out = p.out + row * p.out_row_stride + h * p.out_head_stride + d0;
    std::uint32_t pk[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const __nv_bfloat162 v2 = __floats2bfloat162_rn(acc[2 * k] * inv * p.v_global, acc[2 * k + 1] * inv * p.v_global);
      pk[k] = *reinterpret_cast<const std::uint32_t*>(&v2);
    }
    *reinterpret_cast<uint4*>(out) = make_uint4(pk[0], pk[1], pk[2], pk[3]);
    if (d0 == 0 && p.lse != nullptr) p.lse[row * p.lse_row_stride + h * p.lse_head_stride] = lse_v;
  } else {
    const std::int64_t sl = (row * p.num_q_heads + h) * p.num_splits + split;
    float* op = p.o_partial + sl * 128 + d0;
    *reinterpret_cast<float4*>(op) = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
    *reinterpret_cast<float4*>(op + 4) = make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
    if (d0 == 0) p.lse_partial[sl] = lse_v;
  }
}

// How many clusters of the S split CTAs of one (row, KV head) (grid (rows x Hkv, S),
// cluster (1, S)) the GPU can hold at once: cudaOccupancyMaxActiveClusters, with the
// non-portable opt-in above 8 CTAs; 0 when such a cluster cannot run. Queried once per
// (device, format, S).

// ---------------------------------------------------------------------------------------
// The dims-split variant (the plan's choice for one or two pages per split CTA, see
// choose_decode_schedule): the same CTA shape, with P V split by head dims across the
// warps instead of by tokens, so there is no O merge across warps. Per page:
//   S: warp w computes S for tokens [16w, 16w + 16) (as above);
//   the row max is reduced through shared memory (barrier 1), so all warps share one
//   running max and the sums need no rescaling across warps;
//   P (16 x 128, BF16 or E4M3 held as F16) goes to shared memory (barrier 2);
//   P V: warp w multiplies P (16 x 128) by V (128 tokens x head dims [16w, 16w + 16)).
// V of those 16 dims is loaded by the warp into a warp-private tile (cp.async, __syncwarp
// before use). n-tile nt, column n of the P V product is head dim 16w + 2n + nt, so a
// thread reads one 32-bit (BF16) or 16-bit (E4M3) pair per token. NVFP4: the warp copies
// the 8 code bytes of its 16 dims per token and each lane dequantises the tokens it
// copied (E4M3_sat(e2m1 x scale), spec D7) into a warp-private E4M3 tile, read as FP8.
template <int FMT>
struct DsplitBytes {
  static constexpr bool kNv = FMT == at::kNvfp4;
  static constexpr int kKSlots = FMT == at::kBf16 ? 8 : (kNv ? 2 : 4);  // per-thread 16-byte K slots
  static constexpr int kVTok = FMT == at::kBf16 ? 48 : 16;              // V tile bytes per token (BF16 padded)
  static constexpr int kVStageTok = kNv ? 8 : kVTok;                    // bytes per token cp.async writes
  static constexpr int kVChunks = FMT == at::kBf16 ? 8 : 4;             // V copies per lane per page
  static constexpr int kKRing = kStages * kKSlots * kThreads * 16;
  static constexpr int kVTile = 128 * kVTok;                            // one warp
  static constexpr int kVRing = kStages * kWarps * 128 * kVStageTok;    // [stage][warp][token]
  static constexpr int kVConv = kNv ? kWarps * kVTile : 0;              // NVFP4: the E4M3 V tile
  static constexpr int kPRow = 68;                                      // 32-bit words per P row (padded)
  static constexpr int kP = 16 * kPRow * 4;
  static constexpr int kSmem = kKRing + kVRing + kVConv + kP;
};

template <int FMT>
__global__ void __launch_bounds__(kThreads, 1) warp_dsplit_decode_kernel(const DecodeParams p) {
  using B = DsplitBytes<FMT>;
  constexpr bool kFp8P = FMT != at::kBf16;
  extern __shared__ uint4 dyn[];
  uint4* kring = dyn;                                                          // [stage][slot][thread]
  std::uint8_t* vring = reinterpret_cast<std::uint8_t*>(dyn) + B::kKRing;      // [stage][warp][token][kVTok]
  std::uint8_t* vconv = vring + B::kVRing;                                      // NVFP4: [warp][token][16]
  std::uint32_t* ptile = reinterpret_cast<std::uint32_t*>(vconv + B::kVConv);  // [16][kPRow]
  __shared__ int s_phys[16];
  __shared__ int s_limit[16];
  __shared__ int s_n;
  __shared__ float s_red[kWarps][16];        // per-warp row max, then row sums
  __shared__ float4 s_cta_o[16 * 128 / 4];
  __shared__ float s_cta_m[16], s_cta_l[16];

  sm90::pdl_wait();
  sm90::pdl_launch_dependents();
  const int tid = threadIdx.x;
  std::uint32_t qa[8][4];
  const RowCta rc = begin_row_cta<kFp8P>(p, tid, s_phys, s_limit, &s_n, qa);
  const int lane = rc.lane, w = rc.w, g = rc.g, c = rc.c, G = rc.G, kv = rc.kv, split = rc.split;
  const long long row = rc.row;
  const int n = s_n;
  const int t0 = 16 * w;

  const int eb = FMT == at::kBf16 ? 2 : 1;
  auto kslot = [&](int stage, int i) { return kring + (stage * B::kKSlots + i) * kThreads + tid; };
  auto vtile = [&](int stage) { return vring + (stage * kWarps + w) * (128 * B::kVStageTok); };
  // NVFP4 block scales of the page in flight, loaded (plain loads) when its copies are
  // issued: K blocks 2c, 2c + 1 of tokens t0 + 8nt + g; V block w of tokens lane + 32j.
  // 0 for tokens past the limit (zero codes x a garbage NaN scale would poison P V).
  std::uint32_t sk_next[2] = {0u, 0u}, sv_next[4] = {0u, 0u, 0u, 0u};
  auto issue = [&](int i) {
    const int stage = i % kStages;
    const int phys = s_phys[i], lim = s_limit[i];
    const std::uint8_t* kb =
        static_cast<const std::uint8_t*>(p.k_data) + (phys * p.k_stride[0] + kv * p.k_stride[1]) * eb;
    const std::uint8_t* vb =
        static_cast<const std::uint8_t*>(p.v_data) + (phys * p.v_stride[0] + kv * p.v_stride[1]) * eb;
    const long long ktok = p.k_stride[2] * eb, vtok = p.v_stride[2] * eb;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {  // K tokens t0 + 8nt + g, dims [32c, 32c + 32)
      const int t = t0 + 8 * nt + g;
      const bool ok = t <= lim;
      const std::uint8_t* src = kb + (ok ? t : 0) * ktok + 16 * B::kKSlots / 2 * c;
#pragma unroll
      for (int j = 0; j < B::kKSlots / 2; ++j) cp_async16_zfill(kslot(stage, nt * (B::kKSlots / 2) + j), src + 16 * j, ok);
      if constexpr (B::kNv) {
        const std::uint8_t* ks = p.k_scale + phys * p.ks_stride[0] + kv * p.ks_stride[1];
        sk_next[nt] = ok ? at::nvfp4_scale(ks, p.ks_stride[2], p.k_swizzled, t, 2 * c) |
                               (static_cast<std::uint32_t>(at::nvfp4_scale(ks, p.ks_stride[2], p.k_swizzled, t, 2 * c + 1)) << 8)
                         : 0u;
      }
    }
    std::uint8_t* vt = vtile(stage);
#pragma unroll
    for (int j = 0; j < B::kVChunks; ++j) {  // V tokens x dims [16w, 16w + 16)
      const int chunk = lane + 32 * j;
      const int t = FMT == at::kBf16 ? chunk >> 1 : chunk;
      const int half = FMT == at::kBf16 ? chunk & 1 : 0;
      const bool ok = t <= lim;
      if constexpr (B::kNv) {  // 16 codes = 8 bytes
        cp_async8_zfill(vt + t * 8, vb + (ok ? t : 0) * vtok + 8 * w, ok);
        const std::uint8_t* vs = p.v_scale + phys * p.vs_stride[0] + kv * p.vs_stride[1];
        sv_next[j] = ok ? at::nvfp4_scale(vs, p.vs_stride[2], p.v_swizzled, t, w) : 0u;
      } else {
        cp_async16_zfill(vt + t * B::kVTok + 16 * half, vb + (ok ? t : 0) * vtok + 16 * w * eb + 16 * half, ok);
      }
    }
    cp_async_commit_mem();
  };

  const float c2 = p.c * kLog2e;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};

  if (n > 0) issue(0);
  for (int i = 0; i < n; ++i) {
    __syncwarp();  // every lane is done reading the V tile stage issue(i + 1) overwrites
    std::uint32_t sk[2] = {sk_next[0], sk_next[1]};  // page i's NVFP4 scales (unused otherwise)
    std::uint32_t sv[4] = {sv_next[0], sv_next[1], sv_next[2], sv_next[3]};
    if (i + 1 < n) issue(i + 1);
    else cp_async_commit_mem();
    cp_async_wait_mem<1>();
    const int lim = s_limit[i];
    const int stage = i % kStages;
    if constexpr (B::kNv) {  // each lane dequantises the V codes it copied: E4M3_sat(e2m1 x scale)
      const std::uint8_t* raw = vtile(stage);
      std::uint8_t* dst = vconv + w * B::kVTile;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int t = lane + 32 * j;
        const uint2 x = *reinterpret_cast<const uint2*>(raw + t * 8);
        *reinterpret_cast<uint4*>(dst + t * 16) = gm::nvfp4x16_lookup(x, gm::nvfp4_lut(sv[j]));
      }
    }
    __syncwarp();  // the warp's V tile (copies landed, or dequantised), visible to all its lanes
    // S = Q K^T for tokens t0 + 8nt + {2c, 2c + 1} (rows g, g + 8).
    float s[2][4];
    qk_fragments<FMT>(kslot(stage, 0), sk, qa, s);
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (t0 + 8 * nt + 2 * c + (k & 1) > lim) s[nt][k] = -INFINITY;
        mx[k >> 1] = fmaxf(mx[k >> 1], s[nt][k]);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      if (c == 0) s_red[w][g + 8 * r] = mx[r];
    }
    __syncthreads();  // barrier 1: every warp's row max of this page
    float bias[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float pm = -INFINITY;
#pragma unroll
      for (int k = 0; k < kWarps; ++k) pm = fmaxf(pm, s_red[k][g + 8 * r]);
      const float m_new = fmaxf(m[r], pm);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float alpha = ex2_approx((m[r] - m_use) * c2);
      m[r] = m_new;
      l[r] *= alpha;
      o[0][2 * r] *= alpha;
      o[0][2 * r + 1] *= alpha;
      o[1][2 * r] *= alpha;
      o[1][2 * r + 1] *= alpha;
      bias[r] = kFp8P ? fmaf(-m_use, c2, kLog2_448) : -m_use * c2;
    }
    // P of this warp's tokens to the shared P tile: word (row, 8w + 4nt + c) holds the
    // token pair 16w + 8nt + 2c, +1.
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float e0 = ex2_approx(fmaf(s[nt][2 * r], c2, bias[r]));
        const float e1 = ex2_approx(fmaf(s[nt][2 * r + 1], c2, bias[r]));
        l[r] += e0 + e1;
        std::uint32_t word;
        if constexpr (kFp8P) {
          std::uint16_t q8;
          asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(q8) : "f"(e1), "f"(e0));
          word = gm::e4m3x2_to_f16x2(q8);
        } else {
          const __nv_bfloat162 v2 = __floats2bfloat162_rn(e0, e1);
          word = *reinterpret_cast<const std::uint32_t*>(&v2);
        }
        ptile[(g + 8 * r) * B::kPRow + 8 * w + 4 * nt + c] = word;
      }
    __syncthreads();  // barrier 2: the whole P tile
    // O(16 x dims 16w + 2n + nt) += P (16 x 128) V (128 x 16): 8 k-steps of 16 tokens.
    const std::uint8_t* vt = B::kNv ? vconv + w * B::kVTile : vtile(stage);
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      std::uint32_t pa[4];
      pa[0] = ptile[g * B::kPRow + 8 * ks + c];
      pa[1] = ptile[(g + 8) * B::kPRow + 8 * ks + c];
      pa[2] = ptile[g * B::kPRow + 8 * ks + 4 + c];
      pa[3] = ptile[(g + 8) * B::kPRow + 8 * ks + 4 + c];
      const int ta = 16 * ks + 2 * c;  // tokens ta, ta + 1 (b0) and ta + 8, ta + 9 (b1)
      if constexpr (FMT == at::kBf16) {
        const std::uint32_t x0 = *reinterpret_cast<const std::uint32_t*>(vt + ta * B::kVTok + 4 * g);
        const std::uint32_t x1 = *reinterpret_cast<const std::uint32_t*>(vt + (ta + 1) * B::kVTok + 4 * g);
        const std::uint32_t x8 = *reinterpret_cast<const std::uint32_t*>(vt + (ta + 8) * B::kVTok + 4 * g);
        const std::uint32_t x9 = *reinterpret_cast<const std::uint32_t*>(vt + (ta + 9) * B::kVTok + 4 * g);
        mma16816<false>(o[0], pa, prmt(x0, x1, 0x5410u), prmt(x8, x9, 0x5410u));
        mma16816<false>(o[1], pa, prmt(x0, x1, 0x7632u), prmt(x8, x9, 0x7632u));
      } else {
        const std::uint32_t x0 = *reinterpret_cast<const std::uint16_t*>(vt + ta * B::kVTok + 2 * g);
        const std::uint32_t x1 = *reinterpret_cast<const std::uint16_t*>(vt + (ta + 1) * B::kVTok + 2 * g);
        const std::uint32_t x8 = *reinterpret_cast<const std::uint16_t*>(vt + (ta + 8) * B::kVTok + 2 * g);
        const std::uint32_t x9 = *reinterpret_cast<const std::uint16_t*>(vt + (ta + 9) * B::kVTok + 2 * g);
        const std::uint32_t lo = prmt(x0, x1, 0x5140u);  // bytes: x0.b0 x1.b0 x0.b1 x1.b1
        const std::uint32_t hi = prmt(x8, x9, 0x5140u);
        mma16816_e4m3_b2(o[0], o[1], pa, lo, hi);
      }
    }
  }
  cp_async_wait_mem<0>();
  // Row sums over the 8 warps (one shared running max: no rescaling).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  __syncthreads();  // s_red is reused (the last page's maxima were read before barrier 2)
#pragma unroll
  for (int r = 0; r < 2; ++r)
    if (c == 0) s_red[w][g + 8 * r] = l[r];
  __syncthreads();
  float L[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    L[r] = 0.0f;
#pragma unroll
    for (int k = 0; k < kWarps; ++k) L[r] += s_red[k][g + 8 * r];
  }
  // o[nt][2r + e] is row g + 8r, head dim 16w + 4c + 2e + nt.
  const int d0 = 16 * w + 4 * c;
  if (p.cluster_merge) {
    float* cta_o = reinterpret_cast<float*>(s_cta_o);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      *reinterpret_cast<float4*>(cta_o + (g + 8 * r) * 128 + d0) =
          make_float4(o[0][2 * r], o[1][2 * r], o[0][2 * r + 1], o[1][2 * r + 1]);
      if (w == 0 && c == 0) {
        s_cta_m[g + 8 * r] = m[r];
        s_cta_l[g + 8 * r] = L[r];
      }
    }
    cluster_merge_splits<kFp8P>(p, cta_o, s_cta_m, s_cta_l, row, kv, G, split, tid, c2);
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\nbarrier.cluster.wait.aligned;\n" ::: "memory");
    return;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int hr = g + 8 * r;
    if (hr >= G) continue;
    const bool empty = m[r] == -INFINITY;
    const float inv = empty ? 0.0f : 1.0f / L[r];
    const float lse_v = empty ? -INFINITY : m[r] * p.c + logf(kFp8P ? L[r] / 448.0f : L[r]);
    const int h = kv * G + hr;
    const float4 v4 = make_float4(o[0][2 * r] * inv, o[1][2 * r] * inv, o[0][2 * r + 1] * inv, o[1][2 * r + 1] * inv);
    if (p.num_splits == 1) {
      std::uint16_t* out = p.out + row * p.out_row_stride + h * p.out_head_stride + d0;
      const __nv_bfloat162 a = __floats2bfloat162_rn(v4.x * p.v_global, v4.y * p.v_global);
      const __nv_bfloat162 b2 = __floats2bfloat162_rn(v4.z * p.v_global, v4.w * p.v_global);
      *reinterpret_cast<uint2*>(out) =
          make_uint2(*reinterpret_cast<const std::uint32_t*>(&a), *reinterpret_cast<const std::uint32_t*>(&b2));
      if (w == 0 && c == 0 && p.lse != nullptr) p.lse[row * p.lse_row_stride + h * p.lse_head_stride] = lse_v;
    } else {
      const std::int64_t sl = (row * p.num_q_heads + h) * p.num_splits + split;
      *reinterpret_cast<float4*>(p.o_partial + sl * 128 + d0) = v4;
      if (w == 0 && c == 0) p.lse_partial[sl] = lse_v;
    }
  }
}

// The kernel and its dynamic shared memory for (FMT, dims split).
template <int FMT, bool kDsplit>
struct WarpKernel {
  static constexpr int kSmem = kDsplit ? DsplitBytes<FMT>::kSmem : Slots<FMT>::kSmem;
  static auto fn() {
    if constexpr (kDsplit) return &warp_dsplit_decode_kernel<FMT>;
    else return &warp_mma_decode_kernel<FMT>;
  }
};

template <int FMT, bool kDsplit>
int cluster_capacity(int S) {
  using WK = WarpKernel<FMT, kDsplit>;
  constexpr int smem = WK::kSmem;
  static std::mutex mu;  // plans may be made from several host threads
  static int cap[64][kMaxClusterSplits + 1];
  static bool known[64][kMaxClusterSplits + 1] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64 || S < 2 || S > kMaxClusterSplits) return 0;
  std::lock_guard<std::mutex> lock(mu);
  if (!known[dev][S]) {
    int clusters = 0;
    cudaError_t err = cudaFuncSetAttribute(WK::fn(), cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err == cudaSuccess && S > 8)
      err = cudaFuncSetAttribute(WK::fn(), cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err == cudaSuccess) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(1, S);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = static_cast<size_t>(smem);
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = 1;
      attr[0].val.clusterDim.y = static_cast<unsigned>(S);
      attr[0].val.clusterDim.z = 1;
      cfg.attrs = attr;
      cfg.numAttrs = 1;
      err = cudaOccupancyMaxActiveClusters(&clusters, WK::fn(), &cfg);
    }
    if (err != cudaSuccess) {
      clusters = 0;
      (void)cudaGetLastError();  // clear only the error of this refused query
    }
    cap[dev][S] = clusters;
    known[dev][S] = true;
  }
  return cap[dev][S];
}

#ifdef FLASHMSA_WMMA_TRACE
// Prints, per launch (CTAs grouped by their entry time), each stamp's median offset from
// the launch's first CTA entry, and the gap to the previous launch's last CTA exit.
void dump_trace() {
  cudaDeviceSynchronize();
  static unsigned long long h[kTraceSlots][8];
  unsigned n = 0;
  cudaMemcpyFromSymbol(&n, g_trace_n, sizeof(n));
  if (n > kTraceSlots) n = kTraceSlots;
  cudaMemcpyFromSymbol(h, g_trace, sizeof(unsigned long long) * 8 * n);
  std::vector<int> idx(n);
  for (unsigned i = 0; i < n; ++i) idx[i] = static_cast<int>(i);
  std::sort(idx.begin(), idx.end(), [](int a, int b) { return h[a][1] < h[b][1]; });
  // A new launch starts where the entry time jumps past every exit seen so far.
  std::vector<std::pair<int, int>> launches;
  unsigned long long max_exit = 0;
  int first = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (i > 0 && h[idx[i]][1] > max_exit) { launches.push_back({first, static_cast<int>(i)}); first = static_cast<int>(i); }
    max_exit = std::max(max_exit, h[idx[i]][7]);
  }
  launches.push_back({first, static_cast<int>(n)});
  std::fprintf(stderr, "wmma trace: %u CTAs in %zu launches; per launch: ctas gap_from_prev_exit | median ns after first entry of stamps 0..7 | max exit\n", n, launches.size());
  unsigned long long prev_exit = 0;
  int shown = 0;
  for (auto [a, b] : launches) {
    unsigned long long t0 = h[idx[a]][1], mx = 0;
    std::vector<long long> med(8);
    for (int k = 0; k < 8; ++k) {
      std::vector<long long> v;
      for (int i = a; i < b; ++i) if (h[idx[i]][k]) v.push_back(static_cast<long long>(h[idx[i]][k]) - static_cast<long long>(t0));
      std::sort(v.begin(), v.end());
      med[k] = v.empty() ? -1 : v[v.size() / 2];
    }
    for (int i = a; i < b; ++i) mx = std::max(mx, h[idx[i]][7]);
    if (shown++ < 400 && b - a > 1)
      std::fprintf(stderr, "L %3d ctas gap %6lld | %lld %lld %lld %lld %lld %lld %lld %lld | %lld\n", b - a,
                   prev_exit ? static_cast<long long>(t0 - prev_exit) : -1, med[0], med[1], med[2], med[3], med[4], med[5],
                   med[6], med[7], static_cast<long long>(mx - t0));
    prev_exit = mx;
  }
}
#endif

template <int FMT, bool kDsplit>
cudaError_t launch_fmt(const DecodeParams& p, cudaStream_t stream) {
  using WK = WarpKernel<FMT, kDsplit>;
#ifdef FLASHMSA_WMMA_TRACE
  static const bool reg = [] { std::atexit(dump_trace); return true; }();
  (void)reg;
#endif
  constexpr int smem = WK::kSmem;
  static std::atomic<bool> configured[64] = {};  // the shared-memory opt-in is per device
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    err = cudaFuncSetAttribute(WK::fn(), cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  const bool cluster = p.cluster_merge;  // decided by the plan (warp_mma_cluster_capacity)
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(static_cast<long long>(p.num_rows) * p.num_kv_heads), p.num_splits);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  int na = 0;
  attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;  // PDL (pdl.cuh)
  attr[na].val.programmaticStreamSerializationAllowed = 1;
  ++na;
  if (cluster) {
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = 1;
    attr[na].val.clusterDim.y = static_cast<unsigned>(p.num_splits);
    attr[na].val.clusterDim.z = 1;
    ++na;
  }
  cfg.attrs = attr;
  cfg.numAttrs = static_cast<unsigned>(na);
  err = cudaLaunchKernelEx(&cfg, WK::fn(), p);
  if (err != cudaSuccess || p.num_splits == 1 || cluster) return err;
  return static_cast<cudaError_t>(launch_split_combine(p, stream));
}

}  // namespace

int warp_mma_cluster_capacity(int kv_format, int num_splits, bool dims_split) {
  switch (kv_format) {
    case at::kBf16:
      return dims_split ? cluster_capacity<at::kBf16, true>(num_splits) : cluster_capacity<at::kBf16, false>(num_splits);
    case at::kFp8:
      return dims_split ? cluster_capacity<at::kFp8, true>(num_splits) : cluster_capacity<at::kFp8, false>(num_splits);
    case at::kNvfp4:
      return dims_split ? cluster_capacity<at::kNvfp4, true>(num_splits) : cluster_capacity<at::kNvfp4, false>(num_splits);
    default: return 0;
  }
}

int launch_sparse_attention_warp_mma(const DecodeParams& p, int kv_format, bool q_is_e4m3, void* stream) {
  if (p.num_rows == 0) return 0;
  if (p.cu_seqlens != nullptr || p.topk_k < 1 || p.topk_k > 16 || p.num_q_heads % p.num_kv_heads != 0 ||
      p.num_q_heads / p.num_kv_heads > 16 || p.num_splits < 1 || p.num_splits > 16 ||
      (p.num_splits > 1 && !p.cluster_merge && (p.o_partial == nullptr || p.lse_partial == nullptr)) ||
      (p.cluster_merge && (p.num_splits < 2 || p.num_splits > kMaxClusterSplits)))
    return cudaErrorInvalidValue;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (kv_format) {
    case at::kBf16:
      if (q_is_e4m3) return cudaErrorInvalidValue;
      return p.dims_split ? launch_fmt<at::kBf16, true>(p, s) : launch_fmt<at::kBf16, false>(p, s);
    case at::kFp8:
      if (!q_is_e4m3) return cudaErrorInvalidValue;
      return p.dims_split ? launch_fmt<at::kFp8, true>(p, s) : launch_fmt<at::kFp8, false>(p, s);
    case at::kNvfp4:
      if (!q_is_e4m3) return cudaErrorInvalidValue;
      return p.dims_split ? launch_fmt<at::kNvfp4, true>(p, s) : launch_fmt<at::kNvfp4, false>(p, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace flashmsa::cuda

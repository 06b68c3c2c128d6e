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
#include "cuda/sm90/decode_tile.cuh"
#include "cutlass/arch/barrier.h"
#include "cuda/sm90/pdl.cuh"

namespace flashmsa::cuda {
namespace {

namespace at = ::flashmsa::cuda::sm90::attn;
namespace gm = ::flashmsa::cuda::sm90::gmma;

using decode_tile::kMaxSplits;
using decode_tile::kMaxTopkEntries;
namespace dt = decode_tile;
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

// The Q tile of a CTA: tile row r = query row q0 + r / G, head g G + r % G; rows >= nrows
// zero. All kThreads threads. issue(): the loads (cp.async and one commit group; with QK16
// the E4M3 chunks into registers); finish(): with QK16 their F16 images into the tile. The
// page union runs the metadata round trips between the two, so the Q loads overlap them
// (the synchronous widening loop waited for each chunk's load in turn).
template <int FMT, bool QK16, int ROWS, int kThreads>
struct QTileLoad {
  static constexpr int kChunks = 16;  // 16-byte tile chunks per row (BF16 / F16) or 8 (E4M3)
  static constexpr int kPer = (ROWS * kChunks + kThreads - 1) / kThreads;
  uint2 v[QK16 ? kPer : 1];  // QK16: the E4M3 chunk of tile chunk tid + i kThreads

  __device__ __forceinline__ void issue(const DecodeParams& p, unsigned char* sQ, long long q0, int nrows, int g,
                                        int G, int tid) {
    constexpr bool FP8P = FMT != kBf16;
    constexpr int kQRow = at::PageBytes<FMT, QK16>::kQRow;
    const unsigned char* qbase = static_cast<const unsigned char*>(p.q);
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int c = tid + i * kThreads;
      if (c >= ROWS * kChunks) break;
      const int r = c / kChunks, ch = c % kChunks;
      const bool ok = r < nrows;
      const long long qrow = q0 + (ok ? r / G : 0);
      const std::int64_t off = qrow * p.q_row_stride + (g * G + (ok ? r % G : 0)) * p.q_head_stride;
      if constexpr (QK16) v[i] = ok ? *reinterpret_cast<const uint2*>(qbase + off + ch * 8) : make_uint2(0u, 0u);
      else if (ch < kQRow / 16) at::copy_q_chunk(sQ, ROWS, r, ch, qbase + off * (FP8P ? 1 : 2), ok);
    }
    at::cp_async_commit();
  }
  __device__ __forceinline__ void finish(unsigned char* sQ, int tid) {
    if constexpr (QK16) {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int c = tid + i * kThreads;
        if (c >= ROWS * kChunks) break;
        at::store_e4m3x8_as_f16(sQ + gm::sw128_offset(c / kChunks, (c % kChunks) * 16, ROWS), v[i]);
      }
    }
  }
};

// One CTA = (block of R consecutive query rows of the flattened batch, KV head g, KV
// split). Tile rows: r -> query row q0 + r / G, head g*G + r % G (R*G <= ROWS, R <= 32).
// The CTA stages each page of the union of its rows' selections once (keyed by
// (request, logical page), sorted); warpgroup w owns tile rows [64w, 64w+64) and every
// token of the page (wgmma), so each row runs its own online softmax with no
// cross-warpgroup merge. FMT selects the page format; the FP8 formats take an E4M3 query.
template <int FMT, bool QK16, int ROWS>
__global__ void __launch_bounds__(Layout<FMT, QK16, ROWS>::kThreads, 1)
    sparse_attention_kernel(const DecodeParams p) {
  using L = Layout<FMT, QK16, ROWS>;
  using Page = typename L::Page;
  constexpr bool FP8P = FMT != kBf16;
  constexpr int kThreads = L::kThreads;
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
  __shared__ dt::UnionSmem u;

  const dt::CtaTile t = dt::cta_tile(p);
  const int G = t.G, g = t.g, split = t.split, nq = t.nq, nrows = t.nrows;
  const long long q0 = t.q0;
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, warp = (tid >> 5) & 3;  // warpgroup, warp inside it

  QTileLoad<FMT, QK16, ROWS, kThreads> qload;
  dt::build_page_union<kThreads>(
      p, u, q0, nq, g, tid, [&] { qload.issue(p, sQ, q0, nrows, g, G, tid); }, [&] { qload.finish(sQ, tid); });

  const int n = u.count;
  const int per = (n + p.num_splits - 1) / p.num_splits;
  const int begin = split * per;
  const int end = min(n, begin + per);
  const float c2 = p.c * kLog2e;
  const int wg_row0 = wg * 64;
  const dt::RowState rs = dt::row_state(u, wg_row0, warp, lane, nrows, G);

  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  bool o_live = false;  // o holds a value written by a wgmma (else the first PV overwrites)

  // Pipeline: each page's K and V are one cp.async group, issued one page ahead (a
  // variant with separate K and V groups and the V conversion overlapping the QK wgmma
  // measured slower on the H200: more barriers per page).
  if (begin < end) {
    at::issue_page_copy<FMT, QK16, kThreads>(dt::page_src<FMT>(p, u, begin, g), body, u.valid[begin], tid);
    at::cp_async_commit();
    for (int i = begin; i < end; ++i) {
      unsigned char* stage = body + ((i - begin) & 1) * L::kStageBytes;
      if (i + 1 < end)
        at::issue_page_copy<FMT, QK16, kThreads>(dt::page_src<FMT>(p, u, i + 1, g),
                                                 body + ((i + 1 - begin) & 1) * L::kStageBytes, u.valid[i + 1], tid);
      at::cp_async_commit();
      at::cp_async_wait<1>();
      at::fence_view_async_shared();
      __syncthreads();
      if constexpr (FMT != kBf16) {
        at::convert_page<FMT, QK16, kThreads>(dt::page_src<FMT>(p, u, i, g), stage, conv, u.valid[i], tid);
        __syncthreads();
      }
      const unsigned mask = u.mask[i];
      if (rs.has_rows && (mask & rs.bits) != 0u) {
        std::uint32_t pa[8][4];
        dt::qk_softmax<FMT, QK16>(gm::smem_addr(sQ) + wg_row0 * 128, ROWS * 128,
                                  gm::smem_addr(Page::k_tile(stage, conv)), rs, u.key[i], mask, u.valid[i], lane, c2,
                                  m, l, o, pa);
        at::wg_pv<FMT>(pa, gm::smem_addr(Page::v_tile(stage, conv)), o, o_live);
        gm::wait<0>();
        gm::fence_operands(o);
        o_live = true;
      }
      __syncthreads();  // the stage and conv regions are reused next iteration
    }
  }

  at::cp_async_wait<0>();
  dt::store_rows<FP8P>(p, o, m, l, q0, g, G, wg_row0, warp, lane, nrows, split);
}

// ---------------------------------------------------------------------------------------
// Warp-specialised tile kernel (session 32): the same CTA work (query
// block x KV head x split, the page union, 64 tile rows per consumer warpgroup) with the
// page pipeline split by role instead of CTA barriers between the steps of every page.
//   - Warpgroup 0 (producer): the page copies (cp.async) and the widening of E4M3 /
//     NVFP4 pages into F16 K and V tiles; it signals each tile full on an mbarrier.
//   - Warpgroups 1.. (consumers, 64 tile rows each): Q K^T, softmax, P V; they release a
//     tile on an mbarrier as soon as their wgmmas have read it.
// Each consumer warpgroup issues page j's Q K^T before page j-1's P V, so that page j's
// softmax runs under that P V.
// FP8: 2 raw stages, one F16 K tile (released after Q K^T) and two F16 V tiles (page j's
// V is widened while the consumers still read page j-1's). Page j's K and V are widened
// under the consumers' softmax of page j-1; page j+2's copy is issued once page j is
// widened.
// NVFP4: the same with 3 raw stages, but each consumer warpgroup widens its share of page
// j's V tokens itself after forming page j's P; the producer widens only K. One producer
// warpgroup widening both sides bounded the kernel: without any widening (a diagnosis
// build) it ran 1.66-1.70x faster at batch >= 64 (64/4), without the V side 1.36-1.38x;
// with the V side on the consumers it is 1.10-1.24x faster at batch >= 32 (64/4; H200,
// session 33 runs A and F). Two K tiles (K widened a page ahead) were 1-2 % slower (run D).
// BF16: the copies land in three K tiles and two V tiles (K two pages ahead, V as soon as
// page j-2's P V released its tile); with one K + V stage pair per page, page j+1's copy
// waited for page j-1's release and BF16 ran at 0.88-1.04x of the serial kernel (H200,
// session 32 run C).
// ---------------------------------------------------------------------------------------
#ifndef FLASHMSA_WS_NV_VWIDEN  // NVFP4 V widening: 1 by the consumers (default), 0 by the producer
#define FLASHMSA_WS_NV_VWIDEN 1
#endif
template <int FMT, int ROWS>
struct WsLayout {
  static constexpr bool kBf16Fmt = FMT == kBf16;
  static constexpr bool kQK16 = !kBf16Fmt;  // the exact F16 Q K^T of the FP8 formats (D7)
  using Page = at::PageBytes<FMT, kQK16>;
  static constexpr int kConsumers = ROWS / 64;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kQBytes = ROWS * Page::kQRow;
  // FP8 / NVFP4: raw stages, then the K tile and V tiles 0 and 1 (Page::kConv = K + one
  // V). BF16: no raw stages; K tiles 0-2 and V tiles 0 and 1, the copies' targets.
  // NVFP4 (kConsV): the consumers widen V (each warpgroup its share of the tokens) and the
  // producer only K; three raw stages keep two pages' copies in flight while the
  // consumers still read the third's V. FLASHMSA_WS_NV_VWIDEN=0 builds the FP8 form.
  static constexpr bool kConsV = FMT == kNvfp4 && FLASHMSA_WS_NV_VWIDEN != 0;
  static constexpr int kStages = kBf16Fmt ? 0 : (kConsV ? 3 : 2);
  static constexpr int kStageBytes = (Page::kStage + 1023) / 1024 * 1024;
  static constexpr int kKTiles = kBf16Fmt ? 3 : 1;
  static constexpr int kTileBytes = kKTiles * Page::kK + 2 * Page::kV;
  static constexpr int kLutBytes = kConsV ? 4096 : 0;  // the NVFP4 block-scale tables, after the tiles
  static constexpr int kSmemBytes = kQBytes + kStages * kStageBytes + kTileBytes + kLutBytes + 1024;  // + slack
};

// mbarrier helpers (CUTLASS ClusterBarrier on a CTA-local barrier).
__device__ __forceinline__ void bar_wait(std::uint64_t* b, int parity) {
  cutlass::arch::ClusterBarrier::wait(b, static_cast<std::uint32_t>(parity));
}
__device__ __forceinline__ void bar_arrive(std::uint64_t* b) { cutlass::arch::ClusterBarrier::arrive(b); }
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// setmaxnreg (sm_90a): with two consumer warpgroups (384 threads, 168 registers each at
// launch) the producer gives registers to the consumers: 128 x 88 + 256 x 208 <= 64 K.
// ptxas reports 80 bytes of spill for NVFP4 (a split of 104 / 200 with the widening's
// block-scale tables read from shared memory ran 6-13 % slower, session 32 run J).
template <bool kInc, int kRegs>
__device__ __forceinline__ void set_max_registers() {
  if constexpr (kInc) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
  else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
constexpr int kProducerRegs = 88, kConsumerRegs = 208;
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= 65536, "setmaxnreg: 64 K registers per SM");
__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Barrier ids: 0 is __syncthreads; 1 the producer warpgroup; 3 and 4 the consumer
// warpgroups' turns (ping-pong).
constexpr int kProducerBar = 1, kTurnBar = 3;
#ifndef FLASHMSA_DECODE_PINGPONG
#define FLASHMSA_DECODE_PINGPONG 1
#endif

template <int FMT, int ROWS>
__global__ void __launch_bounds__(WsLayout<FMT, ROWS>::kThreads, 1)
    sparse_attention_ws_kernel(const DecodeParams p) {
  using L = WsLayout<FMT, ROWS>;
  using Page = typename L::Page;
  constexpr bool QK16 = L::kQK16;
  constexpr bool FP8P = FMT != kBf16;
  constexpr int kThreads = L::kThreads;
  constexpr int KT = L::kKTiles;
  constexpr int kCons = 128 * L::kConsumers;
  constexpr int S = L::kStages;
  extern __shared__ unsigned char smem_raw[];
  sm90::pdl_wait();  // PDL, as in sparse_attention_kernel
  sm90::pdl_launch_dependents();
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~static_cast<std::uintptr_t>(1023));
  unsigned char* sQ = smem;                            // [ROWS] x kQRow, SW128
  unsigned char* stages = smem + L::kQBytes;           // S page stages
  unsigned char* tiles = stages + S * L::kStageBytes;  // K tiles, then V tiles
  __shared__ dt::UnionSmem u;
  // K full[KT] (producer), K empty[KT] (consumers), V full[2] (producer; the consumers
  // with kConsV), V empty[2] (consumers). kConsV: also raw full[S] (producer: the stage's
  // copies landed) and stage free[S] (consumers: its V widened).
  constexpr bool kConsV = L::kConsV;
  __shared__ alignas(8) std::uint64_t bars[2 * KT + 4 + (kConsV ? 2 * S : 0)];
  constexpr int kKFull = 0, kKEmpty = KT, kVFull = 2 * KT, kVEmpty = 2 * KT + 2, kRawFull = 2 * KT + 4,
                kStageFree = kRawFull + S;

  const dt::CtaTile t = dt::cta_tile(p);
  const int G = t.G, g = t.g, split = t.split, nq = t.nq, nrows = t.nrows;
  const long long q0 = t.q0;
  const int tid = threadIdx.x, lane = tid & 31;
  const int wg = tid >> 7, warp = (tid >> 5) & 3;  // warpgroup, warp inside it

  if (tid == 0) {
    for (int b = 0; b < KT; ++b) {
      cutlass::arch::ClusterBarrier::init(&bars[kKFull + b], 128);
      cutlass::arch::ClusterBarrier::init(&bars[kKEmpty + b], kCons);
    }
    for (int b = 0; b < 2; ++b) {
      cutlass::arch::ClusterBarrier::init(&bars[kVFull + b], kConsV ? kCons : 128);
      cutlass::arch::ClusterBarrier::init(&bars[kVEmpty + b], kCons);
    }
    if constexpr (kConsV) {
      for (int b = 0; b < S; ++b) {
        cutlass::arch::ClusterBarrier::init(&bars[kRawFull + b], 256);  // two arrivals per producer thread
        cutlass::arch::ClusterBarrier::init(&bars[kStageFree + b], kCons);
      }
    }
  }
  QTileLoad<FMT, QK16, ROWS, kThreads> qload;
  dt::build_page_union<kThreads>(
      p, u, q0, nq, g, tid, [&] { qload.issue(p, sQ, q0, nrows, g, G, tid); }, [&] { qload.finish(sQ, tid); });
  // NVFP4: the 256 block-scale tables, read by the consumers' V widening instead of
  // computing each 16-value group's table (1.00-1.02x, H200, session 33 run E). The
  // producer computes its tables: at 88 registers the table reads cost a 4-byte spill,
  // for another 0-1 % (run E).
  auto lut = [&] { return gm::smem_addr(tiles + L::kTileBytes); };  // not held across the roles' split
  if constexpr (L::kLutBytes != 0) gm::fill_nvfp4_luts<kThreads>(reinterpret_cast<uint4*>(tiles + L::kTileBytes), tid);
  at::cp_async_wait<0>();  // the Q tile, before any role reads it
  at::fence_view_async_shared();
  __syncthreads();

  const int n_all = u.count;
  const int per = (n_all + p.num_splits - 1) / p.num_splits;
  const int begin = split * per;
  const int n = max(0, min(n_all, begin + per) - begin);  // pages of this split
  // Page j's tiles: K tile j % KT, V tile j % 2 (F16 images for the FP8 formats); its K
  // barriers kKFull / kKEmpty + j % KT, completion j / KT.
  auto k_tile = [&](int j) -> unsigned char* { return tiles + (j % KT) * Page::kK; };
  auto v_tile = [&](int j) -> unsigned char* { return tiles + KT * Page::kK + (j & 1) * Page::kV; };

  if (wg == 0) {
    // ---------------- producer ----------------
    if constexpr (L::kConsumers == 2) set_max_registers<false, kProducerRegs>();
    if constexpr (FMT == kBf16) {
      // The copies land in the tiles. Items in issue order: K(0), K(1), then per page j
      // V(j), K(j + 2); item s is one commit group (empty where the page does not exist),
      // s = 2 + 2 j for V(j), 3 + 2 j for K(j + 2). After committing item s, items <= s - 2
      // have landed (wait_group 2) and are signalled, so an item is never signalled behind
      // a wait for a release that needs it: K(j + 2) waits for the consumers' Q K^T of
      // page j - 1, V(j) for their P V of page j - 2, both signalled by then.
      const int items = 2 + 2 * n;
      auto item_page = [&](int s, bool& is_k) {
        is_k = s < 2 || (s & 1);
        return s < 2 ? s : (is_k ? (s - 3) / 2 + 2 : (s - 2) / 2);
      };
      auto issue_item = [&](int s) {
        bool is_k;
        const int j = item_page(s, is_k);
        if (j >= n) return;
        const at::PageSrc src = dt::page_src<FMT>(p, u, begin + j, g);
        if (is_k) {
          if (j >= KT) bar_wait(&bars[kKEmpty + j % KT], (j / KT - 1) & 1);
          at::issue_side_copy<FMT, false, at::kSideK, 128>(src, k_tile(j), u.valid[begin + j], tid);
        } else {
          if (j >= 2) bar_wait(&bars[kVEmpty + (j & 1)], ((j >> 1) - 1) & 1);
          at::issue_side_copy<FMT, false, at::kSideV, 128>(src, v_tile(j) - Page::kK, u.valid[begin + j], tid);
        }
      };
      auto signal_item = [&](int s) {
        bool is_k;
        const int j = item_page(s, is_k);
        if (j >= n) return;
        bar_arrive(is_k ? &bars[kKFull + j % KT] : &bars[kVFull + (j & 1)]);
      };
#pragma unroll 1
      for (int s = 0; s < items; ++s) {
        issue_item(s);
        at::cp_async_commit();
        if (s >= 2) {
          at::cp_async_wait<2>();
          at::fence_view_async_shared();
          signal_item(s - 2);
        }
      }
      at::cp_async_wait<0>();
      at::fence_view_async_shared();
      for (int s = max(0, items - 2); s < items; ++s) signal_item(s);
    } else if constexpr (kConsV) {
      // NVFP4, V widened by the consumers: raw pages into S = 3 stages; the producer widens
      // K. Raw full of a stage takes two arrivals per producer thread: one when its copies
      // of the page completed (cp.async.mbarrier.arrive), one after its wait for them,
      // which also releases the plain scale stores of unaligned planes.
      auto issue = [&](int j) {
        at::issue_page_copy<FMT, QK16, 128>(dt::page_src<FMT>(p, u, begin + j, g),
                                            stages + (j % S) * L::kStageBytes, u.valid[begin + j], tid);
        cutlass::arch::cpasync_barrier_arrive_noinc(&bars[kRawFull + j % S]);
      };
      // Commit group k holds page k: pages 0..S-1 from here, page j + 2 from iteration j >= 1.
#pragma unroll 1
      for (int j = 0; j < S; ++j) {
        if (j < n) issue(j);
        at::cp_async_commit();
      }
#pragma unroll 1
      for (int j = 0; j < n; ++j) {
        // This thread's copies of page j: groups 0..j + 1 are committed (0..S-1 at j = 0).
        static_assert(S == 3, "group accounting");
        if (j == 0) at::cp_async_wait<2>();
        else at::cp_async_wait<1>();
        bar_arrive(&bars[kRawFull + j % S]);
        named_sync(kProducerBar, 128);  // everyone's
        const at::PageSrc src = dt::page_src<FMT>(p, u, begin + j, g);
        // K tile j % KT: the consumers' Q K^T of page j - KT has read it.
        if (j >= KT) bar_wait(&bars[kKEmpty + j % KT], (j / KT - 1) & 1);
        at::convert_side<FMT, true, at::kSideK, 128>(src, stages + (j % S) * L::kStageBytes, k_tile(j),
                                                     u.valid[begin + j], tid);
        bar_arrive(&bars[kKFull + j % KT]);
        // Page j + 2 into page j - 1's stage: its K was widened by every producer thread
        // (the named_sync above), its V by the consumers (stage free).
        if (j >= 1) {
          if (j + 2 < n) {
            bar_wait(&bars[kStageFree + (j - 1) % S], ((j - 1) / S) & 1);
            issue(j + 2);
          }
          at::cp_async_commit();  // group j + 2 (empty past the last page)
        }
      }
    } else {
      // E4M3 / NVFP4: raw pages into 2 stages, widened into the F16 tiles.
      auto issue = [&](int j) {
        at::issue_page_copy<FMT, QK16, 128>(dt::page_src<FMT>(p, u, begin + j, g),
                                            stages + (j & 1) * L::kStageBytes, u.valid[begin + j], tid);
      };
      // Pages 0 and 1 in flight; page j + 2 goes into page j's stage once it is widened.
#pragma unroll 1
      for (int j = 0; j < 2; ++j) {
        if (j < n) issue(j);
        at::cp_async_commit();
      }
#pragma unroll 1
      for (int j = 0; j < n; ++j) {
        at::cp_async_wait<1>();         // this thread's copies of page j
        named_sync(kProducerBar, 128);  // everyone's
        unsigned char* stage = stages + (j & 1) * L::kStageBytes;
        const at::PageSrc src = dt::page_src<FMT>(p, u, begin + j, g);
        if (j >= 1) bar_wait(&bars[kKEmpty], (j - 1) & 1);  // the consumers' Q K^T of page j - 1
        at::convert_side<FMT, true, at::kSideK, 128>(src, stage, k_tile(j), u.valid[begin + j], tid);
        bar_arrive(&bars[kKFull]);
        // V tile j % 2: the consumers' P V of page j - 2 has read it.
        if (j >= 2) bar_wait(&bars[kVEmpty + (j & 1)], ((j >> 1) - 1) & 1);
        at::convert_side<FMT, true, at::kSideV, 128>(src, stage, v_tile(j) - Page::kK, u.valid[begin + j], tid);
        bar_arrive(&bars[kVFull + (j & 1)]);
        named_sync(kProducerBar, 128);  // stage j % 2 read by everyone
        if (j + 2 < n) issue(j + 2);
        at::cp_async_commit();
      }
    }
    at::cp_async_wait<0>();
    return;
  }

  // ---------------- consumers ----------------
  if constexpr (L::kConsumers == 2) set_max_registers<true, kConsumerRegs>();
  const int ctid = tid - 128;  // consumer thread index
  const int row0 = (wg - 1) * 64;
  const float c2 = p.c * kLog2e;
  const dt::RowState rs = dt::row_state(u, row0, warp, lane, nrows, G);
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  bool o_live = false;  // o holds a value written by a wgmma (else the first P V overwrites)
  // Page j's Q K^T is issued before page j - 1's P V, so that page j's softmax runs under
  // that P V (the second wgmma group); the O rescale by page j's alpha waits for it.
  // Every page runs the same steps, also where none of this warpgroup's rows chose it: its
  // scores are then all masked, so P is zero and m, l and O keep their bits (alpha = 1).
  // Under a branch, with a wgmma in flight across it, ptxas serialises every wgmma
  // (C7518 / C7520); for the same reason page 0 is peeled off the loop.
  std::uint32_t pa[8][4];  // page j - 1's P V operand
  const std::uint32_t q_addr = gm::smem_addr(sQ) + row0 * 128;
  // Page j: wait for its K tile, issue its Q K^T into s.
  auto issue_qk = [&](int j, float (&s)[64]) {
    bar_wait(&bars[kKFull + j % KT], (j / KT) & 1);
    at::wg_qk<FMT, QK16>(q_addr, ROWS * 128, gm::smem_addr(k_tile(j)), s);
  };
  // Page j's Q K^T completed (wait<1>: one later group may still run): release the K tile
  // and run the softmax step.
  auto softmax = [&](int j, float (&s)[64], float (&alpha)[2]) {
    gm::fence_operands(s);
    bar_arrive(&bars[kKEmpty + j % KT]);
    const int i = begin + j;
    dt::softmax_page<FP8P>(s, rs, u.key[i], u.mask[i], u.valid[i], lane, c2, m, l, alpha);
  };
  // P V of page j (its V tile landed), issued and committed; not waited.
  auto issue_pv = [&](int j) {
    bar_wait(&bars[kVFull + (j & 1)], (j >> 1) & 1);
    at::wg_pv<FMT>(pa, gm::smem_addr(v_tile(j)), o, o_live);
  };
  // After page j's P V completed: release its V tile.
  auto pv_done = [&](int j) {
    gm::fence_operands(o);
    o_live = true;
    bar_arrive(&bars[kVEmpty + (j & 1)]);
  };
  // kConsV: widen this warpgroup's share of page j's V tokens into V tile j % 2 (after both
  // warpgroups' P V of page j - 2), then signal the tile (V full) and the raw stage (free).
  // After P of page j: under the wgmmas (before the wait for page j's Q K^T) it ran
  // 1.00-1.11x slower at batch >= 32 (H200, session 33 run B).
  constexpr int kVTok = 128 / L::kConsumers;
  auto widen_v = [&](int j) {
    if constexpr (kConsV) {
      bar_wait(&bars[kRawFull + j % S], (j / S) & 1);
      if (j >= 2) bar_wait(&bars[kVEmpty + (j & 1)], ((j >> 1) - 1) & 1);
      at::PageSrc src;  // convert_side's NVFP4 V branch reads only the V scale layout (v_swz)
      src.v_swz = p.v_swizzled;
      at::convert_side<FMT, true, at::kSideV, 128, false, kVTok, true>(
          src, stages + (j % S) * L::kStageBytes, v_tile(j) - Page::kK, u.valid[begin + j], ctid & 127,
          (wg - 1) * kVTok, lut());
      bar_arrive(&bars[kVFull + (j & 1)]);
      bar_arrive(&bars[kStageFree + j % S]);
    }
  };

  // Ping-pong (two consumer warpgroups, FA3 style): a warpgroup issues its wgmmas of a
  // page only in its turn and then hands the turn over, so that the two warpgroups drift
  // half a page apart and one's softmax runs under the other's wgmmas. Turn barriers
  // kTurnBar + w (256 threads: warpgroup w syncs, the other arrives); warpgroup 0 starts.
  // H200: FP8 1.00-1.05x (session 32 run I); NVFP4 0.99-1.03x once its consumers widen V
  // (session 33 run H; 0.98-1.02x before, with the producer widening both sides).
  constexpr bool kPingPong = FLASHMSA_DECODE_PINGPONG != 0 && L::kConsumers == 2;
  const int cw = wg - 1;
  auto turn_begin = [&] {
    if constexpr (kPingPong) named_sync(kTurnBar + cw, 256);
  };
  auto turn_end = [&](bool last) {  // warpgroup 1's last hand-over has no taker
    if constexpr (kPingPong) {
      if (!(last && cw == 1)) named_arrive(kTurnBar + (1 - cw), 256);
    }
  };
  if (n > 0) {
    if constexpr (kPingPong) {
      if (cw == 1) named_arrive(kTurnBar, 256);
    }
    {
      float s[64], alpha[2];
      turn_begin();
      issue_qk(0, s);
      turn_end(false);
      gm::wait<0>();
      softmax(0, s, alpha);
      dt::rescale_o(o, alpha);
      dt::p_operand<FP8P>(s, pa);
      widen_v(0);
    }
#pragma unroll 1
    for (int j = 1; j < n; ++j) {
      float s[64], alpha[2];
      turn_begin();
      issue_qk(j, s);
      issue_pv(j - 1);
      turn_end(false);
      gm::wait<1>();
      softmax(j, s, alpha);
      gm::wait<0>();
      pv_done(j - 1);
      dt::rescale_o(o, alpha);
      dt::p_operand<FP8P>(s, pa);
      widen_v(j);
    }
    turn_begin();
    issue_pv(n - 1);
    turn_end(true);
    gm::wait<0>();
    pv_done(n - 1);
  }
  dt::store_rows<FP8P>(p, o, m, l, q0, g, G, row0, warp, lane, nrows, split);
}

// Split merge as a kernel of its own, after every tile-kernel launch with splits (and the
// warp-MMA kernel's without a cluster merge): kCombinePairs (row, head) pairs per CTA of
// 128 threads (one pass).
constexpr int kCombinePairs = 8;
__global__ void __launch_bounds__(128) sparse_attention_combine(const DecodeParams p) {
  sm90::pdl_wait();  // the attention grid's partials (pdl.cuh)
  const long long first = static_cast<long long>(blockIdx.x) * kCombinePairs;
  const long long pairs = static_cast<long long>(p.num_rows) * p.num_q_heads;
  const int n = static_cast<int>(min(static_cast<long long>(kCombinePairs), pairs - first));
  dt::merge_splits<128>(p, n * 32, threadIdx.x, [&](int r) { return first + r; });
}

// Launches one tile kernel (`kernel`, kThreads threads, smem bytes of dynamic shared
// memory) over (query blocks x KV heads, splits), then the combine kernel where needed.
template <class Kernel>
cudaError_t launch_tile_kernel(Kernel kernel, int threads, int smem, const DecodeParams& p, cudaStream_t stream,
                               bool (&configured)[64]) {
  // The shared-memory opt-in is per device: set it once per device ordinal (retried
  // after a failure).
  int dev = 0;
  cudaError_t err0 = cudaGetDevice(&dev);
  if (err0 != cudaSuccess) return err0;
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    err0 = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err0 != cudaSuccess) return err0;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  const long long nqb = (static_cast<long long>(p.num_rows) + p.queries_per_cta - 1) / p.queries_per_cta;
  dim3 grid(static_cast<unsigned>(nqb * p.num_kv_heads), p.num_splits);
  // Splits are merged by the combine kernel. Until session 34 the last CTA of each (query
  // block, KV head) merged its tile rows itself when tile rows x splits <= 256; on the
  // H200 that fold cost 5-15 us more per call than the combine kernel in every measured
  // shape (its merge ran on one SM after the CTA's own pages; FP8, Q 8, 24-512 CTAs,
  // 2-5 splits, session 34 run E, docs/decode-design.md).
  // Both kernels are programmatic dependents of their predecessor (pdl.cuh): their launch
  // overlaps the previous kernel's tail.
  cudaError_t err = sm90::launch_pdl(kernel, grid, dim3(threads), smem, stream, true, p);
  if (err != cudaSuccess || p.num_splits == 1) return err;
  return static_cast<cudaError_t>(launch_split_combine(p, stream));
}

template <int FMT, bool QK16, int ROWS>
cudaError_t launch_rows(const DecodeParams& p, cudaStream_t stream) {
  // The warp-specialised kernel runs BF16 and the exact FP8 / NVFP4 paths (F16 Q K^T);
  // the FP8 formats' QGMMA opt-in keeps the serial kernel.
  if constexpr (QK16 || FMT == kBf16) {
    if (!p.serial_tile) {
      using L = WsLayout<FMT, ROWS>;
      static bool configured[64] = {};
      return launch_tile_kernel(sparse_attention_ws_kernel<FMT, ROWS>, L::kThreads, L::kSmemBytes, p, stream,
                                configured);
    }
  }
  using L = Layout<FMT, QK16, ROWS>;
  static bool configured[64] = {};
  return launch_tile_kernel(sparse_attention_kernel<FMT, QK16, ROWS>, L::kThreads, L::kSmemBytes, p, stream,
                            configured);
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
      (p.num_splits > 1 && (p.o_partial == nullptr || p.lse_partial == nullptr)))
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
  long long splits = num_sms / ctas;                    // the most that fit one wave (never two)
  if (splits < 1) splits = 1;
  if (splits > 8) splits = 8;  // >= 2 pages per split for a full top-16 row
  return static_cast<int>(splits);
}

namespace {
// FLASHMSA_DECODE_KERNEL=warp_mma|tile replaces the kernel heuristic of
// choose_decode_schedule (benchmarks, and the GPU tests that run every shape on both
// kernels). Read at every plan (host side, outside graph capture); logged once per value.
// 0: not set, 1: warp_mma (token split), 2: tile, 3: warp_mma_dsplit, 4: tile_serial.
int forced_decode_kernel() {
  static std::atomic<int> logged{0};
  const char* v = std::getenv("FLASHMSA_DECODE_KERNEL");
  int r = 0;
  if (v != nullptr && std::strcmp(v, "warp_mma") == 0) r = 1;
  if (v != nullptr && std::strcmp(v, "tile") == 0) r = 2;
  if (v != nullptr && std::strcmp(v, "warp_mma_dsplit") == 0) r = 3;
  if (v != nullptr && std::strcmp(v, "tile_serial") == 0) r = 4;
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
  s.serial_tile = forced == 4;
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

std::int64_t decode_workspace_floats(int num_rows, int num_q_heads, int num_splits) {
  if (num_splits <= 1) return 0;
  return static_cast<std::int64_t>(num_rows) * num_q_heads * num_splits * 129;  // o_partial, lse_partial
}

int device_malloc(void** ptr, std::int64_t bytes) {
  return cudaMalloc(ptr, static_cast<size_t>(bytes));
}
int device_free(void* ptr) { return ptr ? cudaFree(ptr) : 0; }
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

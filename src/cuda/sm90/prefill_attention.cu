// SM90 KV-outer sparse attention for prefill: the attention kernel (stage 2 in
// prefill_kvouter.h).
#include <cuda.h>  // CUtensorMap (the Q gather's and the partials' TMA descriptors)

#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>

#include "cuda/sm90/pdl.cuh"
#include "cuda/sm90/prefill_kvouter_detail.cuh"

namespace flashmsa::cuda::prefill {
namespace {

using at::ex2_approx;
using at::kLog2_448;
using at::kLog2e;

// ---------------------------------------------------------------------------------------
// Attention.

// QK16 (FP8 paths, default): Q K^T on the exact F16 images of E4M3 Q and K (attn_tile.cuh).
// Q8RS (kQ8Rs, the default since session 24): the E4M3 query rows come by TMA (128-byte
// rows, like QGMMA's) and each warp widens its A fragments in registers (load_q_frags)
// for a register-sourced wgmma against a K-permuted F16 K tile; with kQ8Rs off, the F16
// Q tiles come by TMA from the query's F16 copy (widen_q_chunk in the plan), like BF16
// tiles. H200, session 24 run J: Q8RS took the plan's 12-13 us of widening away and
// added 8-13 us to the attention kernel; whole calls Q8KV8 / Q8KV4 at (16/1, 8192,
// 32768) 454-458 / 452-455 us against 455-458 / 457-460, at (64/4, 8192, 32768)
// 1698-1713 / 1688-1698 against 1728-1730 / 1725-1727, at (16/1, 16384, 114688) 885-886
// / 878-882 against 903 / 904-906. Session 24 issued Q8RS's QK(n+1) only after PV(n)
// retired; issuing it under PV(n), as the other paths do (S(n+1), its Q fragments, P(n)
// and the FP32 O(n) all live: 255 registers, no spill), took 4-5 us off the FP8
// attention at the floor case (H200, session 25 run A, docs/bench/h200-2026-11-30-s25).
//
// Software pipeline (per warpgroup): the QK wgmma of tile n+1 is issued right after the
// PV wgmma of tile n, so it runs under tile n's epilogue; the Q rows of tile n+2 are in
// flight meanwhile. Three tiles are live at once, so the buffers rotate by tile
// position n (counted across units): metadata
// n % 3; Q tiles n % 3 (a 256-byte-row tile, BF16 or the F16 copy, is also the output
// staging of its own epilogue; E4M3 rows, QGMMA's and Q8RS's, use one staging tile).
template <int FMT, bool QK16>
struct Smem {
  using PB = at::PageBytes<FMT, QK16>;
  static constexpr int kPage = PB::kStage;                            // one cp.async page stage (x2)
  static constexpr int kConv = PB::kConv;                             // converted page tiles (x1)
  static constexpr int kNQ = 3;                                       // TMA-gathered Q tiles
  static constexpr bool kQ16 = FMT == at::kBf16 || (QK16 && !kQ8Rs);  // 16-bit Q rows (256 bytes)
  static constexpr int kQ = kTileRows * (kQ16 ? 256 : 128);          // E4M3 rows: 128 bytes
  // Output staging (64 rows x 256 bytes per warpgroup, SW128): the 256-byte-row Q tile
  // the QK wgmma read; E4M3 rows (QGMMA, Q8RS) need their own (one: only the epilogue
  // uses it).
  static constexpr int kStage = kQ16 ? 0 : kTileRows * 256;
  // s_units[2] (UnitDesc), s_row[3][128] (int), s_lim[3][128] (int8), s_sched[2], Q
  // barriers [2 warpgroups][kNQ] (u64)
  static constexpr int kMeta = 2 * 32 + 3 * kTileRows * 5 + 8 + 2 * kNQ * 8;
  static constexpr int kBytes = 2 * kPage + kConv + kNQ * kQ + kStage + kMeta;
  static constexpr int kAlloc = kBytes + 1024;  // runtime 1024-byte alignment
  // Q tiles (TMA SW128 destinations, epilogue staging: address-based swizzle) start at
  // multiples of 1024 bytes.
  static_assert((2 * kPage + kConv) % 1024 == 0 && kQ % 1024 == 0, "1024-byte aligned Q tiles");
  static_assert(kAlloc <= 227 * 1024, "shared memory");
};

// Global addresses of a work unit's page (computed where needed, not kept live: the
// pipelined tile loop runs at the register limit).
template <int FMT>
__device__ __forceinline__ at::PageSrc page_src(const PrefillParams& p, const UnitDesc& un) {
  at::PageSrc src;
  const long long phys = un.phys;
  constexpr int es = FMT == at::kBf16 ? 2 : 1;
  src.k = static_cast<const std::uint8_t*>(p.k_data) + (phys * p.k_stride[0] + un.g * p.k_stride[1]) * es;
  src.v = static_cast<const std::uint8_t*>(p.v_data) + (phys * p.v_stride[0] + un.g * p.v_stride[1]) * es;
  src.k_tok = p.k_stride[2] * es;
  src.v_tok = p.v_stride[2] * es;
  if constexpr (FMT == at::kNvfp4) {
    src.ks = p.k_scale + phys * p.ks_stride[0] + un.g * p.ks_stride[1];
    src.vs = p.v_scale + phys * p.vs_stride[0] + un.g * p.vs_stride[1];
    src.ks_tok = p.ks_stride[2];
    src.vs_tok = p.vs_stride[2];
    src.k_swz = p.k_swizzled;
    src.v_swz = p.v_swizzled;
  }
  return src;
}

// L2 policies. Every Q row is gathered once per page it selected (16 times), as many
// bytes as the partials written; the partials are read back only by the combine, after
// the whole kernel. Streaming them through L2 with the default policy evicted Q before
// its next use (reuse distance ~75 MB of traffic at (16/1, 8192, 32768) against a 50 MB
// L2), so Q gathers are marked evict_last and partial stores evict_first.
__device__ __forceinline__ std::uint64_t l2_evict_last() {
  std::uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ std::uint64_t l2_evict_first() {
  std::uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ void st_global_hint(void* p, float2 v, std::uint64_t pol) {
  asm volatile("st.global.L1::no_allocate.L2::cache_hint.v2.f32 [%0], {%1, %2}, %3;\n" ::"l"(p), "f"(v.x), "f"(v.y),
               "l"(pol)
               : "memory");
}

// Partial stores by TMA: each query's G staged rows go out as two boxes (one per 128-byte
// SW128 panel) of the o_part tensor map (encode_o_map: [T K Hq, 128] BF16, box G x 64),
// issued by one lane per box. Bulk groups are per thread: an issuing lane waits for its
// boxes' shared reads (wait_group.read) before the staging buffer is reused (the
// warpgroup barrier before the next Q gather, the unit barrier, the next stmatrix into a
// separate staging tile, the kernel's end).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, std::uint32_t src, int x, int y,
                                             std::uint64_t pol) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%2, %3}], [%1], %4;\n" ::"l"(map),
      "r"(src), "r"(x), "r"(y), "l"(pol)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }

// The list entry (ListEntry) of this thread's row of M-tile j of unit `un` (padding: {-1,
// 0, -1, 0}). Loaded a softmax ahead of issue_q_tile, which depends on it: issued right
// before the gather, its global round trip was the kernel's largest single stall (ncu,
// session 15).
__device__ __forceinline__ int4 load_entry(const Workspace& w, const UnitDesc& un, int j, int G, int qpt, int tid) {
  const int idx = un.begin + j * qpt + ((tid >> 1) >> (__ffs(G) - 1));  // G divides 16 (launch check)
  return idx < un.end ? w.list[idx] : make_int4(-1, 0, -1, 0);
}

// TMA gather of one M-tile and its row metadata. Row r of the tile is head g*G + r % G of
// the query of `entry` (load_entry); a query's G heads are one box of the
// q tensor map (q_map, encode_q_map: [T, Hq, 128], box 1 x G x (64 | 128) elements), so
// one thread per query issues the copies (two for BF16, one per 128-byte SW128 panel)
// into rows [r, r + G) of the SW128 tile. Each query's thread arrives on the warpgroup's barrier `bar`
// for this tile position (initialised for 64 / G arrivals), expecting its query's bytes
// (none for a padding query). Padding rows are not loaded: they keep stale
// data, which the mask (lim -1: every key masked, P = 0) and the store (s_row -1) make
// invisible. The cp.async gather it replaces issued 8 LDGSTS per thread and tile and was
// the kernel's largest MIO-throttle stall (ncu, session 15).
// Metadata: s_row = the row's partial index (t * K + slot) * Hq + h into o_part /
// ml_part, or -1 (padding; int: the launch checks K T Hq < 2^31); s_lim = the last
// visible token of the page for that query (ListEntry z: never past the page's valid
// tokens, whatever the metadata says, so the zero-filled slots stay invisible even for
// a row placed beyond seq_len).
template <int FMT, bool QK16>
__device__ __forceinline__ void issue_q_tile(const CUtensorMap& q_map, int4 entry, int G, std::uint8_t* q_tile,
                                             int* s_row, std::int8_t* s_lim, std::uint64_t* bar, int tid) {
  constexpr bool kQ16 = Smem<FMT, QK16>::kQ16;  // BF16 or the query's F16 copy
  constexpr int kRowBytes = kQ16 ? 256 : 128;   // one head of one query row
  const int r = tid >> 1, half = tid & 1;  // warpgroup wg: rows 64 wg.. (threads 2r, 2r + 1)
  const bool ok = entry.x >= 0;
  if (half == 0 && (r & (G - 1)) == 0) {  // the query's first row: its box(es) and the arrival
    if (ok) {
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(bar, static_cast<std::uint32_t>(G * kRowBytes));
      const std::uint64_t pol = l2_evict_last();
      cute::SM90_TMA_LOAD_3D::copy(&q_map, bar, pol, q_tile + r * 128, 0, entry.w, entry.y);
      if constexpr (kQ16)
        cute::SM90_TMA_LOAD_3D::copy(&q_map, bar, pol, q_tile + kTileRows * 128 + r * 128, 64, entry.w, entry.y);
    } else {
      cutlass::arch::ClusterBarrier::arrive(bar);
    }
  }
  if (half == 0) {
    s_row[r] = ok ? entry.x + (r & (G - 1)) : -1;
    s_lim[r] = static_cast<std::int8_t>(entry.z);
  }
}

__device__ __forceinline__ void wg_barrier(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory");
}

// Keeps the A fragments of an in-flight RS wgmma (P of P V; Q8RS's Q of Q K^T) in their
// registers until the wgmma.wait that retires it.
__device__ __forceinline__ void fence_pa(std::uint32_t (&pa)[8][4]) {
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(pa[i][k])::"memory");
}

// Single-page softmax of this warpgroup's 64 rows (S waited in s) -> P fragments pa, row
// maxima m (raw logits) and row normalisers l; then issues O = P V (committed, not
// waited: pa must stay untouched until it retires) and sums l over the quad under it. The row max and sum
// run as four interleaved chains of 8 (then a 4 -> 1 tree), not one chain of 32: with 8
// warps per SM, a serial FMNMX / FADD chain was latency the scheduler could not hide.
template <int FMT>
__device__ __forceinline__ void softmax_pv(const PrefillParams& p, float (&s)[64], int lim0, int lim1,
                                           std::uint32_t v_addr, std::uint32_t (&pa)[8][4], float (&o)[64],
                                           float (&m)[2], float (&l)[2], int lane) {
  constexpr bool kFp8 = FMT != at::kBf16;
  const float c2 = p.c * kLog2e;
  if (lim0 < 127 || lim1 < 127) {  // the query's own page: causal mask
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int col = 8 * j + 2 * (lane & 3) + (i & 1);
        if (col > ((i >> 1) ? lim1 : lim0)) s[4 * j + i] = -INFINITY;
      }
  }
  // s[4 j + 2 r + e]: row r, column 8 j + 2 (lane & 3) + e; chain a = j & 3.
  float acc[2][4];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int a = 0; a < 4; ++a) acc[r][a] = fmaxf(s[4 * a + 2 * r], s[4 * a + 2 * r + 1]);
#pragma unroll
  for (int j = 4; j < 16; ++j)
#pragma unroll
    for (int r = 0; r < 2; ++r)
      acc[r][j & 3] = fmaxf(acc[r][j & 3], fmaxf(s[4 * j + 2 * r], s[4 * j + 2 * r + 1]));
  float bias[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m[r] = fmaxf(fmaxf(acc[r][0], acc[r][1]), fmaxf(acc[r][2], acc[r][3]));
    m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 1));
    m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 2));
    const float mu = m[r] == -INFINITY ? 0.0f : m[r];
    bias[r] = kFp8 ? fmaf(-mu, c2, kLog2_448) : -mu * c2;  // spec 3.4
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) s[i] = ex2_approx(fmaf(s[i], c2, bias[(i >> 1) & 1]));  // masked: 0
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int a = 0; a < 4; ++a) acc[r][a] = s[4 * a + 2 * r] + s[4 * a + 2 * r + 1];
#pragma unroll
  for (int j = 4; j < 16; ++j)
#pragma unroll
    for (int r = 0; r < 2; ++r) acc[r][j & 3] += s[4 * j + 2 * r] + s[4 * j + 2 * r + 1];
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = (acc[r][0] + acc[r][1]) + (acc[r][2] + acc[r][3]);  // unrounded normaliser
#pragma unroll
  for (int st = 0; st < 8; ++st) {
    if constexpr (kFp8) {  // E4M3_sat(p448), exact as f16
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t q8 = gm::pack_e4m3x4(s[8 * st + 4 * h], s[8 * st + 4 * h + 1], s[8 * st + 4 * h + 2],
                                                 s[8 * st + 4 * h + 3]);
        pa[st][2 * h] = gm::e4m3x2_to_f16x2(static_cast<std::uint16_t>(q8 & 0xffffu));
        pa[st][2 * h + 1] = gm::e4m3x2_to_f16x2(static_cast<std::uint16_t>(q8 >> 16));
      }
    } else {
      gm::bf16_a_from_acc(s, st, pa[st]);
    }
  }
  at::wg_pv<FMT>(pa, v_addr, o, false);
  // The quad's row sums, under the PV wgmma (in the epilogue they were exposed shuffles).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
}

// stmatrix.x4: four 8x8 b16 matrices; lane i gives the shared address of row i % 8 of
// matrix i / 8, and register k holds the lane's two elements of matrix k (the mma
// accumulator layout: row lane / 4, columns 2 (lane % 4) + {0, 1}). Not CuTe's
// SM90_U32x4_STSM_N: its asm has no memory clobber, and the staged rows are read by the
// TMA engine right after a proxy fence and a __syncwarp.
__device__ __forceinline__ void stmatrix_x4(std::uint32_t addr, std::uint32_t r0, std::uint32_t r1,
                                            std::uint32_t r2, std::uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// Epilogue of one tile (PV retired). The partial is stored unnormalised: BF16(O) (O =
// sum of P v over the page) at each row's entry slot, staged through an SW128 tile
// (256-byte rows) with stmatrix, and the row's (m c, l) pair: its log scale (the raw max
// times c) and its normaliser. The combine divides (prefill_combine), so the epilogue
// needs no reciprocal, no 64 multiplies and no logarithm. BF16(O) carries the same
// relative rounding as BF16(O / l) did.
// The staged rows go out by TMA: a query's G rows are one box per 128-byte
// panel, issued by lane b < 32 / G of the warp that staged them (box b: panel b & 1 of
// the warp's query b >> 1). H200, session 22 run A: attention 10-13 us faster at (16/1,
// 8192, 32768) than the 16-byte stores it replaced (8 shared loads and 8 predicated
// stores per thread and tile, most of the epilogue's instructions).
// (Session 23, run Q: splitting this around the next tile's Q K^T wait, stmatrix before
// and the proxy fence and stores after, gained nothing; runs/q/epilogue_split.patch.)
template <bool kOwnStage>
__device__ __forceinline__ void epilogue(const PrefillParams& p, const Workspace& w, const CUtensorMap* o_map,
                                         const float (&o)[64], const float (&m)[2], const float (&l)[2],
                                         std::uint8_t* stage, const int* s_row, int G, int wg, int wtid) {
  const int warp = wtid >> 5, lane = wtid & 31;
  // A staging tile of its own (E4M3 rows: QGMMA, Q8RS) is rewritten by every epilogue:
  // this warp's boxes of the previous tile must have been read out of it (the tile loop
  // waits at its top only where the staging is a Q tile, kQ16).
  if constexpr (kOwnStage) {
    bulk_wait_read();
    __syncwarp();
  }
  // The row indices first: their shared loads are not ordered behind the stmatrix (asm
  // with a memory clobber) and their latency hides under it (ncu, session 16: the first
  // use of s_row was the kernel's second largest stall).
  const int r_ml = lane & 1;  // row r_ml of the quad's two rows goes out through lane 4 q + r_ml
  const int orow_ml = s_row[64 * wg + 16 * warp + (lane >> 2) + 8 * r_ml];
  const int rb = 64 * wg + 16 * warp + (lane >> 1) * G;  // the first row of this lane's box
  const int ybox = lane * G < 32 ? s_row[rb] : -1;       // lane < 32 / G (G divides 16), without a division
  {
    // Matrices of stmatrix s: (column group 2 s + (k >> 1), row half k & 1), k = 0..3.
    const int q = lane >> 3;
    const int row = 64 * wg + 16 * warp + 8 * (q & 1) + (lane & 7);
    const std::uint32_t base = gm::smem_addr(stage);
#pragma unroll
    for (int st = 0; st < 8; ++st)
      stmatrix_x4(base + gm::sw128_offset(row, 16 * (2 * st + (q >> 1)), kTileRows),
                  gm::pack_bf16x2(o[8 * st + 0], o[8 * st + 1]), gm::pack_bf16x2(o[8 * st + 2], o[8 * st + 3]),
                  gm::pack_bf16x2(o[8 * st + 4], o[8 * st + 5]), gm::pack_bf16x2(o[8 * st + 6], o[8 * st + 7]));
  }
  // Each warp stores the 16 rows its own stmatrix staged, so a warp barrier orders the
  // staging (a warpgroup barrier here was 13 % of the kernel's stall samples, ncu session
  // 16). The row's partial index comes precomputed from the gather (s_row): address
  // arithmetic per store was most of the epilogue's instructions (ncu, session 14).
  at::fence_view_async_shared();  // the stmatrix writes, before the TMA engine reads them
  __syncwarp();
  if (ybox >= 0) {  // padding queries (s_row -1) store nothing
    const int panel = lane & 1;
    tma_store_2d(o_map, gm::smem_addr(stage) + panel * (kTileRows * 128) + rb * 128, 64 * panel, ybox,
                 l2_evict_first());
    bulk_commit();
  }
  // (m c, l) after the proxy fence: the fence (a MEMBAR) waits for every earlier memory
  // access of the thread, this global store included when it came first (ncu session 23).
  // (l: quad sums, softmax_pv.)
  if ((lane & 2) == 0 && orow_ml >= 0)
    st_global_hint(w.ml_part + 2 * static_cast<long long>(orow_ml),
                   make_float2((r_ml ? m[1] : m[0]) * p.c, r_ml ? l[1] : l[0]), l2_evict_first());
}

// Q8RS (kQ8Rs, FP8 paths): the A fragments of S = Q K^T for this warpgroup's 64 rows from
// the E4M3 Q tile (TMA SW128, 128-byte rows), widened in registers. The K tile is
// K-permuted (at::e4m3x16_to_f16_perm), so k-step s of lane q = lane % 4 wants dims 16 s +
// 4 q .. + 3 of its rows r and r + 8: one 4-byte word each, which ldmatrix hands out (an
// 8 x 8 b16 matrix is 8 rows x 16 bytes; lane i gets row i / 4, bytes 4 (i % 4) ..).
// Matrices of load s2: rows r, r + 8 of chunk 2 s2, then of chunk 2 s2 + 1.
// (The ldmatrix asm is ours, as stmatrix_x4 is: CuTe's SM75_U32x4_LDSM_N takes a generic
// pointer and has no memory clobber; with it this kernel's SASS changed, 1 instruction more.)
__device__ __forceinline__ void load_q_frags(std::uint32_t tile, int wg, int wtid, std::uint32_t (&qa)[8][4]) {
  const int warp = wtid >> 5, lane = wtid & 31;
  const int row = 64 * wg + 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
  const std::uint32_t rbase = tile + row * 128;
#pragma unroll
  for (int s2 = 0; s2 < 4; ++s2) {
    const int chunk = 2 * s2 + (lane >> 4);
    std::uint32_t r0, r1, r2, r3;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(rbase + ((chunk ^ (row & 7)) << 4))
                 : "memory");
    gm::f16x2_pair(r0, qa[2 * s2][0], qa[2 * s2][2]);
    gm::f16x2_pair(r1, qa[2 * s2][1], qa[2 * s2][3]);
    gm::f16x2_pair(r2, qa[2 * s2 + 1][0], qa[2 * s2 + 1][2]);
    gm::f16x2_pair(r3, qa[2 * s2 + 1][1], qa[2 * s2 + 1][3]);
  }
}

// Q8RS: S = Q K^T from the A fragments (load_q_frags) and the K-permuted F16 K tile.
// Issues and commits; the caller waits and keeps qa (fence_pa) until then.
__device__ __forceinline__ void wg_qk_rs(std::uint32_t (&qa)[8][4], std::uint32_t k_addr, float (&s)[64]) {
  fence_pa(qa);
  gm::fence_operands(s);
  gm::fence();
  const std::uint64_t db0 = gm::desc_k_sw128(k_addr);
#pragma unroll
  for (int st = 0; st < 8; ++st)
    gm::f16_rs_bk<128>(qa[st], gm::desc_add(db0, (st >> 2) * 16384 + (st & 3) * 32), s, st > 0);
  gm::commit();
}

template <int FMT, bool QK16>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attention(const PrefillParams p, const Workspace w, const __grid_constant__ CUtensorMap q_map,
                      const __grid_constant__ CUtensorMap o_map) {
  using S = Smem<FMT, QK16>;
  using PB = at::PageBytes<FMT, QK16>;
  constexpr bool kRs = QK16 && kQ8Rs;  // Q8RS: E4M3 query rows, register-sourced Q K^T
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  const std::uint32_t a0 = gm::smem_addr(smem_raw);
  std::uint8_t* smem = smem_raw + (((a0 + 1023u) & ~1023u) - a0);
  // Buffers by index (arithmetic, not arrays: no local-memory indexing).
  auto page_buf = [smem](int i) { return smem + i * S::kPage; };
  std::uint8_t* conv = smem + 2 * S::kPage;
  std::uint8_t* qbase = conv + S::kConv;
  std::uint8_t* stage_fp8 = qbase + S::kNQ * S::kQ;
  // The current and next unit's descriptors live in shared memory (by unit parity), not
  // in registers: the tile loop runs at the register limit.
  UnitDesc* s_units = reinterpret_cast<UnitDesc*>(stage_fp8 + S::kStage);  // [2]
  int* s_row = reinterpret_cast<int*>(s_units + 2);                        // [3][128]
  std::int8_t* s_lim = reinterpret_cast<std::int8_t*>(s_row + 3 * kTileRows);  // [3][128]
  int* s_sched = reinterpret_cast<int*>(s_lim + 3 * kTileRows);                  // [2]
  std::uint64_t* s_qbar = reinterpret_cast<std::uint64_t*>(s_sched + 2);         // [2][kNQ]
  // Buffers of tile position n.
  auto q_buf = [qbase](int n) { return qbase + (n % S::kNQ) * S::kQ; };
  auto ent_of = [s_row](int n) { return s_row + (n % 3) * kTileRows; };
  auto lim_of = [s_lim](int n) { return s_lim + (n % 3) * kTileRows; };
  auto stage_of = [&](int n) { return S::kQ16 ? q_buf(n) : stage_fp8; };
  // Q tile of position n: warpgroup wg's barrier, and the wait for its TMA bytes. Each
  // position is one phase of its buffer's barrier; bit b of qphase is the parity of the
  // next phase of buffer b (positions are waited in order).
  auto qbar = [s_qbar](int wg_, int n) { return s_qbar + wg_ * S::kNQ + n % S::kNQ; };
  std::uint32_t qphase = 0;
  auto wait_q = [&](int wg_, int n) {
    const int b = n % S::kNQ;
    cutlass::arch::ClusterTransactionBarrier::wait(qbar(wg_, n), (qphase >> b) & 1u);
    qphase ^= 1u << b;
  };

  const int G = p.num_q_heads / p.num_kv_heads, qpt = kTileRows / G;
  // wg through a lane-0 broadcast: warp-uniform to the compiler, so the Q tile
  // addresses and wgmma descriptors derived from it stay in uniform registers.
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), wtid = tid & 127;
  const int lane = wtid & 31;
  const int lr0 = 64 * wg + 16 * (wtid >> 5) + (lane >> 2);

  if (tid == 0) {
    for (int i = 0; i < 2 * S::kNQ; ++i) cutlass::arch::ClusterTransactionBarrier::init(s_qbar + i, 64 / G);
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialised before any thread arrives (issue_q_tile)
#ifdef FLASHMSA_TIMELINE
  const std::uint64_t t_start = tl::now();
#endif
  // A programmatic dependent of the last plan kernel (run_attention): nothing in global memory is
  // touched before this wait. No early trigger for the combine: its CTAs, resident and
  // waiting on the SMs that finished first, made it 15 us slower at (16/1, 8192, 32768)
  // (H200, session 16, run A); it launches as the kernel's CTAs exit.
  sm90::pdl_wait();
  // The unit count and this CTA's first unit are loaded together, by every thread (one
  // broadcast per warp; within the capacity, whatever the count), not the descriptor
  // after the count and through shared memory and a CTA barrier: one dependent round
  // trip fewer before the first page copy. Thread 0 keeps it for the loop (s_units[0],
  // read after the loop's first barrier).
#ifdef FLASHMSA_TIMELINE
  if (tid == 0) {
    tl::put_min(w.tl, tl::kAttnStart, t_start);
    tl::put_max(w.tl, tl::kAttnWait, tl::now());
  }
#endif
  UnitDesc first{};
  if (static_cast<int>(blockIdx.x) < w.ucap) first = w.units[blockIdx.x];
  if (static_cast<int>(blockIdx.x) >= w.unit_ptr[num_csr_rows(p)]) return;
  if (tid == 0) s_units[0] = first;
  int n0 = 0, pb = 0;  // position of the unit's tile 0; page buffer of the unit
  {
    const at::PageSrc src = page_src<FMT>(p, first);
    at::issue_page_copy<FMT, QK16, kThreads>(src, page_buf(0), first.valid, tid);
    at::cp_async_commit();
    issue_q_tile<FMT, QK16>(q_map, load_entry(w, first, 0, G, qpt, tid), G, q_buf(0), ent_of(0),
                            lim_of(0), qbar(wg, 0), tid);
  }
  float s[64], o[64], m[2], l[2];
  std::uint32_t pa[8][4];
  std::uint32_t qa[8][4];  // Q8RS: the A fragments of the Q K^T in flight
  // S = Q K^T of the Q tile of position n against the K tile at k_addr (issued and
  // committed; the caller waits).
  auto issue_qk = [&](int n, std::uint32_t k_addr) {
    if constexpr (kRs) {
      load_q_frags(gm::smem_addr(q_buf(n)), wg, wtid, qa);
      wg_qk_rs(qa, k_addr, s);
    } else {
      at::wg_qk<FMT, QK16>(gm::smem_addr(q_buf(n)) + 128 * 64 * wg, kTileRows * 128, k_addr, s);
    }
  };
  // Dynamic schedule (load balance; the output does not depend on which CTA runs a
  // unit): a CTA's first two units are blockIdx.x and blockIdx.x + gridDim.x, its
  // (k+2)-th is 2 gridDim.x + a ticket that thread 0 takes during its k-th unit's last
  // tile and publishes in s_sched[k & 1] for the unit barrier of unit k+1.
  for (int k = 0;; ++k) {
    // This unit's page and first Q tile; every warpgroup is past the previous unit (and
    // its boxes are out of the staging tiles).
    bulk_wait_read();
    at::cp_async_wait<0>();
    at::fence_view_async_shared();
    __syncthreads();
    // The next unit, or -1 (s_sched holds -1 when the ticket ran past the last unit).
    int un = k == 0 ? static_cast<int>(blockIdx.x + gridDim.x) : s_sched[(k - 1) & 1];
    if (k == 0 && un >= w.unit_ptr[num_csr_rows(p)]) un = -1;
    const bool has_next = un >= 0;
    const UnitDesc& cur = s_units[k & 1];
    const UnitDesc& nxt = s_units[(k + 1) & 1];  // read after the barrier below
    if (tid == 0 && has_next) s_units[(k + 1) & 1] = w.units[un];
    int4 entry = cur.ntiles > 1 ? load_entry(w, cur, 1, G, qpt, tid) : make_int4(-1, 0, -1, 0);  // Q(n0 + 1)
    at::convert_page<FMT, QK16, kThreads, kRs>(page_src<FMT>(p, cur), page_buf(pb), conv, cur.valid, tid);
    __syncthreads();
    const std::uint32_t k_addr = gm::smem_addr(PB::k_tile(page_buf(pb), conv));
    const std::uint32_t v_addr = gm::smem_addr(PB::v_tile(page_buf(pb), conv));
    // Tiles run in full even where a warpgroup's rows are all padding (only a unit's last
    // tile has any): no wgmma in a divergent path. Padding rows have stale Q, lim -1 (all
    // keys masked: P = 0, l = 0) and s_row -1 (nothing stored).
    wait_q(wg, n0);
    issue_qk(n0, k_addr);
#ifdef FLASHMSA_TIMELINE
    if (k == 0 && tid == 0) tl::put_max(w.tl, tl::kAttnFirstMma, tl::now());
#endif
    if (cur.ntiles > 1)
      issue_q_tile<FMT, QK16>(q_map, entry, G, q_buf(n0 + 1), ent_of(n0 + 1), lim_of(n0 + 1),
                              qbar(wg, n0 + 1), tid);
    gm::wait<0>();
    gm::fence_operands(s);
    if constexpr (kRs) fence_pa(qa);
    // Inside a unit the warpgroups run free: warpgroup wg gathers (its own TMA barrier per
    // Q buffer), owns and reads only rows [64 wg, 64 wg + 64) of the Q tiles, metadata
    // and staging, so warpgroup barriers suffice. Step j (tile n = n0 + j, S(n) waited):
    // list entries of position n+2 loaded; softmax, PV(n) issued; warpgroup barrier (tile
    // n-1's epilogue done); Q(n+1) waited on its barrier; QK(n+1) issued (Q8RS: its
    // fragments loaded first); the TMA gather of position n+2 (this unit's tile j+2 or the next unit's tile 0)
    // and, two tiles before the end, the next unit's page into the other buffer by
    // cp.async (free: both warpgroups passed the unit barrier; the only cp.async group,
    // waited at the next unit's start); PV(n) retired; epilogue(n) under QK(n+1); QK(n+1)
    // retired. Buffers of position n+2 (= n-1 mod 3) are free after this step's
    // warpgroup barrier.
    const int last = cur.ntiles - 1;
    const int jp = has_next ? max(cur.ntiles - 2, 0) : -1;
#pragma unroll 1
    for (int j = 0; j < last; ++j) {
      const int n = n0 + j;
      // Position n+2: this unit's tile j+2, or the next unit's tile 0.
      // (j + 2 <= last, not j + 2 < cur.ntiles: the unit's fields live in shared memory and
      // each re-read was an exposed load, ncu session 16.)
      if (j + 2 <= last) entry = load_entry(w, cur, j + 2, G, qpt, tid);
      else if (has_next) entry = load_entry(w, nxt, 0, G, qpt, tid);
      {
        const std::int8_t* lim = lim_of(n);
        softmax_pv<FMT>(p, s, lim[lr0], lim[lr0 + 8], v_addr, pa, o, m, l, lane);
      }
      // 16-bit Q rows: tile n-1's boxes are out of its staging, position n+2's Q tile,
      // before the gather below rewrites it (E4M3 rows stage in a tile of their own, whose
      // reuse the epilogue waits for). Its generic staging writes (stmatrix) were fenced
      // to the async proxy in its epilogue, before the TMA store and this barrier; the
      // TMA gather below is async-proxy too, so no second fence here (it compiled to a
      // MEMBAR: 3 % of the kernel's stall samples, ncu session 23 run N).
      if constexpr (S::kQ16) bulk_wait_read();
      wg_barrier(wg);  // tile n-1's epilogue is done (its buffers are position n+2's)
      wait_q(wg, n + 1);
      issue_qk(n + 1, k_addr);
      // This unit's tile j+2, or the next unit's tile 0. (Two branches: folding them into
      // one condition changed the SASS, session 25, and that build was never measured.)
      if (j + 2 <= last)
        issue_q_tile<FMT, QK16>(q_map, entry, G, q_buf(n + 2), ent_of(n + 2), lim_of(n + 2),
                                qbar(wg, n + 2), tid);
      else if (has_next)
        issue_q_tile<FMT, QK16>(q_map, entry, G, q_buf(n + 2), ent_of(n + 2), lim_of(n + 2),
                                qbar(wg, n + 2), tid);
      if (j == jp) {
        const at::PageSrc src = page_src<FMT>(p, nxt);
        at::issue_page_copy<FMT, QK16, kThreads>(src, page_buf(pb ^ 1), nxt.valid, tid);
      }
      at::cp_async_commit();
      gm::wait<1>();  // PV(n); QK(n+1) stays in flight
      gm::fence_operands(o);
      fence_pa(pa);
      epilogue<!S::kQ16>(p, w, &o_map, o, m, l, stage_of(n), ent_of(n), G, wg, wtid);
      gm::wait<0>();  // QK(n+1)
      gm::fence_operands(s);
      if constexpr (kRs) fence_pa(qa);
    }
    {  // last tile: the next unit's tile 0 was gathered at step last-1 unless it is tile 0
      const int n = n0 + last;
      int ticket = 0;
      if (tid == 0 && has_next) ticket = atomicAdd(w.sched, 1);
      if (last == 0 && has_next) entry = load_entry(w, nxt, 0, G, qpt, tid);
      {
        const std::int8_t* lim = lim_of(n);
        softmax_pv<FMT>(p, s, lim[lr0], lim[lr0 + 8], v_addr, pa, o, m, l, lane);
      }
      if (last == 0 && has_next)  // position n+1 = n-2 mod 3: free since the unit barrier
        issue_q_tile<FMT, QK16>(q_map, entry, G, q_buf(n + 1), ent_of(n + 1), lim_of(n + 1),
                                qbar(wg, n + 1), tid);
      if (last == jp) {
        const at::PageSrc src = page_src<FMT>(p, nxt);
        at::issue_page_copy<FMT, QK16, kThreads>(src, page_buf(pb ^ 1), nxt.valid, tid);
      }
      at::cp_async_commit();
      gm::wait<0>();
      gm::fence_operands(o);
      fence_pa(pa);
      epilogue<!S::kQ16>(p, w, &o_map, o, m, l, stage_of(n), ent_of(n), G, wg, wtid);
      if (tid == 0 && has_next) {
        const int after = 2 * static_cast<int>(gridDim.x) + ticket;
        s_sched[k & 1] = after < w.unit_ptr[num_csr_rows(p)] ? after : -1;
      }
    }
    if (!has_next) break;
    n0 += last + 1;
    pb ^= 1;
  }
  at::cp_async_wait<0>();
  bulk_wait_read();  // the shared memory outlives the TMA stores' reads
#ifdef FLASHMSA_TIMELINE
  if (tid == 0) {
    const std::uint64_t t = tl::now();
    tl::put_min(w.tl, tl::kAttnEndMin, t);
    tl::put_max(w.tl, tl::kAttnEnd, t);
    if (blockIdx.x < tl::kRecord - tl::kCtaEnds) tl::put(w.tl, tl::kCtaEnds + blockIdx.x, t);
  }
#endif
}

// The q tensor map of the attention kernel's TMA gather: q as [T, Hq, 128] (byte strides
// from the view: the op validated 16-byte alignment and strides, which is what TMA needs;
// for QK16 without Q8RS (qk16 = QK16 && !kQ8Rs) the contiguous F16 copy q16), box 1
// query x G heads x 64 16-bit values (128
// bytes, SW128; two boxes per query) or x 128 E4M3 (SW128, QGMMA). cuTensorMapEncodeTiled
// comes from the runtime's driver entry point, so nothing links libcuda.
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiledFn encode_tiled() {
  static const EncodeTiledFn encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
    return e == cudaSuccess && q == cudaDriverEntryPointSuccess ? reinterpret_cast<EncodeTiledFn>(fn) : nullptr;
  }();
  return encode;
}

cudaError_t encode_q_map(const PrefillParams& p, const Workspace& w, bool bf16, bool qk16, CUtensorMap* map) {
  const EncodeTiledFn encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  const bool wide = bf16 || qk16;  // 16-bit elements: BF16, or QK16's F16 copy
  const std::uint64_t es = wide ? 2 : 1;
  const std::uint64_t G = static_cast<std::uint64_t>(p.num_q_heads / p.num_kv_heads);
  const cuuint64_t dims[3] = {128, static_cast<cuuint64_t>(p.num_q_heads), static_cast<cuuint64_t>(p.num_rows)};
  // Strides of size-1 dimensions are never used; give them a legal value.
  // (q16 is contiguous: head stride 128, row stride Hq x 128.)
  const std::int64_t hs = qk16 ? 128 : p.q_head_stride, rs = qk16 ? 128LL * p.num_q_heads : p.q_row_stride;
  const cuuint64_t head = p.num_q_heads > 1 ? static_cast<cuuint64_t>(hs) * es : 128 * es;
  const cuuint64_t row = p.num_rows > 1 ? static_cast<cuuint64_t>(rs) * es : head * dims[1];
  const cuuint64_t strides[2] = {head, row};
  const cuuint32_t box[3] = {wide ? 64u : 128u, static_cast<cuuint32_t>(G), 1};
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUtensorMapDataType type = bf16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : qk16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                          : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  void* base = qk16 ? static_cast<void*>(w.q16) : const_cast<void*>(p.q);
  const CUresult r = encode(map, type, 3, base, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The o_part tensor map of the epilogue's TMA stores: o_part as [T K Hq rows, 128] BF16
// (256-byte rows, contiguous), box G rows x 64 values (128 bytes, SW128): a query's G
// heads are consecutive rows (o_part[t, slot, h]), so one box per query and panel, at
// the row index of its first head (s_row). The launch checks K T Hq < 2^31.
cudaError_t encode_o_map(const PrefillParams& p, const Workspace& w, CUtensorMap* map) {
  const EncodeTiledFn encode = encode_tiled();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t rows = static_cast<cuuint64_t>(p.topk_k) * static_cast<cuuint64_t>(p.num_rows) *
                          static_cast<cuuint64_t>(p.num_q_heads);
  const cuuint64_t dims[2] = {128, rows};
  const cuuint64_t strides[1] = {256};
  const cuuint32_t box[2] = {64, static_cast<cuuint32_t>(p.num_q_heads / p.num_kv_heads)};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, w.o_part, dims, strides, box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}


template <int FMT, bool QK16>
cudaError_t run_attention(const PrefillParams& p, const Workspace& w, cudaStream_t stream) {
  constexpr int smem = Smem<FMT, QK16>::kAlloc;
  static bool configured[64] = {};
  int sms = 0;
  cudaError_t err = device_sms(&sms);  // also checks the device ordinal (< 64)
  if (err != cudaSuccess) return err;
  int dev = 0;
  err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (!configured[dev]) {
    err = cudaFuncSetAttribute(prefill_attention<FMT, QK16>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    configured[dev] = true;
  }
  CUtensorMap q_map;
  err = encode_q_map(p, w, FMT == at::kBf16, QK16 && !kQ8Rs, &q_map);
  if (err != cudaSuccess) return err;
  CUtensorMap o_map;
  err = encode_o_map(p, w, &o_map);
  if (err != cudaSuccess) return err;
  return sm90::launch_pdl(prefill_attention<FMT, QK16>, sms, kThreads, smem, stream, (prefill_pdl() & 1) != 0, p,
                          w, q_map, o_map);
}

}  // namespace

cudaError_t launch_attention(const PrefillParams& p, const Workspace& w, int kv_format, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  switch (kv_format) {
    case at::kBf16: err = run_attention<at::kBf16, false>(p, w, stream); break;
    case at::kFp8:
      err = fp8_qk_on_e4m3_mma() ? run_attention<at::kFp8, false>(p, w, stream) : run_attention<at::kFp8, true>(p, w, stream);
      break;
    default:
      err = fp8_qk_on_e4m3_mma() ? run_attention<at::kNvfp4, false>(p, w, stream)
                                 : run_attention<at::kNvfp4, true>(p, w, stream);
      break;
  }
  return err;
}

}  // namespace flashmsa::cuda::prefill

// SM90 KV-outer sparse attention for prefill (see prefill_kvouter.h for the design).
#include "cuda/sm90/prefill_kvouter.h"
#include "cuda/sm90/workspace_pool.h"

#include <cuda.h>  // CUtensorMap (the Q gather's TMA descriptor)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/sm90/attn_tile.cuh"
#include "cuda/sm90/decode_attention.h"
#include "cuda/sm90/pdl.cuh"

namespace flashmsa::cuda {
namespace {

namespace at = ::flashmsa::cuda::sm90::attn;
using at::ex2_approx;
using at::kLog2_448;
using at::kLog2e;
namespace gm = ::flashmsa::cuda::sm90::gmma;

constexpr int kThreads = 256;         // 2 consumer warpgroups
constexpr int kTileRows = 128;        // M rows per tile = gathered (query, head) pairs
// M-tiles per work unit (one page load each). H200, session 22: with units dispatched
// in CSR row order (run E), 12 beat 8 and 16 at the floor case (16/1, 8192, 32768); with
// the dispatch order by KV head, then largest first (kOrderClasses; runs I and K),
// larger units pay: BF16 / Q8KV8 / Q8KV4 at the floor case 12 tiles 480-483 / 496-497 /
// 506-511 us, 16 479-481 / 490-493 / 499-503, 24 468-469 / 479-481 / 487-489, 32
// 466-468 / 477 / 484; 32 is also best at (64/4, *) and (16/1, 16384, 114688) but 12-15
// us slower than 24 at (16/1, 8192, 0), where 64 rows give too few units for 132 CTAs.
// Session 16 (16-byte stores) had measured 8 best for BF16. Session 23: 32 where every SM
// still gets at least 4 units (tiles_per_unit), else 24.
constexpr int kTilesPerUnit = 24;
constexpr int kMaxTilesPerUnit = 64;  // FLASHMSA_PREFILL_TILES_PER_UNIT's range
constexpr int kLargeTilesPerUnit = 32;  // where there are enough units (tiles_per_unit)
constexpr int kMinUnitsPerSm = 4;
// Dispatch order of the work units (plan_units ranks, plan_fill sorts): by KV head, then
// largest first. Largest first (longest-processing-time order) keeps the kernel's tail
// short; KV head first keeps one head's Q rows (T x G x 256 bytes) the hot set in L2.
// Classes: KV head x size (the launch checks Hkv x kMaxTilesPerUnit <= kOrderClasses; D10
// allows 8 x 64).
constexpr int kOrderClasses = 1024;
constexpr int kOrderBlocks = 32;  // plan_fill CTAs that do the sort (the others skip it)
constexpr int kPlanThreads = 256;
constexpr int kScanThreads = 256;                      // row scans: reduce, then scan
constexpr int kScanItems = 16;
constexpr int kScanRows = kScanThreads * kScanItems;   // rows per scan block
// Sub-counters per CSR row: the plan's counting and filling atomics of warp w go to
// sub-counter w % nsub of a row, so a page chosen by many queries is not one hot
// address (the H200 measured 38 + 41 us for plan_count + plan_fill at (16/1, 8192,
// 32768) with one counter per row). A row's entries stay contiguous in the list, its
// sub-ranges one after the other. nsub = kSub when rows are hot (at least kSubHotEntries
// entries per row on average), else 8, while the two [N, nsub] arrays stay small (16 MB
// each), else 1. At (16/1, 8192, 0) the 64 pages average 2048 entries each and a warp
// (two queries x 16 slots) aggregates little: the H200 measured the plan at 79 us with
// 8 sub-counters and 51 us with 32; where rows are not hot, 32 cost more in the scans
// (40 vs 54 us at (16/1, 8192, 32768), 410 entries per row; session 15, runs G and H).
constexpr int kSub = 32;
constexpr std::int64_t kSubHotEntries = 1024;
constexpr std::int64_t kSubMaxRows = 1 << 19;  // N x 8 ints = 16 MB

// ---------------------------------------------------------------------------------------
// One work unit: up to w.tpu (tiles_per_unit) M-tiles of one CSR row (page of a request, KV head),
// fully resolved by the plan so the attention kernel reads it with two 16-byte loads.
struct __align__(16) UnitDesc {
  int begin, end;  // entries [begin, end) of the list
  int ntiles, g;   // M-tiles, KV head
  int e, valid;    // logical page, valid tokens of the page
  int off, phys;   // query position = t + off; physical page
};

// One list entry (int4), everything the attention kernel needs of a (query t, slot k)
// row group of a CSR row (page e of request b, KV head g), resolved by plan_fill so the
// kernel's Q gather reads it with one 16-byte load and no unit fields (ncu session 23:
// deriving them per tile from the unit descriptor in shared memory was 18 % of the
// kernel's stall samples with the TMA issue):
//   x = (t K + k) Hq + g G: the o_part / ml_part row of the query's first head of g
//   y = t: the query row (the Q gather's coordinate)
//   z = the last visible token of the page for the query: p % 128 on its local page,
//       else 127, never past the page's valid tokens (-1: none)
//   w = g G: the first query head of KV head g (the Q gather's head coordinate)
// Padding rows (past a unit's end) read as {-1, 0, -1, 0}.

// Workspace: carved from one allocation, every piece 256-byte aligned.
struct Workspace {
  int nsub = 1;                     // sub-counters per CSR row (kSub, 8 or 1)
  int tpu = kTilesPerUnit;          // M-tiles per work unit (tiles_per_unit: by shape, or the env override)
  int* counts = nullptr;            // [N, nsub] entries per row and sub-counter (zeroed, consumed by the fill)
  int* sched = nullptr;             // = counts + N nsub: the attention kernel's unit counter (zeroed)
  int* sub_ptr = nullptr;           // [N, nsub] first list position of each sub-range
  int* row_ptr = nullptr;           // [N+1]
  int* unit_ptr = nullptr;          // [N+1] work units before each row
  int2* block_sums = nullptr;       // [scan blocks] (entries, units) per kScanRows rows
  UnitDesc* units = nullptr;        // [unit capacity] in dispatch order
  int4* list = nullptr;             // [Hkv * T * K] ListEntry, CSR order
  unsigned* vmask = nullptr;        // [T * Hkv] valid slots (bit k)
  // Partials, query-major: a query's K x Hq rows are contiguous, so the combine reads one
  // block per query (H200, session 23 run R, three passes: 1-5 us faster per call than
  // slot-major [K, T, Hq, 128], floor case combine 147-149 against 148-151 us).
  std::uint16_t* o_part = nullptr;  // bf16 [T, K, Hq, 128] unnormalised partial O
  float* ml_part = nullptr;         // f32 [T, K, Hq, 2] (m c, l): log scale and normaliser of o_part
  std::uint16_t* q16 = nullptr;     // f16 [T, Hq, 128]: the E4M3 query's exact F16 image (QK16 only)
  int* size_count = nullptr;        // = sched + 1: [kOrderClasses] work units per order class (zeroed)
  int2* unit_key = nullptr;         // [unit capacity] (order class, rank in the class) (plan_units)
  UnitDesc* units_by_row = nullptr;  // [unit capacity] plan_units' descriptors in CSR row order (plan_fill
                                     // moves them into `units` in dispatch order: largest first)
  std::int64_t bytes = 0;
};

std::int64_t align256(std::int64_t b) { return (b + 255) / 256 * 256; }

__host__ __device__ inline std::int64_t num_csr_rows(const PrefillParams& p) {
  return static_cast<std::int64_t>(p.num_kv_heads) * p.batch * p.bt_width;
}

// Work units: ceil(ceil(n / qpt) / tpu) per row of n entries, so at most
// entries / (tpu * qpt) + (non-empty rows) in all.
std::int64_t unit_capacity(const PrefillParams& p, int tpu) {
  const std::int64_t entries = static_cast<std::int64_t>(p.num_kv_heads) * p.num_rows * p.topk_k;
  const std::int64_t qpt = kTileRows / (p.num_q_heads / p.num_kv_heads);
  return num_csr_rows(p) + entries / (tpu * qpt) + 1;
}

// SMs of the current device (the attention kernel's grid; cached per device), 132 if the
// query fails.
int device_sms() {
  static int cache[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
  if (cache[dev] == 0) {
    int n = 0;
    cache[dev] = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0 ? n : 132;
  }
  return cache[dev];
}

// M-tiles per work unit: FLASHMSA_PREFILL_TILES_PER_UNIT (1..kMaxTilesPerUnit) if set,
// else kLargeTilesPerUnit where that still leaves every SM at least kMinUnitsPerSm units,
// else kTilesPerUnit. Units are estimated from host-known shapes only (the per-row entry
// counts are on the device): the entries spread evenly over the N CSR rows. A block
// table wider than the requests makes N larger than the rows in use, so the estimate
// then errs towards the larger size (a few us slower at worst; the output is the same).
// H200, session 23 (run P, v4 sweep, us at BF16 / Q8KV8 / Q8KV4): floor case (16/1,
// 8192, 32768) 24 tiles 456 / 470 / 472, 32 455 / 469 / 469; (64/4, 8192, 32768) 24
// 1703 / 1763 / 1769, 32 1675 / 1744 / 1740; (16/1, 16384, 114688) 24 897 / 930 / 929,
// 32 885 / 916 / 919; but (16/1, 8192, 0) 24 419 / 432 / 431, 32 432 / 444 / 445 (64
// rows: 512 units of 32 tiles, 3.9 per SM, too few to balance).
int tiles_per_unit(const PrefillParams& p) {
  static const int forced = [] {
    const char* e = std::getenv("FLASHMSA_PREFILL_TILES_PER_UNIT");
    const int v = e != nullptr ? std::atoi(e) : 0;
    return v >= 1 && v <= kMaxTilesPerUnit ? v : 0;
  }();
  if (forced != 0) return forced;
  const std::int64_t N = num_csr_rows(p);
  const std::int64_t entries = static_cast<std::int64_t>(p.num_kv_heads) * p.num_rows * p.topk_k;
  const std::int64_t qpt = kTileRows / (p.num_q_heads / p.num_kv_heads);
  const std::int64_t tiles_per_row = ((entries + N - 1) / N + qpt - 1) / qpt;
  const std::int64_t units = N * ((tiles_per_row + kLargeTilesPerUnit - 1) / kLargeTilesPerUnit);
  return units >= static_cast<std::int64_t>(kMinUnitsPerSm) * device_sms() ? kLargeTilesPerUnit : kTilesPerUnit;
}

// QK16 (the FP8 paths' default) gathers an F16 copy of the E4M3 query, widened once per
// call (in plan_fill, widen_q_chunk), instead of widening each gathered tile in shared memory.
bool uses_q16(const PrefillParams& p) { return p.q_e4m3 && !fp8_qk_on_e4m3_mma(); }

Workspace carve(const PrefillParams& p, void* base) {
  const std::int64_t N = num_csr_rows(p), T = p.num_rows, K = p.topk_k;
  Workspace w;
  const std::int64_t entries = static_cast<std::int64_t>(p.num_kv_heads) * T * K;
  w.nsub = N > kSubMaxRows ? 1 : (entries >= kSubHotEntries * N && N <= kSubMaxRows / 4 ? kSub : 8);
  w.tpu = tiles_per_unit(p);
  const std::int64_t S = w.nsub;
  const std::int64_t ucap = unit_capacity(p, w.tpu);
  const std::int64_t sizes[13] = {(N * S + 1 + kOrderClasses) * 4,
                                 (N + 1) * 4,
                                 (N + 1) * 4,
                                 (N + kScanRows - 1) / kScanRows * 8,
                                 unit_capacity(p, w.tpu) * static_cast<std::int64_t>(sizeof(UnitDesc)),
                                 p.num_kv_heads * T * K * 16,
                                 T * p.num_kv_heads * 4,
                                 K * T * p.num_q_heads * 128 * 2,
                                 K * T * p.num_q_heads * 8,
                                 N * S * 4,
                                 uses_q16(p) ? T * p.num_q_heads * 128 * 2 : 0,
                                 ucap * 8,
                                 ucap * static_cast<std::int64_t>(sizeof(UnitDesc))};
  std::int64_t off = 0;
  char* b = static_cast<char*>(base);
  void* ptrs[13];
  for (int i = 0; i < 13; ++i) {
    ptrs[i] = b ? b + off : nullptr;
    off += align256(sizes[i]);
  }
  w.counts = static_cast<int*>(ptrs[0]);
  w.sched = w.counts ? w.counts + N * S : nullptr;
  w.row_ptr = static_cast<int*>(ptrs[1]);
  w.unit_ptr = static_cast<int*>(ptrs[2]);
  w.block_sums = static_cast<int2*>(ptrs[3]);
  w.units = static_cast<UnitDesc*>(ptrs[4]);
  w.list = static_cast<int4*>(ptrs[5]);
  w.vmask = static_cast<unsigned*>(ptrs[6]);
  w.o_part = static_cast<std::uint16_t*>(ptrs[7]);
  w.ml_part = static_cast<float*>(ptrs[8]);
  w.sub_ptr = static_cast<int*>(ptrs[9]);
  w.q16 = uses_q16(p) ? static_cast<std::uint16_t*>(ptrs[10]) : nullptr;
  w.size_count = w.sched ? w.sched + 1 : nullptr;
  w.unit_key = static_cast<int2*>(ptrs[11]);
  w.units_by_row = static_cast<UnitDesc*>(ptrs[12]);
  w.bytes = off;
  return w;
}

// ---------------------------------------------------------------------------------------
// Plan.
//
// Kernels in stream order: plan_zero, plan_count, the row scans, plan_units, plan_fill,
// then the attention kernel and the combine. All but plan_zero are programmatic
// dependents of their predecessor (pdl.cuh; the attention kernel and the combine unless
// FLASHMSA_PREFILL_PDL says otherwise): each plan kernel triggers its dependent at its
// start (the scans after their wait; the attention kernel not at all: see there), and
// each kernel waits before it
// touches anything an earlier kernel writes,
// so the next launch, and whatever part of the next kernel reads only the inputs (top-k,
// block table, lengths), runs under the previous kernel. Every thread waits
// unconditionally (no return before pdl_wait), so a kernel never completes before its
// predecessor and completion is transitive down the chain.
//
// plan_count and plan_fill run one thread per (query t, KV head g, top-k slot k), thread
// j = ((t Hkv + g) << 4) | k: the 16 slots of a (query, KV head) are the lanes of one warp
// half and share validity through warp votes. Both kernels are chains of dependent
// global round trips (request lookup, top-k, block table, atomics); one thread per
// (query, KV head) walking its 16 slots ran 32 CTAs at (16/1, 8192, *) on 132 SMs and was
// latency bound. Per slot, the grid has 16 times the threads, each with one short chain,
// and a half warp reads its (contiguous) top-k row in one 64-byte access.

// Zeroes counts[0, n): the sub-counters and the attention kernel's unit counter. A kernel
// rather than a memset node, so plan_count can be its programmatic dependent.
constexpr int kZeroMaxBlocks = 2048;
__global__ void __launch_bounds__(kPlanThreads) plan_zero(int* counts, long long n) {
  sm90::pdl_launch_dependents();
  for (long long x = static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x; x < n;
       x += static_cast<long long>(gridDim.x) * kPlanThreads)
    counts[x] = 0;
}

// Query row t -> request b (last b with cu[b] <= t), its KV length seq and the query's
// position pos (D4). In range reads only.
__device__ __forceinline__ void locate(const PrefillParams& p, int t, int* b, long long* seq, long long* pos) {
  int lo = 0, hi = p.batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.cu_seqlens[mid * p.cu_stride] <= t) lo = mid;
    else hi = mid - 1;
  }
  *b = lo;
  const long long start = p.cu_seqlens[lo * p.cu_stride];
  const long long q_len = p.cu_seqlens[(lo + 1) * p.cu_stride] - start;
  *seq = p.seq_lens[lo * p.seq_lens_stride];
  *pos = *seq - q_len + (t - start);
}

// Sub-counter of the entry of thread j: that of its warp, j >> 5 (see kSub; nsub is 32, 8 or 1,
// so a mask). A warp holds two (query, KV head) pairs and consecutive warps the next ones,
// so a page chosen by many neighbouring queries spreads over all sub-counters. plan_count and plan_fill run the
// same grid with the same thread per entry, so both see the same sub-counter.
__device__ __forceinline__ int plan_sub(const Workspace& w, long long j) {
  return static_cast<int>((j >> 5) & (w.nsub - 1));
}

// QK16: 16-byte chunk c of the E4M3 query's (query t, head h) row -> the exact F16 image,
// contiguous in q16 [T, Hq, 128]. Session 15: widening each gathered tile in shared
// memory instead cost the FP8 paths about 50 us of the attention kernel at (16/1, 8192,
// 32768) (429 against 377 us for BF16); session 16: a kernel of its own before the plan
// cost 16 us there; session 21 moved it from plan_count into plan_fill (see there).
__device__ __forceinline__ void widen_q_chunk(const PrefillParams& p, std::uint16_t* q16, long long t, int h, int c) {
  const uint4 in = *reinterpret_cast<const uint4*>(static_cast<const std::uint8_t*>(p.q) + t * p.q_row_stride +
                                                   h * p.q_head_stride + c * 16);
  const std::uint32_t w[4] = {in.x, in.y, in.z, in.w};
  std::uint32_t o[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) gm::f16x2_pair(w[k], o[2 * k], o[2 * k + 1]);
  uint4* dst = reinterpret_cast<uint4*>(q16 + ((t * p.num_q_heads + h) * 128 + c * 16));
  dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
  dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

// D1 per slot, one thread each (see above): slot k of (t, g) is valid iff k < K, the query
// position is >= 0, its page v = topk[t, g, k] is in [0, request pages), v <= pos / 128,
// v < W, the block-table entry is in [0, num_pages), and no earlier valid slot of the
// row has the same page (duplicates count once). The top-k read does not wait for the
// request lookup; the block-table read follows both. The 16 lanes of a row share through
// one __match_any_sync on the slot's (CSR row, sub-counter) key: inside a row the key
// is the page, so an accepted slot is a duplicate iff a lower lane of its half has the
// same key (a lower duplicate of an earlier slot still has that earlier slot's key, so
// checking every accepted lower lane equals checking the valid ones). __ballot_sync
// gathers the row's valid-slot mask (bit k), stored once per (query, KV head). Counting
// is warp-aggregated on the same match: the valid lanes of a key (at most one per half)
// add once, through the lowest. No lane returns early (__match_any_sync, __ballot_sync).
__global__ void __launch_bounds__(kPlanThreads) plan_count(const PrefillParams p, Workspace w) {
  sm90::pdl_launch_dependents();
  const long long j = static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x;
  const long long i = j >> 4;  // (query, KV head) pair
  const int k = threadIdx.x & 15, lane = threadIdx.x & 31;
  const bool live = i < static_cast<long long>(p.num_rows) * p.num_kv_heads;
  // Inputs only up to the wait (no earlier plan kernel writes them).
  long long key = -1;  // (CSR row, sub-counter) of the slot if D1 accepts it, duplicates not yet removed
  if (live && k < p.topk_k) {
    const int t = static_cast<int>(i / p.num_kv_heads), g = static_cast<int>(i % p.num_kv_heads);
    const long long v = p.topk[t * p.topk_stride[0] + g * p.topk_stride[1] + k * p.topk_stride[2]];
    int b;
    long long seq, pos;
    locate(p, t, &b, &seq, &pos);
    const long long req_pages = (seq + 127) / 128;
    if (pos >= 0 && v >= 0 && v < req_pages && v <= pos / 128 && v < p.bt_width) {
      const long long phys = p.block_table[b * p.bt_stride[0] + v * p.bt_stride[1]];
      if (phys >= 0 && phys < p.num_pages)
        key = ((static_cast<long long>(g) * p.batch + b) * p.bt_width + v) * w.nsub + plan_sub(w, j);
    }
  }
  const unsigned peers = __match_any_sync(0xffffffffu, key);
  const int half = lane & 16;  // first lane of the row
  const bool valid = key >= 0 && (peers & (0xffffu << half) & ((1u << lane) - 1u)) == 0u;
  const unsigned vbits = __ballot_sync(0xffffffffu, valid);
  sm90::pdl_wait();  // counts: zeroed by plan_zero
  if (live && k == 0) w.vmask[i] = (vbits >> half) & 0xffffu;
  const unsigned group = peers & vbits;
  if (valid && lane == __ffs(group) - 1) atomicAdd(&w.counts[key], __popc(group));
}

// Exclusive scans of the entries per row (row_ptr) and of the work units per row
// (unit_ptr, ceil(ceil(n / qpt) / tpu) for n entries), reduce-then-scan over
// blocks of kScanRows rows: scan_reduce (block totals), scan_blocks (one CTA: block
// offsets, in place, and the totals row_ptr[N], unit_ptr[N]), scan_rows.
__device__ __forceinline__ int units_of(int n, int qpt, int tpu) {
  return ((n + qpt - 1) / qpt + tpu - 1) / tpu;
}

// Entries of CSR row r (< N): the sum of its nsub sub-counters, read as 16-byte vectors
// where nsub is 8 or 32 (a row's counters are contiguous and 32- or 128-byte aligned).
__device__ __forceinline__ int row_count(const Workspace& w, long long r) {
  const int* c = w.counts + r * w.nsub;
  if (w.nsub == 1) return c[0];
  const int4* c4 = reinterpret_cast<const int4*>(c);
  int n = 0;
#pragma unroll
  for (int s = 0; s < kSub / 4; ++s) {
    if (4 * s < w.nsub) {
      const int4 v = c4[s];
      n += (v.x + v.y) + (v.z + v.w);
    }
  }
  return n;
}

// The entries of rows b0 .. b0 + kScanRows - 1 (0 at and past N) into s_ce, one row per
// thread at a time: only the rows that exist are read, each by one thread, and adjacent
// threads read adjacent rows. (Session 21: with one thread per 16 consecutive rows, and
// every row of the block read through a clamped address, scan_single alone took 13.6 us
// at (16/1, 8192, 32768), N = 320, and 26.5 us at (16/1, 8192, 0), N = 64 with 32
// sub-counters, under ncu on the H200.) Ends with a CTA barrier.
__device__ __forceinline__ void block_row_counts(const Workspace& w, long long b0, long long N, int* s_ce) {
  for (int i = threadIdx.x; i < kScanRows; i += kScanThreads) {
    const long long r = b0 + i;
    s_ce[i] = r < N ? row_count(w, r) : 0;
  }
  __syncthreads();
}

// A thread's kScanItems consecutive rows of the block (thread t: rows 16 t ..): entries
// from s_ce and work units.
__device__ __forceinline__ void load_scan_items(const Workspace& w, int qpt, const int* s_ce, int (&ce)[kScanItems],
                                                int (&cu)[kScanItems]) {
  const int4* v = reinterpret_cast<const int4*>(s_ce + threadIdx.x * kScanItems);
#pragma unroll
  for (int i = 0; i < kScanItems / 4; ++i) {
    const int4 x = v[i];
    ce[4 * i] = x.x;
    ce[4 * i + 1] = x.y;
    ce[4 * i + 2] = x.z;
    ce[4 * i + 3] = x.w;
  }
#pragma unroll
  for (int i = 0; i < kScanItems; ++i) cu[i] = units_of(ce[i], qpt, w.tpu);
}

__global__ void __launch_bounds__(kScanThreads) scan_reduce(const PrefillParams p, Workspace w, int qpt) {
  sm90::pdl_wait();  // counts (plan_count)
  sm90::pdl_launch_dependents();
  using Reduce = cub::BlockReduce<int, kScanThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ __align__(16) int s_ce[kScanRows];
  block_row_counts(w, static_cast<long long>(blockIdx.x) * kScanRows, num_csr_rows(p), s_ce);
  int ce[kScanItems], cu[kScanItems];
  load_scan_items(w, qpt, s_ce, ce, cu);
  const int se = Reduce(tmp).Sum(ce);
  __syncthreads();
  const int su = Reduce(tmp).Sum(cu);
  if (threadIdx.x == 0) w.block_sums[blockIdx.x] = make_int2(se, su);
}

__global__ void __launch_bounds__(kScanThreads) scan_blocks(const PrefillParams p, Workspace w, int nblocks) {
  sm90::pdl_wait();  // block_sums (scan_reduce)
  sm90::pdl_launch_dependents();
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  int carry_e = 0, carry_u = 0;
  for (int base = 0; base < nblocks; base += kScanThreads) {
    const int i = base + threadIdx.x;
    const int2 v = i < nblocks ? w.block_sums[i] : make_int2(0, 0);
    int oe, ou, ae, au;
    Scan(tmp).ExclusiveSum(v.x, oe, ae);
    __syncthreads();
    Scan(tmp).ExclusiveSum(v.y, ou, au);
    __syncthreads();
    if (i < nblocks) w.block_sums[i] = make_int2(carry_e + oe, carry_u + ou);
    carry_e += ae;
    carry_u += au;
  }
  if (threadIdx.x == 0) {
    const long long N = num_csr_rows(p);
    w.row_ptr[N] = carry_e;
    w.unit_ptr[N] = carry_u;
  }
}

__global__ void __launch_bounds__(kScanThreads) scan_rows(const PrefillParams p, Workspace w, int qpt) {
  sm90::pdl_wait();  // counts (plan_count), block offsets (scan_blocks)
  sm90::pdl_launch_dependents();
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ __align__(16) int s_ce[kScanRows];
  block_row_counts(w, static_cast<long long>(blockIdx.x) * kScanRows, num_csr_rows(p), s_ce);
  int ce[kScanItems], cu[kScanItems];
  load_scan_items(w, qpt, s_ce, ce, cu);
  Scan(tmp).ExclusiveSum(ce, ce);
  __syncthreads();
  Scan(tmp).ExclusiveSum(cu, cu);
  const int2 off = w.block_sums[blockIdx.x];
  const long long N = num_csr_rows(p);
#pragma unroll
  for (int i = 0; i < kScanItems; ++i) {
    const long long r = static_cast<long long>(blockIdx.x) * kScanRows + threadIdx.x * kScanItems + i;
    if (r < N) {
      w.row_ptr[r] = off.x + ce[i];
      w.unit_ptr[r] = off.y + cu[i];
    }
  }
}

// Small plans (at most kSingleScanBlocks scan blocks): the same two scans in one CTA,
// block by block with a running carry (one launch instead of three).
constexpr int kSingleScanBlocks = 16;
__global__ void __launch_bounds__(kScanThreads) scan_single(const PrefillParams p, Workspace w, int qpt) {
  sm90::pdl_wait();  // counts (plan_count)
  sm90::pdl_launch_dependents();
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const long long N = num_csr_rows(p);
  int carry_e = 0, carry_u = 0;
  __shared__ __align__(16) int s_ce[kScanRows];
  for (long long b0 = 0; b0 < N; b0 += kScanRows) {
    block_row_counts(w, b0, N, s_ce);
    int ce[kScanItems], cu[kScanItems];
    load_scan_items(w, qpt, s_ce, ce, cu);
    int te, tu;
    Scan(tmp).ExclusiveSum(ce, ce, te);
    __syncthreads();
    Scan(tmp).ExclusiveSum(cu, cu, tu);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kScanItems; ++i) {
      const long long r = b0 + threadIdx.x * kScanItems + i;
      if (r < N) {
        w.row_ptr[r] = carry_e + ce[i];
        w.unit_ptr[r] = carry_u + cu[i];
      }
    }
    carry_e += te;
    carry_u += tu;
  }
  if (threadIdx.x == 0) {
    w.row_ptr[N] = carry_e;
    w.unit_ptr[N] = carry_u;
  }
}

// Each valid entry (query t, slot k) takes a position in its row's sub-range, counting
// the sub-counter down (any order: see the header), warp-aggregated as in plan_count:
// one atomic per (row, sub-counter) key per warp, through the lowest lane of the key,
// the others ranked below it. Same grid and thread per entry as plan_count (so the same
// sub-counter). The top-k read and request lookup are inputs and go before the wait;
// then the valid-slot mask, the atomic and the sub-range start (in flight together),
// and the list store. No lane returns early (__match_any_sync, __shfl_sync).
__global__ void __launch_bounds__(kPlanThreads) plan_fill(const PrefillParams p, Workspace w) {
  sm90::pdl_launch_dependents();
  const long long j = static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x;
  const long long i = j >> 4;
  const int k = threadIdx.x & 15, lane = threadIdx.x & 31;
  const bool live = i < static_cast<long long>(p.num_rows) * p.num_kv_heads;
  int t = 0, e = 0;
  long long base = 0;
  int4 ent = make_int4(-1, 0, -1, 0);  // ListEntry
  if (live && k < p.topk_k) {
    const int g = static_cast<int>(i % p.num_kv_heads), G = p.num_q_heads / p.num_kv_heads;
    t = static_cast<int>(i / p.num_kv_heads);
    e = p.topk[t * p.topk_stride[0] + g * p.topk_stride[1] + k * p.topk_stride[2]];
    int b;
    long long seq, pos;
    locate(p, t, &b, &seq, &pos);
    base = (static_cast<long long>(g) * p.batch + b) * p.bt_width;
    // (Only valid entries are stored, 0 <= e <= pos / 128; for the others e is arbitrary,
    // and the 64-bit arithmetic below keeps that harmless.)
    const long long valid = max(0LL, min(128LL, seq - 128LL * e));
    const long long lim = min((pos >> 7) == e ? (pos & 127) : 127LL, valid - 1);
    ent = make_int4((t * p.topk_k + k) * p.num_q_heads + g * G, t, static_cast<int>(lim), g * G);
  }
  // QK16: the 16 threads of (t, g) widen its G heads (8 G chunks) before the wait, under
  // the scans' tail (they trigger after their wait) and plan_units, small kernels that
  // leave most of the GPU idle. Session 21: in plan_count, where only plan_zero ran beside
  // it, the FP8 plan took 10-12 us more than BF16's; here 8-9 us more. q16 is workspace:
  // plan_zero, an ordinary launch, started after all earlier work on the stream, and this
  // kernel starts after it; only the attention kernel (after this kernel's completion)
  // reads q16.
  if (w.q16 != nullptr && live) {
    const int G = p.num_q_heads / p.num_kv_heads;
    const long long tq = i / p.num_kv_heads;
    const int h0 = static_cast<int>(i % p.num_kv_heads) * G;
    for (int c = k; c < 8 * G; c += 16) widen_q_chunk(p, w.q16, tq, h0 + (c >> 3), c & 7);
  }
  sm90::pdl_wait();  // vmask (plan_count), counts and sub_ptr (plan_units)
  if (blockIdx.x < kOrderBlocks) {  // The dispatch order (see kOrderClasses): a counting sort, ranked by plan_units.
    using Scan = cub::BlockScan<int, kPlanThreads>;
    constexpr int kPer = kOrderClasses / kPlanThreads;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ int s_base[kOrderClasses];
    int c[kPer];
#pragma unroll
    for (int x = 0; x < kPer; ++x) c[x] = w.size_count[threadIdx.x * kPer + x];
    Scan(tmp).ExclusiveSum(c, c);
#pragma unroll
    for (int x = 0; x < kPer; ++x) s_base[threadIdx.x * kPer + x] = c[x];
    __syncthreads();
    const int nunits = w.unit_ptr[num_csr_rows(p)];
    const int stride = min(static_cast<int>(gridDim.x), kOrderBlocks) * kPlanThreads;
    for (int u = blockIdx.x * kPlanThreads + threadIdx.x; u < nunits; u += stride) {
      const int2 key = w.unit_key[u];
      w.units[s_base[key.x] + key.y] = w.units_by_row[u];
    }
  }
  const bool valid = live && ((w.vmask[i] >> k) & 1u);  // bits >= K are 0
  const long long key = valid ? (base + e) * w.nsub + plan_sub(w, j) : -1;
  const unsigned peers = __match_any_sync(0xffffffffu, key);
  const int lead = __ffs(peers) - 1;
  int old = 0, start = 0;
  if (valid) {
    start = w.sub_ptr[key];
    if (lane == lead) old = atomicSub(&w.counts[key], __popc(peers));
  }
  const int top = __shfl_sync(0xffffffffu, old, lead);  // the key's count before the group
  if (valid) w.list[start + top - 1 - __popc(peers & ((1u << lane) - 1u))] = ent;
}

// kRowLanes threads per CSR row (a quarter warp): the start of each sub-range of the row
// (for plan_fill, which runs after this kernel), and the descriptors of the row's work
// units. Lane l of a row takes sub-counters l nsub/8 .. (one lane for nsub = 1), an
// exclusive scan over the row's lanes places them, and the lanes write units l, l + 8, ...
// The row's physical page and request lengths are inputs, loaded before the wait.
// (Session 21: with one thread per row, which wrote up to 32 sub-range starts and 32
// units in turn, the kernel took 9.7 us at (16/1, 8192, 32768) and 13.1 us at (16/1,
// 8192, 0) under ncu on the H200.)
constexpr int kRowLanes = 8;
static_assert(kSub % kRowLanes == 0 && 32 % kRowLanes == 0, "a row's lanes split its sub-counters");
__global__ void __launch_bounds__(kPlanThreads) plan_units(const PrefillParams p, Workspace w, int qpt) {
  sm90::pdl_launch_dependents();
  const long long r = (static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x) / kRowLanes;
  const int lane = threadIdx.x % kRowLanes;
  const unsigned row_mask = ((1u << kRowLanes) - 1u) << (threadIdx.x & (32 - kRowLanes));  // this row's lanes
  const bool in = r < num_csr_rows(p);
  const long long per_head = static_cast<long long>(p.batch) * p.bt_width;
  const long long rem = in ? r % per_head : 0;
  const int b = static_cast<int>(rem / p.bt_width);
  UnitDesc d;
  d.g = static_cast<int>(r / per_head);
  d.e = static_cast<int>(rem % p.bt_width);
  long long seq = 0, cu_end = 0;
  d.phys = 0;
  if (in) {
    d.phys = p.block_table[b * p.bt_stride[0] + d.e * p.bt_stride[1]];  // in range; valid when the row has entries
    seq = p.seq_lens[b * p.seq_lens_stride];
    cu_end = p.cu_seqlens[(b + 1) * p.cu_stride];
  }
  sm90::pdl_wait();  // row_ptr, unit_ptr (scans), counts (plan_count)
  if (!in) return;  // the row's lanes leave together
  const int rb = w.row_ptr[r], n = w.row_ptr[r + 1] - rb;
  if (n == 0) return;
  {
    constexpr int kPer = kSub / kRowLanes;  // sub-counters per lane at most
    const int ns = w.nsub, per = ns >= kRowLanes ? ns / kRowLanes : (lane == 0 ? ns : 0);
    const int s0 = lane * per;
    static_assert(kPer == 4, "one int4 of sub-counters per lane at nsub = kSub");
    int c[kPer] = {0, 0, 0, 0};
    if (per == kPer) {  // 16-byte aligned: a row's 32 counters start at a multiple of 128 bytes
      const int4 v = *reinterpret_cast<const int4*>(w.counts + r * ns + s0);
      c[0] = v.x;
      c[1] = v.y;
      c[2] = v.z;
      c[3] = v.w;
    } else {  // nsub 8 (one each) or 1 (lane 0 only)
#pragma unroll
      for (int i = 0; i < kPer; ++i)
        if (i < per) c[i] = w.counts[r * ns + s0 + i];
    }
    const int mine = (c[0] + c[1]) + (c[2] + c[3]);
    int incl = mine;
#pragma unroll
    for (int o = 1; o < kRowLanes; o *= 2) {
      const int v = __shfl_up_sync(row_mask, incl, o, kRowLanes);
      if (lane >= o) incl += v;
    }
    int first = rb + incl - mine;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (i < per) w.sub_ptr[r * ns + s0 + i] = first;
      first += c[i];
    }
  }
  const int tiles = (n + qpt - 1) / qpt;
  d.off = static_cast<int>(seq - cu_end);
  d.valid = static_cast<int>(max(0LL, min(128LL, seq - 128LL * d.e)));
  const int u0 = w.unit_ptr[r];
  for (int k = lane; k * w.tpu < tiles; k += kRowLanes) {
    d.ntiles = min(w.tpu, tiles - k * w.tpu);
    d.begin = rb + k * w.tpu * qpt;
    d.end = min(rb + n, d.begin + d.ntiles * qpt);
    w.units_by_row[u0 + k] = d;
    // The unit's rank in its order class (KV head, then tpu - ntiles: largest first), one
    // atomic per class and warp; plan_fill turns (class, rank) into the dispatch order.
    const int key = d.g * w.tpu + (w.tpu - d.ntiles), wl = threadIdx.x & 31;
    const unsigned peers = __match_any_sync(__activemask(), key);
    const int lead = __ffs(peers) - 1;
    int first = 0;
    if (wl == lead) first = atomicAdd(&w.size_count[key], __popc(peers));
    first = __shfl_sync(peers, first, lead);
    w.unit_key[u0 + k] = make_int2(key, first + __popc(peers & ((1u << wl) - 1u)));
  }
}

// ---------------------------------------------------------------------------------------
// Attention.

// QK16 (FP8 paths, default): Q K^T on the exact F16 images of E4M3 Q and K (attn_tile.cuh):
// the F16 Q tiles come by TMA from the query's F16 copy (widen_q_chunk), like BF16 tiles.
//
// Software pipeline (per warpgroup): the QK wgmma of tile n+1 is issued right after the
// PV wgmma of tile n, so it runs under tile n's epilogue; the Q rows of tile n+2 are in
// flight meanwhile. Three tiles are live at once, so the buffers rotate by tile position
// n (counted across units): metadata n % 3; BF16 / QGMMA Q tiles n % 3 (a BF16 tile is
// also the output staging of its own epilogue, as is a QK16 F16 tile).
template <int FMT, bool QK16>
struct Smem {
  using PB = at::PageBytes<FMT, QK16>;
  static constexpr int kPage = PB::kStage;                            // one cp.async page stage (x2)
  static constexpr int kConv = PB::kConv;                             // converted page tiles (x1)
  static constexpr int kNQ = 3;                                       // TMA-gathered Q tiles
  static constexpr bool kQ16 = FMT == at::kBf16 || QK16;               // 16-bit Q rows (256 bytes)
  static constexpr int kQ = kQ16 ? kTileRows * 256 : kTileRows * PB::kQRow;
  // Output staging (64 rows x 256 bytes per warpgroup, SW128): the 256-byte-row Q tile
  // the QK wgmma read; E4M3 QGMMA needs its own (one: only the epilogue uses it).
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

// Keeps the P fragments (operands of an in-flight RS wgmma) in their registers until
// the wgmma.wait that retires it.
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
  // A staging tile of its own (QGMMA) is rewritten by the next epilogue: this warp's
  // boxes of the previous tile must have been read out of it.
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
                  gm::pack_bf16x2(o[8 * st], o[8 * st + 1]), gm::pack_bf16x2(o[8 * st + 2], o[8 * st + 3]),
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

template <int FMT, bool QK16>
__global__ void __launch_bounds__(kThreads, 1)
    prefill_attention(const PrefillParams p, const Workspace w, const __grid_constant__ CUtensorMap q_map,
                      const __grid_constant__ CUtensorMap o_map) {
  using S = Smem<FMT, QK16>;
  using PB = at::PageBytes<FMT, QK16>;
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
  // A programmatic dependent of plan_fill (run_attention): nothing in global memory is
  // touched before this wait. No early trigger for the combine: its CTAs, resident and
  // waiting on the SMs that finished first, made it 15 us slower at (16/1, 8192, 32768)
  // (H200, session 16, run A); it launches as the kernel's CTAs exit.
  sm90::pdl_wait();
  if (static_cast<int>(blockIdx.x) >= w.unit_ptr[num_csr_rows(p)]) return;
  if (tid == 0) s_units[0] = w.units[blockIdx.x];
  __syncthreads();
  int n0 = 0, pb = 0;  // position of the unit's tile 0; page buffer of the unit
  {
    const UnitDesc& first = s_units[0];
    const at::PageSrc src = page_src<FMT>(p, first);
    at::issue_page_copy<FMT, QK16, kThreads>(src, page_buf(0), first.valid, tid);
    at::cp_async_commit();
    issue_q_tile<FMT, QK16>(q_map, load_entry(w, first, 0, G, qpt, tid), G, q_buf(0), ent_of(0),
                            lim_of(0), qbar(wg, 0), tid);
  }
  float s[64], o[64], m[2], l[2];
  std::uint32_t pa[8][4];
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
    at::convert_page<FMT, QK16, kThreads>(page_src<FMT>(p, cur), page_buf(pb), conv, cur.valid, tid);
    __syncthreads();
    const std::uint32_t k_addr = gm::smem_addr(PB::k_tile(page_buf(pb), conv));
    const std::uint32_t v_addr = gm::smem_addr(PB::v_tile(page_buf(pb), conv));
    // Tiles run in full even where a warpgroup's rows are all padding (only a unit's last
    // tile has any): no wgmma in a divergent path. Padding rows have stale Q, lim -1 (all
    // keys masked: P = 0, l = 0) and s_row -1 (nothing stored).
    wait_q(wg, n0);
    at::wg_qk<FMT, QK16>(gm::smem_addr(q_buf(n0)) + 128 * 64 * wg, kTileRows * 128, k_addr, s);
    if (cur.ntiles > 1)
      issue_q_tile<FMT, QK16>(q_map, entry, G, q_buf(n0 + 1), ent_of(n0 + 1), lim_of(n0 + 1),
                              qbar(wg, n0 + 1), tid);
    gm::wait<0>();
    gm::fence_operands(s);
    // Inside a unit the warpgroups run free: warpgroup wg gathers (its own TMA barrier per
    // Q buffer), owns and reads only rows [64 wg, 64 wg + 64) of the Q tiles, metadata
    // and staging, so warpgroup barriers suffice. Step j (tile n = n0 + j, S(n) waited):
    // list entries of position n+2 loaded; softmax, PV(n) issued; warpgroup barrier (tile
    // n-1's epilogue done); Q(n+1) waited on its barrier; QK(n+1) issued;
    // the TMA gather of position n+2 (this unit's tile j+2 or the next unit's tile 0)
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
      // Tile n-1's boxes are out of its staging (position n+2's Q tile). Its generic
      // staging writes (stmatrix) were fenced to the async proxy in its epilogue, before
      // the TMA store and this barrier; the TMA gather below is async-proxy too, so no
      // second fence here (it compiled to a MEMBAR: 3 % of the kernel's stall samples,
      // ncu session 23 run N).
      bulk_wait_read();
      wg_barrier(wg);  // tile n-1's epilogue is done (its buffers are position n+2's)
      wait_q(wg, n + 1);
      at::wg_qk<FMT, QK16>(gm::smem_addr(q_buf(n + 1)) + 128 * 64 * wg, kTileRows * 128, k_addr, s);
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
}

// ---------------------------------------------------------------------------------------
// Combine: 16 threads (8 dims each) per (query, head), kCombineRows of them per CTA.
// Slot j holds the unnormalised O_j (BF16) with its log scale s_j = m_j c and normaliser
// l_j; with M = max s_j over the slots with l_j != 0 and w_j = exp(s_j - M):
//   out = BF16(v_global * sum w_j O_j / sum w_j l_j),  LSE = M + ln(sum w_j l_j) + lse_bias
// (lse_bias = -ln 448 on the FP8 paths, whose P and l carry the factor 448, spec 3.4).
// A row without a slot of nonzero weight writes 0 and -inf (D5).
// (Query, head) rows per combine CTA, 16 threads each: 2, one warp. H200, session 21
// (runs H, I, bench_prefill interleaved): against 8 rows per CTA, 2 rows took 2-4 us less
// at 16/1 and 10-20 us less at 64/4; 16 and 32 rows took 4-80 us more.
#ifndef FLASHMSA_COMBINE_ROWS
#define FLASHMSA_COMBINE_ROWS 2
#endif
constexpr int kCombineRows = FLASHMSA_COMBINE_ROWS;
static_assert(kCombineRows >= 1 && 16 * kCombineRows <= 1024, "combine CTA: 16 threads per row, <= 1024 threads");
__global__ void __launch_bounds__(16 * kCombineRows) prefill_combine(const PrefillParams p, const Workspace w, float lse_bias) {
  sm90::pdl_wait();  // a programmatic dependent of the attention kernel: everything below reads its partials
  const long long idx = static_cast<long long>(blockIdx.x) * kCombineRows + (threadIdx.x >> 4);
  if (idx >= static_cast<long long>(p.num_rows) * p.num_q_heads) return;
  const long long t = idx / p.num_q_heads;
  const int h = static_cast<int>(idx % p.num_q_heads);
  const int G = p.num_q_heads / p.num_kv_heads;
  const int d0 = (threadIdx.x & 15) * 8;
  const unsigned mask = w.vmask[t * p.num_kv_heads + (h >> (__ffs(G) - 1))];  // G divides 16
  const long long qbase = (t * p.topk_k) * p.num_q_heads + h;  // row of slot k: qbase + k Hq
  // All loads first (predicated, fully unrolled: up to 16 in flight per thread), then
  // the merge in ascending slot order (fixed order, D9).
  float2 ml[16];
  uint4 ov[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const bool on = (mask >> k) & 1u;
    const long long row = qbase + static_cast<long long>(k) * p.num_q_heads;
    ml[k] = on ? *reinterpret_cast<const float2*>(w.ml_part + 2 * row) : make_float2(-INFINITY, 0.0f);
    ov[k] = on ? *reinterpret_cast<const uint4*>(w.o_part + row * 128 + d0) : make_uint4(0, 0, 0, 0);
  }
  // A slot counts when its normaliser is not 0 (NaN counts, so NaN inputs propagate).
  bool any = false;
  float M = -INFINITY;
#pragma unroll
  for (int k = 0; k < 16; ++k)
    if (ml[k].y != 0.0f) {
      any = true;
      M = fmaxf(M, ml[k].x);
    }
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float W = 0.0f;
  if (any) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      if (ml[k].y == 0.0f) continue;
      const float wt = expf(ml[k].x - M);
      W = fmaf(wt, ml[k].y, W);
      const std::uint32_t vv[4] = {ov[k].x, ov[k].y, ov[k].z, ov[k].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[2 * i] += wt * __uint_as_float(vv[i] << 16);
        acc[2 * i + 1] += wt * __uint_as_float(vv[i] & 0xffff0000u);
      }
    }
  }
  const float scale = any ? p.v_global / W : 0.0f;
  uint4 o;
  o.x = gm::pack_bf16x2(acc[0] * scale, acc[1] * scale);
  o.y = gm::pack_bf16x2(acc[2] * scale, acc[3] * scale);
  o.z = gm::pack_bf16x2(acc[4] * scale, acc[5] * scale);
  o.w = gm::pack_bf16x2(acc[6] * scale, acc[7] * scale);
  *reinterpret_cast<uint4*>(p.out + t * p.out_row_stride + h * p.out_head_stride + d0) = o;
  if (d0 == 0 && p.lse != nullptr)
    p.lse[t * p.lse_row_stride + h * p.lse_head_stride] = any ? M + logf(W) + lse_bias : -INFINITY;
}

// The q tensor map of the attention kernel's TMA gather: q as [T, Hq, 128] (byte strides
// from the view: the op validated 16-byte alignment and strides, which is what TMA needs;
// for QK16 the contiguous F16 copy q16), box 1 query x G heads x 64 16-bit values (128
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

// Programmatic dependents (pdl.cuh) past the plan: bit 0 the attention kernel, bit 1 the
// combine; FLASHMSA_PREFILL_PDL=0..3 overrides the default (benchmark A/B).
int prefill_pdl() {
  static const int mode = [] {
    const char* e = std::getenv("FLASHMSA_PREFILL_PDL");
    return e != nullptr && e[0] >= '0' && e[0] <= '3' && e[1] == 0 ? e[0] - '0' : 3;
  }();
  return mode;
}

template <int FMT, bool QK16>
cudaError_t run_attention(const PrefillParams& p, const Workspace& w, cudaStream_t stream) {
  constexpr int smem = Smem<FMT, QK16>::kAlloc;
  static bool configured[64] = {};
  static int sms[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
  if (!configured[dev]) {
    err = cudaFuncSetAttribute(prefill_attention<FMT, QK16>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    err = cudaDeviceGetAttribute(&sms[dev], cudaDevAttrMultiProcessorCount, dev);
    if (err != cudaSuccess) return err;
    configured[dev] = true;
  }
  CUtensorMap q_map;
  err = encode_q_map(p, w, FMT == at::kBf16, QK16, &q_map);
  if (err != cudaSuccess) return err;
  CUtensorMap o_map;
  err = encode_o_map(p, w, &o_map);
  if (err != cudaSuccess) return err;
  return sm90::launch_pdl(prefill_attention<FMT, QK16>, sms[dev], kThreads, smem, stream, (prefill_pdl() & 1) != 0, p,
                          w, q_map, o_map);
}

}  // namespace

std::int64_t prefill_kvouter_workspace_bytes(const PrefillParams& p) { return carve(p, nullptr).bytes; }

int launch_prefill_kvouter(const PrefillParams& p, int kv_format, void* stream_ptr) {
  if (p.num_rows == 0) return 0;
  const int G = p.num_q_heads / p.num_kv_heads;
  if (p.num_kv_heads <= 0 || G <= 0 || G > 16 || 16 % G != 0 || p.topk_k < 1 || p.topk_k > 16 ||
      p.bt_width <= 0 || p.batch <= 0 || kv_format < 0 || kv_format > 2 ||
      p.num_kv_heads * kMaxTilesPerUnit > kOrderClasses ||
      static_cast<std::int64_t>(p.topk_k) * p.num_rows * p.num_q_heads > kMaxPartialRows ||
      p.num_rows >= kMaxQueryRows || p.q_e4m3 != (kv_format != at::kBf16))
    return cudaErrorInvalidValue;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const std::int64_t bytes = prefill_kvouter_workspace_bytes(p);
  void* base = nullptr;
  cudaError_t err = workspace_alloc(&base, static_cast<size_t>(bytes), stream);
  if (err != cudaSuccess) return err;
  const Workspace w = carve(p, base);
  const long long N = num_csr_rows(p);
  const long long th = static_cast<long long>(p.num_rows) * p.num_kv_heads * 16;  // (query, KV head, slot)
  const unsigned plan_blocks = static_cast<unsigned>((th + kPlanThreads - 1) / kPlanThreads);
  const unsigned row_blocks = static_cast<unsigned>((N * kRowLanes + kPlanThreads - 1) / kPlanThreads);
  const int qpt = kTileRows / G;
  const unsigned scan_blocks_n = static_cast<unsigned>((N + kScanRows - 1) / kScanRows);
  const long long nzero = N * w.nsub + 1 + kOrderClasses;  // counts, sched, size_count
  const long long zero_blocks = (nzero + kPlanThreads - 1) / kPlanThreads;
  // The plan: plan_zero, then programmatic dependents (see "Plan." above).
  plan_zero<<<static_cast<unsigned>(zero_blocks < kZeroMaxBlocks ? zero_blocks : kZeroMaxBlocks), kPlanThreads, 0,
              stream>>>(w.counts, nzero);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = sm90::launch_pdl(plan_count, plan_blocks, kPlanThreads, 0, stream, true, p, w);
  if (err == cudaSuccess) {
    if (scan_blocks_n <= kSingleScanBlocks) {
      err = sm90::launch_pdl(scan_single, 1, kScanThreads, 0, stream, true, p, w, qpt);
    } else {
      err = sm90::launch_pdl(scan_reduce, scan_blocks_n, kScanThreads, 0, stream, true, p, w, qpt);
      if (err == cudaSuccess)
        err = sm90::launch_pdl(scan_blocks, 1, kScanThreads, 0, stream, true, p, w, static_cast<int>(scan_blocks_n));
      if (err == cudaSuccess)
        err = sm90::launch_pdl(scan_rows, scan_blocks_n, kScanThreads, 0, stream, true, p, w, qpt);
    }
  }
  if (err == cudaSuccess)  // before the fill: sub_ptr
    err = sm90::launch_pdl(plan_units, row_blocks, kPlanThreads, 0, stream, true, p, w, qpt);
  if (err == cudaSuccess) err = sm90::launch_pdl(plan_fill, plan_blocks, kPlanThreads, 0, stream, true, p, w);
  if (err == cudaSuccess && p.stop_after != 1) {
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
  }
  if (err == cudaSuccess && p.stop_after == 0) {
    const long long rows = static_cast<long long>(p.num_rows) * p.num_q_heads;
    const float lse_bias = kv_format == at::kBf16 ? 0.0f : -std::log(448.0f);
    err = sm90::launch_pdl(prefill_combine, static_cast<unsigned>((rows + kCombineRows - 1) / kCombineRows),
                           16 * kCombineRows, 0, stream, (prefill_pdl() & 2) != 0, p,
                           w, lse_bias);
  }
  const cudaError_t ferr = workspace_free(base, stream);
  return err != cudaSuccess ? err : ferr;
}

}  // namespace flashmsa::cuda

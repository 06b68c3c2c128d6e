// SM90 KV-outer sparse attention for prefill: the plan (stage 1 in prefill_kvouter.h).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda/sm90/pdl.cuh"
#include "cuda/sm90/prefill_kvouter_detail.cuh"

namespace flashmsa::cuda::prefill {
namespace {

// ---------------------------------------------------------------------------------------
// Plan.
//
// Kernels in stream order: plan_zero, then either plan_count_bucketed and
// plan_units_bucketed (bucketed lists: Workspace::bucket, small plans) or plan_count, the
// row scans (none for small plans: fuses_scan), plan_units and plan_fill; then the
// attention kernel and the combine. All but plan_zero are programmatic
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
// half (plan_count's slots share validity through warp votes). Both kernels are chains
// of dependent global round trips (request lookup, top-k, block table and the ranking
// atomic in plan_count; the rank and sub-range start in plan_fill); one thread per
// (query, KV head) walking its 16 slots ran 32 CTAs at (16/1, 8192, *) on 132 SMs and was
// latency bound. Per slot, the grid has 16 times the threads, each with one short chain,
// and a half warp reads its (contiguous) top-k row in one 64-byte access.

// Zeroes counts[0, n): the sub-counters, the attention kernel's unit counter and the
// order classes' unit counts (size_count), contiguous in the workspace. A kernel
// rather than a memset node, so plan_count can be its programmatic dependent.
constexpr int kZeroMaxBlocks = 2048;
__global__ void __launch_bounds__(kPlanThreads) plan_zero(int* counts, long long n, unsigned long long* tl) {
  sm90::pdl_launch_dependents();
  if (blockIdx.x == 0 && threadIdx.x == 0) tl::open(tl, tl::now());
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

// D1 for one slot of KV head g whose query (request b, KV length seq, position pos)
// chose logical page v: the slot's CSR row (g B + b) W + v if the position is >= 0, v is
// in [0, request pages), v <= pos / 128, v < W and the block-table entry is in [0,
// num_pages); else -1. Duplicates are the caller's (plan_count, plan_count_bucketed).
__device__ __forceinline__ long long d1_row(const PrefillParams& p, int g, int b, long long seq, long long pos,
                                            long long v) {
  const long long req_pages = (seq + 127) / 128;
  if (pos < 0 || v < 0 || v >= req_pages || v > pos / 128 || v >= p.bt_width) return -1;
  const long long phys = p.block_table[b * p.bt_stride[0] + v * p.bt_stride[1]];
  if (phys < 0 || phys >= p.num_pages) return -1;
  return (static_cast<long long>(g) * p.batch + b) * p.bt_width + v;
}

// The call's tag in the timeline (prefill_timeline.cuh): kv_format x 4 + stop_after.
__device__ __forceinline__ int tl_tag(const PrefillParams& p) {
  return (p.q_e4m3 ? (p.k_scale != nullptr ? 2 : 1) : 0) * 4 + p.stop_after;
}
// plan_count / plan_count_bucketed, after the wait: block 0 opens the call's timeline record.
__device__ __forceinline__ void tl_count_stamps(const PrefillParams& p, const Workspace& w, std::uint64_t t_start) {
  if (blockIdx.x != 0) return;
  const std::uint64_t t_wait = tl::now();
  tl::start_record(w.tl, tl_tag(p));
  if (threadIdx.x == 0) {
    tl::put(w.tl, tl::kCountStart, t_start);
    tl::put(w.tl, tl::kCountWait, t_wait);
  }
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
// add once, through the lowest, whose returned count ranks them (slot_rank). No lane
// returns early (__match_any_sync, __ballot_sync, __shfl_sync).
__global__ void __launch_bounds__(kPlanThreads) plan_count(const PrefillParams p, Workspace w) {
  sm90::pdl_launch_dependents();
  const std::uint64_t t_start = tl::now();
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
    const long long row = d1_row(p, g, b, seq, pos, v);
    if (row >= 0) key = row * w.nsub + plan_sub(w, j);
  }
  const unsigned peers = __match_any_sync(0xffffffffu, key);
  const int half = lane & 16;  // first lane of the row
  const bool valid = key >= 0 && (peers & (0xffffu << half) & ((1u << lane) - 1u)) == 0u;
  const unsigned vbits = __ballot_sync(0xffffffffu, valid);
  sm90::pdl_wait();  // counts: zeroed by plan_zero
  tl_count_stamps(p, w, t_start);
  if (live && k == 0) w.vmask[i] = (vbits >> half) & 0xffffu;
  // The slot's rank in its (row, sub-counter) key: the key's count before this warp's
  // group (one atomic, through the group's lowest lane) plus the lower lanes of the group.
  // plan_fill places the entry at the sub-range start plus this rank, with no atomic.
  const unsigned group = peers & vbits;
  const int lead = __ffs(group) - 1;  // -1 where !valid and no valid peer
  int old = 0;
  if (valid && lane == lead) old = atomicAdd(&w.counts[key], __popc(group));
  old = __shfl_sync(0xffffffffu, old, valid ? lead : lane);
  if (live) w.slot_rank[j] = valid ? old + __popc(group & ((1u << lane) - 1u)) : -1;
#ifdef FLASHMSA_TIMELINE
  __syncthreads();
  if (threadIdx.x == 0) tl::put_max(w.tl, tl::kCountEnd, tl::now());
#endif
}

// A row's work units (Workspace::tail): of its tiles = ceil(n / qpt) M-tiles, as many
// full units of tpu tiles as fit, then the remainder r = tiles % tpu as one unit, or, for
// a row r >= tail_row0 whose r > tail > 0, as two: r - tail tiles, then tail tiles.
// unit_tiles: unit k's first tile (x) and tile count (y).
__device__ __forceinline__ bool row_splits(const Workspace& w, long long row) {
  return w.tail > 0 && row >= w.tail_row0;
}
__device__ __forceinline__ int units_of(int n, int qpt, const Workspace& w, bool split) {
  const int tiles = (n + qpt - 1) / qpt, full = tiles / w.tpu, r = tiles - full * w.tpu;
  return full + (r == 0 ? 0 : (split && r > w.tail ? 2 : 1));
}
__device__ __forceinline__ int2 unit_tiles(int tiles, int k, const Workspace& w, bool split) {
  const int full = tiles / w.tpu, r = tiles - full * w.tpu;
  if (k < full) return make_int2(k * w.tpu, w.tpu);
  split = split && r > w.tail;
  if (k == full) return make_int2(full * w.tpu, split ? r - w.tail : r);
  return make_int2(full * w.tpu + r - w.tail, w.tail);  // k == full + 1, split
}

// Exclusive scans of the entries per row (row_ptr) and of the work units per row
// (unit_ptr, units_of), reduce-then-scan over
// blocks of kScanRows rows: scan_reduce (block totals), scan_blocks (one CTA: block
// offsets, in place, and the totals row_ptr[N], unit_ptr[N]), scan_rows.

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

// A thread's kScanItems consecutive rows of the block starting at row r0 (thread t: rows
// r0 + 16 t ..): entries from s_ce and work units.
__device__ __forceinline__ void load_scan_items(const Workspace& w, int qpt, long long r0, const int* s_ce,
                                                int (&ce)[kScanItems], int (&cu)[kScanItems]) {
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
  for (int i = 0; i < kScanItems; ++i) cu[i] = units_of(ce[i], qpt, w, row_splits(w, r0 + threadIdx.x * kScanItems + i));
}

__global__ void __launch_bounds__(kScanThreads) scan_reduce(const PrefillParams p, Workspace w, int qpt) {
  sm90::pdl_wait();  // counts (plan_count)
  sm90::pdl_launch_dependents();
  using Reduce = cub::BlockReduce<int, kScanThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ __align__(16) int s_ce[kScanRows];
  block_row_counts(w, static_cast<long long>(blockIdx.x) * kScanRows, num_csr_rows(p), s_ce);
  int ce[kScanItems], cu[kScanItems];
  load_scan_items(w, qpt, static_cast<long long>(blockIdx.x) * kScanRows, s_ce, ce, cu);
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
  load_scan_items(w, qpt, static_cast<long long>(blockIdx.x) * kScanRows, s_ce, ce, cu);
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
    load_scan_items(w, qpt, b0, s_ce, ce, cu);
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

// The list entry (ListEntry) of plan thread j's slot and its key's row base (g B + b) W
// and logical page e, from the inputs only (top-k, cu_seqlens, seq_lens), or {-1, 0, -1,
// 0} for a thread past the slots (live false). (Only valid entries are stored, 0 <= e <=
// pos / 128; for the others e is arbitrary, and the 64-bit arithmetic keeps that
// harmless.) plan_fill and plan_count_bucketed.
struct SlotEntry {
  int4 ent = make_int4(-1, 0, -1, 0);
  long long base = 0;
  int e = 0;
  bool live = false, in_key = false;  // in_key: e is a column of the block table (every accepted slot's is)
  int b = 0, g = 0;                   // the query's request (locate) and the KV head
  long long seq = 0, pos = 0;
};
__device__ __forceinline__ SlotEntry slot_entry(const PrefillParams& p, long long j) {
  SlotEntry s;
  const long long i = j >> 4;
  const int k = static_cast<int>(j & 15);
  s.live = i < static_cast<long long>(p.num_rows) * p.num_kv_heads;
  if (s.live && k < p.topk_k) {
    const int g = static_cast<int>(i % p.num_kv_heads), G = p.num_q_heads / p.num_kv_heads;
    const int t = static_cast<int>(i / p.num_kv_heads);
    s.e = p.topk[t * p.topk_stride[0] + g * p.topk_stride[1] + k * p.topk_stride[2]];
    locate(p, t, &s.b, &s.seq, &s.pos);
    s.g = g;
    s.base = (static_cast<long long>(g) * p.batch + s.b) * p.bt_width;
    const long long valid = max(0LL, min(128LL, s.seq - 128LL * s.e));
    const long long lim = min((s.pos >> 7) == s.e ? (s.pos & 127) : 127LL, valid - 1);
    s.ent = make_int4((t * p.topk_k + k) * p.num_q_heads + g * G, t, static_cast<int>(lim), g * G);
    s.in_key = s.e >= 0 && s.e < p.bt_width;
  }
  return s;
}

// Each valid entry (query t, slot k) goes to its row's sub-range start plus the rank
// plan_count's atomic gave it (slot_rank; any order inside the row: see the header).
// Same grid and thread per entry as plan_count (so the same sub-counter). The top-k read
// and request lookup are inputs and go before the wait; then the rank and the sub-range
// start (in flight together), and the list store. (Session 24: this kernel counted the
// sub-counters down with a second warp-aggregated atomic, whose round trip and the
// shuffle after it were most of its stall samples under ncu.)
__global__ void __launch_bounds__(kPlanThreads) plan_fill(const PrefillParams p, Workspace w) {
  sm90::pdl_launch_dependents();
  const long long j = static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x;
  const long long i = j >> 4;
  const int k = threadIdx.x & 15;
  const SlotEntry se = slot_entry(p, j);
  const bool live = se.live;
  const std::uint64_t t_start = tl::now();
  // QK16: the 16 threads of (t, g) widen its G heads (8 G chunks) before the wait, under
  // plan_units (and the scans' tail, where there are scans), small kernels that leave
  // most of the GPU idle. Session 21: in plan_count, where only plan_zero ran beside it,
  // the FP8 plan took 10-12 us more than BF16's; here 8-9 us more (12-13 us in session
  // 24, whose BF16 plan is shorter; every other placement measured was slower: see
  // docs/prefill-design.md, "Session 24"). q16 is workspace:
  // plan_zero, an ordinary launch, started after all earlier work on the stream, and this
  // kernel starts after it; only the attention kernel (after this kernel's completion)
  // reads q16.
  if (w.q16 != nullptr && live) {
    const int G = p.num_q_heads / p.num_kv_heads;
    const long long tq = i / p.num_kv_heads;
    const int h0 = static_cast<int>(i % p.num_kv_heads) * G;
    for (int c = k; c < 8 * G; c += 16) widen_q_chunk(p, w.q16, tq, h0 + (c >> 3), c & 7);
  }
  sm90::pdl_wait();  // slot_rank (plan_count); sub_ptr, size_count, unit_key, units_by_row, unit_ptr[N] (plan_units)
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    tl::put(w.tl, tl::kFillStart, t_start);
    tl::put(w.tl, tl::kFillWait, tl::now());
  }
  if (blockIdx.x < kOrderBlocks) {  // The dispatch order (see kOrderClasses): a counting sort, ranked by plan_units.
    using Scan = cub::BlockScan<int, kPlanThreads>;
    constexpr int kPer = kOrderClasses / kPlanThreads;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ int s_base[kOrderClasses];
    // The unit count with the class counts, and this thread's first unit before the scan,
    // so that its round trip runs under the scan's barriers (H200, session 26 run E: the
    // plan 0.1-0.4 us shorter; the whole call 0.8-6.3 us shorter at three shapes, more
    // than the plan's change, so mostly run-to-run spread).
    const int nunits = w.unit_ptr[num_csr_rows(p)];
    int c[kPer];
#pragma unroll
    for (int x = 0; x < kPer; ++x) c[x] = w.size_count[threadIdx.x * kPer + x];
    const int u0 = blockIdx.x * kPlanThreads + threadIdx.x;
    int2 key0 = make_int2(0, 0);
    UnitDesc d0{};
    if (u0 < nunits) {
      key0 = w.unit_key[u0];
      d0 = w.units_by_row[u0];
    }
    Scan(tmp).ExclusiveSum(c, c);
#pragma unroll
    for (int x = 0; x < kPer; ++x) s_base[threadIdx.x * kPer + x] = c[x];
    __syncthreads();
    const int stride = min(static_cast<int>(gridDim.x), kOrderBlocks) * kPlanThreads;
    if (u0 < nunits) w.units[s_base[key0.x] + key0.y] = d0;
    for (int u = u0 + stride; u < nunits; u += stride) {
      const int2 key = w.unit_key[u];
      w.units[s_base[key.x] + key.y] = w.units_by_row[u];
    }
  }
  // The entry's place: its sub-range's start plus the rank plan_count gave it (-1: not
  // an accepted slot). The sub-range start is loaded beside the rank wherever the key is
  // in range (every accepted slot's is), not after it.
  const long long key = se.in_key ? (se.base + se.e) * w.nsub + plan_sub(w, j) : 0;
  const int rank = live ? w.slot_rank[j] : -1;
  const int start = se.in_key ? w.sub_ptr[key] : 0;
  if (rank >= 0) w.list[start + rank] = se.ent;
#ifdef FLASHMSA_TIMELINE
  __syncthreads();
  if (threadIdx.x == 0) tl::put_max(w.tl, tl::kFillEnd, tl::now());
#endif
}

// The fields of CSR row r's unit descriptors that come from the inputs alone (KV head g,
// logical page e, physical page, query position offset, valid tokens); in = r < N (else,
// or with in false, no load: only g and e). plan_units and plan_units_bucketed.
__device__ __forceinline__ UnitDesc row_desc(const PrefillParams& p, long long r, bool in) {
  const long long per_head = static_cast<long long>(p.batch) * p.bt_width;
  const long long rem = r % per_head;
  const int b = static_cast<int>(rem / p.bt_width);
  UnitDesc d{};
  d.g = static_cast<int>(r / per_head);
  d.e = static_cast<int>(rem % p.bt_width);
  if (in) {
    d.phys = p.block_table[b * p.bt_stride[0] + d.e * p.bt_stride[1]];  // in range; valid when the row has entries
    const long long seq = p.seq_lens[b * p.seq_lens_stride];
    d.off = static_cast<int>(seq - p.cu_seqlens[(b + 1) * p.cu_stride]);
    d.valid = static_cast<int>(max(0LL, min(128LL, seq - 128LL * d.e)));
  }
  return d;
}
// Unit k of a row of n entries (tiles M-tiles, list position rb; units_of / unit_tiles):
// its tiles and list range into d.
__device__ __forceinline__ void row_unit(const Workspace& w, int rb, int n, int tiles, int k, bool split, int qpt,
                                         UnitDesc* d) {
  const int2 ut = unit_tiles(tiles, k, w, split);
  d->ntiles = ut.y;
  d->begin = rb + ut.x * qpt;
  d->end = min(rb + n, d->begin + d->ntiles * qpt);
}

// kRowLanes threads per CSR row (a quarter warp): the start of each sub-range of the row
// (for plan_fill, which runs after this kernel), and the descriptors of the row's work
// units. Lane l of a row takes sub-counters l nsub/8 .. (one lane for nsub = 1), an
// exclusive scan over the row's lanes places them, and the lanes write units l, l + 8, ...
// The row's physical page and request lengths are inputs, loaded before the wait.
// (Session 21: with one thread per row, which wrote up to 32 sub-range starts and 32
// units in turn, the kernel took 9.7 us at (16/1, 8192, 32768) and 13.1 us at (16/1,
// 8192, 0) under ncu on the H200.)
// fused_scan (small plans, fuses_scan): no scan kernel ran before this one; each CTA
// sums the entries and units of every row before its own (all of them at most
// kFusedScanInts sub-counters, read from L2) and scans its own kRowsPerUnitsCta rows, and
// the last CTA writes the totals row_ptr[N], unit_ptr[N]. One kernel boundary fewer
// (scan_single took 4.8-5.3 us on its own at (16/1, 8192, 32768), ncu, session 24).
constexpr int kRowLanes = 8;
constexpr int kRowsPerUnitsCta = kPlanThreads / kRowLanes;
static_assert(kSub % kRowLanes == 0 && 32 % kRowLanes == 0, "a row's lanes split its sub-counters");
__global__ void __launch_bounds__(kPlanThreads) plan_units(const PrefillParams p, Workspace w, int qpt,
                                                           int fused_scan) {
  sm90::pdl_launch_dependents();
  const std::uint64_t t_start = tl::now();
  const long long N = num_csr_rows(p);
  const long long r = (static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x) / kRowLanes;
  const int lane = threadIdx.x % kRowLanes;
  const unsigned row_mask = ((1u << kRowLanes) - 1u) << (threadIdx.x & (32 - kRowLanes));  // this row's lanes
  const bool in = r < N;
  UnitDesc d = row_desc(p, r, in);
  sm90::pdl_wait();  // counts (plan_count); row_ptr, unit_ptr (the scans, unless fused_scan)
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    tl::put(w.tl, tl::kUnitsStart, t_start);
    tl::put(w.tl, tl::kUnitsWait, tl::now());
  }
#ifdef FLASHMSA_TIMELINE
  struct EndStamp {  // at every return below
    unsigned long long* t;
    __device__ ~EndStamp() {
      if ((threadIdx.x & 31) == 0) tl::put_max(t, tl::kUnitsEnd, tl::now());
    }
  } end_stamp{w.tl};
#endif
  // This lane's sub-counters of the row (a quarter of them, or all for lane 0 at nsub 1).
  constexpr int kPer = kSub / kRowLanes;  // sub-counters per lane at most
  const int ns = w.nsub, per = ns >= kRowLanes ? ns / kRowLanes : (lane == 0 ? ns : 0);
  const int s0 = lane * per;
  static_assert(kPer == 4, "one int4 of sub-counters per lane at nsub = kSub");
  int c[kPer] = {0, 0, 0, 0};
  if (in) {
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
  }
  const int mine = (c[0] + c[1]) + (c[2] + c[3]);
  int incl = mine;
#pragma unroll
  for (int o = 1; o < kRowLanes; o *= 2) {
    const int v = __shfl_up_sync(row_mask, incl, o, kRowLanes);
    if (lane >= o) incl += v;
  }
  const int n = __shfl_sync(row_mask, incl, kRowLanes - 1, kRowLanes);  // the row's entries
  int rb = 0, u0 = 0;
  if (fused_scan) {
    // Entries and units of the rows before this CTA's (strided over the threads; their
    // CTA totals te, tu), and the exclusive prefix of its own rows' (lane 0 of each row;
    // ee, eu): four cub block scans.
    const long long r0 = static_cast<long long>(blockIdx.x) * kRowsPerUnitsCta;
    int pe = 0, pu = 0;
    for (long long x = threadIdx.x; x < r0; x += kPlanThreads) {
      const int cx = row_count(w, x);
      pe += cx;
      pu += units_of(cx, qpt, w, row_splits(w, x));
    }
    const int oe = lane == 0 ? n : 0, ou = lane == 0 ? units_of(n, qpt, w, row_splits(w, r)) : 0;
    using Scan = cub::BlockScan<int, kPlanThreads>;
    __shared__ typename Scan::TempStorage tmp;
    int te, tu, ee, eu, unused;
    Scan(tmp).ExclusiveSum(pe, unused, te);  // te, tu: the earlier rows' totals
    __syncthreads();
    Scan(tmp).ExclusiveSum(pu, unused, tu);
    __syncthreads();
    Scan(tmp).ExclusiveSum(oe, ee);  // ee, eu: this CTA's rows before the thread's
    __syncthreads();
    Scan(tmp).ExclusiveSum(ou, eu);
    (void)unused;
    rb = __shfl_sync(row_mask, te + ee, 0, kRowLanes);
    u0 = __shfl_sync(row_mask, tu + eu, 0, kRowLanes);
    if (in && lane == 0) {
      w.row_ptr[r] = rb;
      w.unit_ptr[r] = u0;
    }
    if (in && lane == 0 && r == N - 1) {  // the last row's CTA: the totals
      w.row_ptr[N] = rb + n;
      w.unit_ptr[N] = u0 + units_of(n, qpt, w, row_splits(w, r));
    }
  } else if (in) {
    rb = w.row_ptr[r];
    u0 = w.unit_ptr[r];
  }
  if (!in) return;  // the row's lanes leave together (after the CTA scan)
  {  // every row's, empty ones too: plan_fill loads the start of any in-range key
    int first = rb + incl - mine;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (i < per) w.sub_ptr[r * ns + s0 + i] = first;
      first += c[i];
    }
  }
  if (n == 0) return;
  const int tiles = (n + qpt - 1) / qpt;
  const bool split = row_splits(w, r);
  const int nunits = units_of(n, qpt, w, split);
  for (int k = lane; k < nunits; k += kRowLanes) {
    row_unit(w, rb, n, tiles, k, split, qpt, &d);
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


// Bucketed lists (Workspace::bucket > 0; plan_buckets in prefill_kvouter_detail.cuh):
// CSR row r's entries live at [r bucket, r bucket + n_r) of the list, bucket = T (no row
// holds more entries than its request has queries), so no scan places them and plan_fill
// is not needed; one counter per row (nsub 1).
//
// plan_count_bucketed: the slots of 64 (query, KV head) pairs per CTA (the same thread j
// per slot as plan_count). D1 and the duplicates as in plan_count; the CTA counts its
// entries per row in shared memory (under plan_zero, before the wait), then adds each
// row's count to the row's global counter once (the returned count is the CTA's base in
// the row's bucket), and stores its entries at bucket + base + local rank. At (16/1,
// 8192, 32768) that is about 250 global atomics per CTA instead of one per entry: plan_count
// spent 4.5-4.8 us after its wait on 131,072 of them (H200, session 30 run C, timeline
// build).
constexpr int kBucketThreads = 1024;
__global__ void __launch_bounds__(kBucketThreads) plan_count_bucketed(const PrefillParams p, Workspace w) {
  __shared__ int s_n[kBucketMaxRows];  // this CTA's entries per row, then its base in the row's bucket
  sm90::pdl_launch_dependents();
  const std::uint64_t t_start = tl::now();
  const int tid = threadIdx.x, lane = tid & 31;
  const long long j = static_cast<long long>(blockIdx.x) * kBucketThreads + tid;
  const long long i = j >> 4;
  const int k = tid & 15;
  const int N = static_cast<int>(num_csr_rows(p));  // <= kBucketMaxRows
  for (int r = tid; r < N; r += kBucketThreads) s_n[r] = 0;
  const SlotEntry se = slot_entry(p, j);  // the entry and its page (inputs only)
  // The slot's CSR row if D1 accepts it, duplicates not yet removed.
  const long long row = se.live && k < p.topk_k ? d1_row(p, se.g, se.b, se.seq, se.pos, se.e) : -1;
  const unsigned peers = __match_any_sync(0xffffffffu, row);
  const int half = lane & 16;
  const bool valid = row >= 0 && (peers & (0xffffu << half) & ((1u << lane) - 1u)) == 0u;
  const unsigned vbits = __ballot_sync(0xffffffffu, valid);
  __syncthreads();  // s_n zeroed
  // The slot's rank among the CTA's entries of its row: one shared atomic per key and
  // warp (the two halves' own pages are usually the same row).
  const unsigned group = peers & vbits;
  const int lead = __ffs(group) - 1;
  int rank = 0;
  if (valid && lane == lead) rank = atomicAdd(&s_n[row], __popc(group));
  rank = __shfl_sync(0xffffffffu, rank, valid ? lead : lane) + __popc(group & ((1u << lane) - 1u));
  sm90::pdl_wait();  // counts: zeroed by plan_zero
  tl_count_stamps(p, w, t_start);
  if (se.live && k == 0) w.vmask[i] = (vbits >> half) & 0xffffu;
  __syncthreads();  // every shared atomic done
  for (int r = tid; r < N; r += kBucketThreads) {
    const int c = s_n[r];
    if (c != 0) s_n[r] = atomicAdd(&w.counts[r], c);
  }
  __syncthreads();
  if (valid) w.list[row * w.bucket + s_n[row] + rank] = se.ent;
#ifdef FLASHMSA_TIMELINE
  __syncthreads();
  if (tid == 0) tl::put_max(w.tl, tl::kCountEnd, tl::now());
#endif
}

// plan_units_bucketed: one CTA, rows tid and tid + kBucketThreads. The units of each row
// (units_of, unit_tiles: as plan_units) go straight into dispatch order: units per
// order class (kOrderClasses) in shared memory, a scan of the classes, then a position
// per unit. A row's full units share one class per KV head; rows are KV-head major, so
// within a warp the lanes of one head are consecutive and their full units take one
// atomic per warp and a segmented scan of the lanes. Remainder and tail units (at most
// two per row, of varied sizes) take one atomic each. Also writes the unit count into
// unit_ptr[N] (the attention kernel reads only that entry). Which unit of a class goes
// first does not change any output (a (query, page) partial does not depend on its tile
// or unit), only the schedule.
static_assert(kOrderClasses == kBucketThreads, "plan_units_bucketed: one order class per thread");
__global__ void __launch_bounds__(kBucketThreads) plan_units_bucketed(const PrefillParams p, Workspace w, int qpt) {
  using Scan = cub::BlockScan<int, kBucketThreads>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ int s_class[kOrderClasses];  // units per order class, then the next free position
  __shared__ int3 s_row[kBucketMaxRows];   // (phys, off, valid) of each row's descriptors (registers: 64 a thread)
  sm90::pdl_launch_dependents();
  const std::uint64_t t_start = tl::now();
  const int tid = threadIdx.x, lane = tid & 31;
  const int N = static_cast<int>(num_csr_rows(p));  // <= 2 kBucketThreads
  s_class[tid] = 0;
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int r = tid + q * kBucketThreads;
    if (r < N) {
      const UnitDesc d = row_desc(p, r, true);
      s_row[r] = make_int3(d.phys, d.off, d.valid);
    }
  }
  // The descriptor of row r (< N) without its unit fields.
  auto row_of = [&](int r) {
    UnitDesc d = row_desc(p, r, false);  // g, e
    const int3 x = s_row[r];
    d.phys = x.x;
    d.off = x.y;
    d.valid = x.z;
    return d;
  };
  sm90::pdl_wait();  // counts (plan_count_bucketed)
  if (tid == 0) {
    tl::put(w.tl, tl::kUnitsStart, t_start);
    tl::put(w.tl, tl::kUnitsWait, tl::now());
  }
  int n[2];
#pragma unroll
  for (int q = 0; q < 2; ++q) n[q] = tid + q * kBucketThreads < N ? w.counts[tid + q * kBucketThreads] : 0;
  __syncthreads();  // s_class zeroed, s_row written
  // Full units: key = the class of the row's full units (-1 past the last row; rows
  // without full units keep their head's key and add 0, so a head's lanes stay
  // consecutive), incl = the inclusive sum of full over the lanes of the same key, whose
  // last lane (ll) holds the key's total for the warp.
  int full[2], key[2], incl[2], ll[2];
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int r = tid + q * kBucketThreads, tiles = (n[q] + qpt - 1) / qpt;
    full[q] = tiles / w.tpu;
    key[q] = r < N ? row_desc(p, r, false).g * w.tpu : -1;
    incl[q] = full[q];
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, incl[q], o), kv = __shfl_up_sync(0xffffffffu, key[q], o);
      if (lane >= o && kv == key[q]) incl[q] += v;
    }
    ll[q] = 31 - __clz(__match_any_sync(0xffffffffu, key[q]));
    if (lane == ll[q] && key[q] >= 0 && incl[q] > 0) atomicAdd(&s_class[key[q]], incl[q]);
    const bool split = row_splits(w, r);
    const int nu = n[q] > 0 ? units_of(n[q], qpt, w, split) : 0;
    for (int u = full[q]; u < nu; ++u) {
      UnitDesc d{};
      row_unit(w, 0, n[q], tiles, u, split, qpt, &d);
      atomicAdd(&s_class[key[q] + w.tpu - d.ntiles], 1);
    }
  }
  __syncthreads();
  int first, nunits;
  Scan(tmp).ExclusiveSum(s_class[tid], first, nunits);
  __syncthreads();  // every count read before it is overwritten
  s_class[tid] = first;
  __syncthreads();
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const int r = tid + q * kBucketThreads, tiles = (n[q] + qpt - 1) / qpt;
    int start = 0;  // the key's first position for this warp's lanes
    if (lane == ll[q] && key[q] >= 0 && incl[q] > 0) start = atomicAdd(&s_class[key[q]], incl[q]);
    start = __shfl_sync(0xffffffffu, start, ll[q]);
    if (n[q] == 0) continue;
    const long long rb = static_cast<long long>(r) * w.bucket;
    const bool split = row_splits(w, r);
    const int nu = units_of(n[q], qpt, w, split);
    const UnitDesc d0 = row_of(r);
    for (int u = 0; u < nu; ++u) {
      UnitDesc d = d0;
      row_unit(w, static_cast<int>(rb), n[q], tiles, u, split, qpt, &d);
      const int pos = u < full[q] ? start + incl[q] - full[q] + u : atomicAdd(&s_class[key[q] + w.tpu - d.ntiles], 1);
      w.units[pos] = d;
    }
  }
  if (tid == 0) w.unit_ptr[N] = nunits;
#ifdef FLASHMSA_TIMELINE
  __syncthreads();
  if (tid == 0) tl::put(w.tl, tl::kUnitsEnd, tl::now());
#endif
}
}  // namespace

namespace tl {
#ifdef FLASHMSA_TIMELINE
namespace {
__device__ unsigned long long g_timeline[kWords];
unsigned long long* g_host_ptr = nullptr;
// Medians over the recorded calls (the ring's last min(calls, kRecords)), relative to
// plan_zero's start, in us.
void dump() {
  if (g_host_ptr == nullptr || cudaDeviceSynchronize() != cudaSuccess) return;
  static unsigned long long h[kWords];
  if (cudaMemcpy(h, g_host_ptr, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess) return;
  const unsigned long long calls = h[0];
  const int n = static_cast<int>(calls < kRecords ? calls : kRecords);
  static const char* names[kEvents] = {"zero_start", "count_start", "count_wait", "count_end", "units_start",
                                       "units_wait", "units_end", "fill_start", "fill_wait", "fill_end",
                                       "attn_start_min", "attn_wait_max", "attn_first_mma_max", "attn_end_min",
                                       "attn_end_max", "combine_start", "combine_wait"};
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  for (unsigned long long tag = 0; tag < 16; ++tag) {
    std::vector<const unsigned long long*> recs;
    for (int c = 0; c < n; ++c)
      if (h[2 + c * kRecord + kTag] == tag && h[2 + c * kRecord + kZeroStart] != 0) recs.push_back(h + 2 + c * kRecord);
    if (recs.empty()) continue;
    std::printf("timeline tag %llu (kv_format %llu, stop_after %llu): %zu calls, medians in us from plan_zero's start\n",
                tag, tag / 4, tag % 4, recs.size());
    for (int e = 1; e < kEvents; ++e) {
      std::vector<double> v;
      for (const unsigned long long* r : recs)
        if (r[e] != 0 && r[e] != ~0ull) v.push_back(static_cast<double>(r[e] - r[kZeroStart]) * 1e-3);
      if (!v.empty()) std::printf("timeline %llu %-20s %9.2f  (%zu)\n", tag, names[e], median(v), v.size());
    }
    // The attention CTAs' end stamps: quantiles per call, then their medians.
    std::vector<double> q[5];
    for (const unsigned long long* r : recs) {
      std::vector<double> ends;
      for (int i = kCtaEnds; i < kRecord; ++i)
        if (r[i] != 0) ends.push_back(static_cast<double>(r[i] - r[kZeroStart]) * 1e-3);
      if (ends.empty()) continue;
      std::sort(ends.begin(), ends.end());
      const double fr[5] = {0.0, 0.1, 0.5, 0.9, 1.0};
      for (int k = 0; k < 5; ++k) q[k].push_back(ends[static_cast<size_t>(fr[k] * (ends.size() - 1))]);
    }
    if (!q[0].empty())
      std::printf("timeline %llu attn_cta_end min/p10/p50/p90/max %.2f %.2f %.2f %.2f %.2f\n", tag, median(q[0]),
                  median(q[1]), median(q[2]), median(q[3]), median(q[4]));
  }
}
}  // namespace
unsigned long long* buffer() {
  if (g_host_ptr == nullptr) {
    void* ptr = nullptr;
    if (cudaGetSymbolAddress(&ptr, g_timeline) != cudaSuccess) return nullptr;
    static unsigned long long init[kWords];  // every record reset (start_record resets one ahead)
    for (int c = 0; c < kRecords; ++c)
      for (int i = 0; i < kRecord; ++i) init[2 + c * kRecord + i] = is_min_event(i) ? ~0ull : 0ull;
    if (cudaMemcpy(ptr, init, sizeof(init), cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
    g_host_ptr = static_cast<unsigned long long*>(ptr);
    std::atexit(dump);
  }
  return g_host_ptr;
}
#else
unsigned long long* buffer() { return nullptr; }
#endif
}  // namespace tl

bool fuses_scan(const PrefillParams& p, const Workspace& w) {
  static const bool off = env_whole("FLASHMSA_PLAN_FUSED_SCAN", 0, 1) == 0;  // "0" turns it off
  return !off && num_csr_rows(p) * w.nsub <= kFusedScanInts;
}

cudaError_t launch_plan(const PrefillParams& p, const Workspace& w, cudaStream_t stream) {
  const int G = p.num_q_heads / p.num_kv_heads;
  const long long N = num_csr_rows(p);
  const long long th = static_cast<long long>(p.num_rows) * p.num_kv_heads * 16;  // (query, KV head, slot)
  const unsigned plan_blocks = static_cast<unsigned>((th + kPlanThreads - 1) / kPlanThreads);
  const unsigned row_blocks = static_cast<unsigned>((N * kRowLanes + kPlanThreads - 1) / kPlanThreads);
  const int qpt = kTileRows / G;
  const unsigned scan_blocks_n = static_cast<unsigned>((N + kScanRows - 1) / kScanRows);
  const long long nzero = N * w.nsub + 1 + kOrderClasses;  // counts, sched, size_count
  const long long zero_blocks = (nzero + kPlanThreads - 1) / kPlanThreads;
  const bool fused = fuses_scan(p, w);
  // plan_zero, then programmatic dependents (see "Plan." at the top of this file).
  plan_zero<<<static_cast<unsigned>(zero_blocks < kZeroMaxBlocks ? zero_blocks : kZeroMaxBlocks), kPlanThreads, 0,
              stream>>>(w.counts, nzero, w.tl);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess && w.bucket == 0 && plan_buckets_env() == 2) err = cudaErrorNotSupported;
  if (err == cudaSuccess && w.bucket > 0) {
    err = sm90::launch_pdl(plan_count_bucketed, static_cast<unsigned>((th + kBucketThreads - 1) / kBucketThreads),
                           kBucketThreads, 0, stream, true, p, w);
    if (err == cudaSuccess) err = sm90::launch_pdl(plan_units_bucketed, 1, kBucketThreads, 0, stream, true, p, w, qpt);
    return err;
  }
  if (err == cudaSuccess) err = sm90::launch_pdl(plan_count, plan_blocks, kPlanThreads, 0, stream, true, p, w);
  if (err == cudaSuccess && !fused) {
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
    err = sm90::launch_pdl(plan_units, row_blocks, kPlanThreads, 0, stream, true, p, w, qpt, fused ? 1 : 0);
  if (err == cudaSuccess) err = sm90::launch_pdl(plan_fill, plan_blocks, kPlanThreads, 0, stream, true, p, w);
  return err;
}

}  // namespace flashmsa::cuda::prefill

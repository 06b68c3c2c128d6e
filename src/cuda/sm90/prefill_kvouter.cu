// SM90 KV-outer sparse attention for prefill (see prefill_kvouter.h for the design).
#include "cuda/sm90/prefill_kvouter.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "cuda/sm90/attn_tile.cuh"
#include "cuda/sm90/decode_attention.h"

namespace flashmsa::cuda {
namespace {

namespace at = ::flashmsa::cuda::sm90::attn;
using at::ex2_approx;
using at::kLog2_448;
using at::kLog2e;
namespace gm = ::flashmsa::cuda::sm90::gmma;

constexpr int kThreads = 256;         // 2 consumer warpgroups
constexpr int kTileRows = 128;        // M rows per tile = gathered (query, head) pairs
constexpr int kTilesPerUnit = 8;      // M-tiles per work unit (one page load each)
constexpr int kPlanThreads = 256;
constexpr int kScanThreads = 256;                      // row scans: reduce, then scan
constexpr int kScanItems = 16;
constexpr int kScanRows = kScanThreads * kScanItems;   // rows per scan block
// Sub-counters per CSR row: the plan's counting and filling atomics of warp w go to
// sub-counter w % nsub of a row, so a page chosen by many queries is not one hot
// address (the H200 measured 38 + 41 us for plan_count + plan_fill at (16/1, 8192,
// 32768) with one counter per row). A row's entries stay contiguous in the list, its
// sub-ranges one after the other. nsub = kSub while the two [N, nsub] arrays stay small
// (N <= kSubMaxRows CSR rows: 16 MB each), else 1.
constexpr int kSub = 8;
constexpr std::int64_t kSubMaxRows = 1 << 19;

// ---------------------------------------------------------------------------------------
// One work unit: up to kTilesPerUnit M-tiles of one CSR row (page of a request, KV head),
// fully resolved by the plan so the attention kernel reads it with two 16-byte loads.
struct __align__(16) UnitDesc {
  int begin, end;  // entries [begin, end) of the list
  int ntiles, g;   // M-tiles, KV head
  int e, valid;    // logical page, valid tokens of the page
  int off, phys;   // query position = t + off; physical page
};

// Workspace: carved from one allocation, every piece 256-byte aligned.
struct Workspace {
  int nsub = 1;                     // sub-counters per CSR row (kSub or 1)
  int* counts = nullptr;            // [N, nsub] entries per row and sub-counter (zeroed, consumed by the fill)
  int* sched = nullptr;             // = counts + N nsub: the attention kernel's unit counter (zeroed)
  int* sub_ptr = nullptr;           // [N, nsub] first list position of each sub-range
  int* row_ptr = nullptr;           // [N+1]
  int* unit_ptr = nullptr;          // [N+1] work units before each row
  int2* block_sums = nullptr;       // [scan blocks] (entries, units) per kScanRows rows
  UnitDesc* units = nullptr;        // [unit capacity]
  int* list = nullptr;              // [Hkv * T * K] (query << 4) | slot
  unsigned* vmask = nullptr;        // [T * Hkv] valid slots (bit k)
  std::uint16_t* o_part = nullptr;  // bf16 [K, T, Hq, 128]
  float* lse_part = nullptr;        // f32 [K, T, Hq]
  std::int64_t bytes = 0;
};

std::int64_t align256(std::int64_t b) { return (b + 255) / 256 * 256; }

__host__ __device__ inline std::int64_t num_csr_rows(const PrefillParams& p) {
  return static_cast<std::int64_t>(p.num_kv_heads) * p.batch * p.bt_width;
}

// Work units: ceil(ceil(n / qpt) / kTilesPerUnit) per row of n entries, so at most
// entries / (kTilesPerUnit * qpt) + (non-empty rows) in all.
std::int64_t unit_capacity(const PrefillParams& p) {
  const std::int64_t entries = static_cast<std::int64_t>(p.num_kv_heads) * p.num_rows * p.topk_k;
  const std::int64_t qpt = kTileRows / (p.num_q_heads / p.num_kv_heads);
  return num_csr_rows(p) + entries / (kTilesPerUnit * qpt) + 1;
}

Workspace carve(const PrefillParams& p, void* base) {
  const std::int64_t N = num_csr_rows(p), T = p.num_rows, K = p.topk_k;
  Workspace w;
  w.nsub = N <= kSubMaxRows ? kSub : 1;
  const std::int64_t S = w.nsub;
  const std::int64_t sizes[10] = {(N * S + 1) * 4,
                                 (N + 1) * 4,
                                 (N + 1) * 4,
                                 (N + kScanRows - 1) / kScanRows * 8,
                                 unit_capacity(p) * static_cast<std::int64_t>(sizeof(UnitDesc)),
                                 p.num_kv_heads * T * K * 4,
                                 T * p.num_kv_heads * 4,
                                 K * T * p.num_q_heads * 128 * 2,
                                 K * T * p.num_q_heads * 4,
                                 N * S * 4};
  std::int64_t off = 0;
  char* b = static_cast<char*>(base);
  void* ptrs[10];
  for (int i = 0; i < 10; ++i) {
    ptrs[i] = b ? b + off : nullptr;
    off += align256(sizes[i]);
  }
  w.counts = static_cast<int*>(ptrs[0]);
  w.sched = w.counts ? w.counts + N * S : nullptr;
  w.row_ptr = static_cast<int*>(ptrs[1]);
  w.unit_ptr = static_cast<int*>(ptrs[2]);
  w.block_sums = static_cast<int2*>(ptrs[3]);
  w.units = static_cast<UnitDesc*>(ptrs[4]);
  w.list = static_cast<int*>(ptrs[5]);
  w.vmask = static_cast<unsigned*>(ptrs[6]);
  w.o_part = static_cast<std::uint16_t*>(ptrs[7]);
  w.lse_part = static_cast<float*>(ptrs[8]);
  w.sub_ptr = static_cast<int*>(ptrs[9]);
  w.bytes = off;
  return w;
}

// ---------------------------------------------------------------------------------------
// Plan.

// Query row t -> request b (last b with cu[b] <= t) and position p (D4). In range reads only.
__device__ __forceinline__ void locate(const PrefillParams& p, int t, int* b, long long* pos) {
  int lo = 0, hi = p.batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (p.cu_seqlens[mid * p.cu_stride] <= t) lo = mid;
    else hi = mid - 1;
  }
  *b = lo;
  const long long start = p.cu_seqlens[lo * p.cu_stride];
  const long long q_len = p.cu_seqlens[(lo + 1) * p.cu_stride] - start;
  *pos = static_cast<long long>(p.seq_lens[lo * p.seq_lens_stride]) - q_len + (t - start);
}

// D1: the valid, first-occurrence entries of topk[t, g, :] (bit k of the mask) and their
// logical pages. Three passes (top-k reads, block-table reads, checks) so the 16 slots'
// round trips overlap instead of chaining.
__device__ __forceinline__ unsigned valid_entries(const PrefillParams& p, int t, int g, int b, long long pos,
                                                  int (&e)[16]) {
  unsigned mask = 0;
#pragma unroll
  for (int k = 0; k < 16; ++k) e[k] = -1;
  if (pos < 0) return 0;
  const long long seq = p.seq_lens[b * p.seq_lens_stride];
  const long long req_pages = (seq + 127) / 128;
  const std::int32_t* row = p.topk + t * p.topk_stride[0] + g * p.topk_stride[1];
  long long v[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) v[k] = k < p.topk_k ? row[k * p.topk_stride[2]] : -1;
  int phys[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const bool in = v[k] >= 0 && v[k] < req_pages && v[k] <= pos / 128 && v[k] < p.bt_width;
    phys[k] = in ? p.block_table[b * p.bt_stride[0] + v[k] * p.bt_stride[1]] : -1;
  }
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    bool ok = phys[k] >= 0 && phys[k] < p.num_pages;  // also false when v[k] was rejected
#pragma unroll
    for (int j = 0; j < k; ++j) ok = ok && e[j] != v[k];
    if (ok) {
      e[k] = static_cast<int>(v[k]);
      mask |= 1u << k;
    }
  }
  return mask;
}

// Sub-counter of the thread's warp (see kSub); the fill uses the same mapping.
__device__ __forceinline__ int plan_sub(const Workspace& w, long long i) { return static_cast<int>((i >> 5) % w.nsub); }

// Warp-aggregated counting: lanes whose slot k lands on the same (row, sub-counter) add
// once, through the lowest such lane. No lane returns early (__match_any_sync).
__global__ void __launch_bounds__(kPlanThreads) plan_count(const PrefillParams p, Workspace w) {
  const long long i = static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x;
  const bool live = i < static_cast<long long>(p.num_rows) * p.num_kv_heads;
  const int lane = threadIdx.x & 31;
  int e[16];
  unsigned mask = 0;
  long long base = 0;
  if (live) {
    const int t = static_cast<int>(i / p.num_kv_heads), g = static_cast<int>(i % p.num_kv_heads);
    int b;
    long long pos;
    locate(p, t, &b, &pos);
    mask = valid_entries(p, t, g, b, pos, e);
    w.vmask[i] = mask;
    base = (static_cast<long long>(g) * p.batch + b) * p.bt_width;
  }
  const int sub = plan_sub(w, i);
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const long long key = ((mask >> k) & 1u) ? (base + e[k]) * w.nsub + sub : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, key);
    if (key >= 0 && lane == __ffs(peers) - 1) atomicAdd(&w.counts[key], __popc(peers));
  }
}

// Exclusive scans of the entries per row (row_ptr) and of the work units per row
// (unit_ptr, ceil(ceil(n / qpt) / kTilesPerUnit) for n entries), reduce-then-scan over
// blocks of kScanRows rows: scan_reduce (block totals), scan_blocks (one CTA: block
// offsets, in place, and the totals row_ptr[N], unit_ptr[N]), scan_rows.
__device__ __forceinline__ int units_of(int n, int qpt) {
  return ((n + qpt - 1) / qpt + kTilesPerUnit - 1) / kTilesPerUnit;
}

// Entries of CSR row r < N: the sum of its sub-counters, 0 for r >= N. The loads are
// unconditional (row clamped to N - 1) so a thread's rows load together rather than one
// guarded round trip after another.
__device__ __forceinline__ int row_count(const Workspace& w, long long r, long long N) {
  const int* c = w.counts + (r < N ? r : N - 1) * w.nsub;
  int n = 0;
#pragma unroll
  for (int s = 0; s < kSub; ++s) n += s < w.nsub ? c[s] : 0;
  return r < N ? n : 0;
}

__device__ __forceinline__ void load_scan_items(const PrefillParams& p, const Workspace& w, int qpt,
                                                int (&ce)[kScanItems], int (&cu)[kScanItems]) {
  const long long N = num_csr_rows(p);
#pragma unroll
  for (int i = 0; i < kScanItems; ++i) {
    const long long r = static_cast<long long>(blockIdx.x) * kScanRows + threadIdx.x * kScanItems + i;
    ce[i] = row_count(w, r, N);
    cu[i] = units_of(ce[i], qpt);
  }
}

__global__ void __launch_bounds__(kScanThreads) scan_reduce(const PrefillParams p, Workspace w, int qpt) {
  using Reduce = cub::BlockReduce<int, kScanThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  int ce[kScanItems], cu[kScanItems];
  load_scan_items(p, w, qpt, ce, cu);
  const int se = Reduce(tmp).Sum(ce);
  __syncthreads();
  const int su = Reduce(tmp).Sum(cu);
  if (threadIdx.x == 0) w.block_sums[blockIdx.x] = make_int2(se, su);
}

__global__ void __launch_bounds__(kScanThreads) scan_blocks(const PrefillParams p, Workspace w, int nblocks) {
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
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  int ce[kScanItems], cu[kScanItems];
  load_scan_items(p, w, qpt, ce, cu);
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
  using Scan = cub::BlockScan<int, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const long long N = num_csr_rows(p);
  int carry_e = 0, carry_u = 0;
  for (long long b0 = 0; b0 < N; b0 += kScanRows) {
    int ce[kScanItems], cu[kScanItems];
#pragma unroll
    for (int i = 0; i < kScanItems; ++i) {
      const long long r = b0 + threadIdx.x * kScanItems + i;
      ce[i] = row_count(w, r, N);
      cu[i] = units_of(ce[i], qpt);
    }
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
// one atomic per (row, sub-counter) and slot k per warp, the lanes ranked below it.
// Passes: top-k reads; atomics (all in flight together); ranks and sub-range starts;
// list stores. No lane returns early (__match_any_sync, __shfl_sync).
__global__ void __launch_bounds__(kPlanThreads) plan_fill(const PrefillParams p, Workspace w) {
  const long long i = static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x;
  const bool live = i < static_cast<long long>(p.num_rows) * p.num_kv_heads;
  const unsigned mask = live ? w.vmask[i] : 0u;
  const int lane = threadIdx.x & 31;
  int t = 0;
  long long base = 0;
  int e[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) e[k] = 0;
  if (mask != 0u) {
    const int g = static_cast<int>(i % p.num_kv_heads);
    t = static_cast<int>(i / p.num_kv_heads);
    int b;
    long long pos;
    locate(p, t, &b, &pos);
    base = (static_cast<long long>(g) * p.batch + b) * p.bt_width;
    const std::int32_t* row = p.topk + t * p.topk_stride[0] + g * p.topk_stride[1];
#pragma unroll
    for (int k = 0; k < 16; ++k) e[k] = ((mask >> k) & 1u) ? row[k * p.topk_stride[2]] : 0;  // bits >= K are 0
  }
  const int sub = plan_sub(w, i);
  unsigned peers[16];
  int old[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const long long key = ((mask >> k) & 1u) ? (base + e[k]) * w.nsub + sub : -1;
    peers[k] = __match_any_sync(0xffffffffu, key);
    old[k] = 0;
    if (key >= 0 && lane == __ffs(peers[k]) - 1) old[k] = atomicSub(&w.counts[key], __popc(peers[k]));
  }
  int pos_k[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const int top = __shfl_sync(0xffffffffu, old[k], __ffs(peers[k]) - 1);  // count before the group
    const int rank = __popc(peers[k] & ((1u << lane) - 1u));
    pos_k[k] = top - 1 - rank;
    if ((mask >> k) & 1u) pos_k[k] += w.sub_ptr[(base + e[k]) * w.nsub + sub];
  }
#pragma unroll
  for (int k = 0; k < 16; ++k)
    if ((mask >> k) & 1u) w.list[pos_k[k]] = (t << 4) | k;
}

// One thread per CSR row: the start of each sub-range of the row (for plan_fill, which
// runs after this kernel), and the descriptors of the row's work units.
__global__ void __launch_bounds__(kPlanThreads) plan_units(const PrefillParams p, Workspace w, int qpt) {
  const long long r = static_cast<long long>(blockIdx.x) * kPlanThreads + threadIdx.x;
  if (r >= num_csr_rows(p)) return;
  const int rb = w.row_ptr[r], n = w.row_ptr[r + 1] - rb;
  if (n == 0) return;
  {
    int c[kSub];
#pragma unroll
    for (int s = 0; s < kSub; ++s) c[s] = s < w.nsub ? w.counts[r * w.nsub + s] : 0;
    int first = rb;
#pragma unroll
    for (int s = 0; s < kSub; ++s) {
      if (s < w.nsub) w.sub_ptr[r * w.nsub + s] = first;
      first += c[s];
    }
  }
  const int tiles = (n + qpt - 1) / qpt;
  const long long per_head = static_cast<long long>(p.batch) * p.bt_width;
  const long long rem = r % per_head;
  const int b = static_cast<int>(rem / p.bt_width);
  UnitDesc d;
  d.g = static_cast<int>(r / per_head);
  d.e = static_cast<int>(rem % p.bt_width);
  d.phys = p.block_table[b * p.bt_stride[0] + d.e * p.bt_stride[1]];  // valid: the row has entries
  const long long seq = p.seq_lens[b * p.seq_lens_stride];
  d.off = static_cast<int>(seq - p.cu_seqlens[(b + 1) * p.cu_stride]);
  d.valid = static_cast<int>(max(0LL, min(128LL, seq - 128LL * d.e)));
  const int u0 = w.unit_ptr[r];
  for (int k = 0; k * kTilesPerUnit < tiles; ++k) {
    d.ntiles = min(kTilesPerUnit, tiles - k * kTilesPerUnit);
    d.begin = rb + k * kTilesPerUnit * qpt;
    d.end = min(rb + n, d.begin + d.ntiles * qpt);
    w.units[u0 + k] = d;
  }
}

// ---------------------------------------------------------------------------------------
// Attention.

// QK16 (FP8 paths, default): Q K^T on the exact F16 images of E4M3 Q and K (attn_tile.cuh):
// the E4M3 Q rows arrive raw by cp.async and each warpgroup widens its 64 rows into an
// F16 Q tile before it issues that tile's QK wgmma.
//
// Software pipeline (per warpgroup): the QK wgmma of tile n+1 is issued right after the
// PV wgmma of tile n, so it runs under tile n's epilogue; the Q rows of tile n+2 are in
// flight meanwhile. Three tiles are live at once, so the buffers rotate by tile position
// n (counted across units): metadata n % 3; BF16 / QGMMA Q tiles n % 3 (a BF16 tile is
// also the output staging of its own epilogue); QK16: raw E4M3 rows n % 2 (dead once
// widened) and F16 Q tiles n % 2 (each the staging of its own epilogue).
template <int FMT, bool QK16>
struct Smem {
  using PB = at::PageBytes<FMT, QK16>;
  static constexpr int kPage = PB::kStage;                            // one cp.async page stage (x2)
  static constexpr int kConv = PB::kConv;                             // converted page tiles (x1)
  static constexpr int kNQ = QK16 ? 2 : 3;                            // cp.async Q tiles
  static constexpr int kQ = QK16 ? kTileRows * 128 : kTileRows * PB::kQRow;
  static constexpr int kNWide = QK16 ? 2 : 0;                         // F16 Q tiles (QK16)
  static constexpr int kWideQ = kTileRows * 256;
  // Output staging (64 rows x 256 bytes per warpgroup, SW128): the 256-byte-row Q tile
  // the QK wgmma read; E4M3 QGMMA needs its own (one: only the epilogue uses it).
  static constexpr int kStage = (FMT == at::kBf16 || QK16) ? 0 : kTileRows * 256;
  static constexpr int kMeta = 3 * kTileRows * 5 + 8;  // s_entry[3][128] (int), s_lim[3][128] (int8), s_sched[2]
  static constexpr int kBytes = 2 * kPage + kConv + kNQ * kQ + kNWide * kWideQ + kStage + kMeta;
  static constexpr int kAlloc = kBytes + 1024;  // runtime 1024-byte alignment
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

// cp.async gather of M-tile j of unit `un` (rows r -> entry r / G, head g*G + r % G) and
// its row metadata: s_entry = list entry or -1 (padding), s_lim = last visible token of
// the page for that query (127, or p % 128 on the query's local page; -1 for padding).
template <int FMT, bool QK16>
__device__ __forceinline__ void issue_q_tile(const PrefillParams& p, const Workspace& w, const UnitDesc& un, int j,
                                             int G, int qpt, std::uint8_t* q_tile, int* s_entry,
                                             std::int8_t* s_lim, int tid) {
  constexpr int kChunks = FMT == at::kBf16 ? 16 : 8;  // 16-byte chunks of one global Q row
  constexpr int es = FMT == at::kBf16 ? 2 : 1;
  const int r = tid >> 1, half = tid & 1;  // warpgroup wg copies its own rows 64 wg..
  const int idx = un.begin + j * qpt + (r >> (__ffs(G) - 1));  // G divides 16 (launch check)
  const bool ok = idx < un.end;
  int entry = -1, lim = -1;
  const std::uint8_t* src = static_cast<const std::uint8_t*>(p.q);
  if (ok) {
    entry = w.list[idx];
    const int t = entry >> 4;
    const long long pos = static_cast<long long>(t) + un.off;
    // Never past the page's valid tokens, whatever the metadata says (the zero-filled
    // slots must stay invisible even for a row placed beyond seq_len).
    lim = min((pos >> 7) == un.e ? static_cast<int>(pos & 127) : 127, un.valid - 1);
    src += (static_cast<long long>(t) * p.q_row_stride +
            static_cast<long long>(un.g * G + (r & (G - 1))) * p.q_head_stride) * es;
  }
#pragma unroll
  for (int c = 0; c < kChunks / 2; ++c) {
    const int ch = half * (kChunks / 2) + c;
    if constexpr (QK16) at::cp_async16_zfill(q_tile + r * 128 + ch * 16, src + (ok ? ch * 16 : 0), ok);  // raw rows
    else at::copy_q_chunk(q_tile, kTileRows, r, ch, src, ok);
  }
  if (half == 0) {
    s_entry[r] = entry;
    s_lim[r] = static_cast<std::int8_t>(lim);
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

// QK16: this warpgroup's 64 raw E4M3 rows -> the F16 Q tile (then proxy fence; the
// caller's warpgroup barrier publishes it to the wgmma).
__device__ __forceinline__ void widen_q(const std::uint8_t* raw, std::uint8_t* wide, int wg, int wtid) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int c = wtid + 128 * i;
    const int row = 64 * wg + (c >> 4), ch = c & 15;
    at::store_e4m3x8_as_f16(wide + gm::sw128_offset(row, 16 * ch, kTileRows),
                            *reinterpret_cast<const uint2*>(raw + row * 128 + 8 * ch));
  }
  at::fence_view_async_shared();
}

// Single-page softmax of this warpgroup's 64 rows (S waited in s) -> P fragments pa, row
// maxima m (raw logits) and per-thread normaliser partials l; then issues O = P V
// (committed, not waited: pa must stay untouched until it retires).
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
  m[0] = m[1] = -INFINITY;
#pragma unroll
  for (int i = 0; i < 64; ++i) m[(i >> 1) & 1] = fmaxf(m[(i >> 1) & 1], s[i]);
  float bias[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 1));
    m[r] = fmaxf(m[r], __shfl_xor_sync(0xffffffffu, m[r], 2));
    const float mu = m[r] == -INFINITY ? 0.0f : m[r];
    bias[r] = kFp8 ? fmaf(-mu, c2, kLog2_448) : -mu * c2;  // spec 3.4
    l[r] = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    s[i] = ex2_approx(fmaf(s[i], c2, bias[(i >> 1) & 1]));  // masked: 0
    l[(i >> 1) & 1] += s[i];                               // unrounded normaliser
  }
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
}

// Epilogue of one tile (PV retired): rows normalised, staged as BF16 (SW128, 256-byte
// rows), stored coalesced at each row's entry slot, and the row LSE.
template <int FMT>
__device__ __forceinline__ void epilogue(const PrefillParams& p, const Workspace& w, const UnitDesc& un, int G,
                                         const float (&o)[64], const float (&m)[2], float (&l)[2],
                                         std::uint8_t* stage, const int* s_entry, int wg, int wtid) {
  constexpr bool kFp8 = FMT != at::kBf16;
  const int warp = wtid >> 5, lane = wtid & 31;
  const int lr0 = 64 * wg + 16 * warp + (lane >> 2);
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = lr0 + 8 * r;
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<std::uint32_t*>(stage + gm::sw128_offset(row, 16 * j + 4 * (lane & 3), kTileRows)) =
          gm::pack_bf16x2(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
    const int entry = s_entry[row];
    if ((lane & 3) == 0 && entry >= 0) {
      const long long t = entry >> 4, slot = entry & 15;
      const int h = un.g * G + (row & (G - 1));
      const float lse = m[r] * p.c + logf(kFp8 ? l[r] * (1.0f / 448.0f) : l[r]);
      w.lse_part[(slot * p.num_rows + t) * p.num_q_heads + h] = lse;
    }
  }
  wg_barrier(wg);
  // Thread wtid stores chunk wtid % 16 of rows 64 wg + wtid / 16 + 8 i. The address
  // arithmetic is per row and cheap (G is a power of two): it ran a division and a
  // 64-bit product chain per 16-byte store before (26 % of the kernel's instructions,
  // ncu, session 14).
  const int ch = wtid & 15;
  std::uint16_t* const o_base = w.o_part + ch * 8;
  const long long plane = static_cast<long long>(p.num_rows) * p.num_q_heads;  // rows per slot
#pragma unroll 4
  for (int i = 0; i < 8; ++i) {
    const int row = 64 * wg + (wtid >> 4) + 8 * i;
    const int entry = s_entry[row];
    if (entry < 0) continue;
    const long long orow = (entry & 15) * plane + static_cast<long long>(entry >> 4) * p.num_q_heads + un.g * G +
                           (row & (G - 1));
    const uint4 v = *reinterpret_cast<const uint4*>(stage + gm::sw128_offset(row, 16 * ch, kTileRows));
    *reinterpret_cast<uint4*>(o_base + orow * 128) = v;
  }
}

template <int FMT, bool QK16>
__global__ void __launch_bounds__(kThreads, 1) prefill_attention(const PrefillParams p, const Workspace w) {
  using S = Smem<FMT, QK16>;
  using PB = at::PageBytes<FMT, QK16>;
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  const std::uint32_t a0 = gm::smem_addr(smem_raw);
  std::uint8_t* smem = smem_raw + (((a0 + 1023u) & ~1023u) - a0);
  // Buffers by index (arithmetic, not arrays: no local-memory indexing).
  auto page_buf = [smem](int i) { return smem + i * S::kPage; };
  std::uint8_t* conv = smem + 2 * S::kPage;
  std::uint8_t* qbase = conv + S::kConv;
  std::uint8_t* wbase = qbase + S::kNQ * S::kQ;
  std::uint8_t* stage_fp8 = wbase + S::kNWide * S::kWideQ;
  int* s_entry = reinterpret_cast<int*>(stage_fp8 + S::kStage);        // [3][128]
  std::int8_t* s_lim = reinterpret_cast<std::int8_t*>(s_entry + 3 * kTileRows);  // [3][128]
  int* s_sched = reinterpret_cast<int*>(s_lim + 3 * kTileRows);                  // [2]
  // Buffers of tile position n.
  auto q_buf = [qbase](int n) { return qbase + (n % S::kNQ) * S::kQ; };
  auto wide_q = [wbase](int n) { return wbase + (n & 1) * S::kWideQ; };
  auto ent_of = [s_entry](int n) { return s_entry + (n % 3) * kTileRows; };
  auto lim_of = [s_lim](int n) { return s_lim + (n % 3) * kTileRows; };
  auto qk_tile = [&](int n) { return QK16 ? wide_q(n) : q_buf(n); };
  auto stage_of = [&](int n) { return FMT == at::kBf16 ? q_buf(n) : (QK16 ? wide_q(n) : stage_fp8); };

  const int total = w.unit_ptr[num_csr_rows(p)];
  int u = blockIdx.x;
  if (u >= total) return;
  const int G = p.num_q_heads / p.num_kv_heads, qpt = kTileRows / G;
  const int tid = threadIdx.x, wg = tid >> 7, wtid = tid & 127;
  const int lane = wtid & 31;
  const int lr0 = 64 * wg + 16 * (wtid >> 5) + (lane >> 2);

  UnitDesc cur = w.units[u];
  int n0 = 0, pb = 0;  // position of cur's tile 0; page buffer of cur
  {
    const at::PageSrc src = page_src<FMT>(p, cur);
    at::issue_page_copy<FMT, QK16, kThreads>(src, page_buf(0), cur.valid, tid);
  }
  at::cp_async_commit();
  issue_q_tile<FMT, QK16>(p, w, cur, 0, G, qpt, q_buf(0), ent_of(0), lim_of(0), tid);
  at::cp_async_commit();
  float s[64], o[64], m[2], l[2];
  std::uint32_t pa[8][4];
  // Dynamic schedule (load balance; the output does not depend on which CTA runs a
  // unit): a CTA's first two units are blockIdx.x and blockIdx.x + gridDim.x, its
  // (k+2)-th is 2 gridDim.x + a ticket that thread 0 takes during its k-th unit's last
  // tile and publishes in s_sched[k & 1] for the unit barrier of unit k+1.
  for (int k = 0;; ++k) {
    // This unit's page and first Q tile; every warpgroup is past the previous unit.
    at::cp_async_wait<0>();
    at::fence_view_async_shared();
    __syncthreads();
    const int un = k == 0 ? u + static_cast<int>(gridDim.x) : s_sched[(k - 1) & 1];
    const bool has_next = un < total;
    UnitDesc nxt;
    if (has_next) nxt = w.units[un];
    at::convert_page<FMT, QK16, kThreads>(page_src<FMT>(p, cur), page_buf(pb), conv, cur.valid, tid);
    __syncthreads();
    const std::uint32_t k_addr = gm::smem_addr(PB::k_tile(page_buf(pb), conv));
    const std::uint32_t v_addr = gm::smem_addr(PB::v_tile(page_buf(pb), conv));
    // Tiles run in full even where a warpgroup's rows are all padding (only a unit's last
    // tile has any): no wgmma in a divergent path. Padding rows have zero Q, lim -1 (all
    // keys masked: P = 0, l = 0) and entry -1 (nothing stored).
    if constexpr (QK16) {
      widen_q(q_buf(n0), wide_q(n0), wg, wtid);
      wg_barrier(wg);
    }
    at::wg_qk<FMT, QK16>(gm::smem_addr(qk_tile(n0)) + 128 * 64 * wg, kTileRows * 128, k_addr, s);
    if (cur.ntiles > 1)
      issue_q_tile<FMT, QK16>(p, w, cur, 1, G, qpt, q_buf(n0 + 1), ent_of(n0 + 1), lim_of(n0 + 1), tid);
    at::cp_async_commit();
    at::cp_async_commit();  // empty: two groups per step, as in the loop
    gm::wait<0>();
    gm::fence_operands(s);
    // Inside a unit the warpgroups run free: warpgroup wg gathers, owns and reads only
    // rows [64 wg, 64 wg + 64) of the Q tiles, metadata and staging (threads 2r, 2r+1
    // copy row r), so warpgroup barriers suffice. Step j (tile n = n0 + j, S(n) waited):
    // softmax, PV(n) issued; Q(n+1) complete (cp.async groups: each step commits Q(n+2),
    // then the next unit's page or nothing, so after wait_group 1 only the page of step
    // j-1 may be in flight), widened (QK16); QK(n+1) issued; the gather of position n+2
    // (this unit's tile j+2 or the next unit's tile 0) and, two tiles before the end,
    // the next unit's page into the other buffer (free: both warpgroups passed the unit
    // barrier); PV(n) retired; epilogue(n) under QK(n+1); QK(n+1) retired.
    // Buffers of position n+2 (= n-1 mod 3; QK16 raw rows: = n mod 2, widened before
    // step j-1's QK) are free after this step's warpgroup barrier.
    const int last = cur.ntiles - 1;
    const int jp = has_next ? max(cur.ntiles - 2, 0) : -1;
#pragma unroll 1
    for (int j = 0; j < last; ++j) {
      const int n = n0 + j;
      {
        const std::int8_t* lim = lim_of(n);
        softmax_pv<FMT>(p, s, lim[lr0], lim[lr0 + 8], v_addr, pa, o, m, l, lane);
      }
      at::cp_async_wait<1>();
      at::fence_view_async_shared();
      wg_barrier(wg);  // Q(n+1) landed in all threads; tile n-1's epilogue is done
      if constexpr (QK16) {
        widen_q(q_buf(n + 1), wide_q(n + 1), wg, wtid);
        wg_barrier(wg);
      }
      at::wg_qk<FMT, QK16>(gm::smem_addr(qk_tile(n + 1)) + 128 * 64 * wg, kTileRows * 128, k_addr, s);
      if (j + 2 < cur.ntiles)
        issue_q_tile<FMT, QK16>(p, w, cur, j + 2, G, qpt, q_buf(n + 2), ent_of(n + 2), lim_of(n + 2), tid);
      else if (has_next)
        issue_q_tile<FMT, QK16>(p, w, nxt, 0, G, qpt, q_buf(n + 2), ent_of(n + 2), lim_of(n + 2), tid);
      at::cp_async_commit();
      if (j == jp) {
        const at::PageSrc src = page_src<FMT>(p, nxt);
        at::issue_page_copy<FMT, QK16, kThreads>(src, page_buf(pb ^ 1), nxt.valid, tid);
      }
      at::cp_async_commit();
      gm::wait<1>();  // PV(n); QK(n+1) stays in flight
      gm::fence_operands(o);
      fence_pa(pa);
      epilogue<FMT>(p, w, cur, G, o, m, l, stage_of(n), ent_of(n), wg, wtid);
      gm::wait<0>();  // QK(n+1)
      gm::fence_operands(s);
    }
    {  // last tile: the next unit's tile 0 was gathered at step last-1 unless it is tile 0
      const int n = n0 + last;
      int ticket = 0;
      if (tid == 0 && has_next) ticket = atomicAdd(w.sched, 1);
      {
        const std::int8_t* lim = lim_of(n);
        softmax_pv<FMT>(p, s, lim[lr0], lim[lr0 + 8], v_addr, pa, o, m, l, lane);
      }
      if (last == 0 && has_next)  // position n+1 = n-2 mod 3: free since the unit barrier
        issue_q_tile<FMT, QK16>(p, w, nxt, 0, G, qpt, q_buf(n + 1), ent_of(n + 1), lim_of(n + 1), tid);
      at::cp_async_commit();
      if (last == jp) {
        const at::PageSrc src = page_src<FMT>(p, nxt);
        at::issue_page_copy<FMT, QK16, kThreads>(src, page_buf(pb ^ 1), nxt.valid, tid);
      }
      at::cp_async_commit();
      gm::wait<0>();
      gm::fence_operands(o);
      fence_pa(pa);
      epilogue<FMT>(p, w, cur, G, o, m, l, stage_of(n), ent_of(n), wg, wtid);
      if (tid == 0 && has_next) s_sched[k & 1] = 2 * static_cast<int>(gridDim.x) + ticket;
    }
    if (!has_next) break;
    n0 += cur.ntiles;
    cur = nxt;
    u = un;
    pb ^= 1;
  }
  at::cp_async_wait<0>();
}

// ---------------------------------------------------------------------------------------
// Combine: 16 threads (8 dims each) per (query, head), 8 of them per 128-thread CTA.
__global__ void __launch_bounds__(128) prefill_combine(const PrefillParams p, const Workspace w) {
  const long long idx = static_cast<long long>(blockIdx.x) * 8 + (threadIdx.x >> 4);
  if (idx >= static_cast<long long>(p.num_rows) * p.num_q_heads) return;
  const long long t = idx / p.num_q_heads;
  const int h = static_cast<int>(idx % p.num_q_heads);
  const int G = p.num_q_heads / p.num_kv_heads;
  const int d0 = (threadIdx.x & 15) * 8;
  const unsigned mask = w.vmask[t * p.num_kv_heads + (h >> (__ffs(G) - 1))];  // G divides 16
  const long long plane = static_cast<long long>(p.num_rows) * p.num_q_heads;
  // All loads first (predicated, fully unrolled: up to 16 in flight per thread), then
  // the merge in ascending slot order (fixed order, D9).
  float ls[16];
  uint4 ov[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const bool on = (mask >> k) & 1u;
    ls[k] = on ? w.lse_part[k * plane + idx] : -INFINITY;
    ov[k] = on ? *reinterpret_cast<const uint4*>(w.o_part + (k * plane + idx) * 128 + d0) : make_uint4(0, 0, 0, 0);
  }
  float M = -INFINITY;
#pragma unroll
  for (int k = 0; k < 16; ++k) M = fmaxf(M, ls[k]);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float W = 0.0f, lse = -INFINITY;
  if (mask != 0) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      if (!((mask >> k) & 1u)) continue;
      const float wt = expf(ls[k] - M);
      W += wt;
      const std::uint32_t vv[4] = {ov[k].x, ov[k].y, ov[k].z, ov[k].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[2 * i] += wt * __uint_as_float(vv[i] << 16);
        acc[2 * i + 1] += wt * __uint_as_float(vv[i] & 0xffff0000u);
      }
    }
    lse = M + logf(W);
  }
  const float scale = mask != 0 ? p.v_global / W : 0.0f;
  uint4 o;
  o.x = gm::pack_bf16x2(acc[0] * scale, acc[1] * scale);
  o.y = gm::pack_bf16x2(acc[2] * scale, acc[3] * scale);
  o.z = gm::pack_bf16x2(acc[4] * scale, acc[5] * scale);
  o.w = gm::pack_bf16x2(acc[6] * scale, acc[7] * scale);
  *reinterpret_cast<uint4*>(p.out + t * p.out_row_stride + h * p.out_head_stride + d0) = o;
  if (d0 == 0 && p.lse != nullptr) p.lse[t * p.lse_row_stride + h * p.lse_head_stride] = lse;
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
  prefill_attention<FMT, QK16><<<sms[dev], kThreads, smem, stream>>>(p, w);
  return cudaGetLastError();
}

}  // namespace

std::int64_t prefill_kvouter_workspace_bytes(const PrefillParams& p) { return carve(p, nullptr).bytes; }

int launch_prefill_kvouter(const PrefillParams& p, int kv_format, void* stream_ptr) {
  if (p.num_rows == 0) return 0;
  const int G = p.num_q_heads / p.num_kv_heads;
  if (p.num_kv_heads <= 0 || G <= 0 || G > 16 || 16 % G != 0 || p.topk_k < 1 || p.topk_k > 16 ||
      p.bt_width <= 0 || p.batch <= 0 || kv_format < 0 || kv_format > 2)
    return cudaErrorInvalidValue;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const std::int64_t bytes = prefill_kvouter_workspace_bytes(p);
  void* base = nullptr;
  cudaError_t err = cudaMallocAsync(&base, static_cast<size_t>(bytes), stream);
  if (err != cudaSuccess) return err;
  const Workspace w = carve(p, base);
  const long long N = num_csr_rows(p);
  const long long th = static_cast<long long>(p.num_rows) * p.num_kv_heads;
  const unsigned plan_blocks = static_cast<unsigned>((th + kPlanThreads - 1) / kPlanThreads);
  const unsigned row_blocks = static_cast<unsigned>((N + kPlanThreads - 1) / kPlanThreads);
  const int qpt = kTileRows / G;
  const unsigned scan_blocks_n = static_cast<unsigned>((N + kScanRows - 1) / kScanRows);
  err = cudaMemsetAsync(w.counts, 0, static_cast<size_t>(N * w.nsub + 1) * 4, stream);
  if (err == cudaSuccess) {
    plan_count<<<plan_blocks, kPlanThreads, 0, stream>>>(p, w);
    if (scan_blocks_n <= kSingleScanBlocks) {
      scan_single<<<1, kScanThreads, 0, stream>>>(p, w, qpt);
    } else {
      scan_reduce<<<scan_blocks_n, kScanThreads, 0, stream>>>(p, w, qpt);
      scan_blocks<<<1, kScanThreads, 0, stream>>>(p, w, static_cast<int>(scan_blocks_n));
      scan_rows<<<scan_blocks_n, kScanThreads, 0, stream>>>(p, w, qpt);
    }
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) {
    plan_units<<<row_blocks, kPlanThreads, 0, stream>>>(p, w, qpt);  // before the fill: sub_ptr
    plan_fill<<<plan_blocks, kPlanThreads, 0, stream>>>(p, w);
    err = cudaGetLastError();
  }
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
    prefill_combine<<<static_cast<unsigned>((rows + 7) / 8), 128, 0, stream>>>(p, w);
    err = cudaGetLastError();
  }
  const cudaError_t ferr = cudaFreeAsync(base, stream);
  return err != cudaSuccess ? err : ferr;
}

}  // namespace flashmsa::cuda

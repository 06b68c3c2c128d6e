// Internal to the KV-outer prefill's translation units (prefill_plan.cu, prefill_attention.cu,
// prefill_kvouter.cu; the design is in prefill_kvouter.h): the tile and plan constants, the
// work-unit descriptor, the workspace layout and its carving, shared by the plan, the
// attention kernel and the combine.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "cuda/sm90/attn_tile.cuh"
#include "cuda/sm90/decode_attention.h"
#include "cuda/sm90/prefill_kvouter.h"
#include "cuda/sm90/prefill_timeline.cuh"

namespace flashmsa::cuda::prefill {

namespace at = ::flashmsa::cuda::sm90::attn;
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
// still gets at least 4 units (tiles_per_unit), else 24. Session 25 (run G, three
// interleaved passes, BF16 / Q8KV8 / Q8KV4): at (16/1, 8192, 0), which takes the
// fallback, 28 tiles 403-404 / 409-414 / 411-413 us against 24's 408-410 / 416-418 /
// 415-419 (30: 407 / 412-414 / 412-413); at the floor case, which keeps 32, 28 would be
// 10-16 us slower and 30 the same as 32. The fallback is 28.
constexpr int kTilesPerUnit = 28;
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
// Sub-counters per CSR row: the plan's counting (and ranking) atomics of warp w go to
// sub-counter w % nsub of a row, so a page chosen by many queries is not one hot
// address (the H200 measured 38 + 41 us for plan_count + plan_fill at (16/1, 8192,
// 32768) with one counter per row). A row's entries stay contiguous in the list, its
// sub-ranges one after the other. nsub = kSub when rows are hot (at least kSubHotEntries
// entries per row on average) or warm in a small plan (plan_sub_counters), else 8, while
// the two [N, nsub] arrays stay small (16 MB each), else 1. At (16/1, 8192, 0) the 64
// pages average 2048 entries each and a warp
// (two queries x 16 slots) aggregates little: the H200 measured the plan at 79 us with
// 8 sub-counters and 51 us with 32; where rows are not hot, 32 cost more in the scan
// kernels of session 15 (40 vs 54 us at (16/1, 8192, 32768), 410 entries per row, runs G
// and H). With the fused scan (session 24) 32 is the shorter plan there (session 26).
constexpr int kSub = 32;
constexpr std::int64_t kSubHotEntries = 1024;
constexpr std::int64_t kSubMaxRows = 1 << 19;  // N x 8 ints = 16 MB
// Plans of at most this many sub-counters (N x nsub) skip the scan kernels: plan_units
// scans the rows itself (fuses_scan). Every CTA of it reads them all at worst (64 KB).
#ifndef FLASHMSA_PLAN_FUSED_SCAN_INTS  // benchmark variants may override it (session 26 run C: 65,536)
#define FLASHMSA_PLAN_FUSED_SCAN_INTS 16384
#endif
constexpr std::int64_t kFusedScanInts = FLASHMSA_PLAN_FUSED_SCAN_INTS;

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
  int tail = 0;                     // M-tiles split off the remainder unit of rows >= tail_row0 (tail_split)
  long long tail_row0 = 0;          // the first CSR row that splits (rows are KV-head major)
  int ucap = 0;                     // unit capacity: entries of units, unit_key and units_by_row
  int bucket = 0;                   // > 0 (= T): bucketed list, row r's entries at [r bucket, r bucket + n_r)
                                    // (plan_buckets); 0: CSR list
  int* counts = nullptr;            // [N, nsub] entries per row and sub-counter (zeroed; plan_count adds)
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
  int* slot_rank = nullptr;         // [T * Hkv * 16] per plan thread (query, KV head, slot): the slot's
                                    // rank in its (row, sub-counter), or -1 (plan_count; plan_fill reads)
  unsigned long long* tl = nullptr;  // the timeline (prefill_timeline.cuh; FLASHMSA_TIMELINE builds only)
  std::int64_t bytes = 0;
};

inline std::int64_t align256(std::int64_t b) { return (b + 255) / 256 * 256; }

__host__ __device__ inline std::int64_t num_csr_rows(const PrefillParams& p) {
  return static_cast<std::int64_t>(p.num_kv_heads) * p.batch * p.bt_width;
}

// Work units: ceil(ceil(n / qpt) / tpu) per row of n entries, plus one in each row that
// splits off a tail unit (units_of in prefill_plan.cu), so at most entries / (tpu * qpt)
// + (non-empty rows) + split_rows in all.
inline std::int64_t unit_capacity(const PrefillParams& p, int tpu, std::int64_t split_rows) {
  const std::int64_t entries = static_cast<std::int64_t>(p.num_kv_heads) * p.num_rows * p.topk_k;
  const std::int64_t qpt = kTileRows / (p.num_q_heads / p.num_kv_heads);
  return num_csr_rows(p) + split_rows + entries / (tpu * qpt) + 1;
}

// SMs of the current device (device_sm_count, decode_attention.h), cached per device: the
// attention kernel's grid and the unit-size choice (tiles_per_unit).
inline cudaError_t device_sms(int* n) {
  static int cache[64] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
  if (cache[dev] <= 0) {
    int count = 0;
    e = static_cast<cudaError_t>(device_sm_count(&count));
    if (e != cudaSuccess) return e;
    cache[dev] = count;
  }
  *n = cache[dev];
  return cudaSuccess;
}

// The benchmark overrides below (FLASHMSA_PREFILL_*, FLASHMSA_PLAN_*): the variable's
// value if it is a whole number in [lo, hi], else -1 (unset or malformed: the default).
inline int env_whole(const char* name, int lo, int hi) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == 0) return -1;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  return *end == 0 && v >= lo && v <= hi ? static_cast<int>(v) : -1;
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
inline int tiles_per_unit(const PrefillParams& p) {
  static const int forced = env_whole("FLASHMSA_PREFILL_TILES_PER_UNIT", 1, kMaxTilesPerUnit);
  if (forced > 0) return forced;
  const std::int64_t N = num_csr_rows(p);
  const std::int64_t entries = static_cast<std::int64_t>(p.num_kv_heads) * p.num_rows * p.topk_k;
  const std::int64_t qpt = kTileRows / (p.num_q_heads / p.num_kv_heads);
  const std::int64_t tiles_per_row = ((entries + N - 1) / N + qpt - 1) / qpt;
  const std::int64_t units = N * ((tiles_per_row + kLargeTilesPerUnit - 1) / kLargeTilesPerUnit);
  int sms = 132;  // a failed query fails the launch anyway (run_attention)
  (void)device_sms(&sms);
  return units >= static_cast<std::int64_t>(kMinUnitsPerSm) * sms ? kLargeTilesPerUnit : kTilesPerUnit;
}

// Tail units. The dispatch order (KV head, then largest first) ends with the last KV
// head's smallest units; with one remainder unit per row of ~15-30 tiles, the CTAs
// finished up to 35 us apart at (16/1, 8192, 32768) (ncu: SM active cycles 437-501 K of
// 505 K, session 24 run D). Each row of the last KV head whose remainder is longer than
// kTailTiles gives its last kTailTiles tiles to a unit of their own, so the order ends
// with small units, where
// that head has between 1 and 3 rows per SM (1 to 3 extra units per CTA; each unit costs
// about 2 us of page load, conversion and pipeline refill). H200, run E, floor case,
// every row split: attention 272-275 against 278-279 us with 2 or 4 tiles, none better
// with 6, 8 or 12; splitting every row at 64/4 (1,280 rows) or (16/1, 16384, 114688)
// (1,024 rows) cost 3-16 us. FLASHMSA_PREFILL_TAIL_TILES=t (0..tpu-1) forces t tiles
// for every row (0: off).
constexpr int kTailTiles = 4;
inline void tail_split(const PrefillParams& p, int tpu, Workspace* w) {
  static const int forced = env_whole("FLASHMSA_PREFILL_TAIL_TILES", 0, kMaxTilesPerUnit);
  w->tail = 0;
  w->tail_row0 = 0;
  if (forced >= 0) {
    w->tail = forced < tpu ? forced : 0;
    return;
  }
  const std::int64_t rows_per_head = static_cast<std::int64_t>(p.batch) * p.bt_width;
  int sms = 132;
  (void)device_sms(&sms);
  if (kTailTiles < tpu && rows_per_head >= sms && rows_per_head <= 3LL * sms) {
    w->tail = kTailTiles;
    w->tail_row0 = rows_per_head * (p.num_kv_heads - 1);
  }
}

// QK16 (the FP8 paths' default) runs Q K^T on the exact F16 images of the E4M3 values.
// Its query rows come either from an F16 copy of the E4M3 query, widened once per call
// (in plan_fill, widen_q_chunk) and gathered by TMA like BF16 rows, or, with kQ8Rs, as
// E4M3 rows gathered by TMA and widened in registers into the A fragments of a
// register-sourced wgmma (prefill_attention.cu), with no copy (the default since session
// 24; -DFLASHMSA_PREFILL_Q8RS=0 builds the copy path for A/B runs).
#ifndef FLASHMSA_PREFILL_Q8RS
#define FLASHMSA_PREFILL_Q8RS 1
#endif
constexpr bool kQ8Rs = FLASHMSA_PREFILL_Q8RS != 0;
inline bool uses_q16(const PrefillParams& p) { return p.q_e4m3 && !fp8_qk_on_e4m3_mma() && !kQ8Rs; }

// Sub-counters per CSR row (see kSub): kSub where rows are hot, or warm (at least
// kSubWarmEntries entries per row on average) in a plan small enough to fuse its scan at
// kSub (N x kSub <= kFusedScanInts, see fuses_scan); else 8; 1 where even 8 would pass
// the 16 MB cap.
// FLASHMSA_PLAN_SUB_COUNTERS=1|8|32 forces a count within the cap (benchmark A/B; the
// output does not depend on it). H200, session 26 (docs/bench/h200-2026-11-30-s26, runs
// A-G and final2), (16/1, 8192, 32768) (N = 320, 410 entries per row): the plan about
// 1-2.5 us shorter with 32 than with 8 in every run (medians); the whole call -4.4 to
// +1.2 us, because the attention kernel's share grew by 0-2 us (cause not identified).
// Forcing 32 on larger plans (scan kernels) or fusing scans of up to 65,536 counters
// made the plans of (64/4, 8192, 32768) and (16/1, 16384, 114688) 2-6 us longer (run C).
constexpr std::int64_t kSubWarmEntries = 256;
inline int plan_sub_counters(std::int64_t N, std::int64_t entries) {
  static const int forced = [] {
    const int v = env_whole("FLASHMSA_PLAN_SUB_COUNTERS", 1, kSub);
    return v == 1 || v == 8 || v == kSub ? v : 0;
  }();
  if (N > kSubMaxRows) return 1;
  if (forced != 0) return forced == kSub && N > kSubMaxRows / 4 ? 8 : forced;
  const bool hot = entries >= kSubHotEntries * N && N <= kSubMaxRows / 4;
  const bool warm = entries >= kSubWarmEntries * N && N * kSub <= kFusedScanInts;
  return hot || warm ? kSub : 8;
}

// Bucketed lists (Workspace::bucket; plan_count_bucketed and plan_units_bucketed in
// prefill_plan.cu): row r's entries at [r T, r T + n_r) of the list, which then takes N x
// T x 16 bytes instead of Hkv x T x K x 16. Used where the rows fit the count kernel's
// shared memory (kBucketMaxRows), the list stays at most an eighth of the partials' bytes
// (N <= 2 K Hq: (16/1, 8192, 32768) has N = 320 and 42 MB against 537 MB), the list
// indices fit 31 bits with a tile to spare (the attention kernel's load_entry reads up to
// a tile past a row's end, as padding), and there is no F16 query copy (which plan_fill
// writes). The list can then be up to 32 times the CSR list's bytes.
// FLASHMSA_PLAN_BUCKETS (read at every call; test hooks): 0 = never; 2 = required
// (launch_plan fails with cudaErrorNotSupported where the rule says no); unset or 1 = by
// the rule.
constexpr std::int64_t kBucketMaxRows = 2048;
inline int plan_buckets_env() { return env_whole("FLASHMSA_PLAN_BUCKETS", 0, 2); }
inline bool plan_buckets(const PrefillParams& p) {
  const std::int64_t N = num_csr_rows(p), T = p.num_rows;
  return plan_buckets_env() != 0 && N <= kBucketMaxRows && N <= 2LL * p.topk_k * p.num_q_heads &&
         N * T <= 0x7fffffffLL - kTileRows && !uses_q16(p);
}

inline Workspace carve(const PrefillParams& p, void* base) {
  const std::int64_t N = num_csr_rows(p), T = p.num_rows, K = p.topk_k;
  Workspace w;
  const std::int64_t entries = static_cast<std::int64_t>(p.num_kv_heads) * T * K;
  const bool bucketed = plan_buckets(p);
  w.bucket = bucketed ? static_cast<int>(T) : 0;
  w.nsub = bucketed ? 1 : plan_sub_counters(N, entries);
  w.tpu = tiles_per_unit(p);
  tail_split(p, w.tpu, &w);
  const std::int64_t S = w.nsub;
  const std::int64_t ucap = unit_capacity(p, w.tpu, w.tail > 0 ? N - w.tail_row0 : 0);
  const std::int64_t sizes[14] = {(N * S + 1 + kOrderClasses) * 4,
                                 (N + 1) * 4,
                                 (N + 1) * 4,
                                 (N + kScanRows - 1) / kScanRows * 8,
                                 ucap * static_cast<std::int64_t>(sizeof(UnitDesc)),
                                 bucketed ? N * T * 16 : p.num_kv_heads * T * K * 16,
                                 T * p.num_kv_heads * 4,
                                 K * T * p.num_q_heads * 128 * 2,
                                 K * T * p.num_q_heads * 8,
                                 bucketed ? 0 : N * S * 4,
                                 uses_q16(p) ? T * p.num_q_heads * 128 * 2 : 0,
                                 bucketed ? 0 : ucap * 8,
                                 bucketed ? 0 : ucap * static_cast<std::int64_t>(sizeof(UnitDesc)),
                                 bucketed ? 0 : static_cast<std::int64_t>(p.num_kv_heads) * T * 16 * 4};
  std::int64_t off = 0;
  char* b = static_cast<char*>(base);
  void* ptrs[14];
  for (int i = 0; i < 14; ++i) {
    ptrs[i] = b ? b + off : nullptr;
    off += align256(sizes[i]);
  }
  w.counts = static_cast<int*>(ptrs[0]);
  w.sched = w.counts ? w.counts + N * S : nullptr;
  w.row_ptr = static_cast<int*>(ptrs[1]);
  w.unit_ptr = static_cast<int*>(ptrs[2]);
  w.block_sums = static_cast<int2*>(ptrs[3]);
  w.units = static_cast<UnitDesc*>(ptrs[4]);
  w.ucap = static_cast<int>(ucap < 0x7fffffff ? ucap : 0x7fffffff);
  w.list = static_cast<int4*>(ptrs[5]);
  w.vmask = static_cast<unsigned*>(ptrs[6]);
  w.o_part = static_cast<std::uint16_t*>(ptrs[7]);
  w.ml_part = static_cast<float*>(ptrs[8]);
  w.sub_ptr = static_cast<int*>(ptrs[9]);
  w.q16 = uses_q16(p) ? static_cast<std::uint16_t*>(ptrs[10]) : nullptr;
  w.size_count = w.sched ? w.sched + 1 : nullptr;
  w.unit_key = static_cast<int2*>(ptrs[11]);
  w.units_by_row = static_cast<UnitDesc*>(ptrs[12]);
  w.slot_rank = static_cast<int*>(ptrs[13]);
  w.bytes = off;
  return w;
}


// Programmatic dependents (pdl.cuh) past the plan: bit 0 the attention kernel, bit 1 the
// combine; FLASHMSA_PREFILL_PDL=0..3 overrides the default (benchmark A/B).
inline int prefill_pdl() {
  static const int mode = env_whole("FLASHMSA_PREFILL_PDL", 0, 3);
  return mode >= 0 ? mode : 3;
}

// The plan (prefill_plan.cu) on `stream`, each kernel a programmatic dependent of the
// one before: plan_zero, then plan_count_bucketed and plan_units_bucketed where
// Workspace::bucket > 0, else plan_count, the row scans (none where fuses_scan),
// plan_units and plan_fill.
bool fuses_scan(const PrefillParams& p, const Workspace& w);
cudaError_t launch_plan(const PrefillParams& p, const Workspace& w, cudaStream_t stream);
// The attention kernel (prefill_attention.cu) for kv_format 0 (BF16), 1 (FP8) or 2
// (NVFP4), a programmatic dependent of the last plan kernel unless FLASHMSA_PREFILL_PDL says
// otherwise.
cudaError_t launch_attention(const PrefillParams& p, const Workspace& w, int kv_format, cudaStream_t stream);

}  // namespace flashmsa::cuda::prefill

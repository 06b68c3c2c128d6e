// KV-outer prefill: an optional timeline of one call's kernels, for diagnosis only.
//
// Compiled in only with -DFLASHMSA_TIMELINE (CMake -DFLASHMSA_PREFILL_TIMELINE=ON; a
// diagnosis build, never the library's default): each kernel of the call stamps %globaltimer (ns) at its start, after its
// pdl_wait and at its end into a per-call record, and at process exit the medians over
// the recorded calls, grouped by tag, are printed relative to plan_zero's start (stdout
// lines "timeline ..."). Starts are taken in a register at entry and written after the
// kernel's pdl_wait. plan_zero only counts the call (a reduction) and stamps its start
// in a fixed word, so it does not wait on the record; plan_count (block 0, after its
// wait) copies that stamp and the tag into the call's record and resets the next call's.
// Without the macro every hook below is an empty inline function and Workspace::tl
// stays null. The buffer is the first device's (one GPU per process in such a build).
#pragma once

#include <cstdint>

namespace flashmsa::cuda::prefill::tl {

// Events of a record (u64 ns; "min" / "max": over the CTAs that stamp it).
enum Event : int {
  kZeroStart = 0,     // plan_zero, block 0
  kCountStart,        // plan_count / plan_count_bucketed, block 0
  kCountWait,         // plan_count, block 0 after pdl_wait
  kCountEnd,          // plan_count, max over CTAs
  kUnitsStart,        // plan_units / plan_units_bucketed, block 0
  kUnitsWait,         //   block 0 after pdl_wait
  kUnitsEnd,          //   max
  kFillStart,         // plan_fill, block 0
  kFillWait,          //   block 0 after pdl_wait
  kFillEnd,           //   max
  kAttnStart,         // attention, min over CTAs
  kAttnWait,          //   max after pdl_wait
  kAttnFirstMma,      //   max over CTAs: the first Q K^T issued
  kAttnEndMin,        //   the first CTA to finish
  kAttnEnd,           //   max
  kCombineStart,      // combine, block 0
  kCombineWait,       //   block 0 after pdl_wait
  kEvents,
  kTag = kEvents,     // the call's tag: kv_format * 4 + stop_after (plan_zero's argument)
};
constexpr int kCtaEnds = 40;             // + blockIdx.x: the attention CTAs' end stamps (up to 152 CTAs)
constexpr int kRecord = 192;             // u64 per record
constexpr int kRecords = 1024;           // ring of records
constexpr int kWords = 2 + kRecords * kRecord;  // [0]: calls opened, [1]: plan_zero's start, then the ring
static_assert(kEvents < kCtaEnds, "events before the CTA end stamps");
__host__ __device__ constexpr bool is_min_event(int i) { return i == kAttnStart || i == kAttnEndMin; }

#ifdef FLASHMSA_TIMELINE
__device__ __forceinline__ std::uint64_t now() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The record of the current call (after pdl_wait in plan_count and later kernels).
__device__ __forceinline__ unsigned long long* rec(unsigned long long* tl, unsigned long long ahead = 0) {
  const unsigned long long n = *reinterpret_cast<volatile unsigned long long*>(tl) - 1 + ahead;
  return tl + 2 + (n % kRecords) * kRecord;
}
// plan_zero, block 0, thread 0: a new call (a reduction, not waited for) and its start.
__device__ __forceinline__ void open(unsigned long long* tl, std::uint64_t t0) {
  if (tl == nullptr) return;
  atomicAdd(tl, 1ull);
  tl[1] = t0;
}
// plan_count, block 0 after pdl_wait (thread 0 then every thread): the call's start and
// tag into its record, and the next call's record reset (the host reset the ring first).
__device__ __forceinline__ void start_record(unsigned long long* tl, int tag) {
  if (tl == nullptr) return;
  if (threadIdx.x == 0) {
    unsigned long long* r = rec(tl);
    r[kZeroStart] = tl[1];
    r[kTag] = static_cast<unsigned long long>(tag);
  }
  unsigned long long* nx = rec(tl, 1);
  for (int i = threadIdx.x; i < kRecord; i += blockDim.x) nx[i] = is_min_event(i) ? ~0ull : 0ull;
}
__device__ __forceinline__ void put(unsigned long long* tl, int e, std::uint64_t t) {
  if (tl != nullptr) rec(tl)[e] = t;
}
__device__ __forceinline__ void put_min(unsigned long long* tl, int e, std::uint64_t t) {
  if (tl != nullptr) atomicMin(rec(tl) + e, static_cast<unsigned long long>(t));
}
__device__ __forceinline__ void put_max(unsigned long long* tl, int e, std::uint64_t t) {
  if (tl != nullptr) atomicMax(rec(tl) + e, static_cast<unsigned long long>(t));
}
#else
__device__ __forceinline__ std::uint64_t now() { return 0; }
__device__ __forceinline__ void open(unsigned long long*, std::uint64_t) {}
__device__ __forceinline__ void start_record(unsigned long long*, int) {}
__device__ __forceinline__ void put(unsigned long long*, int, std::uint64_t) {}
__device__ __forceinline__ void put_min(unsigned long long*, int, std::uint64_t) {}
__device__ __forceinline__ void put_max(unsigned long long*, int, std::uint64_t) {}
#endif

// The timeline buffer (kWords u64, zeroed; prefill_plan.cu), registering the exit dump on
// first use; null without FLASHMSA_TIMELINE. The dump groups the calls by tag.
unsigned long long* buffer();

}  // namespace flashmsa::cuda::prefill::tl

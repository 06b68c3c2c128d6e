// Internal: a minimal fork-join parallel_for for the CPU backend.
// Work items must be independent; results are then bitwise identical for any thread
// count (D9).
#pragma once

#include <cstdint>
#include <functional>

namespace flashmsa::detail {

/// Threads used by the CPU backend: FLASHMSA_NUM_THREADS if set (> 0), else the
/// hardware concurrency (at least 1).
int default_num_threads();

/// Calls fn(i, thread_index) for every i in [0, n), distributing contiguous chunks
/// dynamically over `num_threads` threads (0 = default_num_threads()).
/// thread_index is in [0, num_threads) and identifies per-thread scratch.
void parallel_for(std::int64_t n, int num_threads,
                  const std::function<void(std::int64_t, int)>& fn);

}  // namespace flashmsa::detail

#include "common/parallel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

namespace flashmsa::detail {

int default_num_threads() {
  if (const char* env = std::getenv("FLASHMSA_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

void parallel_for(std::int64_t n, int num_threads,
                  const std::function<void(std::int64_t, int)>& fn) {
  if (n <= 0) return;
  int nt = num_threads > 0 ? num_threads : default_num_threads();
  nt = static_cast<int>(std::min<std::int64_t>(nt, n));
  if (nt <= 1) {
    for (std::int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::atomic<std::int64_t> next{0};
  const std::int64_t chunk = std::max<std::int64_t>(1, n / (static_cast<std::int64_t>(nt) * 8));
  auto worker = [&](int tid) {
    for (;;) {
      const std::int64_t begin = next.fetch_add(chunk);
      if (begin >= n) break;
      const std::int64_t end = std::min(n, begin + chunk);
      for (std::int64_t i = begin; i < end; ++i) fn(i, tid);
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(nt - 1);
  for (int t = 1; t < nt; ++t) threads.emplace_back(worker, t);
  worker(0);
  for (auto& th : threads) th.join();
}

}  // namespace flashmsa::detail

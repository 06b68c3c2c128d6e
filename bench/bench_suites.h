// The decode workload suites of data/msa-workloads, loaded for the GPU benchmarks
// (bench_decode, bench_indexer). Needs the flashmsa_tools library (tools/workloads.h).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "workloads.h"

namespace flashmsa::bench {

/// Loads the decode suites named by `suite` ("all", "full" or "low_latency"), in the
/// order of `names`, with every case's Q replaced by `q_override` when it is > 0.
/// Prints the error and returns false when the data directory or a suite is missing.
inline bool load_decode_suites(const std::string& suite, std::vector<std::string> names, int q_override,
                               std::vector<std::pair<std::string, std::vector<tools::WorkloadCase>>>* out) {
  std::string dir;
  Status st = tools::find_data_dir("", &dir);
  for (const std::string& s : names) {
    if (!st.ok()) break;
    if (suite != "all" && suite != s) continue;
    std::vector<tools::WorkloadCase> cases;
    st = tools::load_decode_suite(dir, s, &cases);
    if (q_override > 0)
      for (auto& c : cases) c.q_len_per_req = q_override;
    out->push_back({s, std::move(cases)});
  }
  if (!st.ok()) std::fprintf(stderr, "%s\n", st.message().c_str());
  return st.ok();
}

}  // namespace flashmsa::bench

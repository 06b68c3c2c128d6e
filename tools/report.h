// FlashMSA tools — output of a run: the per-case table, the totals and the JSON report
// (docs/run-report.schema.json).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashmsa/status.h"
#include "runner.h"
#include "workloads.h"

namespace flashmsa::tools {

/// Build / machine facts recorded in the report.
struct BuildInfo {
  std::string version;      ///< flashmsa::version()
  std::string compiler;     ///< e.g. "GCC 12.2.0"
  std::string build_type;   ///< CMAKE_BUILD_TYPE when known, else "optimized (NDEBUG)" / "debug"
  bool cuda = false;        ///< flashmsa::built_with_cuda()
  std::string git_revision; ///< configure-time FLASHMSA_GIT_REVISION, else `git rev-parse HEAD`, else "unknown"
  std::string hostname;
  int cores = 0;            ///< std::thread::hardware_concurrency()
};
BuildInfo collect_build_info();

/// Prints the per-case table, the totals and, last, exactly "N/M cases passed".
void print_table(const RunReport& report, std::ostream& out);

/// The JSON report (schema "flashmsa-run-report", version 1).
/// `timestamp` is an ISO-8601 UTC string (empty = now).
nlohmann::json report_to_json(const RunReport& report, const BuildInfo& build,
                              const std::string& timestamp = "");

/// Writes `j` (pretty-printed) to `path`. Error names '--json' and the path.
Status write_json_file(const nlohmann::json& j, const std::string& path);

/// Prints the cases of a workload (id, batch, rows, KV tokens, weight, estimated CPU
/// seconds and host memory under `opts`, tags).
void print_case_list(const std::vector<WorkloadCase>& cases, const RunOptions& opts, std::ostream& out);

}  // namespace flashmsa::tools

// FlashMSA tools — runs workload cases through the library: synthetic inputs, the
// insert -> indexer -> attention pipeline, stage timings, effective throughput and the
// optional FP64 check. This is the engine behind `flashmsa run` (tools/cli_app.h) and
// the end-to-end tests.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"
#include "workloads.h"

namespace flashmsa::tools {

/// Command-line request as typed by the user (strings unparsed), see docs/cli.md.
struct RunRequest {
  std::string workload;               ///< "" (default selection) | prefill | decode | lowlat
  int cases = -1;                     ///< --cases N (-1 = not given)
  bool cases_given = false;           ///< --cases was on the command line (then N < 1 is an error)
  std::vector<std::string> case_ids;  ///< --case ID (repeatable)
  std::string heads = "64/4";         ///< --heads Hq/Hkv
  std::string kv_dtype = "bf16";      ///< --kv-dtype bf16|fp8|nvfp4
  std::string index_dtype = "bf16";   ///< --index-dtype bf16|fp8
  std::string device = "auto";        ///< --device cpu|cuda|auto
  std::uint64_t seed = 1701;          ///< --seed
  int check = -1;                     ///< --check (1) / --no-check (0); -1 = default
  std::string json_path;              ///< --json FILE
  int threads = 0;                    ///< --threads N (0 = all cores)
  double max_memory_gb = 8.0;         ///< --max-memory-gb
  int check_rows = 8;                 ///< --check-rows
  int warmup = 1;                     ///< --warmup N
  std::string data_dir;               ///< --data-dir ("" = env / built-in)
};

/// Resolved options of a run.
struct RunOptions {
  std::string data_dir;
  std::string selection;              ///< how the cases were chosen (for the report)
  int num_q_heads = 64;
  int num_kv_heads = 4;
  KvFormat kv_format = KvFormat::bf16;
  KvFormat index_format = KvFormat::bf16;  ///< bf16 | fp8
  Device device = Device::cpu;
  std::string device_request = "auto";
  std::uint64_t seed = 1701;
  bool check = false;
  int threads = 0;                    ///< 0 = FLASHMSA_NUM_THREADS or all cores
  double max_memory_gb = 8.0;
  int check_rows = 8;
  /// --device cuda: untimed calls of each GPU stage before its timed call (lazy module
  /// loading, first-use attributes and workspace-pool growth stay out of the times);
  /// outputs are poisoned again and the caches restored before the timed call.
  int warmup = 1;
  std::string json_path;
  /// Testing only (not a CLI option): corrupt the results before the check to prove it
  /// can fail. "" (none), "out" (one output element of row 0 + 0.25), "lse" (LSE of the
  /// last row + 0.01), "topk" (last row, KV head 0: slot 0 duplicated into slot 1).
  std::string inject_fault;
};

/// Parses "64/4" | "32/2" | "16/1" | "8/1". Error names '--heads' and the value.
Status parse_heads(const std::string& s, int* hq, int* hkv);

/// Validates a request, resolves the data directory and loads the selected cases.
///   no --workload / --cases / --case: the default selection (default_selection()),
///     check on unless --no-check;
///   --workload W [--cases N]: the N highest-weight cases of W (all when N is absent);
///   --case ID...: those cases, in the given order, appended to the workload's cases when
///     --cases is given too (--workload W --case X without --cases runs X only); a case
///     the workload selection already holds is not added again, and an id given twice is
///     an error.
/// Errors (InvalidArgument) name the option and the value: unknown workload, case id,
/// head split, dtype, device; --device cuda without CUDA kernels, without the CLI's CUDA
/// runtime (FLASHMSA_TOOLS_CUDA) or without a visible GPU. --device auto picks cuda when all
/// three are there, else cpu.
Status resolve_request(const RunRequest& req, RunOptions* opts, std::vector<WorkloadCase>* cases);

/// Rough CPU cost (seconds on a ~2-core x86 machine) of one case with `opts`, used to
/// pick the default selection. Deterministic (a formula of the shape, no timing).
double estimate_cpu_seconds(const WorkloadCase& c, const RunOptions& opts);

/// Host bytes a case needs (caches, inputs, outputs, scratch).
std::int64_t estimate_host_bytes(const WorkloadCase& c, const RunOptions& opts);

/// The default selection of `flashmsa run`: the cheapest prefill benchmark cases under
/// estimate_cpu_seconds (four cheapest, plus the cheapest of batch >= 2 and of batch >= 3),
/// the two highest-weight cases among those estimated under 10 s, further representative
/// cases (highest weight first, each under 10 s) while the estimated total stays under 45 s,
/// then decode cases b1_s1000_q8, b4_s32000_q8 (low latency), b8_s1000_q8, b8_s10000_q8 and
/// b32_s4000_q8 (full).
Status default_selection(const std::string& data_dir, const RunOptions& opts,
                         std::vector<WorkloadCase>* out);

/// Results of the --check of one case.
struct CheckResult {
  bool enabled = false;
  bool pass = true;
  int rows_checked = 0;                 ///< query rows compared (all heads each)
  std::vector<std::int64_t> rows;       ///< which rows
  std::int64_t elements = 0;            ///< output elements compared
  std::int64_t mismatches = 0;          ///< outside atol + rtol*|ref|
  double max_abs_err = 0.0;
  double cosine = 1.0;
  double max_lse_err = 0.0;
  double atol = 0, rtol = 0, min_cosine = 0, lse_tol = 0;  ///< the D8 policy applied
  std::int64_t nonfinite = 0;           ///< NaN/Inf positions that differ
  int topk_rows_checked = 0;            ///< (row, KV head) pairs
  int topk_mismatches = 0;              ///< pairs whose selection violates D1/D2
  int topk_near_ties = 0;               ///< pairs where 15th vs 16th best are within 2e-4 (set not pinned)
  std::string message;                  ///< first failure, "" when passing
};

/// Everything measured for one case.
struct CaseResult {
  WorkloadCase wc;
  std::string status = "not run";  ///< "ok", "failed", "skipped (memory)", "error"
  bool pass = false;
  std::string error;               ///< message when status != ok
  // Shape
  std::int64_t rows = 0;           ///< query rows (T, or B*Q)
  std::int64_t kv_tokens = 0;      ///< sum of seq_lens
  std::int64_t pages = 0;          ///< physical pages allocated (excluding the scratch page)
  std::int64_t est_host_bytes = 0;
  // Stage times (ms); setup (input generation + prefix insertion) is not a stage.
  double setup_ms = 0, insert_ms = 0, indexer_ms = 0, plan_ms = 0, attention_ms = 0;
  double total_ms() const { return insert_ms + indexer_ms + attention_ms; }
  // Work actually done
  double attention_flops = 0;      ///< 4 * 128 * Hq per selected visible (row, key) pair
  double indexer_flops = 0;        ///< 2 * 128 * H per (row, history key)
  std::int64_t workload_useful_flops = -1;  ///< prefill metrics.useful_flops (per head pair)
  std::int64_t visible_keys = 0;   ///< sum over (row, KV head) of selected visible keys
  std::int64_t distinct_pages = 0; ///< distinct (physical page, KV head) pairs selected
  std::int64_t selected_bytes = 0; ///< their K/V (+ scale) bytes
  double attention_tflops = 0, indexer_tflops = 0, gbps = 0;
  double workload_useful_tflops = 0;  ///< useful_flops * H / indexer time (prefill)
  float q_scale = 1, k_scale = 1, v_scale = 1;
  /// Where each stage ran: "cpu" or "cuda" (with --device cuda, a stage whose op has no
  /// CUDA kernel in this build runs on the CPU).
  std::string insert_device = "cpu", indexer_device = "cpu", attention_device = "cpu";
  std::string output_digest;       ///< 64-bit hash of out, lse and top-k (determinism)
  CheckResult check;
};

/// Aggregates over a group of cases (weighted by call weight, or unweighted).
struct Totals {
  int cases = 0;
  double weight = 0;               ///< sum of weights (weighted group)
  double mean_insert_ms = 0, mean_indexer_ms = 0, mean_attention_ms = 0, mean_total_ms = 0;
  double attention_tflops = 0;     ///< sum w*F / sum w*t
  double indexer_tflops = 0;
  double gbps = 0;
};

/// A whole run.
struct RunReport {
  RunOptions options;
  std::vector<CaseResult> cases;
  Totals weighted;    ///< cases with weight > 0 that ran, weighted by call weight
  Totals unweighted;  ///< cases with weight 0 that ran, each counted once
  int passed = 0;
  int total = 0;
};

/// Runs one case (never throws; failures are recorded in the result).
CaseResult run_case(const WorkloadCase& c, const RunOptions& opts);

/// Runs all cases, printing one progress line per case to `progress` (may be null),
/// and fills the totals.
RunReport run_cases(const std::vector<WorkloadCase>& cases, const RunOptions& opts,
                    std::ostream* progress);

/// Weighted / unweighted aggregates of the cases that ran.
void compute_totals(RunReport* report);

}  // namespace flashmsa::tools

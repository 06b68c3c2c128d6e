// FlashMSA tools — the `flashmsa` command line (CLI11). Header-only so that the CLI11
// dependency stays with the executable and the tests that drive the CLI in-process.
//
//   flashmsa run  [--workload prefill|decode|lowlat] [--cases N] [--case ID]...
//                 [--heads 64/4|32/2|16/1|8/1] [--kv-dtype bf16|fp8|nvfp4]
//                 [--index-dtype bf16|fp8] [--device cpu|cuda|auto] [--seed S]
//                 [--check | --no-check] [--check-rows N] [--json FILE] [--threads N]
//                 [--max-memory-gb G] [--data-dir DIR]
//   flashmsa list [--workload prefill|decode|lowlat] [--heads ..] [--kv-dtype ..] [--data-dir DIR]
//
// Exit codes: 0 every case passed; 1 at least one case failed; 2 invalid option value,
// missing data or unusable output file; CLI11's own non-zero codes for malformed
// command lines. See docs/cli.md.
#pragma once

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "flashmsa/version.h"
#include "report.h"
#include "runner.h"
#include "workloads.h"

namespace flashmsa::tools {

inline void add_common_options(CLI::App* cmd, RunRequest* req) {
  cmd->add_option("--heads", req->heads, "Q heads / KV heads per rank: 64/4 (TP1), 32/2, 16/1, 8/1")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", req->kv_dtype, "K/V cache format: bf16, fp8 (Q8KV8) or nvfp4 (Q8KV4)")
      ->capture_default_str();
  cmd->add_option("--index-dtype", req->index_dtype, "index q / index-K cache format: bf16 or fp8")
      ->capture_default_str();
  cmd->add_option("--data-dir", req->data_dir,
                  "msa-workloads directory (default: $FLASHMSA_DATA_DIR, else the source tree's data/)");
}

/// Runs the CLI with `argv` (argv[0] = program name). Output goes to `out` (tables,
/// help) and `err` (progress, errors). Returns the process exit code.
inline int cli_main(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"FlashMSA — MiniMax Sparse Attention: run real workloads through the library", "flashmsa"};
  app.set_version_flag("--version", std::string("flashmsa ") + flashmsa::version());
  app.require_subcommand(1);

  RunRequest req;
  bool check_on = false, check_off = false;
  CLI::App* run = app.add_subcommand(
      "run",
      "Run workload cases: insert -> indexer -> sparse attention, with stage timings, effective "
      "TFLOP/s and GB/s, and an optional FP64 check. With no selection options: a default set of "
      "cheap real prefill and decode cases, check on.");
  run->add_option("--workload", req.workload, "prefill (128 benchmark cases), decode (full suite, 28), lowlat (12)");
  CLI::Option* cases_opt =
      run->add_option("--cases", req.cases, "run the N highest-weight cases of --workload (ties by case order)");
  run->add_option("--case", req.case_ids, "case id (repeatable): prefill_<hex> or a decode name like b8_s1000_q8")
      ->allow_extra_args(false);
  add_common_options(run, &req);
  run->add_option("--device", req.device, "cpu, cuda or auto (auto = cuda when built with CUDA kernels and the CUDA runtime and a GPU is visible, else cpu)")
      ->capture_default_str();
  // Parsed as text: CLI11 would wrap "-1" or an overflowing value into a uint64.
  std::string seed_text = std::to_string(req.seed);
  run->add_option("--seed", seed_text, "seed of the synthetic inputs (0 .. 2^64-1)")->capture_default_str();
  run->add_flag("--check", check_on, "compare with an FP64 reference (attention and top-k), D8 tolerances");
  run->add_flag("--no-check", check_off, "skip the check (also for the default selection)");
  run->add_option("--check-rows", req.check_rows, "query rows per case the check samples (all heads each)")
      ->capture_default_str();
  run->add_option("--warmup", req.warmup,
                  "--device cuda: untimed calls of each stage before the timed one (0..100; 0 times the first call)")
      ->capture_default_str();
  run->add_option("--json", req.json_path, "also write a JSON report (docs/run-report.schema.json)");
  run->add_option("--threads", req.threads, "CPU threads (0 = FLASHMSA_NUM_THREADS or all cores)")
      ->capture_default_str();
  run->add_option("--max-memory-gb", req.max_memory_gb,
                  "host memory budget per case in GiB; larger cases fail up front")
      ->capture_default_str();

  RunRequest list_req;
  CLI::App* list = app.add_subcommand("list", "List the cases of a workload with cost and memory estimates");
  list->add_option("--workload", list_req.workload, "prefill, decode or lowlat (default: the default selection)");
  add_common_options(list, &list_req);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }

  if (list->parsed()) {
    RunOptions opts;
    std::vector<WorkloadCase> cases;
    const Status s = resolve_request(list_req, &opts, &cases);
    if (!s.ok()) {
      err << "flashmsa list: error: " << s.message() << "\n";
      return 2;
    }
    out << "workload: " << (list_req.workload.empty() ? "default selection of `flashmsa run`" : list_req.workload)
        << " (estimates for heads " << opts.num_q_heads << "/" << opts.num_kv_heads << ", "
        << kv_format_name(opts.kv_format) << " cache, " << kv_format_name(opts.index_format) << " index"
        << (opts.check ? ", check on" : "") << ")\n";
    print_case_list(cases, opts, out);
    return 0;
  }

  if (check_on && check_off) {
    err << "flashmsa run: error: --check and --no-check are mutually exclusive\n";
    return 2;
  }
  req.check = check_on ? 1 : (check_off ? 0 : -1);
  req.cases_given = cases_opt->count() > 0;
  {
    unsigned long long v = 0;
    const char* b = seed_text.data();
    const char* e = b + seed_text.size();
    const auto r = std::from_chars(b, e, v);
    if (seed_text.empty() || r.ec != std::errc() || r.ptr != e) {
      err << "flashmsa run: error: --seed '" << seed_text << "': expected an integer in 0 .. 2^64-1\n";
      return 2;
    }
    req.seed = v;
  }
  RunOptions opts;
  std::vector<WorkloadCase> cases;
  const Status s = resolve_request(req, &opts, &cases);
  if (!s.ok()) {
    err << "flashmsa run: error: " << s.message() << "\n";
    return 2;
  }
  if (cases.empty()) {
    err << "flashmsa run: error: no cases selected\n";
    return 2;
  }
  if (!opts.json_path.empty()) {  // fail before running when the report cannot be written
    std::ofstream probe(opts.json_path);
    if (!probe) {
      err << "flashmsa run: error: --json '" << opts.json_path << "': cannot open the file for writing\n";
      return 2;
    }
  }
  if (opts.threads > 0) setenv("FLASHMSA_NUM_THREADS", std::to_string(opts.threads).c_str(), 1);
  const RunReport report = run_cases(cases, opts, &err);
  print_table(report, out);
  if (!opts.json_path.empty()) {
    const Status w = write_json_file(report_to_json(report, collect_build_info()), opts.json_path);
    if (!w.ok()) {
      err << "flashmsa run: error: " << w.message() << "\n";
      return 2;
    }
  }
  return report.passed == report.total ? 0 : 1;
}

}  // namespace flashmsa::tools

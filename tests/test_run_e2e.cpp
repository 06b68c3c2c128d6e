// End-to-end tests of the `flashmsa run` engine (tools/runner.h) and the CLI front end
// (tools/cli_app.h): one small real case per workload kind with the FP64 check on,
// quantised formats, determinism of every non-timing field, memory guard, and the
// error paths of bad options.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"
#include "cli_app.h"
#include "device_mem.h"
#include "flashmsa/version.h"
#include "report.h"
#include "runner.h"
#include "workloads.h"

namespace ft = flashmsa::tools;

namespace {

// Small real cases (cheap on 2 cores):
//   prefill_3bae7083e0b65d7d2c2f  batch 1, q 7 after a 20,480-token prefix (L = 160 > 16:
//                                 ranked top-k), benchmark stress case
//   prefill_b8d425c3ea26ee1d3d1a  batch 3, q 193/211/226, prefixes 23K-32K (representative)
//   b8_s1000_q8                   decode full suite, 8 requests x 8 MTP queries
//   b2_s4000_q8                   decode low-latency suite
constexpr const char* kPrefillSmall = "prefill_3bae7083e0b65d7d2c2f";
constexpr const char* kPrefillBatch3 = "prefill_b8d425c3ea26ee1d3d1a";
constexpr const char* kDecodeFull = "b8_s1000_q8";
constexpr const char* kDecodeLowlat = "b2_s4000_q8";

ft::RunRequest request_for(std::vector<std::string> ids) {
  ft::RunRequest req;
  req.case_ids = std::move(ids);
  req.check = 1;
  return req;
}

ft::RunReport run_request(const ft::RunRequest& req) {
  ft::RunOptions opts;
  std::vector<ft::WorkloadCase> cases;
  const flashmsa::Status s = ft::resolve_request(req, &opts, &cases);
  EXPECT_TRUE(s.ok()) << s.message();
  return ft::run_cases(cases, opts, nullptr);
}

void expect_passed(const ft::CaseResult& r) {
  EXPECT_EQ(r.status, "ok") << r.wc.id << ": " << r.error;
  EXPECT_TRUE(r.pass) << r.wc.id << ": " << r.error;
  EXPECT_TRUE(r.check.enabled);
  EXPECT_TRUE(r.check.pass) << r.check.message;
  EXPECT_GT(r.check.elements, 0);
  EXPECT_GT(r.check.topk_rows_checked, 0);
  EXPECT_EQ(r.check.topk_mismatches, 0);
  EXPECT_GE(r.check.cosine, r.check.min_cosine);
  EXPECT_GT(r.attention_flops, 0);
  EXPECT_GT(r.selected_bytes, 0);
  EXPECT_EQ(r.output_digest.size(), 16u);
}

/// The JSON report without the fields that legitimately change between runs.
nlohmann::json strip_timings(nlohmann::json j) {
  j.erase("timestamp_utc");
  j["totals"] = nullptr;
  for (auto& c : j["cases"]) {
    c.erase("times_ms");
    c.erase("throughput");
  }
  return j;
}

int run_cli(std::vector<std::string> args, std::string* out, std::string* err) {
  std::vector<const char*> argv{"flashmsa"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream o, e;
  const int rc = ft::cli_main(static_cast<int>(argv.size()), argv.data(), o, e);
  *out = o.str();
  *err = e.str();
  return rc;
}

}  // namespace

TEST(RunE2E, PrefillCasesPassCheck) {
  const ft::RunReport rep = run_request(request_for({kPrefillSmall, kPrefillBatch3}));
  ASSERT_EQ(rep.cases.size(), 2u);
  for (const auto& r : rep.cases) {
    expect_passed(r);
    // Indexer FLOPs of prefill are the workload's useful_flops times the index heads.
    EXPECT_EQ(r.indexer_flops, static_cast<double>(r.wc.useful_flops) * 4);
    EXPECT_EQ(r.rows, r.wc.total_q());
  }
  EXPECT_EQ(rep.passed, 2);
  EXPECT_EQ(rep.cases[1].wc.batch_size, 3);
  // Totals: the batch-3 case is representative (weight > 0), the other is not.
  EXPECT_EQ(rep.weighted.cases, 1);
  EXPECT_EQ(rep.unweighted.cases, 1);
}

TEST(RunE2E, DecodeAndLowLatencyPassCheck) {
  const ft::RunReport rep = run_request(request_for({kDecodeFull, kDecodeLowlat}));
  ASSERT_EQ(rep.cases.size(), 2u);
  for (const auto& r : rep.cases) expect_passed(r);
  EXPECT_EQ(rep.cases[0].rows, 64);  // 8 requests x 8 queries
  EXPECT_EQ(rep.cases[1].rows, 16);
  EXPECT_EQ(rep.cases[0].kv_tokens, 8000);
  EXPECT_EQ(rep.cases[1].wc.weight, 0.0);
  EXPECT_EQ(rep.weighted.cases, 1);
  EXPECT_EQ(rep.unweighted.cases, 1);
  EXPECT_GT(rep.weighted.attention_tflops, 0);
}

TEST(RunE2E, QuantisedFormatsPassCheck) {
  for (const char* kv : {"fp8", "nvfp4"}) {
    ft::RunRequest req = request_for({kPrefillSmall, kDecodeFull});
    req.kv_dtype = kv;
    req.index_dtype = "fp8";
    req.heads = "16/1";
    const ft::RunReport rep = run_request(req);
    ASSERT_EQ(rep.cases.size(), 2u);
    for (const auto& r : rep.cases) {
      expect_passed(r);
      EXPECT_EQ(r.check.atol, 5e-2) << kv;  // FP8 tolerance policy
      EXPECT_LT(r.q_scale, 1.0f);
      EXPECT_NE(r.k_scale, 1.0f);
    }
  }
}

TEST(RunE2E, SameSeedGivesIdenticalNonTimingFields) {
  ft::RunRequest req = request_for({kPrefillSmall, kDecodeLowlat});
  req.threads = 1;
  const auto a = run_request(req);
  req.threads = 2;  // different thread count: same bits
  const auto b = run_request(req);
  const ft::BuildInfo bi = ft::collect_build_info();
  nlohmann::json ja = strip_timings(ft::report_to_json(a, bi, "x"));
  nlohmann::json jb = strip_timings(ft::report_to_json(b, bi, "x"));
  ja["options"].erase("threads");
  jb["options"].erase("threads");
  EXPECT_EQ(ja, jb);
  for (std::size_t i = 0; i < a.cases.size(); ++i)
    EXPECT_EQ(a.cases[i].output_digest, b.cases[i].output_digest);

  // A different seed: different inputs, still passes.
  req.seed = 42;
  const auto c = run_request(req);
  for (std::size_t i = 0; i < c.cases.size(); ++i) {
    expect_passed(c.cases[i]);
    EXPECT_NE(c.cases[i].output_digest, a.cases[i].output_digest);
  }
}

TEST(RunE2E, MemoryGuardFailsCaseWithoutAllocating) {
  ft::RunRequest req = request_for({"b128_s200000_q8", kDecodeLowlat});
  const auto rep = run_request(req);  // default 8 GiB budget: b128 x 200K needs ~60 GiB
  ASSERT_EQ(rep.cases.size(), 2u);
  EXPECT_EQ(rep.cases[0].status, "skipped (memory)");
  EXPECT_FALSE(rep.cases[0].pass);
  EXPECT_NE(rep.cases[0].error.find("--max-memory-gb"), std::string::npos) << rep.cases[0].error;
  EXPECT_GT(rep.cases[0].est_host_bytes, 50LL << 30);
  EXPECT_TRUE(rep.cases[1].pass);
  EXPECT_EQ(rep.passed, 1);
  EXPECT_EQ(rep.total, 2);
}

TEST(RunE2E, BadOptionsAreClearErrors) {
  struct Bad {
    ft::RunRequest req;
    std::string needle;
  };
  std::vector<Bad> bad;
  {
    ft::RunRequest r;
    r.heads = "48/3";
    bad.push_back({r, "--heads '48/3'"});
  }
  {
    ft::RunRequest r;
    r.case_ids = {"prefill_ffffffffffffffffffff"};
    bad.push_back({r, "--case 'prefill_ffffffffffffffffffff'"});
  }
  {
    ft::RunRequest r;
    r.kv_dtype = "int8";
    bad.push_back({r, "--kv-dtype 'int8'"});
  }
  {
    ft::RunRequest r;
    r.index_dtype = "nvfp4";
    bad.push_back({r, "--index-dtype 'nvfp4'"});
  }
  {
    ft::RunRequest r;
    r.workload = "mixed";
    bad.push_back({r, "--workload 'mixed'"});
  }
  {
    ft::RunRequest r;
    r.cases = 3;
    bad.push_back({r, "--cases 3"});
  }
  {
    ft::RunRequest r;
    r.device = "tpu";
    bad.push_back({r, "--device 'tpu'"});
  }
  {
    ft::RunRequest r;
    r.data_dir = "/no/such/dir";
    bad.push_back({r, "--data-dir '/no/such/dir'"});
  }
  if (!(flashmsa::built_with_cuda() && ft::tools_have_cuda() && ft::cuda_device_count() > 0)) {
    // No CUDA kernels, a CLI without the CUDA runtime, or no GPU: a clear error naming
    // the option (with all three, --device cuda runs).
    ft::RunRequest r;
    r.device = "cuda";
    bad.push_back({r, "--device cuda"});
  }
  for (const Bad& b : bad) {
    ft::RunOptions opts;
    std::vector<ft::WorkloadCase> cases;
    const flashmsa::Status s = ft::resolve_request(b.req, &opts, &cases);
    ASSERT_FALSE(s.ok()) << b.needle;
    EXPECT_NE(s.message().find(b.needle), std::string::npos) << s.message();
  }
  {  // --cases beyond the workload selects all of it and says so; a --case the selection
     // already holds is not added again.
    ft::RunRequest r;
    r.workload = "lowlat";
    r.cases = 1000;
    r.cases_given = true;
    r.case_ids = {kDecodeLowlat};
    ft::RunOptions opts;
    std::vector<ft::WorkloadCase> cases;
    ASSERT_TRUE(ft::resolve_request(r, &opts, &cases).ok());
    EXPECT_EQ(cases.size(), 12u);
    EXPECT_NE(opts.selection.find("all 12 cases (--cases 1000)"), std::string::npos) << opts.selection;
  }
  int hq = 0, hkv = 0;
  for (const char* h : {"64/4", "32/2", "16/1", "8/1"}) EXPECT_TRUE(ft::parse_heads(h, &hq, &hkv).ok()) << h;
  EXPECT_EQ(hq, 8);
  EXPECT_EQ(hkv, 1);
}

TEST(RunE2E, CliFrontEnd) {
  std::string out, err;
  // A good run: exit 0, table on stdout, progress on stderr, last line "1/1 cases passed".
  ASSERT_EQ(run_cli({"run", "--case", kDecodeLowlat, "--check"}, &out, &err), 0) << err << out;
  ASSERT_FALSE(out.empty());
  std::string last = out.substr(0, out.size() - 1);
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_EQ(last, "1/1 cases passed");
  EXPECT_NE(err.find("[1/1] b2_s4000_q8"), std::string::npos) << err;
  // Repeated --case.
  ASSERT_EQ(run_cli({"run", "--case", kDecodeLowlat, "--case", "b1_s1000_q8", "--no-check"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("2/2 cases passed"), std::string::npos) << out;
  // Bad values: exit 2 with a message naming the option and the value.
  EXPECT_EQ(run_cli({"run", "--heads", "48/3"}, &out, &err), 2);
  EXPECT_NE(err.find("--heads '48/3'"), std::string::npos) << err;
  EXPECT_EQ(run_cli({"run", "--case", "b9_s9_q9"}, &out, &err), 2);
  EXPECT_NE(err.find("b9_s9_q9"), std::string::npos) << err;
  EXPECT_EQ(run_cli({"run", "--check", "--no-check"}, &out, &err), 2);
  // --cases below 1 (also -1, the API's "not given"), a negative or overflowing seed and a
  // repeated --case id: exit 2, before running anything.
  for (const char* n : {"-1", "0", "-7"}) {
    EXPECT_EQ(run_cli({"run", "--workload", "lowlat", "--cases", n}, &out, &err), 2) << n;
    EXPECT_NE(err.find(std::string("--cases ") + n + ": expected a positive number"), std::string::npos) << err;
  }
  for (const char* v : {"-1", "99999999999999999999", "12x"}) {
    EXPECT_EQ(run_cli({"run", "--case", kDecodeLowlat, "--seed", v}, &out, &err), 2) << v;
    EXPECT_NE(err.find(std::string("--seed '") + v + "'"), std::string::npos) << err;
  }
  EXPECT_EQ(run_cli({"run", "--case", kDecodeLowlat, "--case", kDecodeLowlat}, &out, &err), 2);
  EXPECT_NE(err.find("given more than once"), std::string::npos) << err;
  EXPECT_EQ(err.find("[1/"), std::string::npos) << "must fail before running: " << err;
  EXPECT_EQ(run_cli({"run", "--case", kDecodeLowlat, "--json", "/nonexistent-dir/r.json"}, &out, &err), 2);
  EXPECT_NE(err.find("--json '/nonexistent-dir/r.json'"), std::string::npos) << err;
  EXPECT_EQ(err.find("[1/1]"), std::string::npos) << "must fail before running: " << err;
  // Malformed command lines are rejected by CLI11 (non-zero).
  EXPECT_NE(run_cli({"run", "--threads", "many"}, &out, &err), 0);
  EXPECT_NE(run_cli({"frobnicate"}, &out, &err), 0);
  EXPECT_NE(run_cli({}, &out, &err), 0);
  // A failing case (memory guard) gives exit 1.
  EXPECT_EQ(run_cli({"run", "--case", kDecodeLowlat, "--max-memory-gb", "0.0001"}, &out, &err), 1);
  EXPECT_NE(out.find("0/1 cases passed"), std::string::npos) << out;
  // Help and list.
  EXPECT_EQ(run_cli({"run", "--help"}, &out, &err), 0);
  EXPECT_NE(out.find("--kv-dtype"), std::string::npos);
  EXPECT_EQ(run_cli({"list", "--workload", "lowlat"}, &out, &err), 0);
  EXPECT_NE(out.find("b4_s32000_q8"), std::string::npos);
  EXPECT_NE(out.find("12 cases"), std::string::npos);
}

// The check is not vacuous: corrupted results make a case fail with a reason.
TEST(RunE2E, CheckDetectsCorruptedResults) {
  for (const char* fault : {"out", "lse", "topk"}) {
    for (const char* id : {kPrefillSmall, kDecodeLowlat}) {
      ft::RunOptions opts;
      std::vector<ft::WorkloadCase> cases;
      ASSERT_TRUE(ft::resolve_request(request_for({id}), &opts, &cases).ok());
      opts.inject_fault = fault;
      const ft::CaseResult r = ft::run_case(cases[0], opts);
      EXPECT_EQ(r.status, "failed") << fault << " " << id;
      EXPECT_FALSE(r.pass) << fault << " " << id;
      EXPECT_FALSE(r.check.pass) << fault << " " << id;
      EXPECT_FALSE(r.error.empty()) << fault << " " << id;
      if (std::string(fault) == "topk") {
        EXPECT_GT(r.check.topk_mismatches, 0) << id;
      } else if (std::string(fault) == "out") {
        EXPECT_GT(r.check.mismatches, 0) << id;
      } else {
        EXPECT_GT(r.check.max_lse_err, 1e-3) << id;
      }
    }
  }
}

TEST(RunE2E, CheckRowSamplingAndEstimates) {
  EXPECT_EQ(ft::sample_rows(1, 8), std::vector<std::int64_t>({0}));
  EXPECT_EQ(ft::sample_rows(5, 8), std::vector<std::int64_t>({0, 1, 2, 3, 4}));
  const auto r = ft::sample_rows(1000, 8);
  ASSERT_EQ(r.size(), 8u);
  EXPECT_EQ(r.front(), 0);
  EXPECT_EQ(r.back(), 999);
  for (std::size_t i = 1; i < r.size(); ++i) EXPECT_GT(r[i], r[i - 1]);
  // Memory estimate: b128 x 200K in bf16 needs > 50 GiB; fp8 roughly halves the K/V part.
  std::string dir;
  ASSERT_TRUE(ft::find_data_dir("", &dir).ok());
  ft::WorkloadCase c;
  ASSERT_TRUE(ft::find_case(dir, "b128_s200000_q8", &c).ok());
  ft::RunOptions o;
  const std::int64_t bf16 = ft::estimate_host_bytes(c, o);
  o.kv_format = flashmsa::KvFormat::fp8;
  const std::int64_t fp8 = ft::estimate_host_bytes(c, o);
  EXPECT_GT(bf16, 50LL << 30);
  EXPECT_LT(fp8, bf16 * 6 / 10);
  // The default selection is deterministic, mixes prefill and decode, and is cheap.
  std::vector<ft::WorkloadCase> a, b;
  o = ft::RunOptions{};
  o.check = true;
  ASSERT_TRUE(ft::default_selection(dir, o, &a).ok());
  ASSERT_TRUE(ft::default_selection(dir, o, &b).ok());
  ASSERT_EQ(a.size(), b.size());
  double est = 0;
  int prefill = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, b[i].id);
    est += ft::estimate_cpu_seconds(a[i], o);
    prefill += a[i].kind == ft::CaseKind::prefill ? 1 : 0;
  }
  EXPECT_GE(prefill, 4);
  EXPECT_GE(static_cast<int>(a.size()) - prefill, 2);
  EXPECT_LT(est, 90.0);
}

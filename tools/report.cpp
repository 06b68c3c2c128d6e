// FlashMSA tools — table, totals and JSON report (see report.h).
#include "report.h"

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <thread>

#include "flashmsa/cache.h"
#include "flashmsa/version.h"

namespace flashmsa::tools {

namespace {

using nlohmann::json;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string git_revision_at_runtime() {
#ifdef FLASHMSA_DATA_DIR
  std::string src = FLASHMSA_DATA_DIR;
  const auto pos = src.rfind("/data");
  if (pos != std::string::npos) src = src.substr(0, pos);
  const std::string cmd = "git -C '" + src + "' rev-parse HEAD 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "unknown";
  std::array<char, 128> buf{};
  std::string out;
  while (fgets(buf.data(), static_cast<int>(buf.size()), f)) out += buf.data();
  const int rc = pclose(f);
  out = trim(out);
  if (rc == 0 && out.size() == 40) return out;
#endif
  return "unknown";
}

/// JSON number that stays valid JSON for non-finite values (null).
json num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

std::string fixed(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

std::string sci(double v) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(2) << v;
  return os.str();
}

std::string shape_string(const WorkloadCase& c) {
  std::ostringstream os;
  if (c.kind == CaseKind::decode) {
    os << "B" << c.batch_size << " Q" << c.q_len_per_req << " kv~" << c.nominal_seq_len;
  } else {
    os << "B" << c.batch_size << " q" << c.total_q() << " kv<=" << c.max_seq_len();
  }
  return os.str();
}

json totals_json(const Totals& t, bool weighted) {
  json j;
  j["cases"] = t.cases;
  if (weighted) j["weight"] = t.weight;
  j["mean_insert_ms"] = t.mean_insert_ms;
  j["mean_indexer_ms"] = t.mean_indexer_ms;
  j["mean_attention_ms"] = t.mean_attention_ms;
  j["mean_total_ms"] = t.mean_total_ms;
  j["attention_tflops"] = t.attention_tflops;
  j["indexer_tflops"] = t.indexer_tflops;
  j["gbps"] = t.gbps;
  return j;
}

}  // namespace

BuildInfo collect_build_info() {
  BuildInfo b;
  b.version = flashmsa::version();
#if defined(__clang__)
  b.compiler = std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  b.compiler = std::string("GCC ") + __VERSION__;
#elif defined(_MSC_VER)
  b.compiler = "MSVC " + std::to_string(_MSC_VER);
#else
  b.compiler = "unknown";
#endif
#if defined(FLASHMSA_BUILD_TYPE)
  b.build_type = FLASHMSA_BUILD_TYPE;
#elif defined(NDEBUG)
  b.build_type = "optimized (NDEBUG)";
#else
  b.build_type = "debug (assertions on)";
#endif
  b.cuda = flashmsa::built_with_cuda();
#if defined(FLASHMSA_GIT_REVISION)
  b.git_revision = FLASHMSA_GIT_REVISION;
  if (b.git_revision.empty()) b.git_revision = git_revision_at_runtime();
#else
  b.git_revision = git_revision_at_runtime();
#endif
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) b.hostname = host;
  else b.hostname = "unknown";
  b.cores = static_cast<int>(std::thread::hardware_concurrency());
  return b;
}

void print_table(const RunReport& rep, std::ostream& out) {
  const auto& o = rep.options;
  out << "FlashMSA run: heads " << o.num_q_heads << "/" << o.num_kv_heads << ", kv " << kv_format_name(o.kv_format)
      << ", index " << kv_format_name(o.index_format) << ", device " << device_name(o.device) << ", seed " << o.seed
      << ", check " << (o.check ? "on" : "off") << ", selection: " << o.selection << "\n";
  std::ostringstream hdr;
  hdr << std::left << std::setw(29) << "case" << std::setw(24) << "shape" << std::right << std::setw(7) << "weight"
      << std::setw(10) << "insert_ms" << std::setw(11) << "indexer_ms" << std::setw(10) << "attn_ms" << std::setw(10)
      << "idx_TF/s" << std::setw(10) << "attn_TF/s" << std::setw(9) << "GB/s" << std::setw(10) << "max_err"
      << std::setw(10) << "cosine" << std::setw(6) << "pass";
  out << hdr.str() << "\n" << std::string(hdr.str().size(), '-') << "\n";
  for (const CaseResult& r : rep.cases) {
    out << std::left << std::setw(29) << r.wc.id << std::setw(24) << shape_string(r.wc) << std::right << std::setw(7)
        << fixed(r.wc.weight, 0);
    const bool ran = r.status == "ok" || r.status == "failed";
    if (ran) {
      out << std::setw(10) << fixed(r.insert_ms, 2) << std::setw(11) << fixed(r.indexer_ms, 2) << std::setw(10)
          << fixed(r.attention_ms, 2) << std::setw(10) << fixed(r.indexer_tflops, 4) << std::setw(10)
          << fixed(r.attention_tflops, 4) << std::setw(9) << fixed(r.gbps, 1);
      if (r.check.enabled)
        out << std::setw(10) << sci(r.check.max_abs_err) << std::setw(10) << fixed(r.check.cosine, 6);
      else
        out << std::setw(10) << "-" << std::setw(10) << "-";
      out << std::setw(6) << (r.pass ? "yes" : "NO") << "\n";
    } else {
      out << "  " << r.status << ": " << r.error << "\n";
    }
    if (ran && !r.pass) out << "    failure: " << r.error << "\n";
  }
  out << "\n";
  const Totals& w = rep.weighted;
  const Totals& u = rep.unweighted;
  if (w.cases > 0)
    out << "weighted (" << w.cases << " cases, " << fixed(w.weight, 0) << " calls): mean insert "
        << fixed(w.mean_insert_ms, 3) << " ms, indexer " << fixed(w.mean_indexer_ms, 3) << " ms, attention "
        << fixed(w.mean_attention_ms, 3) << " ms, total " << fixed(w.mean_total_ms, 3) << " ms; indexer "
        << fixed(w.indexer_tflops, 3) << " TFLOP/s, attention " << fixed(w.attention_tflops, 3) << " TFLOP/s, "
        << fixed(w.gbps, 1) << " GB/s\n";
  if (u.cases > 0)
    out << "unweighted (" << u.cases << " weight-0 cases): mean insert " << fixed(u.mean_insert_ms, 3)
        << " ms, indexer " << fixed(u.mean_indexer_ms, 3) << " ms, attention " << fixed(u.mean_attention_ms, 3)
        << " ms, total " << fixed(u.mean_total_ms, 3) << " ms; indexer " << fixed(u.indexer_tflops, 3)
        << " TFLOP/s, attention " << fixed(u.attention_tflops, 3) << " TFLOP/s, " << fixed(u.gbps, 1) << " GB/s\n";
  bool any_prefill = false;
  for (const CaseResult& r : rep.cases) any_prefill = any_prefill || r.wc.useful_flops >= 0;
  if (any_prefill)
    out << "note: prefill useful_flops (workload convention, per head pair: 2*128*128 * sum of complete history\n"
           "      pages per row) times the index heads equals the indexer FLOPs counted above.\n";
  out << rep.passed << "/" << rep.total << " cases passed\n";
}

json report_to_json(const RunReport& rep, const BuildInfo& b, const std::string& timestamp) {
  json j;
  j["schema"] = "flashmsa-run-report";
  j["schema_version"] = 1;
  std::string ts = timestamp;
  if (ts.empty()) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    ts = buf;
  }
  j["timestamp_utc"] = ts;
  j["machine"] = {{"hostname", b.hostname}, {"cores", b.cores}};
  j["build"] = {{"version", b.version}, {"compiler", b.compiler}, {"build_type", b.build_type}, {"cuda", b.cuda}};
  j["git_revision"] = b.git_revision;
  const RunOptions& o = rep.options;
  j["options"] = {{"selection", o.selection},
                  {"num_q_heads", o.num_q_heads},
                  {"num_kv_heads", o.num_kv_heads},
                  {"kv_dtype", kv_format_name(o.kv_format)},
                  {"index_dtype", kv_format_name(o.index_format)},
                  {"device", device_name(o.device)},
                  {"device_request", o.device_request},
                  {"seed", o.seed},
                  {"check", o.check},
                  {"check_rows", o.check_rows},
                  {"warmup", o.warmup},
                  {"threads", o.threads},
                  {"max_memory_gb", o.max_memory_gb},
                  {"data_dir", o.data_dir},
                  {"json", o.json_path}};
  json cases = json::array();
  for (const CaseResult& r : rep.cases) {
    const WorkloadCase& c = r.wc;
    json e;
    e["id"] = c.id;
    e["kind"] = c.kind == CaseKind::prefill ? "prefill" : "decode";
    e["source"] = c.source;
    e["tags"] = c.tags;
    e["weight"] = c.weight;
    e["count"] = c.count;
    e["batch_size"] = c.batch_size;
    e["query_lens"] = c.query_lens;
    e["prefix_lens"] = c.prefix_lens;
    e["seq_lens"] = c.seq_lens;
    if (c.kind == CaseKind::decode) {
      e["q_len_per_req"] = c.q_len_per_req;
      e["nominal_seq_len"] = c.nominal_seq_len;
    }
    e["rows"] = r.rows;
    e["kv_tokens"] = r.kv_tokens;
    e["pages"] = r.pages;
    e["est_host_bytes"] = r.est_host_bytes;
    e["status"] = r.status;
    e["pass"] = r.pass;
    e["error"] = r.error;
    e["times_ms"] = {{"setup", r.setup_ms},     {"insert", r.insert_ms},       {"indexer", r.indexer_ms},
                     {"plan", r.plan_ms},       {"attention", r.attention_ms}, {"total", r.total_ms()}};
    e["work"] = {{"attention_flops", r.attention_flops},
                 {"indexer_flops", r.indexer_flops},
                 {"workload_useful_flops", c.useful_flops >= 0 ? json(c.useful_flops) : json(nullptr)},
                 {"visible_keys", r.visible_keys},
                 {"distinct_pages", r.distinct_pages},
                 {"selected_bytes", r.selected_bytes}};
    e["throughput"] = {{"attention_tflops", r.attention_tflops},
                       {"indexer_tflops", r.indexer_tflops},
                       {"workload_useful_tflops", r.workload_useful_tflops},
                       {"gbps", r.gbps}};
    e["scales"] = {{"q", r.q_scale}, {"k", r.k_scale}, {"v", r.v_scale}};
    e["devices"] = {{"insert", r.insert_device}, {"indexer", r.indexer_device}, {"attention", r.attention_device}};
    e["output_digest"] = r.output_digest;
    const CheckResult& k = r.check;
    e["check"] = {{"enabled", k.enabled},
                  {"pass", k.pass},
                  {"rows", k.rows},
                  {"elements", k.elements},
                  {"mismatches", k.mismatches},
                  {"max_abs_err", num(k.max_abs_err)},
                  {"cosine", num(k.cosine)},
                  {"max_lse_err", num(k.max_lse_err)},
                  {"nonfinite_mismatches", k.nonfinite},
                  {"tolerance", {{"atol", k.atol}, {"rtol", k.rtol}, {"min_cosine", k.min_cosine}, {"lse", k.lse_tol}}},
                  {"topk_checked", k.topk_rows_checked},
                  {"topk_mismatches", k.topk_mismatches},
                  {"topk_near_ties", k.topk_near_ties},
                  {"message", k.message}};
    cases.push_back(std::move(e));
  }
  j["cases"] = std::move(cases);
  j["totals"] = {{"weighted", totals_json(rep.weighted, true)}, {"unweighted", totals_json(rep.unweighted, false)}};
  j["summary"] = {{"passed", rep.passed},
                  {"total", rep.total},
                  {"line", std::to_string(rep.passed) + "/" + std::to_string(rep.total) + " cases passed"}};
  return j;
}

Status write_json_file(const json& j, const std::string& path) {
  std::ofstream f(path);
  if (!f) return Status(StatusCode::kInvalidArgument, "--json '" + path + "': cannot open the file for writing");
  f << j.dump(2) << "\n";
  f.close();
  if (!f) return Status(StatusCode::kInvalidArgument, "--json '" + path + "': write failed");
  return Status::Ok();
}

void print_case_list(const std::vector<WorkloadCase>& cases, const RunOptions& opts, std::ostream& out) {
  out << std::left << std::setw(29) << "case" << std::setw(24) << "shape" << std::right << std::setw(7) << "weight"
      << std::setw(8) << "rows" << std::setw(11) << "kv_tokens" << std::setw(10) << "est_cpu_s" << std::setw(10)
      << "est_GiB" << "  tags\n";
  for (const WorkloadCase& c : cases) {
    out << std::left << std::setw(29) << c.id << std::setw(24) << shape_string(c) << std::right << std::setw(7)
        << fixed(c.weight, 0) << std::setw(8) << c.total_q() << std::setw(11) << c.total_kv() << std::setw(10)
        << fixed(estimate_cpu_seconds(c, opts), 1) << std::setw(10)
        << fixed(static_cast<double>(estimate_host_bytes(c, opts)) / (1024.0 * 1024.0 * 1024.0), 2) << "  ";
    for (std::size_t i = 0; i < c.tags.size(); ++i) out << (i ? "," : "") << c.tags[i];
    out << "\n";
  }
  out << cases.size() << " cases\n";
}

}  // namespace flashmsa::tools

// FlashMSA tools — workload loader (see workloads.h).
#include "workloads.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

namespace flashmsa::tools {

namespace {

using nlohmann::json;

constexpr const char* kPrefillShapesFile = "prefill_benchmark_shapes_v1.json";
constexpr const char* kManifestShard = "prefill_cases_v1/part-00002.jsonl";
constexpr const char* kDecodeFile = "decode-workloads.json";

Status error(const std::string& msg) { return Status(StatusCode::kInvalidArgument, msg); }

bool file_exists(const std::string& path) {
  std::ifstream f(path);
  return f.good();
}

Status read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return error("cannot open workload data file '" + path + "' (missing or unreadable)");
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return Status::Ok();
}

Status parse_json_file(const std::string& path, json* out) {
  std::string text;
  FLASHMSA_RETURN_IF_ERROR(read_file(path, &text));
  try {
    *out = json::parse(text);
  } catch (const std::exception& e) {
    return error("cannot parse workload data file '" + path + "': " + e.what());
  }
  return Status::Ok();
}

std::int64_t ceil_pages(std::int64_t n) { return (n + 127) / 128; }

/// Fills a prefill case from a JSON object (benchmark shapes entry or manifest line).
Status prefill_from_json(const json& j, const std::string& source, const std::string& where,
                         WorkloadCase* c) {
  try {
    c->id = j.at("case_id").get<std::string>();
    c->kind = CaseKind::prefill;
    c->source = source;
    c->tags.clear();
    if (j.contains("tags")) c->tags = j.at("tags").get<std::vector<std::string>>();
    c->batch_size = j.at("batch_size").get<int>();
    c->query_lens = j.at("query_lens").get<std::vector<std::int32_t>>();
    c->prefix_lens = j.at("prefix_lens").get<std::vector<std::int32_t>>();
    c->seq_lens = j.at("final_kv_lens").get<std::vector<std::int32_t>>();
    c->count = j.at("count").get<std::int64_t>();
    c->weight = j.contains("representative_weight") ? j.at("representative_weight").get<double>() : 0.0;
    c->stratum = j.contains("stratum") ? j.at("stratum").get<std::string>() : std::string();
    c->useful_flops = j.at("metrics").at("useful_flops").get<std::int64_t>();
  } catch (const std::exception& e) {
    return error("malformed prefill case in " + where + ": " + e.what());
  }
  const auto b = static_cast<std::size_t>(c->batch_size);
  if (c->batch_size < 1 || c->query_lens.size() != b || c->prefix_lens.size() != b ||
      c->seq_lens.size() != b)
    return error("prefill case " + c->id + " in " + where +
                 ": batch_size does not match the length lists");
  for (std::size_t i = 0; i < b; ++i) {
    if (c->query_lens[i] < 1 || c->prefix_lens[i] < 0 ||
        c->seq_lens[i] != c->prefix_lens[i] + c->query_lens[i])
      return error("prefill case " + c->id + " in " + where +
                   ": expected final_kv_lens = prefix_lens + query_lens with query_lens >= 1");
  }
  return Status::Ok();
}

std::string join_dir(const std::string& dir, const char* file) {
  if (dir.empty() || dir.back() == '/') return dir + file;
  return dir + "/" + file;
}

/// Accepts the msa-workloads directory itself or a parent holding msa-workloads/.
bool resolve_candidate(const std::string& cand, std::string* out) {
  if (file_exists(join_dir(cand, kDecodeFile)) || file_exists(join_dir(cand, kPrefillShapesFile))) {
    *out = cand;
    return true;
  }
  const std::string sub = join_dir(cand, "msa-workloads");
  if (file_exists(join_dir(sub, kDecodeFile)) || file_exists(join_dir(sub, kPrefillShapesFile))) {
    *out = sub;
    return true;
  }
  return false;
}

}  // namespace

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::prefill: return "prefill";
    case Workload::decode: return "decode";
    case Workload::lowlat: return "lowlat";
  }
  return "?";
}

bool parse_workload(const std::string& s, Workload* out) {
  if (s == "prefill") *out = Workload::prefill;
  else if (s == "decode") *out = Workload::decode;
  else if (s == "lowlat" || s == "low_latency" || s == "low-latency") *out = Workload::lowlat;
  else return false;
  return true;
}

std::int64_t WorkloadCase::total_q() const {
  std::int64_t s = 0;
  for (auto q : query_lens) s += q;
  return s;
}
std::int64_t WorkloadCase::total_kv() const {
  std::int64_t s = 0;
  for (auto k : seq_lens) s += k;
  return s;
}
std::int64_t WorkloadCase::max_seq_len() const {
  std::int64_t m = 0;
  for (auto k : seq_lens) m = std::max<std::int64_t>(m, k);
  return m;
}
std::int64_t WorkloadCase::total_pages() const {
  std::int64_t s = 0;
  for (auto k : seq_lens) s += ceil_pages(k);
  return s;
}
std::int64_t WorkloadCase::max_pages() const { return ceil_pages(max_seq_len()); }

std::int64_t WorkloadCase::recomputed_useful_flops() const {
  // sum_j floor((prefix + j) / 128) for j in [0, q): closed form per request.
  std::int64_t pages = 0;
  for (std::size_t i = 0; i < query_lens.size(); ++i) {
    const std::int64_t p0 = prefix_lens[i];
    const std::int64_t p1 = p0 + query_lens[i];  // exclusive
    // S(n) = sum_{x < n} floor(x / 128)
    auto S = [](std::int64_t n) {
      const std::int64_t f = n / 128, r = n % 128;
      return 128 * f * (f - 1) / 2 + r * f;
    };
    pages += S(p1) - S(p0);
  }
  return 2 * 128 * 128 * pages;
}

Status find_data_dir(const std::string& explicit_dir, std::string* out) {
  if (!explicit_dir.empty()) {
    if (resolve_candidate(explicit_dir, out)) return Status::Ok();
    return error("--data-dir '" + explicit_dir +
                 "': no msa-workloads data there (expected " + kDecodeFile + " and " +
                 kPrefillShapesFile + " in it or in its msa-workloads/ subdirectory)");
  }
  if (const char* env = std::getenv("FLASHMSA_DATA_DIR")) {
    if (*env) {
      if (resolve_candidate(env, out)) return Status::Ok();
      return error(std::string("FLASHMSA_DATA_DIR='") + env +
                   "': no msa-workloads data there (expected " + kDecodeFile + " and " +
                   kPrefillShapesFile + " in it or in its msa-workloads/ subdirectory)");
    }
  }
#ifdef FLASHMSA_DATA_DIR
  if (resolve_candidate(FLASHMSA_DATA_DIR, out)) return Status::Ok();
  return error(std::string("built-in data directory '") + FLASHMSA_DATA_DIR +
               "' holds no msa-workloads data; pass --data-dir or set FLASHMSA_DATA_DIR");
#else
  return error("no workload data directory: pass --data-dir or set FLASHMSA_DATA_DIR");
#endif
}

Status load_prefill_benchmark(const std::string& dir, std::vector<WorkloadCase>* out) {
  const std::string path = join_dir(dir, kPrefillShapesFile);
  json j;
  FLASHMSA_RETURN_IF_ERROR(parse_json_file(path, &j));
  out->clear();
  try {
    const json& cases = j.at("cases");
    if (!cases.is_array()) return error(path + ": 'cases' is not an array");
    int order = 0;
    for (const json& e : cases) {
      WorkloadCase c;
      FLASHMSA_RETURN_IF_ERROR(prefill_from_json(e, "prefill_benchmark", path, &c));
      c.order = order++;
      out->push_back(std::move(c));
    }
    if (j.contains("case_count") && j.at("case_count").get<std::size_t>() != out->size())
      return error(path + ": case_count does not match the number of cases");
  } catch (const std::exception& e) {
    return error("malformed " + path + ": " + e.what());
  }
  return Status::Ok();
}

Status find_prefill_manifest_case(const std::string& dir, const std::string& id,
                                  WorkloadCase* out, bool* found) {
  *found = false;
  const std::string path = join_dir(dir, kManifestShard);
  std::ifstream f(path);
  if (!f) return error("cannot open workload data file '" + path + "' (missing or unreadable)");
  const std::string needle = "\"case_id\":\"" + id + "\"";
  std::string line;
  int order = 0;
  while (std::getline(f, line)) {
    if (line.find(needle) != std::string::npos) {
      json j;
      try {
        j = json::parse(line);
      } catch (const std::exception& e) {
        return error("cannot parse line " + std::to_string(order + 1) + " of '" + path + "': " + e.what());
      }
      FLASHMSA_RETURN_IF_ERROR(prefill_from_json(j, "prefill_manifest", path, out));
      out->order = order;
      *found = true;
      return Status::Ok();
    }
    ++order;
  }
  return Status::Ok();
}

Status decode_seq_lens(int batch_size, std::int64_t nominal, std::int64_t length_rng_seed,
                       int q_len_per_req, std::vector<std::int32_t>* out) {
  if (batch_size < 1 || nominal < 1)
    return error("decode length rule: expected batch_size >= 1 and nominal_seq_len >= 1, got " +
                 std::to_string(batch_size) + " and " + std::to_string(nominal));
  // torch's CPU generator: mt19937 initialised with the low 32 bits of the seed
  // (init_genrand), one 32-bit draw per random() call.
  std::mt19937 gen(static_cast<std::uint32_t>(length_rng_seed));
  const int pairs = batch_size / 2;
  const std::int64_t dmin = std::max<std::int64_t>(1, nominal / 20);
  const std::int64_t dmax = std::max<std::int64_t>(dmin, nominal / 4);
  const auto range = static_cast<std::uint64_t>(dmax + 1 - dmin);
  std::vector<std::int64_t> deltas(static_cast<std::size_t>(pairs));
  for (auto& d : deltas) d = static_cast<std::int64_t>(static_cast<std::uint64_t>(gen()) % range) + dmin;
  std::vector<std::int64_t> values;
  values.reserve(static_cast<std::size_t>(batch_size));
  for (auto d : deltas) values.push_back(nominal - d);
  for (auto d : deltas) values.push_back(nominal + d);
  if (batch_size % 2) values.push_back(nominal);
  std::vector<int> r(static_cast<std::size_t>(batch_size));
  for (int i = 0; i < batch_size; ++i) r[static_cast<std::size_t>(i)] = i;
  for (int i = 0; i + 1 < batch_size; ++i) {
    const auto z = static_cast<int>(static_cast<std::uint64_t>(gen()) %
                                    static_cast<std::uint64_t>(batch_size - i));
    std::swap(r[static_cast<std::size_t>(i)], r[static_cast<std::size_t>(i + z)]);
  }
  out->assign(static_cast<std::size_t>(batch_size), 0);
  std::int64_t sum = 0, mn = INT64_MAX;
  for (int k = 0; k < batch_size; ++k) {
    const std::int64_t v = values[static_cast<std::size_t>(r[static_cast<std::size_t>(k)])];
    (*out)[static_cast<std::size_t>(k)] = static_cast<std::int32_t>(v);
    sum += v;
    mn = std::min(mn, v);
  }
  if (sum != static_cast<std::int64_t>(batch_size) * nominal || mn < q_len_per_req)
    return error("decode length rule: invariant violated for b" + std::to_string(batch_size) +
                 "_s" + std::to_string(nominal) + " (sum " + std::to_string(sum) + ", min " +
                 std::to_string(mn) + ")");
  return Status::Ok();
}

namespace {

Status decode_case_from_json(const json& e, const std::string& suite, const std::string& path,
                             int order, WorkloadCase* c) {
  try {
    c->id = e.at("name").get<std::string>();
    c->kind = CaseKind::decode;
    c->source = "decode_" + suite;
    c->batch_size = e.at("batch_size").get<int>();
    c->nominal_seq_len = e.at("nominal_seq_len").get<std::int64_t>();
    c->q_len_per_req = e.at("q_len_per_req").get<int>();
    c->weight = e.at("weight").get<double>();
    c->length_rng_seed = e.at("length_rng_seed").get<std::int64_t>();
    const std::int64_t seed = e.at("seed").get<std::int64_t>();
    if (c->length_rng_seed != seed + 1009LL * c->batch_size + c->nominal_seq_len)
      return error(path + ": case " + c->id +
                   ": length_rng_seed != seed + batch_size * 1009 + nominal_seq_len");
    if (e.contains("min_delta") &&
        e.at("min_delta").get<std::int64_t>() != std::max<std::int64_t>(1, c->nominal_seq_len / 20))
      return error(path + ": case " + c->id + ": min_delta does not follow the length rule");
    if (c->q_len_per_req < 1 || c->q_len_per_req > 32)
      return error(path + ": case " + c->id + ": q_len_per_req out of range");
  } catch (const std::exception& ex) {
    return error("malformed decode case in " + path + ": " + ex.what());
  }
  c->order = order;
  c->count = 0;
  c->useful_flops = -1;
  FLASHMSA_RETURN_IF_ERROR(decode_seq_lens(c->batch_size, c->nominal_seq_len, c->length_rng_seed,
                                           c->q_len_per_req, &c->seq_lens));
  c->query_lens.assign(static_cast<std::size_t>(c->batch_size), c->q_len_per_req);
  c->prefix_lens.resize(static_cast<std::size_t>(c->batch_size));
  for (std::size_t i = 0; i < c->seq_lens.size(); ++i) c->prefix_lens[i] = c->seq_lens[i] - c->q_len_per_req;
  if (e.contains("total_kv_tokens") && e.at("total_kv_tokens").get<std::int64_t>() != c->total_kv())
    return error(path + ": case " + c->id + ": total_kv_tokens does not match the generated lengths");
  return Status::Ok();
}

}  // namespace

Status load_decode_suite(const std::string& dir, const std::string& suite,
                         std::vector<WorkloadCase>* out) {
  const std::string path = join_dir(dir, kDecodeFile);
  json j;
  FLASHMSA_RETURN_IF_ERROR(parse_json_file(path, &j));
  out->clear();
  try {
    const json& suites = j.at("suites");
    if (!suites.contains(suite))
      return error(path + ": no decode suite '" + suite + "' (have full, smoke, low_latency)");
    const json& s = suites.at(suite);
    if (s.contains("cases")) {
      int order = 0;
      for (const json& e : s.at("cases")) {
        WorkloadCase c;
        FLASHMSA_RETURN_IF_ERROR(decode_case_from_json(e, suite, path, order++, &c));
        out->push_back(std::move(c));
      }
    } else if (s.contains("case_names")) {
      std::vector<WorkloadCase> full;
      FLASHMSA_RETURN_IF_ERROR(load_decode_suite(dir, "full", &full));
      for (const auto& name : s.at("case_names").get<std::vector<std::string>>()) {
        auto it = std::find_if(full.begin(), full.end(), [&](const WorkloadCase& c) { return c.id == name; });
        if (it == full.end()) return error(path + ": suite '" + suite + "' names unknown case " + name);
        out->push_back(*it);
      }
    }
    if (s.contains("case_count") && s.at("case_count").get<std::size_t>() != out->size())
      return error(path + ": suite '" + suite + "': case_count does not match the cases");
  } catch (const std::exception& e) {
    return error("malformed " + path + ": " + e.what());
  }
  return Status::Ok();
}

Status load_workload(const std::string& dir, Workload w, std::vector<WorkloadCase>* out) {
  switch (w) {
    case Workload::prefill: return load_prefill_benchmark(dir, out);
    case Workload::decode: return load_decode_suite(dir, "full", out);
    case Workload::lowlat: return load_decode_suite(dir, "low_latency", out);
  }
  return error("unknown workload");
}

Status find_case(const std::string& dir, const std::string& id, WorkloadCase* out) {
  if (id.rfind("prefill_", 0) == 0) {
    std::vector<WorkloadCase> bench;
    FLASHMSA_RETURN_IF_ERROR(load_prefill_benchmark(dir, &bench));
    for (auto& c : bench)
      if (c.id == id) {
        *out = std::move(c);
        return Status::Ok();
      }
    bool found = false;
    FLASHMSA_RETURN_IF_ERROR(find_prefill_manifest_case(dir, id, out, &found));
    if (found) return Status::Ok();
    return error("--case '" + id + "': unknown prefill case id (looked in " + kPrefillShapesFile +
                 " and " + kManifestShard + " under " + dir +
                 "; ids of batch-1/2 shapes outside the benchmark live in manifest shards that are not shipped)");
  }
  for (const char* suite : {"full", "low_latency"}) {
    std::vector<WorkloadCase> cases;
    FLASHMSA_RETURN_IF_ERROR(load_decode_suite(dir, suite, &cases));
    for (auto& c : cases)
      if (c.id == id) {
        *out = std::move(c);
        return Status::Ok();
      }
  }
  return error("--case '" + id +
               "': unknown case id (expected a prefill id 'prefill_<20 hex>' from the benchmark or "
               "manifest shard, or a decode name such as 'b8_s1000_q8' from the full / low_latency "
               "suites; `flashmsa list --workload W` prints them)");
}

Status select_top_weighted(const std::vector<WorkloadCase>& cases, int n,
                           std::vector<WorkloadCase>* out) {
  if (n < 1) return error("--cases " + std::to_string(n) + ": expected a positive number of cases");
  std::vector<std::size_t> idx(cases.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    return cases[a].weight > cases[b].weight;
  });
  out->clear();
  for (std::size_t i = 0; i < idx.size() && static_cast<int>(i) < n; ++i) out->push_back(cases[idx[i]]);
  return Status::Ok();
}

}  // namespace flashmsa::tools

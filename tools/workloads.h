// FlashMSA tools — the workload loader: real prefill shapes and the decode/MTP suite.
//
// Data: data/msa-workloads/ (README.en.md / README.md there describe every field).
//   prefill  prefill_benchmark_shapes_v1.json       128 benchmark cases with full shapes
//            prefill_cases_v1/part-00002.jsonl        manifest shard, for --case look-ups
//   decode   decode-workloads.json                   suites "full" (28 cases, weights summing
//                                                     to 10,000), "low_latency" (12, weight 0)
// The directory is found by find_data_dir(): an explicit path, else the FLASHMSA_DATA_DIR
// environment variable, else the FLASHMSA_DATA_DIR compile definition (<source>/data).
//
// Decode per-request lengths follow the suite's length rule with PyTorch's CPU generator
// reproduced exactly (decode_seq_lens below; checked against torch 2.11 on every suite case).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashmsa/status.h"

namespace flashmsa::tools {

/// Which workload a command works on.
enum class Workload {
  prefill,  ///< the 128 prefill benchmark cases (prefill_benchmark_shapes_v1.json)
  decode,   ///< decode suite "full" (28 cases, production weights)
  lowlat,   ///< decode suite "low_latency" (12 cases, weight 0)
};
/// "prefill", "decode", "lowlat".
const char* workload_name(Workload w);
/// Parses "prefill" | "decode" | "lowlat" (also "low_latency", "low-latency").
bool parse_workload(const std::string& s, Workload* out);

/// Kind of attention call a case describes.
enum class CaseKind { prefill, decode };

/// One workload case: a batch of requests with their query and KV lengths.
/// Prefill request i: q_len = query_lens[i] new tokens after prefix_lens[i] cached ones,
/// seq_lens[i] = prefix + q (final KV length); row j sits at p = prefix + j (D4).
/// Decode request b: query_lens[b] = Q (q_len_per_req), seq_lens[b] includes the Q new
/// tokens, prefix_lens[b] = seq_lens[b] - Q.
struct WorkloadCase {
  std::string id;             ///< prefill case_id ("prefill_<20 hex>") or decode name ("b8_s1000_q8")
  CaseKind kind = CaseKind::prefill;
  std::string source;         ///< "prefill_benchmark", "prefill_manifest", "decode_full", "decode_low_latency"
  std::vector<std::string> tags;   ///< prefill benchmark tags (empty otherwise)
  int batch_size = 0;
  std::vector<std::int32_t> query_lens;
  std::vector<std::int32_t> prefix_lens;
  std::vector<std::int32_t> seq_lens;   ///< final KV length per request (incl. new tokens)
  std::int64_t count = 0;          ///< production call count of the shape (prefill), 0 for decode
  double weight = 0.0;             ///< call weight: prefill representative_weight (0 if absent),
                                   ///< decode suite weight (0 for low_latency)
  std::int64_t useful_flops = -1;  ///< prefill metrics.useful_flops (workload convention), -1 for decode
  std::string stratum;             ///< prefill representative stratum ("" if none)
  // Decode only:
  int q_len_per_req = 0;
  std::int64_t nominal_seq_len = 0;
  std::int64_t length_rng_seed = 0;
  int order = 0;                   ///< position in its file / suite (tie-break of weighted selection)

  std::int64_t total_q() const;          ///< sum of query_lens
  std::int64_t total_kv() const;         ///< sum of seq_lens
  std::int64_t max_seq_len() const;
  std::int64_t total_pages() const;      ///< sum of ceil(seq_len / 128)
  std::int64_t max_pages() const;        ///< max of ceil(seq_len / 128)
  /// The workload FLOPs convention of the prefill README, recomputed from the shape:
  /// 2 * 128 * 128 * sum_i sum_j floor((prefix_i + j) / 128).
  std::int64_t recomputed_useful_flops() const;
};

/// Resolves the msa-workloads directory. `explicit_dir` (may be empty) wins, then the
/// FLASHMSA_DATA_DIR environment variable, then the FLASHMSA_DATA_DIR compile definition.
/// Each candidate may name the msa-workloads directory itself or its parent.
/// Errors: InvalidArgument naming the candidate that was tried when it holds no
/// decode-workloads.json / prefill_benchmark_shapes_v1.json.
Status find_data_dir(const std::string& explicit_dir, std::string* out);

/// Loads the 128 prefill benchmark cases (in file order) from `dir`.
Status load_prefill_benchmark(const std::string& dir, std::vector<WorkloadCase>* out);

/// Looks a prefill case id up in prefill_cases_v1/part-00002.jsonl. *found = false
/// when the id is not in the shard (not an error).
Status find_prefill_manifest_case(const std::string& dir, const std::string& id,
                                  WorkloadCase* out, bool* found);

/// Loads a decode suite: "full", "low_latency" or "smoke" (in suite order), with
/// per-request lengths from decode_seq_lens and the invariants checked.
Status load_decode_suite(const std::string& dir, const std::string& suite,
                         std::vector<WorkloadCase>* out);

/// Loads all cases of a workload (prefill benchmark, decode full, decode low_latency).
Status load_workload(const std::string& dir, Workload w, std::vector<WorkloadCase>* out);

/// Finds a case by id: the prefill benchmark, then the manifest shard, then the decode
/// suites "full" and "low_latency". Error (InvalidArgument naming '--case') for an id
/// found nowhere; the message says where it looked.
Status find_case(const std::string& dir, const std::string& id, WorkloadCase* out);

/// The decode length rule (decode-workloads.json "length_rule"):
///   gen = mt19937(length_rng_seed)   (PyTorch's CPU generator, standard init_genrand)
///   P = B / 2, d_min = max(1, N / 20), d_max = max(d_min, N / 4)
///   delta_i = gen() % (d_max + 1 - d_min) + d_min, i < P        (torch.randint)
///   values  = [N - delta_0..P-1, N + delta_0..P-1] (+ [N] if B is odd)
///   r = [0..B-1]; for i in 0..B-2: z = gen() % (B - i); swap(r[i], r[i + z])  (torch.randperm)
///   seq_lens[k] = values[r[k]]                                   (values[perm])
/// Checked against torch 2.11.0 (torch.Generator().manual_seed, torch.randint,
/// torch.randperm) for B in {1,2,3,4,5,8,32,64,128} x N in {1K..200K}: identical.
/// Errors: B < 1, N < 1, or a violated invariant (sum == B*N, min >= q_len).
Status decode_seq_lens(int batch_size, std::int64_t nominal, std::int64_t length_rng_seed,
                       int q_len_per_req, std::vector<std::int32_t>* out);

/// The `n` cases of highest weight, ties broken by case order (stable). n larger than
/// the number of cases selects all. Error for n < 1 (naming '--cases').
Status select_top_weighted(const std::vector<WorkloadCase>& cases, int n,
                           std::vector<WorkloadCase>* out);

}  // namespace flashmsa::tools

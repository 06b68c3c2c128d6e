// Tests of the workload loader (tools/workloads.h): field parsing of every data file,
// call weights, the decode length rule (exact PyTorch parity), weighted selection and
// error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <unistd.h>
#include <set>
#include <string>
#include <vector>

#include "workloads.h"

namespace ft = flashmsa::tools;

namespace {

std::string data_dir() {
  std::string dir;
  const flashmsa::Status s = ft::find_data_dir("", &dir);
  EXPECT_TRUE(s.ok()) << s.message();
  return dir;
}

}  // namespace

TEST(Workloads, DataDirResolution) {
  std::string dir;
  ASSERT_TRUE(ft::find_data_dir("", &dir).ok());
  EXPECT_NE(dir.find("msa-workloads"), std::string::npos) << dir;
  // The parent directory is accepted too.
  std::string parent = dir.substr(0, dir.rfind("/msa-workloads"));
  std::string again;
  ASSERT_TRUE(ft::find_data_dir(parent, &again).ok());
  EXPECT_EQ(again, parent + "/msa-workloads");
  // A directory without data is a clear error naming the option and the value.
  flashmsa::Status s = ft::find_data_dir("/nonexistent/dir", &again);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--data-dir"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("/nonexistent/dir"), std::string::npos) << s.message();
}

TEST(Workloads, PrefillBenchmarkFields) {
  std::vector<ft::WorkloadCase> cases;
  flashmsa::Status s = ft::load_prefill_benchmark(data_dir(), &cases);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(cases.size(), 128u);
  // First entry of prefill_benchmark_shapes_v1.json.
  const ft::WorkloadCase& c0 = cases[0];
  EXPECT_EQ(c0.id, "prefill_4469427d069d9467c4ec");
  EXPECT_EQ(c0.kind, ft::CaseKind::prefill);
  EXPECT_EQ(c0.batch_size, 1);
  EXPECT_EQ(c0.query_lens, std::vector<std::int32_t>({171}));
  EXPECT_EQ(c0.prefix_lens, std::vector<std::int32_t>({55168}));
  EXPECT_EQ(c0.seq_lens, std::vector<std::int32_t>({55339}));
  EXPECT_EQ(c0.count, 1);
  EXPECT_EQ(c0.weight, 1325.0);
  EXPECT_EQ(c0.useful_flops, 2416443392LL);
  EXPECT_EQ(c0.stratum, "b1/t1_3/k_32_64k");
  EXPECT_EQ(c0.tags, std::vector<std::string>({"representative"}));
  EXPECT_EQ(c0.order, 0);

  double weight_sum = 0;
  int representative = 0;
  std::set<std::string> ids;
  for (const auto& c : cases) {
    weight_sum += c.weight;
    const bool rep = std::find(c.tags.begin(), c.tags.end(), "representative") != c.tags.end();
    representative += rep ? 1 : 0;
    EXPECT_EQ(rep, c.weight > 0) << c.id;  // weight 0 when representative_weight is absent
    ids.insert(c.id);
    ASSERT_EQ(static_cast<int>(c.query_lens.size()), c.batch_size);
    for (int i = 0; i < c.batch_size; ++i) {
      EXPECT_EQ(c.seq_lens[i], c.prefix_lens[i] + c.query_lens[i]);
      EXPECT_EQ(c.prefix_lens[i] % 128, 0) << c.id;
    }
    EXPECT_LE(c.total_q(), 16384);
    // The workload FLOPs convention, recomputed from the shape, matches the file.
    EXPECT_EQ(c.recomputed_useful_flops(), c.useful_flops) << c.id;
  }
  EXPECT_EQ(weight_sum, 14805.0);
  EXPECT_EQ(representative, 66);
  EXPECT_EQ(ids.size(), 128u);
}

TEST(Workloads, PrefillManifestLookup) {
  const std::string dir = data_dir();
  ft::WorkloadCase c;
  bool found = false;
  // First line of part-00002.jsonl (not in the benchmark selection).
  ASSERT_TRUE(ft::find_prefill_manifest_case(dir, "prefill_2241587aa787cf312a60", &c, &found).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(c.batch_size, 3);
  EXPECT_EQ(c.query_lens, std::vector<std::int32_t>({54, 233, 12621}));
  EXPECT_EQ(c.prefix_lens, std::vector<std::int32_t>({101888, 30976, 72576}));
  EXPECT_EQ(c.seq_lens, std::vector<std::int32_t>({101942, 31209, 85197}));
  EXPECT_EQ(c.useful_flops, 257933705216LL);
  EXPECT_EQ(c.recomputed_useful_flops(), c.useful_flops);
  EXPECT_EQ(c.weight, 0.0);
  EXPECT_EQ(c.source, "prefill_manifest");
  EXPECT_EQ(c.order, 0);
  ASSERT_TRUE(ft::find_prefill_manifest_case(dir, "prefill_00000000000000000000", &c, &found).ok());
  EXPECT_FALSE(found);

  // find_case: benchmark first, then the shard, then decode suites.
  ASSERT_TRUE(ft::find_case(dir, "prefill_2241587aa787cf312a60", &c).ok());
  EXPECT_EQ(c.source, "prefill_manifest");
  ASSERT_TRUE(ft::find_case(dir, "prefill_f97f037f8487ee6aa442", &c).ok());
  EXPECT_EQ(c.source, "prefill_benchmark");
  EXPECT_EQ(c.weight, 1418.0);
  ASSERT_TRUE(ft::find_case(dir, "b4_s32000_q8", &c).ok());
  EXPECT_EQ(c.source, "decode_low_latency");
  ASSERT_TRUE(ft::find_case(dir, "b128_s200000_q8", &c).ok());
  EXPECT_EQ(c.source, "decode_full");
}

TEST(Workloads, UnknownCaseIdIsAClearError) {
  const std::string dir = data_dir();
  ft::WorkloadCase c;
  for (const char* id : {"prefill_deadbeefdeadbeefdead", "b3_s1000_q8", "nonsense"}) {
    flashmsa::Status s = ft::find_case(dir, id, &c);
    ASSERT_FALSE(s.ok()) << id;
    EXPECT_NE(s.message().find("--case"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(id), std::string::npos) << s.message();
  }
}

TEST(Workloads, DecodeSuites) {
  const std::string dir = data_dir();
  std::vector<ft::WorkloadCase> full, low, smoke;
  ASSERT_TRUE(ft::load_decode_suite(dir, "full", &full).ok());
  ASSERT_TRUE(ft::load_decode_suite(dir, "low_latency", &low).ok());
  ASSERT_TRUE(ft::load_decode_suite(dir, "smoke", &smoke).ok());
  ASSERT_EQ(full.size(), 28u);
  ASSERT_EQ(low.size(), 12u);
  ASSERT_EQ(smoke.size(), 6u);
  double w = 0;
  for (const auto& c : full) {
    w += c.weight;
    EXPECT_GT(c.weight, 0) << c.id;
  }
  EXPECT_EQ(w, 10000.0);
  for (const auto& c : low) EXPECT_EQ(c.weight, 0.0) << c.id;
  EXPECT_EQ(full[0].id, "b8_s1000_q8");
  EXPECT_EQ(full[0].weight, 30.0);
  EXPECT_EQ(full[0].length_rng_seed, 10773);
  EXPECT_EQ(full[0].q_len_per_req, 8);
  EXPECT_EQ(full[27].id, "b128_s200000_q8");
  EXPECT_EQ(full[27].weight, 28.0);
  EXPECT_EQ(low[0].id, "b1_s1000_q8");
  EXPECT_EQ(low[11].id, "b4_s32000_q8");
  EXPECT_EQ(smoke[1].id, "b128_s1000_q8");
  for (const auto* suite : {&full, &low}) {
    for (const auto& c : *suite) {
      ASSERT_EQ(static_cast<int>(c.seq_lens.size()), c.batch_size);
      EXPECT_EQ(c.total_kv(), c.batch_size * c.nominal_seq_len) << c.id;
      std::int64_t mn = *std::min_element(c.seq_lens.begin(), c.seq_lens.end());
      std::int64_t mx = c.max_seq_len();
      EXPECT_GE(mn, c.q_len_per_req) << c.id;
      EXPECT_GE(mn, c.nominal_seq_len - c.nominal_seq_len / 4) << c.id;
      EXPECT_LE(mx, c.nominal_seq_len + c.nominal_seq_len / 4) << c.id;
      for (int b = 0; b < c.batch_size; ++b) {
        EXPECT_EQ(c.query_lens[b], 8);
        EXPECT_EQ(c.prefix_lens[b] + 8, c.seq_lens[b]);
      }
      EXPECT_EQ(c.useful_flops, -1);
    }
  }
}

// Expected values were produced by PyTorch 2.11.0 (torch.Generator().manual_seed,
// torch.randint, torch.randperm), exactly as the upstream suite generates them.
TEST(Workloads, DecodeLengthRuleMatchesTorch) {
  std::vector<std::int32_t> v;
  ASSERT_TRUE(ft::decode_seq_lens(8, 1000, 1701 + 8 * 1009 + 1000, 8, &v).ok());
  EXPECT_EQ(v, std::vector<std::int32_t>({1234, 766, 1188, 750, 773, 1227, 812, 1250}));
  ASSERT_TRUE(ft::decode_seq_lens(4, 32000, 1701 + 4 * 1009 + 32000, 8, &v).ok());
  EXPECT_EQ(v, std::vector<std::int32_t>({27785, 37800, 36215, 26200}));
  ASSERT_TRUE(ft::decode_seq_lens(2, 4000, 1701 + 2 * 1009 + 4000, 8, &v).ok());
  EXPECT_EQ(v, std::vector<std::int32_t>({4294, 3706}));
  ASSERT_TRUE(ft::decode_seq_lens(1, 8000, 1701 + 1009 + 8000, 8, &v).ok());
  EXPECT_EQ(v, std::vector<std::int32_t>({8000}));
  ASSERT_TRUE(ft::decode_seq_lens(3, 1000, 1701 + 3 * 1009 + 1000, 8, &v).ok());
  EXPECT_EQ(v, std::vector<std::int32_t>({1167, 833, 1000}));
  ASSERT_TRUE(ft::decode_seq_lens(5, 5000, 1701 + 5 * 1009 + 5000, 8, &v).ok());
  EXPECT_EQ(v, std::vector<std::int32_t>({5000, 4531, 6242, 3758, 5469}));
  ASSERT_TRUE(ft::decode_seq_lens(64, 50000, 1701 + 64 * 1009 + 50000, 8, &v).ok());
  EXPECT_EQ(std::vector<std::int32_t>(v.begin(), v.begin() + 6),
            std::vector<std::int32_t>({57542, 45584, 42958, 46084, 43666, 60240}));
  EXPECT_EQ(std::vector<std::int32_t>(v.end() - 3, v.end()),
            std::vector<std::int32_t>({43027, 57034, 53761}));
  ASSERT_TRUE(ft::decode_seq_lens(128, 200000, 1701 + 128 * 1009 + 200000, 8, &v).ok());
  EXPECT_EQ(std::vector<std::int32_t>(v.begin(), v.begin() + 6),
            std::vector<std::int32_t>({164454, 160667, 171796, 182776, 189874, 213369}));
  EXPECT_EQ(std::vector<std::int32_t>(v.end() - 3, v.end()),
            std::vector<std::int32_t>({167172, 234553, 175905}));
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 150272);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 249728);
}

TEST(Workloads, DecodeLengthRuleInvariantsAndDeterminism) {
  for (int b : {1, 2, 3, 7, 8, 33, 128}) {
    for (std::int64_t n : {16, 100, 1000, 77777}) {
      std::vector<std::int32_t> a, c;
      ASSERT_TRUE(ft::decode_seq_lens(b, n, 42 + b + n, 8, &a).ok());
      ASSERT_TRUE(ft::decode_seq_lens(b, n, 42 + b + n, 8, &c).ok());
      EXPECT_EQ(a, c);
      std::int64_t sum = 0;
      for (auto x : a) sum += x;
      EXPECT_EQ(sum, b * n);
      // paired symmetric deltas: sorted values mirror around n
      std::vector<std::int32_t> s = a;
      std::sort(s.begin(), s.end());
      for (std::size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i] + s[s.size() - 1 - i], 2 * n);
    }
  }
  // A different seed gives different lengths.
  std::vector<std::int32_t> a, c;
  ASSERT_TRUE(ft::decode_seq_lens(32, 10000, 1, 8, &a).ok());
  ASSERT_TRUE(ft::decode_seq_lens(32, 10000, 2, 8, &c).ok());
  EXPECT_NE(a, c);
  // Invariant violation (min < q_len) and bad arguments are errors.
  EXPECT_FALSE(ft::decode_seq_lens(8, 9, 5, 8, &a).ok());  // 9 - 2 < 8
  EXPECT_FALSE(ft::decode_seq_lens(0, 1000, 5, 8, &a).ok());
}

TEST(Workloads, WeightedSelection) {
  const std::string dir = data_dir();
  std::vector<ft::WorkloadCase> cases, top;
  ASSERT_TRUE(ft::load_workload(dir, ft::Workload::prefill, &cases).ok());
  ASSERT_TRUE(ft::select_top_weighted(cases, 5, &top).ok());
  ASSERT_EQ(top.size(), 5u);
  for (std::size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].weight, top[i].weight);
  double best = 0;
  for (const auto& c : cases) best = std::max(best, c.weight);
  EXPECT_EQ(top[0].weight, best);
  // More than available selects all, in weight order with ties by case order.
  ASSERT_TRUE(ft::select_top_weighted(cases, 1000, &top).ok());
  ASSERT_EQ(top.size(), 128u);
  for (std::size_t i = 1; i < top.size(); ++i) {
    EXPECT_GE(top[i - 1].weight, top[i].weight);
    if (top[i - 1].weight == top[i].weight) {
      EXPECT_LT(top[i - 1].order, top[i].order);
    }
  }
  // Decode full: the heaviest case is b8_s100000_q8 (1260), then b32_s100000_q8 (980).
  ASSERT_TRUE(ft::load_workload(dir, ft::Workload::decode, &cases).ok());
  ASSERT_TRUE(ft::select_top_weighted(cases, 3, &top).ok());
  EXPECT_EQ(top[0].id, "b8_s100000_q8");
  EXPECT_EQ(top[1].id, "b32_s100000_q8");
  EXPECT_EQ(top[2].id, "b8_s200000_q8");
  // Low latency: all weights 0 -> suite order.
  ASSERT_TRUE(ft::load_workload(dir, ft::Workload::lowlat, &cases).ok());
  ASSERT_TRUE(ft::select_top_weighted(cases, 3, &top).ok());
  EXPECT_EQ(top[0].id, "b1_s1000_q8");
  EXPECT_EQ(top[1].id, "b2_s1000_q8");
  EXPECT_EQ(top[2].id, "b4_s1000_q8");
  flashmsa::Status s = ft::select_top_weighted(cases, 0, &top);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--cases"), std::string::npos);
}

TEST(Workloads, WorkloadNames) {
  ft::Workload w;
  ASSERT_TRUE(ft::parse_workload("prefill", &w));
  EXPECT_EQ(w, ft::Workload::prefill);
  ASSERT_TRUE(ft::parse_workload("lowlat", &w));
  EXPECT_EQ(w, ft::Workload::lowlat);
  ASSERT_TRUE(ft::parse_workload("decode", &w));
  EXPECT_STREQ(ft::workload_name(w), "decode");
  EXPECT_FALSE(ft::parse_workload("mixed", &w));
}

TEST(Workloads, MissingDataFileIsAClearError) {
  // A directory that holds the decode file but no prefill files.
  char tmpl[] = "/tmp/flashmsa_wl_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string src = data_dir() + "/decode-workloads.json";
  ASSERT_EQ(std::system(("cp '" + src + "' '" + dir + "/'").c_str()), 0);
  std::string found;
  ASSERT_TRUE(ft::find_data_dir(dir, &found).ok());
  std::vector<ft::WorkloadCase> cases;
  flashmsa::Status s = ft::load_prefill_benchmark(dir, &cases);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("prefill_benchmark_shapes_v1.json"), std::string::npos) << s.message();
  ft::WorkloadCase c;
  s = ft::find_case(dir, "prefill_2241587aa787cf312a60", &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot open"), std::string::npos) << s.message();
  ASSERT_TRUE(ft::load_decode_suite(dir, "full", &cases).ok());  // the decode file is there
  s = ft::load_decode_suite(dir, "nightly", &cases);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nightly"), std::string::npos);
  // A malformed file names the file.
  ASSERT_EQ(std::system(("echo '{\"cases\": [' > '" + dir + "/prefill_benchmark_shapes_v1.json'").c_str()), 0);
  s = ft::load_prefill_benchmark(dir, &cases);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot parse"), std::string::npos) << s.message();
  (void)std::system(("rm -rf '" + dir + "'").c_str());
}

// nvfp4_to_fp8_selected (spec 5.3, selected pages): deduplication of the (physical page,
// KV head) pairs named by a top-k tensor, the (page, head) order of the compact cache,
// the address tables, bitwise conversion, untouched capacity tail, and validation.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"
#include "nvfp4_selected_case.h"

namespace {

using namespace flashmsa;
using flashmsa::testing::SelectedCase;

// Independent expectation: pairs by brute force over the top-k entries, values element by
// element with nvfp4_to_e4m3.
void check_against_reference(const SelectedCase& c, const std::string& what) {
  const std::int64_t r = c.rows();
  const TensorView tk = c.topk_view();
  auto entry = [&](std::int64_t row, int h, int j) {
    return tk.ptr<const std::int32_t>()[row * tk.stride[0] + h * tk.stride[1] + j * tk.stride[2]];
  };
  auto pair_of = [&](std::int64_t row, int h, int j) -> std::pair<int, int> {
    const int lp = entry(row, h, j);
    if (lp < 0 || lp >= c.width) return {-1, -1};
    const int pp = c.block_table.data<std::int32_t>()[(row / c.rows_per_request) * c.width + lp];
    if (pp < 0 || pp >= c.pages) return {-1, -1};
    return {pp, h};
  };
  std::set<std::pair<int, int>> uniq;
  for (std::int64_t row = 0; row < r; ++row)
    for (int h = 0; h < c.hkv; ++h)
      for (int j = 0; j < c.k; ++j) {
        const auto pr = pair_of(row, h, j);
        if (pr.first >= 0) uniq.insert(pr);
      }
  std::map<std::pair<int, int>, int> index;
  for (const auto& pr : uniq) index.emplace(pr, static_cast<int>(index.size()));
  const int n = static_cast<int>(uniq.size());
  ASSERT_GT(n, 0) << what;
  ASSERT_EQ(c.num_pairs.data<std::int32_t>()[0], n) << what;

  int ci = 0;
  for (const auto& pr : uniq) {
    EXPECT_EQ(c.pairs.data<std::int32_t>()[2 * ci], pr.first) << what << " pair " << ci;
    EXPECT_EQ(c.pairs.data<std::int32_t>()[2 * ci + 1], pr.second) << what << " pair " << ci;
    ++ci;
  }
  for (std::int64_t i = 2 * n; i < 2 * c.capacity(); ++i)
    ASSERT_EQ(static_cast<std::uint32_t>(c.pairs.data<std::int32_t>()[i]), 0xEEEEEEEEu)
        << what << ": pairs tail written";
  for (std::int64_t row = 0; row < r; ++row)
    for (int h = 0; h < c.hkv; ++h)
      for (int j = 0; j < c.k; ++j) {
        const auto pr = pair_of(row, h, j);
        const int want = pr.first >= 0 ? index.at(pr) : -1;
        ASSERT_EQ(c.compact.data<std::int32_t>()[(row * c.hkv + h) * c.k + j], want)
            << what << ": compact_topk[" << row << ", " << h << ", " << j << "]";
      }

  std::int64_t bad = 0;
  for (int side = 0; side < 2; ++side) {
    const PagedCacheSide& s = side == 0 ? c.kv.k : c.kv.v;
    const HostTensor& out = side == 0 ? c.k_out : c.v_out;
    ci = 0;
    for (const auto& pr : uniq) {
      for (int t = 0; t < 128; ++t) {
        const std::uint8_t* data = static_cast<const std::uint8_t*>(s.data.data) +
                                   pr.first * s.data.stride[0] + pr.second * s.data.stride[1] +
                                   t * s.data.stride[2];
        const std::uint8_t* plane = static_cast<const std::uint8_t*>(s.block_scale.data) +
                                    pr.first * s.block_scale.stride[0] +
                                    pr.second * s.block_scale.stride[1];
        for (int d = 0; d < 128; ++d) {
          const int g = d / 16;
          const std::uint8_t sc =
              plane[s.scale_swizzled ? nvfp4_scale_offset(t, g, true)
                                     : t * s.block_scale.stride[2] + g * s.block_scale.stride[3]];
          const std::uint8_t code = (data[d / 2] >> (4 * (d % 2))) & 0xf;
          const std::uint8_t got = out.data<std::uint8_t>()[(static_cast<std::int64_t>(ci) * 128 + t) * 128 + d];
          if (got != nvfp4_to_e4m3(code, sc)) ++bad;
        }
      }
      ++ci;
    }
    for (std::size_t i = static_cast<std::size_t>(n) * 128 * 128; i < out.bytes(); ++i)
      if (out.data<std::uint8_t>()[i] != 0xAB) ++bad;
  }
  EXPECT_EQ(bad, 0) << what << ": converted bytes";
}

TEST(Nvfp4ToFp8Selected, LinearScales) {
  SelectedCase c;
  c.seed = 11;
  c.build();
  const Status s = nvfp4_to_fp8_selected(c.args());
  ASSERT_TRUE(s.ok()) << s.message();
  check_against_reference(c, "linear");
}

TEST(Nvfp4ToFp8Selected, HeadSlotSwizzledHeadMajorTopk) {
  SelectedCase c;
  c.preset_head_slot_head_major();
  c.seed = 12;
  c.build();
  Nvfp4ToFp8SelectedArgs a = c.args();
  a.workspace = TensorView{};  // optional on the CPU
  const Status s = nvfp4_to_fp8_selected(a);
  ASSERT_TRUE(s.ok()) << s.message();
  check_against_reference(c, "head-slot");
}

TEST(Nvfp4ToFp8Selected, CapacityBoundByPagesAndDeterministic) {
  SelectedCase a, b;
  for (SelectedCase* c : {&a, &b}) {
    c->preset_capacity_bound_by_pages();  // capacity = 3 < R * Hkv * K
    c->seed = 13;
    c->build();
  }
  ASSERT_EQ(a.capacity(), 3);
  ASSERT_TRUE(nvfp4_to_fp8_selected(a.args()).ok());
  ASSERT_TRUE(nvfp4_to_fp8_selected(b.args()).ok());
  check_against_reference(a, "3 pages");
  EXPECT_EQ(std::memcmp(a.k_out.view().data, b.k_out.view().data, a.k_out.bytes()), 0);
  EXPECT_EQ(std::memcmp(a.compact.view().data, b.compact.view().data, a.compact.bytes()), 0);
}

TEST(Nvfp4ToFp8Selected, AllEntriesSkipped) {
  SelectedCase c;
  c.seed = 14;
  c.build();
  for (std::int64_t i = 0; i < c.topk.numel(); ++i) c.topk.data<std::int32_t>()[i] = -1;
  ASSERT_TRUE(nvfp4_to_fp8_selected(c.args()).ok());
  EXPECT_EQ(c.num_pairs.data<std::int32_t>()[0], 0);
  for (std::int64_t i = 0; i < c.compact.numel(); ++i) ASSERT_EQ(c.compact.data<std::int32_t>()[i], -1);
  for (std::size_t i = 0; i < c.k_out.bytes(); ++i) ASSERT_EQ(c.k_out.data<std::uint8_t>()[i], 0xAB);
}

void expect_invalid(const Status& st, const std::string& arg, const char* also = nullptr) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("'" + arg + "'"), std::string::npos)
      << "message should name '" << arg << "': " << st.message();
  if (also) EXPECT_NE(st.message().find(also), std::string::npos) << st.message();
}

TEST(Nvfp4ToFp8SelectedRejects, Rules) {
  SelectedCase c;
  c.build();
  const Nvfp4ToFp8SelectedArgs ok = c.args();
  const std::int64_t cap = c.capacity();
  struct Bad {
    std::function<void(Nvfp4ToFp8SelectedArgs&)> mutate;
    const char* arg;
    const char* also;
  };
  const Bad bad[] = {
      {[](Nvfp4ToFp8SelectedArgs& a) { a.kv.format = KvFormat::fp8; }, "kv.format", "nvfp4"},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.topk = TensorView{}; }, "topk", "null"},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.topk.dtype = DType::u8; }, "topk", "dtype"},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.topk.shape[1] = 1; }, "topk", nullptr},  // Hkv
      {[](Nvfp4ToFp8SelectedArgs& a) { a.topk.shape[2] = 17; }, "topk", "1..16"},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.rows_per_request = 0; }, "rows_per_request", nullptr},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.rows_per_request = 3; }, "block_table", "rows_per_request"},
      {[cap](Nvfp4ToFp8SelectedArgs& a) { a.k_out.shape[0] = cap - 1; }, "k_out", "capacity"},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.v_out.dtype = DType::u8; }, "v_out", "dtype"},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.pairs.shape[1] = 3; }, "pairs", nullptr},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.compact_topk.shape[2] = 3; }, "compact_topk", nullptr},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.num_pairs.shape[0] = 2; }, "num_pairs", nullptr},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.workspace.shape[0] = 5; }, "workspace", nullptr},
      {[](Nvfp4ToFp8SelectedArgs& a) { a.num_pairs.device = Device::cuda; }, "num_pairs",
       "memory on cuda"},
  };
  for (const Bad& b : bad) {
    Nvfp4ToFp8SelectedArgs a = ok;
    b.mutate(a);
    expect_invalid(nvfp4_to_fp8_selected(a), b.arg, b.also);
  }
  // Nothing was written by the rejected calls.
  EXPECT_EQ(static_cast<std::uint32_t>(c.num_pairs.data<std::int32_t>()[0]), 0xEEEEEEEEu);
  EXPECT_TRUE(nvfp4_to_fp8_selected(ok).ok());
}

}  // namespace

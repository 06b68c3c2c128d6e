// GPU nvfp4_to_fp8_selected vs the CPU backend (spec 5.3): every output byte identical
// (compact caches, pairs, compact_topk, num_pairs, and the untouched capacity tail), for
// linear and head-slot (swizzled) caches, token- and head-major top-k, a capacity bound
// by the pages, all-skipped input, a run captured in a CUDA graph, and repeated calls
// (the workspace is reset on the device). Skipped without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "cuda_test_util.h"
#include "flashmsa/cache.h"
#include "nvfp4_selected_case.h"

namespace {

using namespace flashmsa;
using flashmsa::testing::SelectedCase;

struct DeviceSelected {
  flashmsa::cudatest::DeviceMirror m;
  Nvfp4ToFp8SelectedArgs args;

  explicit DeviceSelected(SelectedCase& c) {
    args = c.args();
    m.mirror({&c.kv_buf, &c.k_data, &c.v_data, &c.k_scale, &c.v_scale, &c.topk, &c.block_table,
              &c.k_out, &c.v_out, &c.pairs, &c.compact, &c.num_pairs, &c.workspace},
             {&args.kv.k.data, &args.kv.v.data, &args.kv.k.block_scale, &args.kv.v.block_scale,
              &args.topk, &args.block_table, &args.k_out, &args.v_out, &args.pairs,
              &args.compact_topk, &args.num_pairs, &args.workspace});
  }
};

void expect_same(const HostTensor& gpu, const HostTensor& cpu, const std::string& what) {
  std::int64_t bad = 0, first = -1;
  for (std::size_t i = 0; i < cpu.bytes(); ++i)
    if (gpu.data<std::uint8_t>()[i] != cpu.data<std::uint8_t>()[i]) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++bad;
    }
  EXPECT_EQ(bad, 0) << what << ": first differing byte " << first;
}

// `cfg` sets the fields of a SelectedCase before build().
template <class Cfg>
void run(const Cfg& cfg, const std::string& what, bool all_skipped = false, bool graph = false) {
  SelectedCase cpu, gpu;
  for (SelectedCase* c : {&cpu, &gpu}) {
    cfg(*c);
    c->build();
  }
  if (all_skipped)
    for (SelectedCase* c : {&cpu, &gpu})
      for (std::int64_t i = 0; i < c->topk.numel(); ++i) c->topk.data<std::int32_t>()[i] = -1;
  Status s = nvfp4_to_fp8_selected(cpu.args());
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  DeviceSelected d(gpu);
  if (graph) {
    cudaStream_t st;
    ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
    d.args.stream = st;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal), cudaSuccess);
    s = nvfp4_to_fp8_selected(d.args);
    ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
    ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
    for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaGraphLaunch(ge, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(st);
  } else {
    for (int i = 0; i < 2; ++i) {  // twice: the workspace must be reset by the call
      s = nvfp4_to_fp8_selected(d.args);
      ASSERT_TRUE(s.ok()) << what << ": " << s.message();
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  }
  d.m.download_all();
  expect_same(gpu.num_pairs, cpu.num_pairs, what + ": num_pairs");
  expect_same(gpu.pairs, cpu.pairs, what + ": pairs");
  expect_same(gpu.compact, cpu.compact, what + ": compact_topk");
  expect_same(gpu.k_out, cpu.k_out, what + ": k_out");
  expect_same(gpu.v_out, cpu.v_out, what + ": v_out");
}

TEST(CudaNvfp4ToFp8Selected, MatchesCpu) {
  REQUIRE_GPU();
  run([](SelectedCase& c) { c.seed = 21; }, "linear 2 heads");
  run([](SelectedCase& c) { c.preset_head_slot_head_major(), c.seed = 22; },
      "head-slot swizzled K, head-major top-k");
  run([](SelectedCase& c) { c.preset_many_heads(), c.seed = 23; }, "8 heads, 300 pages, 32 rows");
  run([](SelectedCase& c) { c.preset_capacity_bound_by_pages(), c.seed = 24; },
      "capacity bound by pages");
}

TEST(CudaNvfp4ToFp8Selected, AllSkippedAndGraphCapture) {
  REQUIRE_GPU();
  run([](SelectedCase& c) { c.seed = 25; }, "all skipped", true);
  run(
      [](SelectedCase& c) {
        c.head_slot = true;
        c.k_swizzled = c.v_swizzled = true;
        c.seed = 26;
      },
      "graph capture", false, true);
}

TEST(CudaNvfp4ToFp8Selected, WorkspaceRequiredOnGpu) {
  REQUIRE_GPU();
  SelectedCase c;
  c.build();
  DeviceSelected d(c);
  Nvfp4ToFp8SelectedArgs a = d.args;
  a.workspace = TensorView{};
  const Status s = nvfp4_to_fp8_selected(a);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("'workspace'"), std::string::npos) << s.message();
}

}  // namespace

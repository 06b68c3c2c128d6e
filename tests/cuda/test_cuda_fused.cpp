// GPU fused_qknorm_rope_insert vs the CPU backend (issue 6): q / index q / K / index K
// within atol = rtol = 1e-2, and, because both backends evaluate the same FP32 operation
// sequence (flashmsa/fused.h), every output and cache byte identical (V bytes exact by
// construction). Skipped without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "flashmsa/flashmsa.h"
#include "flashmsa/fused.h"
#include "fused_case.h"

namespace {

using namespace flashmsa;
using flashmsa::testing::FusedCase;

// Device copies of every buffer of a FusedCase and the arguments rebased onto them.
struct DeviceCase {
  flashmsa::cudatest::DeviceMirror m;
  FusedQkvInsertArgs args;

  explicit DeviceCase(FusedCase& c) {
    args = c.args();
    m.mirror({&c.qkv, &c.wq, &c.wk, &c.wiq, &c.wik, &c.cos_sin, &c.positions, &c.slots, &c.islots,
              &c.kv_buf, &c.k_data4, &c.v_data4, &c.k_scale4, &c.v_scale4, &c.index_buf,
              &c.index_scale, &c.q_out, &c.iq_out},
             {&args.qkv, &args.q_norm_weight, &args.k_norm_weight, &args.index_q_norm_weight,
              &args.index_k_norm_weight, &args.cos_sin_cache, &args.positions, &args.slot_mapping,
              &args.index_slot_mapping, &args.kv.k.data, &args.kv.v.data, &args.kv.k.block_scale,
              &args.kv.v.block_scale, &args.index_k.data, &args.index_k.block_scale, &args.q_out,
              &args.index_q_out});
  }
};

std::int64_t count_diff(const HostTensor& a, const HostTensor& b, std::int64_t* first) {
  const auto* x = a.data<std::uint8_t>();
  const auto* y = b.data<std::uint8_t>();
  std::int64_t n = 0;
  *first = -1;
  for (std::size_t i = 0; i < a.bytes(); ++i)
    if (x[i] != y[i]) {
      if (*first < 0) *first = static_cast<std::int64_t>(i);
      ++n;
    }
  return n;
}

// Element-wise atol = rtol = 1e-2 on a bf16 tensor (e4m3 tensors: decoded, same bound
// plus one E4M3 step, 2^-3 relative). Other dtypes (nvfp4 u8 buffers): bytes only.
std::int64_t count_far(const HostTensor& gpu, const HostTensor& cpu) {
  std::int64_t bad = 0;
  if (!gpu.view().defined()) return 0;
  if (gpu.view().dtype != DType::bf16 && gpu.view().dtype != DType::e4m3) return 0;
  const bool e4 = gpu.view().dtype == DType::e4m3;
  const std::int64_t n = static_cast<std::int64_t>(gpu.bytes() / dtype_size(gpu.view().dtype));
  for (std::int64_t i = 0; i < n; ++i) {
    double a, b;
    if (e4) {
      a = e4m3_to_float(gpu.data<std::uint8_t>()[i]);
      b = e4m3_to_float(cpu.data<std::uint8_t>()[i]);
    } else {
      a = bf16_to_float(gpu.data<std::uint16_t>()[i]);
      b = bf16_to_float(cpu.data<std::uint16_t>()[i]);
    }
    if (std::isnan(a) && std::isnan(b)) continue;  // untouched poison
    const double tol = 1e-2 + (e4 ? 0.13 : 1e-2) * std::fabs(b);
    if (!(std::fabs(a - b) <= tol)) ++bad;
  }
  return bad;
}

using Combo = flashmsa::testing::FusedCombo;

// Byte comparison of an optional buffer pair (nvfp4 linear planes).
void expect_same_bytes(const HostTensor& gpu, const HostTensor& cpu, const std::string& what) {
  if (!cpu.view().defined()) return;
  std::int64_t first = 0;
  EXPECT_EQ(count_diff(gpu, cpu, &first), 0) << what << " bytes, first " << first;
}

void run_combo(const Combo& k, int n) {
  const std::string what = "combo " + std::to_string(n) + " (" + std::to_string(k.hq) + "/" +
                           std::to_string(k.hkv) + ", T " + std::to_string(k.t) + ", kv " +
                           kv_format_name(k.kv) + ", index " + kv_format_name(k.idx) + ", q " +
                           dtype_name(k.q) + ", iq " + dtype_name(k.iq) + (k.nhd ? ", NHD" : "") +
                           (k.head_slot ? ", head-slot" : "") + (k.k_swz ? ", K swizzled" : "") +
                           (k.v_swz ? ", V swizzled" : "") + ")";
  auto make = [&](FusedCase& c) {
    k.configure(c, 1000 + n);
    // Unique slots: enough pages for every token (FusedCase's default 3 pages would map
    // T > 384 tokens onto repeated slots, whose GPU bytes are unspecified, flashmsa/fused.h).
    c.pages = c.index_pages = std::max(3, (k.t + 127) / 128 + 1);
    c.build();
    c.ik.global_scale = k.idx == KvFormat::nvfp4 ? 0.25f : 1.0f;
  };
  FusedCase cpu, gpu;
  make(cpu);
  make(gpu);
  Status s = fused_qknorm_rope_insert(cpu.args());
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  DeviceCase d(gpu);
  s = fused_qknorm_rope_insert(d.args);
  ASSERT_TRUE(s.ok()) << what << ": " << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  d.m.download_all();
  expect_same_bytes(gpu.k_data4, cpu.k_data4, what + ": nvfp4 K data");
  expect_same_bytes(gpu.v_data4, cpu.v_data4, what + ": nvfp4 V data");
  expect_same_bytes(gpu.k_scale4, cpu.k_scale4, what + ": nvfp4 K scales");
  expect_same_bytes(gpu.v_scale4, cpu.v_scale4, what + ": nvfp4 V scales");
  expect_same_bytes(gpu.index_scale, cpu.index_scale, what + ": nvfp4 index-K scales");

  EXPECT_EQ(count_far(gpu.q_out, cpu.q_out), 0) << what << ": q_out";
  EXPECT_EQ(count_far(gpu.iq_out, cpu.iq_out), 0) << what << ": index_q_out";
  EXPECT_EQ(count_far(gpu.index_buf, cpu.index_buf), 0) << what << ": index K cache";
  EXPECT_EQ(count_far(gpu.kv_buf, cpu.kv_buf), 0) << what << ": K/V cache";
  std::int64_t first = 0;
  expect_same_bytes(gpu.kv_buf, cpu.kv_buf, what + ": K/V cache");
  EXPECT_EQ(count_diff(gpu.index_buf, cpu.index_buf, &first), 0)
      << what << ": index K cache bytes, first " << first;
  EXPECT_EQ(count_diff(gpu.q_out, cpu.q_out, &first), 0) << what << ": q_out bytes, first " << first;
  EXPECT_EQ(count_diff(gpu.iq_out, cpu.iq_out, &first), 0)
      << what << ": index_q_out bytes, first " << first;
}

TEST(CudaFused, MatchesCpuBackend) {
  REQUIRE_GPU();
  const Combo combos[] = {
      {64, 4, 300, KvFormat::bf16, KvFormat::bf16, DType::bf16, DType::bf16, false},
      {64, 4, 257, KvFormat::fp8, KvFormat::fp8, DType::e4m3, DType::e4m3, true},
      {16, 1, 77, KvFormat::fp8, KvFormat::bf16, DType::bf16, DType::e4m3, false},
      {16, 1, 1, KvFormat::bf16, KvFormat::fp8, DType::e4m3, DType::bf16, true},
      {8, 8, 33, KvFormat::bf16, KvFormat::bf16, DType::bf16, DType::bf16, true},
      {32, 2, 129, KvFormat::fp8, KvFormat::fp8, DType::bf16, DType::bf16, false},
      {64, 4, 4096, KvFormat::fp8, KvFormat::bf16, DType::e4m3, DType::e4m3, false},
      // NVFP4 K/V (linear planes, head-slot with and without swizzle) and index K.
      {64, 4, 300, KvFormat::nvfp4, KvFormat::nvfp4, DType::bf16, DType::bf16, false},
      {16, 1, 77, KvFormat::nvfp4, KvFormat::fp8, DType::e4m3, DType::e4m3, false, true, true, true},
      {32, 2, 129, KvFormat::nvfp4, KvFormat::bf16, DType::e4m3, DType::bf16, false, true, false, false},
      {8, 8, 33, KvFormat::nvfp4, KvFormat::nvfp4, DType::bf16, DType::e4m3, false, true, true, false},
      {16, 1, 1, KvFormat::bf16, KvFormat::nvfp4, DType::e4m3, DType::bf16, true},
      {64, 4, 2049, KvFormat::nvfp4, KvFormat::nvfp4, DType::e4m3, DType::e4m3, false, true, false, true},
  };
  int n = 0;
  for (const Combo& k : combos) run_combo(k, n++);
}

// Duplicate slots (T = 1000 tokens over 3 pages: every slot 2-3 times): the GPU bytes of
// those rows are unspecified (flashmsa/fused.h), so only q_out, index_q_out and the
// K/V rows of slots used exactly once are compared with the CPU (which, sequentially,
// leaves the last token's bytes). Pins that repeated slots disturb no other row.
TEST(CudaFused, DuplicateSlotsLeaveOtherRowsExact) {
  REQUIRE_GPU();
  auto make = [](FusedCase& c) {
    c.hq = 64;
    c.hkv = 4;
    c.t = 1000;
    c.kv_fmt = KvFormat::fp8;
    c.idx_fmt = KvFormat::fp8;
    c.q_dtype = DType::e4m3;
    c.iq_dtype = DType::e4m3;
    c.q_scale = 0.05f;
    c.k_scale = 0.03f;
    c.v_scale = 0.7f;
    c.seed = 77;
    c.build();
  };
  FusedCase cpu, gpu;
  make(cpu);
  make(gpu);
  ASSERT_TRUE(fused_qknorm_rope_insert(cpu.args()).ok());
  DeviceCase d(gpu);
  ASSERT_TRUE(fused_qknorm_rope_insert(d.args).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  d.m.download_all();
  std::int64_t first = 0;
  EXPECT_EQ(count_diff(gpu.q_out, cpu.q_out, &first), 0) << "q_out, first " << first;
  EXPECT_EQ(count_diff(gpu.iq_out, cpu.iq_out, &first), 0) << "index_q_out, first " << first;
  std::vector<int> uses(static_cast<std::size_t>(cpu.pages) * 128, 0);
  for (int i = 0; i < cpu.t; ++i) {
    const std::int32_t s = cpu.slots.data<std::int32_t>()[i];
    if (s >= 0) ++uses[static_cast<std::size_t>(s)];
  }
  int rows = 0, bad = 0;
  const auto* g = gpu.kv_buf.data<std::uint8_t>();
  const auto* c = cpu.kv_buf.data<std::uint8_t>();
  for (int s = 0; s < cpu.pages * 128; ++s) {
    if (uses[static_cast<std::size_t>(s)] != 1) continue;
    for (int h = 0; h < cpu.hkv; ++h, ++rows) {  // packed [pages, Hkv, 128, 256] e4m3
      const std::size_t off = ((static_cast<std::size_t>(s / 128) * cpu.hkv + h) * 128 + s % 128) * 256;
      if (std::memcmp(g + off, c + off, 256) != 0) ++bad;
    }
  }
  EXPECT_GT(rows, 0);
  EXPECT_EQ(bad, 0) << "of " << rows << " K/V rows of unique slots";
}

TEST(CudaFused, ZeroTokens) {
  REQUIRE_GPU();
  FusedCase c;
  c.t = 0;
  c.build();
  DeviceCase d(c);
  EXPECT_TRUE(fused_qknorm_rope_insert(d.args).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CudaFused, MixedDevicesAreRejected) {
  REQUIRE_GPU();
  FusedCase c;
  c.t = 5;
  c.build();
  DeviceCase d(c);
  FusedQkvInsertArgs a = d.args;
  a.positions = c.positions.view();  // host
  const Status s = fused_qknorm_rope_insert(a);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("argument 'positions'"), std::string::npos) << s.message();
}

}  // namespace

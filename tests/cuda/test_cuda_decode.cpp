// GPU sparse decode attention (SparseDecodePlan on Device::cuda) against the CPU backend,
// with the tolerance policy of spec D8. Outputs are poisoned (0xFF = NaN) before every
// run. Skips when no CUDA device is present (CI); run on the H200 with
//   build/test_cuda_decode
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"
#include "cuda/cuda_test_util.h"
#include "cuda/sm90/decode_attention.h"
#include "test_util.h"

namespace flashmsa {
namespace {

using testing::Rng;
using namespace cudatest;

struct Case {
  int batch = 2, q_per_req = 1, hq = 64, hkv = 4;
  KvFormat format = KvFormat::bf16;
  bool v_swizzled = false;
  std::vector<std::int32_t> seq_lens;  // size batch
  int pages_per_req = 0;               // capacity; 0 = derived
  bool messy_topk = false;             // -1, duplicates, out-of-range entries
  int topk = kMaxTopk;                 // top-k width K (columns of topk_indices)
  std::uint64_t seed = 1;
};

/// All host inputs of one case.
struct Inputs {
  HostTensor q, k, v, k_scale, v_scale, topk, block_table, seq_lens;
  float q_scale = 1.0f, k_global = 1.0f, v_global = 1.0f;
  int num_pages = 0, pages_per_req = 0;
};

void make_topk(const Case& c, Inputs& in, Rng& rng) {
  const int rows = c.batch * c.q_per_req;
  const int K = c.topk;
  in.topk.reset(DType::i32, {rows, c.hkv, K});
  auto* t = in.topk.data<std::int32_t>();
  for (int row = 0; row < rows; ++row) {
    const int b = row / c.q_per_req;
    const long pos = static_cast<long>(in.seq_lens.data<std::int32_t>()[b]) - c.q_per_req + row % c.q_per_req;
    for (int g = 0; g < c.hkv; ++g) {
      std::int32_t* e = t + (row * c.hkv + g) * K;
      for (int k = 0; k < K; ++k) e[k] = -1;
      if (pos < 0) continue;
      const int local = static_cast<int>(pos / kPageSize);
      std::vector<std::int32_t> hist(static_cast<std::size_t>(local));
      for (int i = 0; i < local; ++i) hist[static_cast<std::size_t>(i)] = i;
      std::shuffle(hist.begin(), hist.end(), rng);
      const int n_hist = std::min(local, K - 1);
      for (int k = 0; k < n_hist; ++k) e[k] = hist[static_cast<std::size_t>(k)];
      e[n_hist] = local;
      if (c.messy_topk) {
        // D1: these must all be ignored / counted once.
        if (n_hist + 1 < K) e[n_hist + 1] = local + 1;             // beyond the local page
        if (n_hist >= 2) e[1] = e[0];                              // duplicate
        if (n_hist >= 3) e[2] = -7;                                // negative
        if (n_hist >= 4) e[3] = 1 << 20;                           // far out of range
      }
    }
  }
}

Inputs make_inputs(const Case& c) {
  Rng rng(c.seed);
  Inputs in;
  in.seq_lens.reset(DType::i32, {c.batch});
  int max_pages = 1;
  for (int b = 0; b < c.batch; ++b) {
    in.seq_lens.data<std::int32_t>()[b] = c.seq_lens[static_cast<std::size_t>(b)];
    max_pages = std::max(max_pages, (c.seq_lens[static_cast<std::size_t>(b)] + kPageSize - 1) / kPageSize);
  }
  in.pages_per_req = c.pages_per_req > 0 ? c.pages_per_req : max_pages;
  in.num_pages = c.batch * in.pages_per_req + 2;
  // Block table: a random permutation of the physical pages.
  std::vector<std::int32_t> perm = testing::random_permutation(in.num_pages, rng);
  in.block_table.reset(DType::i32, {c.batch, in.pages_per_req});
  for (int i = 0; i < c.batch * in.pages_per_req; ++i) in.block_table.data<std::int32_t>()[i] = perm[static_cast<std::size_t>(i)];

  const int rows = c.batch * c.q_per_req;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (c.format == KvFormat::bf16) {
    in.q.reset(DType::bf16, {rows, c.hq, kHeadDim});
    testing::fill_bf16_normal(in.q, rng);
    in.k.reset(DType::bf16, {in.num_pages, c.hkv, kPageSize, kHeadDim});
    in.v.reset(DType::bf16, {in.num_pages, c.hkv, kPageSize, kHeadDim});
    fill_bf16_uniform(in.k, rng());
    fill_bf16_uniform(in.v, rng());
  } else {
    in.q.reset(DType::e4m3, {rows, c.hq, kHeadDim});
    in.q_scale = 1.0f / 16.0f;
    for (std::int64_t i = 0; i < in.q.numel(); ++i)
      in.q.data<std::uint8_t>()[i] = float_to_e4m3_sat(normal(rng) / in.q_scale);
    if (c.format == KvFormat::fp8) {
      in.k_global = 1.0f / 32.0f;
      in.v_global = 1.0f / 64.0f;
      in.k.reset(DType::e4m3, {in.num_pages, c.hkv, kPageSize, kHeadDim});
      in.v.reset(DType::e4m3, {in.num_pages, c.hkv, kPageSize, kHeadDim});
      std::uint64_t s = rng() | 1;
      auto uniform = [&s]() {  // [-2, 2), 64-bit LCG
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<float>(static_cast<std::int32_t>(s >> 32)) * (2.0f / 2147483648.0f);
      };
      for (std::int64_t i = 0; i < in.k.numel(); ++i) {
        in.k.data<std::uint8_t>()[i] = float_to_e4m3_sat(uniform() / in.k_global);
        in.v.data<std::uint8_t>()[i] = float_to_e4m3_sat(uniform() / in.v_global);
      }
    } else {
      in.k_global = 0.25f;
      in.v_global = 0.5f;
      in.k.reset(DType::u8, {in.num_pages, c.hkv, kPageSize, 64});
      in.v.reset(DType::u8, {in.num_pages, c.hkv, kPageSize, 64});
      in.k_scale.reset(DType::u8, {in.num_pages, c.hkv, kPageSize, 8});
      in.v_scale.reset(DType::u8, {in.num_pages, c.hkv, kPageSize, 8});
      std::uniform_int_distribution<int> byte(0, 255), scale(0x28, 0x40);
      for (std::int64_t i = 0; i < in.k.numel(); ++i) {
        in.k.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(byte(rng));
        in.v.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(byte(rng));
      }
      for (std::int64_t i = 0; i < in.k_scale.numel(); ++i) {
        in.k_scale.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(scale(rng));
        in.v_scale.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(scale(rng));
      }
    }
  }
  make_topk(c, in, rng);
  return in;
}

PagedKvCache cache_of(const Case& c, const Inputs& in, const TensorView& k, const TensorView& v,
                      const TensorView& ks, const TensorView& vs) {
  PagedKvCache kv;
  kv.format = c.format;
  kv.k.data = k;
  kv.v.data = v;
  kv.k.global_scale = in.k_global;
  kv.v.global_scale = in.v_global;
  if (c.format == KvFormat::nvfp4) {
    kv.k.block_scale = ks;
    kv.v.block_scale = vs;
    kv.v.scale_swizzled = c.v_swizzled;
  }
  return kv;
}

DecodePlanArgs plan_args(const Case& c, const Inputs& in, Device device) {
  DecodePlanArgs a;
  a.batch_size = c.batch;
  a.queries_per_request = c.q_per_req;
  a.num_q_heads = c.hq;
  a.num_kv_heads = c.hkv;
  a.max_pages_per_request = in.pages_per_req;
  a.topk = c.topk;
  a.kv_format = c.format;
  a.q_dtype = c.format == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
  a.device = device;
  return a;
}

Result run_cpu(const Case& c, const Inputs& in) {
  Result r;
  const int rows = c.batch * c.q_per_req;
  r.out.reset(DType::bf16, {rows, c.hq, kHeadDim});
  r.lse.reset(DType::f32, {rows, c.hq});
  SparseDecodePlan plan;
  Status s = plan.plan(plan_args(c, in, Device::cpu));
  EXPECT_TRUE(s.ok()) << s.message();
  DecodeRunArgs a;
  a.q = in.q.view();
  a.kv = cache_of(c, in, in.k.view(), in.v.view(), in.k_scale.view(), in.v_scale.view());
  a.topk_indices = in.topk.view();
  a.block_table = in.block_table.view();
  a.seq_lens = in.seq_lens.view();
  a.q_scale = in.q_scale;
  a.out = r.out.view();
  a.lse = r.lse.view();
  s = plan.run(a);
  EXPECT_TRUE(s.ok()) << s.message();
  return r;
}

/// Device copies of every input of a case.
struct DeviceInputs {
  explicit DeviceInputs(const Inputs& in)
      : q(in.q), k(in.k), v(in.v), ks(in.k_scale), vs(in.v_scale), topk(in.topk),
        block_table(in.block_table), seq_lens(in.seq_lens) {}
  DeviceTensor q, k, v, ks, vs, topk, block_table, seq_lens;
};

DecodeRunArgs device_run_args(const Case& c, const Inputs& in, const DeviceInputs& d,
                              DeviceTensor& out, DeviceTensor& lse) {
  DecodeRunArgs a;
  a.q = d.q.view();
  a.kv = cache_of(c, in, d.k.view(), d.v.view(), d.ks.view(), d.vs.view());
  if (c.format != KvFormat::nvfp4) a.kv.k.block_scale = a.kv.v.block_scale = TensorView{};
  a.topk_indices = d.topk.view();
  a.block_table = d.block_table.view();
  a.seq_lens = d.seq_lens.view();
  a.q_scale = in.q_scale;
  a.out = out.view();
  a.lse = lse.view();
  return a;
}

/// One planned GPU run on poisoned outputs; `edit` may change the run arguments first.
Result run_gpu(const Case& c, const Inputs& in, const std::function<void(DecodeRunArgs&)>& edit = nullptr) {
  Result r;
  const int rows = c.batch * c.q_per_req;
  r.out.reset(DType::bf16, {rows, c.hq, kHeadDim});
  r.lse.reset(DType::f32, {rows, c.hq});
  DeviceInputs d(in);
  DeviceTensor out(r.out), lse(r.lse);
  out.poison();
  lse.poison();
  SparseDecodePlan plan;
  Status s = plan.plan(plan_args(c, in, Device::cuda));
  EXPECT_TRUE(s.ok()) << s.message();
  DecodeRunArgs a = device_run_args(c, in, d, out, lse);
  if (edit) edit(a);
  s = plan.run(a);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.download(r.out);
  lse.download(r.lse);
  return r;
}

std::string name_of(const Case& c) {
  return std::string(kv_format_name(c.format)) + (c.v_swizzled ? "(swizzled V)" : "") + " B=" +
         std::to_string(c.batch) + " Q=" + std::to_string(c.q_per_req) + " heads " +
         std::to_string(c.hq) + "/" + std::to_string(c.hkv);
}

/// Sets an environment variable for its scope and restores the previous value on exit.
/// The decode plan reads FLASHMSA_DECODE_KERNEL (kernel choice) and FLASHMSA_DECODE_MERGE
/// (combine kernel instead of the cluster merge) at every plan().
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* prev = std::getenv(name);
    had_ = prev != nullptr;
    if (had_) prev_ = prev;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, prev_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string prev_;
};
/// Forces the decode kernel ("tile", "tile_serial", "warp_mma" or "warp_mma_dsplit") of the plans made in its scope.
struct ScopedDecodeKernel : ScopedEnv {
  explicit ScopedDecodeKernel(const char* kernel) : ScopedEnv("FLASHMSA_DECODE_KERNEL", kernel) {}
};
/// Every decode kernel: every correctness shape runs on each.
const char* const kKernels[] = {"tile", "tile_serial", "warp_mma", "warp_mma_dsplit"};

void check_case(const Case& c) {
  const Inputs in = make_inputs(c);
  const Result cpu = run_cpu(c, in);
  for (const char* kernel : kKernels) {
    ScopedDecodeKernel force(kernel);
    const Result gpu = run_gpu(c, in);
    expect_close(gpu, cpu, c.format != KvFormat::bf16, name_of(c) + " kernel " + kernel);
  }
}

const std::vector<std::int32_t> kMixedLens = {0, 1, 127, 128, 129, 1000, 2048, 4100, 9000};

TEST(CudaDecode, FormatsAndHeadSplits) {
  REQUIRE_GPU();
  const int heads[][2] = {{64, 4}, {32, 2}, {16, 1}, {8, 1}, {8, 8}, {8, 4}, {16, 4}};  // G 16, 8, 1, 2, 4
  std::uint64_t seed = 11;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    for (auto& h : heads) {
      for (int q : {1, 8}) {
        Case c;
        c.format = f;
        c.hq = h[0];
        c.hkv = h[1];
        c.q_per_req = q;
        c.batch = static_cast<int>(kMixedLens.size());
        c.seq_lens = kMixedLens;
        c.seed = seed++;
        for (auto& s : c.seq_lens) s = std::max<std::int32_t>(s, s == 0 ? 0 : q);
        check_case(c);
      }
    }
  }
}

TEST(CudaDecode, SingleSplitLargeBatch) {
  REQUIRE_GPU();
  // 40 requests x 4 KV heads fill the 132 SMs: plan() picks one split, so the kernel's
  // own epilogue (not the combine kernel) writes the outputs.
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
    Case c;
    c.format = f;
    c.batch = 40;
    c.q_per_req = 2;
    c.seed = 900;
    for (int b = 0; b < c.batch; ++b) c.seq_lens.push_back(200 + 123 * b);
    const Inputs in = make_inputs(c);
    SparseDecodePlan plan;
    ASSERT_TRUE(plan.plan(plan_args(c, in, Device::cuda)).ok());
    EXPECT_EQ(plan.num_splits(), 1);
    expect_close(run_gpu(c, in), run_cpu(c, in), f != KvFormat::bf16, name_of(c));
  }
}

// Late page copies: the K/V caches (and the NVFP4 block scales) in host memory, so a
// kernel that reads a stage before its copy completed (a wrong cp.async group count or
// barrier) reads stale bytes. 12 requests x 4 KV heads take 2 splits on 132 SMs, each
// with up to half of a request's 16-47 pages, so the pipelines run past their prologue.
// Every format and kernel.
TEST(CudaDecode, PageCopiesLandingLate) {
  REQUIRE_GPU();
  std::uint64_t seed = 950;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Case c;
    c.format = f;
    c.batch = 12;
    c.q_per_req = 8;
    c.seed = seed++;
    for (int b = 0; b < c.batch; ++b) c.seq_lens.push_back(2048 + 331 * b);
    const Inputs in = make_inputs(c);
    const Result cpu = run_cpu(c, in);
    const HostMappedTensor hk(in.k), hv(in.v), hks(in.k_scale), hvs(in.v_scale);
    for (const char* kernel : kKernels) {
      ScopedDecodeKernel force(kernel);
      const Result r = run_gpu(c, in, [&](DecodeRunArgs& a) {
        a.kv = cache_of(c, in, hk.view(), hv.view(), hks.view(), hvs.view());
        if (c.format != KvFormat::nvfp4) a.kv.k.block_scale = a.kv.v.block_scale = TensorView{};
      });
      expect_close(r, cpu, f != KvFormat::bf16, name_of(c) + " (caches in host memory), kernel " + kernel);
    }
  }
}

TEST(CudaDecode, SwizzledNvfp4VScales) {
  REQUIRE_GPU();
  Case c;
  c.format = KvFormat::nvfp4;
  c.v_swizzled = true;
  c.batch = 3;
  c.q_per_req = 4;
  c.seq_lens = {300, 5000, 20000};
  check_case(c);
}

// NVFP4 block-scale planes whose token rows are 9 bytes apart (a view of the first 8
// bytes of [pages, Hkv, 128, 9]): not 8-byte aligned, so the tile kernel's scale copy
// takes its plain-load path, and the warp-MMA kernels read the scales by stride.
TEST(CudaDecode, Nvfp4ScalesWithOddTokenStride) {
  REQUIRE_GPU();
  Case c;
  c.format = KvFormat::nvfp4;
  c.batch = 3;
  c.q_per_req = 4;
  c.seq_lens = {300, 5000, 20000};
  c.seed = 909;
  const Inputs in = make_inputs(c);
  const Result cpu = run_cpu(c, in);
  auto widen = [](const HostTensor& t) {
    HostTensor w;
    w.reset(DType::u8, {t.view().shape[0], t.view().shape[1], kPageSize, 9});
    for (std::int64_t r = 0; r < t.numel() / 8; ++r)
      for (int j = 0; j < 9; ++j) w.data<std::uint8_t>()[r * 9 + j] = j < 8 ? t.data<std::uint8_t>()[r * 8 + j] : 0x7f;
    return w;
  };
  const HostTensor ks9 = widen(in.k_scale), vs9 = widen(in.v_scale);
  DeviceTensor dks(ks9), dvs(vs9);
  auto narrow = [](TensorView v) {
    v.shape[3] = 8;
    return v;
  };
  for (const char* kernel : kKernels) {
    ScopedDecodeKernel force(kernel);
    const Result r = run_gpu(c, in, [&](DecodeRunArgs& a) {
      a.kv.k.block_scale = narrow(dks.view());
      a.kv.v.block_scale = narrow(dvs.view());
    });
    expect_close(r, cpu, true, std::string("NVFP4 scale token stride 9, kernel ") + kernel);
  }
}

TEST(CudaDecode, QueriesPerRequest) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
    for (int q : {1, 2, 3, 4, 8, 16, 32}) {
      Case c;
      c.format = f;
      c.q_per_req = q;
      c.batch = 4;
      c.seq_lens = {q, 129 + q, 3000, 12000};
      c.seed = 100 + static_cast<std::uint64_t>(q);
      check_case(c);
    }
  }
}

TEST(CudaDecode, NarrowTopk) {
  REQUIRE_GPU();
  // Top-k widths below 16 (K = 1: the local page only; 5; 8), both kernels (check_case).
  std::uint64_t seed = 300;
  for (int k : {1, 5, 8})
    for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
      Case c;
      c.format = f;
      c.topk = k;
      c.batch = 3;
      c.q_per_req = 2;
      c.seq_lens = {129, 2000, 9000};
      c.seed = seed++;
      check_case(c);
    }
}

TEST(CudaDecode, MessyTopkEntriesAreIgnored) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Case c;
    c.format = f;
    c.messy_topk = true;
    c.batch = 4;
    c.q_per_req = 2;
    c.seq_lens = {200, 2000, 6000, 30000};
    check_case(c);
  }
}

TEST(CudaDecode, PaddingRowsAreExactZeros) {
  REQUIRE_GPU();
  Case c;
  c.batch = 3;
  c.q_per_req = 8;
  c.seq_lens = {0, 5, 1000};  // request 0 padding; request 1 has rows with p < 0
  c.pages_per_req = 8;
  const Inputs in = make_inputs(c);
  for (const char* kernel : kKernels) {
    ScopedDecodeKernel force(kernel);
    SCOPED_TRACE(kernel);
    const Result gpu = run_gpu(c, in);
    for (int row = 0; row < 8 + 3; ++row)
      for (int h = 0; h < c.hq; ++h) {
        const float l = gpu.lse.data<float>()[row * c.hq + h];
        ASSERT_TRUE(std::isinf(l) && l < 0) << "row " << row;
        for (int d = 0; d < kHeadDim; ++d)
          ASSERT_EQ(gpu.out.data<std::uint16_t>()[(row * c.hq + h) * kHeadDim + d], 0) << "row " << row;
      }
    expect_close(gpu, run_cpu(c, in), false, std::string("padding, kernel ") + kernel);
  }
}

TEST(CudaDecode, BitwiseDeterministic) {
  REQUIRE_GPU();
  // Q 8 x 16 heads per KV head: 128 tile rows, the tile kernels' two-consumer form.
  for (KvFormat f : {KvFormat::fp8, KvFormat::nvfp4}) {
    Case c;
    c.format = f;
    c.batch = 5;
    c.q_per_req = 8;
    c.seq_lens = {1000, 20000, 60000, 128, 7777};
    const Inputs in = make_inputs(c);
    const Result cpu = run_cpu(c, in);
    for (const char* kernel : kKernels) {
      ScopedDecodeKernel force(kernel);
      const Result a = run_gpu(c, in), b = run_gpu(c, in);
      const std::string what = name_of(c) + " kernel " + kernel;
      EXPECT_EQ(std::memcmp(a.out.view().data, b.out.view().data, a.out.bytes()), 0) << what;
      EXPECT_EQ(std::memcmp(a.lse.view().data, b.lse.view().data, a.lse.bytes()), 0) << what;
      expect_close(a, cpu, true, what);
    }
  }
}

TEST(CudaDecode, GraphReplayAfterUpdatingMetadata) {
  REQUIRE_GPU();
  for (const char* kernel : kKernels) {
    ScopedDecodeKernel force(kernel);
    SCOPED_TRACE(kernel);
    Case c;
    c.format = KvFormat::bf16;
    c.batch = 4;
    c.q_per_req = 4;
    c.seq_lens = {500, 3000, 9000, 16000};
    c.pages_per_req = 160;
    Inputs in = make_inputs(c);
    const int rows = c.batch * c.q_per_req;
    Result gpu;
    gpu.out.reset(DType::bf16, {rows, c.hq, kHeadDim});
    gpu.lse.reset(DType::f32, {rows, c.hq});
    DeviceInputs d(in);
    DeviceTensor out(gpu.out), lse(gpu.lse);
    SparseDecodePlan plan;
    ASSERT_TRUE(plan.plan(plan_args(c, in, Device::cuda)).ok());
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    DecodeRunArgs args = device_run_args(c, in, d, out, lse);
    args.stream = stream;
    ASSERT_TRUE(plan.run(args).ok());  // warm-up outside capture
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    Status s = plan.run(args);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int step = 0; step < 3; ++step) {
      // New lengths (same capacity) and a new top-k, updated in place.
      Case c2 = c;
      c2.seed = 1000 + static_cast<std::uint64_t>(step);
      c2.seq_lens = {600 + 700 * step, 2000 + 5000 * step, 128 * (step + 1), 20000 - 1000 * step};
      Inputs in2 = make_inputs(c2);
      // Keep the caches and block table of the captured inputs; only metadata changes.
      for (int b = 0; b < c.batch; ++b) in.seq_lens.data<std::int32_t>()[b] = c2.seq_lens[static_cast<std::size_t>(b)];
      Rng rng(77 + static_cast<std::uint64_t>(step));
      make_topk(c2, in, rng);
      // New logical -> physical mapping over the same pages (block_table updated in place).
      std::shuffle(in.block_table.data<std::int32_t>(),
                   in.block_table.data<std::int32_t>() + in.block_table.numel(), rng);
      d.seq_lens.upload(in.seq_lens);
      d.topk.upload(in.topk);
      d.block_table.upload(in.block_table);
      out.poison();
      lse.poison();
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      out.download(gpu.out);
      lse.download(gpu.lse);
      expect_close(gpu, run_cpu(c, in), false, "graph replay step " + std::to_string(step));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

int device_sms() {
  int dev = 0, sms = 0;
  EXPECT_EQ(cudaGetDevice(&dev), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  return sms;
}

bool same_bits(const Result& a, const Result& b) {
  return std::memcmp(a.out.view().data, b.out.view().data, a.out.bytes()) == 0 &&
         std::memcmp(a.lse.view().data, b.lse.view().data, a.lse.bytes()) == 0;
}

TEST(CudaDecode, SplitRuleAndWorkspaceSize) {
  // Host-side only (runs without a GPU). 132 SMs (H200), 64/4 heads: Q 1 -> 1 row and
  // Q 8 -> 8 rows per CTA.
  using cuda::choose_num_splits;
  EXPECT_EQ(choose_num_splits(1, 1, 4, 132), 16);    // b1 Q1: 4 CTAs x 16 = 64 <= 132
  EXPECT_EQ(choose_num_splits(2, 1, 4, 132), 16);    // b2: 8 x 16 = 128
  EXPECT_EQ(choose_num_splits(3, 1, 4, 132), 8);     // b3: 12 x 16 > 132, 132/12 = 11 -> 8
  EXPECT_EQ(choose_num_splits(4, 1, 4, 132), 8);     // b4: 16 CTAs
  EXPECT_EQ(choose_num_splits(10, 1, 4, 132), 3);    // 40 CTAs: 3 x 40 = 120 fit one wave
  EXPECT_EQ(choose_num_splits(16, 1, 4, 132), 2);    // 64 CTAs
  EXPECT_EQ(choose_num_splits(20, 1, 4, 132), 1);    // 80 CTAs: 2 splits would take 2 waves
  EXPECT_EQ(choose_num_splits(40, 1, 4, 132), 1);    // 160 CTAs
  EXPECT_EQ(choose_num_splits(64, 8, 4, 132), 4);    // b8 Q8: 32 CTAs x 4 = 128
  EXPECT_EQ(choose_num_splits(256, 8, 4, 132), 1);   // b32 Q8: 128 CTAs fill one wave
  EXPECT_EQ(choose_num_splits(1024, 8, 4, 132), 1);  // b128 Q8
  EXPECT_EQ(choose_num_splits(1, 1, 1, 8), 8);       // few SMs: 16 x 1 > 8
  // Kernel choice: warp-MMA while query rows x KV heads <= SMs or at Q 1, with the
  // largest split count <= 16 that fits one wave and splits a 16-page row evenly (at
  // least 1).
  struct Want {
    int batch, q, hq, hkv;
    bool warp_mma;
    int per_cta, splits;
  };
  for (const Want w : {Want{1, 1, 64, 4, true, 1, 16},   // 4 row CTAs: 16 splits
                       Want{2, 1, 64, 4, true, 1, 16},   // 8: 16
                       Want{3, 1, 64, 4, true, 1, 8},    // 12: 11 fit -> 2 pages each -> 8
                       Want{4, 1, 64, 4, true, 1, 8},    // 16: 8
                       Want{1, 8, 64, 4, true, 1, 4},    // 32: 4
                       Want{4, 8, 16, 1, true, 1, 4},    // 32: 4
                       Want{8, 1, 16, 1, true, 1, 16},   // 8: 16
                       Want{2, 8, 64, 4, true, 1, 2},    // 64: 2 (token split)
                       Want{8, 8, 16, 1, true, 1, 2},    // 64: 2
                       Want{33, 1, 64, 4, true, 1, 1},   // 132 row CTAs: one wave
                       Want{4, 8, 64, 4, true, 1, 1},    // 128 row CTAs: one wave
                       Want{128, 1, 64, 4, true, 1, 1},  // 512 row CTAs, tile M = 16
                       Want{128, 1, 16, 1, true, 1, 1},  // 128 row CTAs
                       Want{8, 8, 64, 4, false, 8, 4},   // 256 row CTAs, tile M = 128: 32 x 4
                       Want{64, 4, 16, 4, false, 4, 1},  // 1024 row CTAs, Q 4: tile (M = 16)
                       Want{32, 8, 64, 4, false, 8, 1}}) {
    const cuda::DecodeSchedule s = cuda::choose_decode_schedule(w.batch, w.q, w.hq, w.hkv, 132, true);
    EXPECT_EQ(s.warp_mma, w.warp_mma) << w.batch << "x" << w.q;
    // Dims split (BF16): one or two pages per split CTA.
    EXPECT_EQ(s.dims_split, w.warp_mma && w.splits >= 8) << w.batch << "x" << w.q;
    const cuda::DecodeSchedule f = cuda::choose_decode_schedule(w.batch, w.q, w.hq, w.hkv, 132, false);
    EXPECT_EQ(f.dims_split, w.warp_mma && w.splits == 16) << w.batch << "x" << w.q << " FP8 / NVFP4";
    EXPECT_EQ(s.queries_per_cta, w.per_cta) << w.batch << "x" << w.q;
    EXPECT_EQ(s.num_splits, w.splits) << w.batch << "x" << w.q;
    EXPECT_EQ(f.num_splits, w.splits) << w.batch << "x" << w.q << " FP8 / NVFP4";
  }
  // o_partial + lse_partial: 129 words per (row, head, split); nothing for one split.
  EXPECT_EQ(cuda::decode_workspace_floats(1, 64, 16), 64 * 16 * 129);
  EXPECT_EQ(cuda::decode_workspace_floats(24, 64, 2), 24 * 64 * 2 * 129);
  EXPECT_EQ(cuda::decode_workspace_floats(24, 64, 1), 0);
}

TEST(CudaDecode, WarpMmaClusterCapacity) {
  REQUIRE_GPU();
  // Informational (the launch falls back to the combine kernel when clusters do not fit):
  // how many split clusters this GPU holds at once.
  for (int f = 0; f < 3; ++f)
    for (int s : {2, 4, 8, 16})
      std::printf("cluster capacity: format %d, %2d splits: %d clusters\n", f, s, cuda::warp_mma_cluster_capacity(f, s));
  EXPECT_GE(cuda::warp_mma_cluster_capacity(0, 2), 1);  // portable sizes always fit one
}

TEST(CudaDecode, WarpMmaSplitsFollowClusterCapacity) {
  REQUIRE_GPU();
  // FP8 / NVFP4 on the warp-MMA kernel: where the schedule gives 8 splits whose 8-CTA
  // clusters do not all fit, plan() takes 6 (b4 Q1 64/4: 16 row CTAs, 16 clusters; the
  // H200 holds 15); where they fit it keeps 8 (b3 Q1: 12 clusters). BF16 keeps 8 (the
  // dims-split variant). Each plan's output matches the CPU.
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4})
    for (int batch : {3, 4}) {
      Case c;
      c.format = f;
      c.batch = batch;
      c.q_per_req = 1;
      c.seq_lens.assign(batch, 4096);
      c.pages_per_req = 64;
      c.seed = 960 + static_cast<std::uint64_t>(batch);
      const Inputs in = make_inputs(c);
      SparseDecodePlan plan;
      ASSERT_TRUE(plan.plan(plan_args(c, in, Device::cuda)).ok());
      const int rows = batch * c.hkv;  // one CTA per (query row, KV head) and split
      if (device_sms() >= 128 && device_sms() < 144) {  // 8 splits by the schedule
        const bool fits = rows <= cuda::warp_mma_cluster_capacity(static_cast<int>(f), 8, false);
        EXPECT_EQ(plan.num_splits(), f == KvFormat::bf16 || fits ? 8 : 6) << name_of(c);
      }
      expect_close(run_gpu(c, in), run_cpu(c, in), f != KvFormat::bf16, name_of(c) + " (warp-MMA splits)");
    }
}

TEST(CudaDecode, SixteenSplitsSmallBatches) {
  REQUIRE_GPU();
  // At most 8 CTAs per split (query blocks x KV heads): plan() picks 16 splits, one page
  // each for a full top-16 row, when 16 x the CTAs fit the SMs (all of these on the
  // H200's 132); the combine kernel merges the 16 partials. Issue 8's latency case
  // first; short rows leave most splits empty; request 0 of the Q 4 shape is padding
  // (every split empty, D5).
  struct Shape {
    int batch, q, hq, hkv;
    std::vector<std::int32_t> lens;
  };
  const Shape shapes[] = {{1, 1, 64, 4, {4096}},    {2, 1, 64, 4, {4096, 300}}, {1, 1, 16, 1, {20000}},
                          {2, 4, 64, 4, {0, 9000}}, {1, 8, 64, 4, {4100}},      {1, 1, 8, 8, {130}}};
  const bool expect16 = device_sms() >= 8 * 16;
  ScopedDecodeKernel force("tile");  // the wgmma tile kernel's 16-split paths
  std::uint64_t seed = 500;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    for (const Shape& sh : shapes) {
      Case c;
      c.format = f;
      c.batch = sh.batch;
      c.q_per_req = sh.q;
      c.hq = sh.hq;
      c.hkv = sh.hkv;
      c.seq_lens = sh.lens;
      c.seed = seed++;
      const Inputs in = make_inputs(c);
      SparseDecodePlan plan;
      ASSERT_TRUE(plan.plan(plan_args(c, in, Device::cuda)).ok());
      if (expect16) EXPECT_EQ(plan.num_splits(), 16) << name_of(c);
      const Result cpu = run_cpu(c, in);
      expect_close(run_gpu(c, in), cpu, f != KvFormat::bf16, name_of(c) + " (16 splits)");
      {
        ScopedDecodeKernel serial("tile_serial");  // the tile kernel's serial form
        expect_close(run_gpu(c, in), cpu, f != KvFormat::bf16, name_of(c) + " (16 splits, serial tile kernel)");
      }
      ScopedDecodeKernel warp("warp_mma");  // the same shapes on the warp-MMA kernel
      expect_close(run_gpu(c, in), cpu, f != KvFormat::bf16, name_of(c) + " (warp-MMA kernel)");
      {
        ScopedEnv combine("FLASHMSA_DECODE_MERGE", "combine");  // ... with its other split merge
        expect_close(run_gpu(c, in), cpu, f != KvFormat::bf16, name_of(c) + " (warp-MMA kernel, combine kernel)");
      }
      ScopedDecodeKernel dsplit("warp_mma_dsplit");  // the experimental dims-split variant, both merges
      expect_close(run_gpu(c, in), cpu, f != KvFormat::bf16, name_of(c) + " (dims-split kernel)");
      ScopedEnv combine("FLASHMSA_DECODE_MERGE", "combine");
      expect_close(run_gpu(c, in), cpu, f != KvFormat::bf16, name_of(c) + " (dims-split kernel, combine kernel)");
    }
  }
}

TEST(CudaDecode, SixteenSplitsRepeatedRunsAndGraphReplays) {
  REQUIRE_GPU();
  // B 1, Q 1, 4K (16 splits on the H200) and B 8, Q 8, 4K (4 splits of the tile kernel's
  // 32 CTAs on the H200), both merged by the combine kernel. One plan runs 3 times on a
  // stream, then a captured run is replayed 8 times: every launch must give the same bits
  // (D9) and overwrite the poisoned output. Then new lengths and top-k, updated in
  // place: the replays match the CPU.
  // The automatic choice runs b1 Q1 on the dims-split warp-MMA kernel (16 splits) and
  // b8 Q8 on the tile kernel; b1 Q1 also runs forced onto the tile kernel (both forms)
  // and onto the token-split warp-MMA kernel, b8 Q8 onto the serial tile kernel.
  struct Shape {
    int batch, q, splits;
    const char* kernel;  // nullptr: the plan's own choice
  };
  for (const Shape sh : {Shape{1, 1, 16, nullptr}, Shape{1, 1, 16, "tile"}, Shape{1, 1, 16, "tile_serial"},
                         Shape{1, 1, 16, "warp_mma"}, Shape{8, 8, 4, nullptr}, Shape{8, 8, 4, "tile_serial"}})
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
    std::unique_ptr<ScopedDecodeKernel> force;
    if (sh.kernel != nullptr) force = std::make_unique<ScopedDecodeKernel>(sh.kernel);
    SCOPED_TRACE(sh.kernel != nullptr ? sh.kernel : "auto");
    Case c;
    c.format = f;
    c.batch = sh.batch;
    c.q_per_req = sh.q;
    c.seq_lens.assign(sh.batch, 4096);
    c.pages_per_req = 64;
    c.seed = 4242;
    Inputs in = make_inputs(c);
    const bool fp8 = f != KvFormat::bf16;
    Result gpu, first;
    const std::int64_t rows = static_cast<std::int64_t>(c.batch) * c.q_per_req;
    for (Result* r : {&gpu, &first}) {
      r->out.reset(DType::bf16, {rows, c.hq, kHeadDim});
      r->lse.reset(DType::f32, {rows, c.hq});
    }
    DeviceInputs d(in);
    DeviceTensor out(gpu.out), lse(gpu.lse);
    SparseDecodePlan plan;
    ASSERT_TRUE(plan.plan(plan_args(c, in, Device::cuda)).ok());
    // The split count the shape is meant to exercise (choose_num_splits): 16 for b1 on
    // any GPU with >= 64 SMs, 4 for the 32 CTAs of b8 Q8 on 128..159 SMs (the H200: 132).
    const int sms = device_sms();
    if (sh.batch == 1 ? sms >= 64 : (sms >= 128 && sms < 160)) EXPECT_EQ(plan.num_splits(), sh.splits);
    if (sh.kernel == nullptr && sms >= 64 && sms < 256)
      EXPECT_STREQ(plan.kernel(), sh.batch == 1 ? "warp_mma_dsplit" : "tile");
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    DecodeRunArgs args = device_run_args(c, in, d, out, lse);
    args.stream = stream;
    const Result cpu = run_cpu(c, in);
    auto fetch = [&](Result& r) {
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      out.download(r.out);
      lse.download(r.lse);
    };
    for (int i = 0; i < 3; ++i) {
      out.poison();
      lse.poison();
      ASSERT_TRUE(plan.run(args).ok());
      fetch(i == 0 ? first : gpu);
      if (i == 0) expect_close(first, cpu, fp8, "run 0");
      else EXPECT_TRUE(same_bits(gpu, first)) << "run " << i << " differs from run 0";
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    const Status s = plan.run(args);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int i = 0; i < 8; ++i) {
      out.poison();
      lse.poison();
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      fetch(gpu);
      EXPECT_TRUE(same_bits(gpu, first)) << "replay " << i << " differs from run 0";
    }
    for (int step = 0; step < 3; ++step) {
      Case c2 = c;
      for (int b = 0; b < c.batch; ++b) {
        c2.seq_lens[b] = 1000 + 2500 * step + 37 * b;
        in.seq_lens.data<std::int32_t>()[b] = c2.seq_lens[b];
      }
      Rng rng(900 + static_cast<std::uint64_t>(step));
      make_topk(c2, in, rng);
      d.seq_lens.upload(in.seq_lens);
      d.topk.upload(in.topk);
      out.poison();
      lse.poison();
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      fetch(gpu);
      expect_close(gpu, run_cpu(c, in), fp8, "replay with new metadata " + std::to_string(step));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

TEST(CudaDecode, PlanCacheReturnsTheSamePlanPerKey) {
  REQUIRE_GPU();
  Case c;
  c.batch = 2;
  c.q_per_req = 4;
  c.seq_lens = {1000, 3000};
  const Inputs in = make_inputs(c);
  DecodePlanCache cache;
  SparseDecodePlan* a = nullptr;
  SparseDecodePlan* b = nullptr;
  ASSERT_TRUE(cache.get(plan_args(c, in, Device::cuda), &a).ok());
  ASSERT_TRUE(cache.get(plan_args(c, in, Device::cuda), &b).ok());
  EXPECT_EQ(a, b);
  DecodePlanArgs other = plan_args(c, in, Device::cuda);
  other.queries_per_request = 2;
  ASSERT_TRUE(cache.get(other, &b).ok());
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.size(), 2u);
  // The cached plan runs and matches the CPU backend.
  DeviceInputs d(in);
  Result gpu;
  gpu.out.reset(DType::bf16, {c.batch * c.q_per_req, c.hq, kHeadDim});
  gpu.lse.reset(DType::f32, {c.batch * c.q_per_req, c.hq});
  DeviceTensor out(gpu.out), lse(gpu.lse);
  out.poison();
  ASSERT_TRUE(a->run(device_run_args(c, in, d, out, lse)).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.download(gpu.out);
  lse.download(gpu.lse);
  expect_close(gpu, run_cpu(c, in), false, "cached plan");
}

TEST(CudaDecode, RejectsMixedDevices) {
  REQUIRE_GPU();
  Case c;
  c.batch = 1;
  c.seq_lens = {300};
  const Inputs in = make_inputs(c);
  DeviceInputs d(in);
  HostTensor out_h(DType::bf16, {1, c.hq, kHeadDim}), lse_h(DType::f32, {1, c.hq});
  DeviceTensor out(out_h), lse(lse_h);
  SparseDecodePlan plan;
  ASSERT_TRUE(plan.plan(plan_args(c, in, Device::cuda)).ok());
  DecodeRunArgs a = device_run_args(c, in, d, out, lse);
  a.seq_lens = in.seq_lens.view();  // host memory
  Status s = plan.run(a);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("seq_lens"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace flashmsa

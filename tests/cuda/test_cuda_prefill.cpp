// GPU sparse_attention_prefill against the CPU backend (policy D8), outputs poisoned with
// NaN before each run. Varlen batches with prefix 0, prefixes ending mid-page, q_len 1,
// every format, head split, LSE on/off, head-major top-k views, junk top-k entries
// (duplicates, -1, future and out-of-range pages, local-first order, queries without their
// own page), partial last pages whose unused token slots hold NaN bytes, random batches of
// 1..8 requests, bitwise determinism, CUDA-graph capture. The default kernel is the KV-outer one;
// QueryOuterStillMatches runs the v1 query-outer kernel (FLASHMSA_PREFILL_KERNEL=
// query_outer) on a mixed batch.
// Skips without a CUDA device; run on the H200 with build/test_cuda_prefill.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "flashmsa/flashmsa.h"
#include "test_util.h"

namespace flashmsa {
namespace {

using namespace cudatest;
using testing::Rng;

struct Req {
  int q_len, prefix;
};

struct Case {
  std::vector<Req> reqs;
  int hq = 64, hkv = 4;
  KvFormat format = KvFormat::bf16;
  bool v_swizzled = false;
  bool with_lse = true;
  bool head_major_topk = false;
  bool messy = false;
  bool local_first = false;  // vLLM order: the local page in slot 0
  bool nan_slots = true;     // unused token slots / unmapped pages hold NaN bytes
  bool q_head_major = false;  // GPU q stored [Hq, T, 128], passed as a [T, Hq, 128] view
  int topk_k = 16;           // K of the top-k tensor [T, Hkv, K]
  int min_width = 1;         // block-table columns at least (extra ones map a spare page)
  int drop_own = 0;          // > 0: query j of each request with j % drop_own == 0 omits its own page
  bool host_cache = false;   // K/V (and NVFP4 scales) in pinned host memory: copies land late
  std::uint64_t seed = 1;
};

struct Inputs {
  HostTensor q, k, v, ks, vs, topk, block_table, cu, seq_lens;
  TensorView topk_view;  // token-major view (possibly of head-major storage)
  float q_scale = 1.0f, k_global = 1.0f, v_global = 1.0f;
  int T = 0;
};

void fill_e4m3_uniform(HostTensor& t, float scale, std::uint64_t seed) {
  std::uint64_t s = seed | 1;
  auto* p = t.data<std::uint8_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = float_to_e4m3_sat(static_cast<float>(static_cast<std::int32_t>(s >> 32)) * (2.0f / 2147483648.0f) / scale);
  }
}

// The token slots past seq_len in each request's last page, and every unmapped page, hold
// NaN bytes (0xff: NaN in bf16 and E4M3; NVFP4 codes have no NaN, their block scales
// do): no kernel may let them reach the output.
void poison_unused_slots(const Case& c, Inputs& in) {
  const int B = static_cast<int>(c.reqs.size());
  const std::int64_t width = in.block_table.view().shape[1];
  const std::int64_t row_bytes = in.k.bytes() / in.k.view().shape[0] / c.hkv / 128;
  auto poison_token = [&](std::int64_t phys, int t) {
    for (int g = 0; g < c.hkv; ++g) {
      const std::int64_t off = ((phys * c.hkv + g) * 128 + t) * row_bytes;
      std::memset(static_cast<std::uint8_t*>(in.k.view().data) + off, 0xff, static_cast<std::size_t>(row_bytes));
      std::memset(static_cast<std::uint8_t*>(in.v.view().data) + off, 0xff, static_cast<std::size_t>(row_bytes));
      if (c.format == KvFormat::nvfp4) {
        const std::int64_t base = (phys * c.hkv + g) * 128 * 8;
        for (int grp = 0; grp < 8; ++grp) {
          in.ks.data<std::uint8_t>()[base + t * 8 + grp] = 0xff;
          in.vs.data<std::uint8_t>()[base + (c.v_swizzled ? 32 * (t / 4) + 4 * grp + t % 4 : t * 8 + grp)] = 0xff;
        }
      }
    }
  };
  std::vector<bool> mapped(static_cast<std::size_t>(in.k.view().shape[0]), false);
  for (int b = 0; b < B; ++b) {
    const int seq = in.seq_lens.data<std::int32_t>()[b];
    for (int e = 0; e < (seq + 127) / 128; ++e)
      mapped[static_cast<std::size_t>(in.block_table.data<std::int32_t>()[b * width + e])] = true;
    if (seq % 128 == 0) continue;
    const std::int64_t phys = in.block_table.data<std::int32_t>()[b * width + seq / 128];
    for (int t = seq % 128; t < 128; ++t) poison_token(phys, t);
  }
  for (std::size_t phys = 0; phys < mapped.size(); ++phys)
    if (!mapped[phys])
      for (int t = 0; t < 128; ++t) poison_token(static_cast<std::int64_t>(phys), t);
}

Inputs make_inputs(const Case& c) {
  Rng rng(c.seed);
  Inputs in;
  const int B = static_cast<int>(c.reqs.size());
  in.cu.reset(DType::i32, {B + 1});
  in.seq_lens.reset(DType::i32, {B});
  int width = c.min_width, total_pages = 0;
  for (int b = 0; b < B; ++b) {
    const int seq = c.reqs[b].q_len + c.reqs[b].prefix;
    in.cu.data<std::int32_t>()[b + 1] = in.cu.data<std::int32_t>()[b] + c.reqs[b].q_len;
    in.seq_lens.data<std::int32_t>()[b] = seq;
    width = std::max(width, (seq + 127) / 128);
    total_pages += (seq + 127) / 128;
  }
  in.T = in.cu.data<std::int32_t>()[B];
  const int num_pages = total_pages + 2;
  std::vector<std::int32_t> perm = testing::random_permutation(num_pages, rng);
  in.block_table.reset(DType::i32, {B, width});
  int next = 0;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < width; ++j)
      in.block_table.data<std::int32_t>()[b * width + j] =
          j < (in.seq_lens.data<std::int32_t>()[b] + 127) / 128 ? perm[next++] : perm[num_pages - 1];
  // q, caches
  if (c.format == KvFormat::bf16) {
    in.q.reset(DType::bf16, {in.T, c.hq, 128});
    fill_bf16_uniform(in.q, rng());
    in.k.reset(DType::bf16, {num_pages, c.hkv, 128, 128});
    in.v.reset(DType::bf16, {num_pages, c.hkv, 128, 128});
    fill_bf16_uniform(in.k, rng());
    fill_bf16_uniform(in.v, rng());
  } else {
    in.q.reset(DType::e4m3, {in.T, c.hq, 128});
    in.q_scale = 1.0f / 16.0f;
    fill_e4m3_uniform(in.q, in.q_scale, rng());
    if (c.format == KvFormat::fp8) {
      in.k_global = 1.0f / 32.0f;
      in.v_global = 1.0f / 64.0f;
      in.k.reset(DType::e4m3, {num_pages, c.hkv, 128, 128});
      in.v.reset(DType::e4m3, {num_pages, c.hkv, 128, 128});
      fill_e4m3_uniform(in.k, in.k_global, rng());
      fill_e4m3_uniform(in.v, in.v_global, rng());
    } else {
      in.k_global = 0.25f;
      in.v_global = 0.5f;
      in.k.reset(DType::u8, {num_pages, c.hkv, 128, 64});
      in.v.reset(DType::u8, {num_pages, c.hkv, 128, 64});
      in.ks.reset(DType::u8, {num_pages, c.hkv, 128, 8});
      in.vs.reset(DType::u8, {num_pages, c.hkv, 128, 8});
      std::uniform_int_distribution<int> byte(0, 255), scale(0x28, 0x40);
      for (std::int64_t i = 0; i < in.k.numel(); ++i) {
        in.k.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(byte(rng));
        in.v.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(byte(rng));
      }
      for (std::int64_t i = 0; i < in.ks.numel(); ++i) {
        in.ks.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(scale(rng));
        in.vs.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(scale(rng));
      }
    }
  }
  if (c.nan_slots) poison_unused_slots(c, in);
  // top-k: local page + up to K-1 random history pages, -1 padded (D1); storage token- or
  // head-major, always seen through a token-major [T, Hkv, K] view.
  const int K = c.topk_k;
  if (c.head_major_topk) {
    in.topk.reset(DType::i32, {c.hkv, in.T, K});
    in.topk_view = make_strided_view(in.topk.view().data, DType::i32, {in.T, c.hkv, K},
                                     {K, static_cast<std::int64_t>(in.T) * K, 1});
  } else {
    in.topk.reset(DType::i32, {in.T, c.hkv, K});
    in.topk_view = in.topk.view();
  }
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < c.reqs[b].q_len; ++j) {
      const int row = in.cu.data<std::int32_t>()[b] + j;
      const int pos = c.reqs[b].prefix + j, local = pos / 128;
      for (int g = 0; g < c.hkv; ++g) {
        std::int32_t* e = in.topk.data<std::int32_t>() + in.topk_view.offset({row, g, 0});
        std::vector<std::int32_t> hist(static_cast<std::size_t>(local));
        for (int i = 0; i < local; ++i) hist[static_cast<std::size_t>(i)] = i;
        std::shuffle(hist.begin(), hist.end(), rng);
        const int nh = std::min(local, K - 1);
        for (int k = 0; k < K; ++k) e[k] = -1;
        for (int k = 0; k < nh; ++k) e[k] = hist[static_cast<std::size_t>(k)];
        e[nh] = c.drop_own > 0 && j % c.drop_own == 0 ? -1 : local;
        if (c.local_first) std::rotate(e, e + nh, e + nh + 1);
        if (c.messy) {
          if (nh + 1 < K) e[nh + 1] = local + 1;   // future page: ignored
          if (nh >= 2) e[1] = e[0];                // duplicate: counted once
          if (nh >= 3) e[2] = 1 << 30;             // out of range: ignored
        }
      }
    }
  return in;
}

SparseAttentionPrefillArgs args_of(const Case& c, const Inputs& in, const TensorView& q,
                                   const TensorView& k, const TensorView& v, const TensorView& ks,
                                   const TensorView& vs, const TensorView& topk,
                                   const TensorView& bt, const TensorView& cu,
                                   const TensorView& seq, const TensorView& out,
                                   const TensorView& lse) {
  SparseAttentionPrefillArgs a;
  a.q = q;
  a.kv.format = c.format;
  a.kv.k.data = k;
  a.kv.v.data = v;
  a.kv.k.global_scale = in.k_global;
  a.kv.v.global_scale = in.v_global;
  if (c.format == KvFormat::nvfp4) {
    a.kv.k.block_scale = ks;
    a.kv.v.block_scale = vs;
    a.kv.v.scale_swizzled = c.v_swizzled;
  }
  a.topk_indices = topk;
  a.block_table = bt;
  a.cu_seqlens_q = cu;
  a.seq_lens = seq;
  a.q_scale = in.q_scale;
  a.out = out;
  a.lse = c.with_lse ? lse : TensorView{};
  return a;
}

Result run_cpu(const Case& c, const Inputs& in) {
  Result r;
  r.out.reset(DType::bf16, {in.T, c.hq, 128});
  r.lse.reset(DType::f32, {c.with_lse ? in.T : 0, c.hq});
  Status s = sparse_attention_prefill(args_of(c, in, in.q.view(), in.k.view(), in.v.view(),
                                              in.ks.view(), in.vs.view(), in.topk_view,
                                              in.block_table.view(), in.cu.view(),
                                              in.seq_lens.view(), r.out.view(), r.lse.view()));
  EXPECT_TRUE(s.ok()) << s.message();
  return r;
}

// graph: capture the call on a fresh stream into a CUDA graph (plan, workspace
// allocation and all), then poison the outputs and replay it.
Result run_gpu(const Case& c, const Inputs& in, bool graph = false) {
  Result r;
  r.out.reset(DType::bf16, {in.T, c.hq, 128});
  r.lse.reset(DType::f32, {c.with_lse ? in.T : 0, c.hq});
  // q_head_major: the same q values in head-major storage (head stride T x 128), the
  // layout the TMA gather's tensor map must follow from the view's strides.
  HostTensor q_store;
  if (c.q_head_major) {
    q_store.reset(in.q.view().dtype, {c.hq, in.T, 128});
    const std::size_t es = in.q.bytes() / static_cast<std::size_t>(in.q.numel());
    for (int t = 0; t < in.T; ++t)
      for (int h = 0; h < c.hq; ++h)
        std::memcpy(q_store.data<std::uint8_t>() + ((static_cast<std::size_t>(h) * in.T + t) * 128) * es,
                    in.q.data<std::uint8_t>() + ((static_cast<std::size_t>(t) * c.hq + h) * 128) * es, 128 * es);
  }
  DeviceTensor q(c.q_head_major ? q_store : in.q), k(in.k), v(in.v), ks(in.ks), vs(in.vs), topk(in.topk),
      bt(in.block_table), cu(in.cu), seq(in.seq_lens), out(r.out), lse(r.lse);
  TensorView q_view = q.view();
  if (c.q_head_major)
    q_view = make_strided_view(q_view.data, in.q.view().dtype, {in.T, c.hq, 128}, {128, static_cast<std::int64_t>(in.T) * 128, 1},
                               Device::cuda);
  out.poison();
  lse.poison();
  TensorView topk_view = in.topk_view;
  topk_view.data = topk.view().data;
  topk_view.device = Device::cuda;
  std::unique_ptr<HostMappedTensor> hk, hv, hks, hvs;
  if (c.host_cache) {
    hk = std::make_unique<HostMappedTensor>(in.k);
    hv = std::make_unique<HostMappedTensor>(in.v);
    hks = std::make_unique<HostMappedTensor>(in.ks);
    hvs = std::make_unique<HostMappedTensor>(in.vs);
  }
  SparseAttentionPrefillArgs a =
      args_of(c, in, q_view, hk ? hk->view() : k.view(), hv ? hv->view() : v.view(), hks ? hks->view() : ks.view(),
              hvs ? hvs->view() : vs.view(), topk_view, bt.view(), cu.view(), seq.view(), out.view(), lse.view());
  if (graph) {
    cudaStream_t stream;
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    a.stream = stream;
    cudaGraph_t g;
    cudaGraphExec_t exec;
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    Status s = sparse_attention_prefill(a);
    EXPECT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(cudaStreamEndCapture(stream, &g), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    for (int rep = 0; rep < 2; ++rep) {
      out.poison();
      lse.poison();
      EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    cudaStreamDestroy(stream);
  } else {
    Status s = sparse_attention_prefill(a);
    EXPECT_TRUE(s.ok()) << s.message();
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.download(r.out);
  lse.download(r.lse);
  return r;
}

void check_case(const Case& c, const std::string& what) {
  const Inputs in = make_inputs(c);
  expect_close(run_gpu(c, in), run_cpu(c, in), c.format != KvFormat::bf16, what);
}

const std::vector<Req> kMixed = {{1, 0}, {200, 0}, {77, 1000}, {300, 3968}, {129, 20000}};

TEST(CudaPrefill, FormatsAndHeadSplits) {
  REQUIRE_GPU();
  // Group sizes 16, 16, 16, 8, 1, 4, 2 (the TMA gather's box is one query's G heads).
  const int heads[][2] = {{64, 4}, {32, 2}, {16, 1}, {8, 1}, {8, 8}, {16, 4}, {16, 8}};
  std::uint64_t seed = 5;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4})
    for (auto& h : heads) {
      Case c;
      c.reqs = kMixed;
      c.format = f;
      c.hq = h[0];
      c.hkv = h[1];
      c.seed = seed++;
      check_case(c, std::string(kv_format_name(f)) + " " + std::to_string(h[0]) + "/" + std::to_string(h[1]));
    }
}

TEST(CudaPrefill, LseOffHeadMajorTopkMessyEntriesSwizzledScales) {
  REQUIRE_GPU();
  Case c;
  c.reqs = {{50, 128}, {1, 5000}, {260, 0}};
  c.format = KvFormat::nvfp4;
  c.v_swizzled = true;
  c.with_lse = false;
  c.head_major_topk = true;
  c.messy = true;
  check_case(c, "nvfp4 lse off, head-major, messy");
  c.format = KvFormat::bf16;
  c.with_lse = true;
  check_case(c, "bf16 head-major, messy");
}

// q as a strided view: head-major storage (head stride T x 128, row stride 128), for
// the TMA gather's tensor map and both Q element sizes.
TEST(CudaPrefill, HeadMajorQuery) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8}) {
    Case c;
    c.reqs = {{130, 300}, {1, 0}, {77, 2000}};
    c.hq = 16;
    c.hkv = 2;
    c.format = f;
    c.q_head_major = true;
    check_case(c, std::string(kv_format_name(f)) + " head-major q");
  }
}

// Several work units per CTA (about 4 here): the cross-unit page and Q-tile pipeline.
TEST(CudaPrefill, SingleRequestLongChunk) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Case c;
    c.reqs = {{2048, 6144}};
    c.hq = 16;
    c.hkv = 1;
    c.format = f;
    check_case(c, std::string(kv_format_name(f)) + " 16/1 2048 rows");
  }
}

// Late page copies (caches in pinned host memory): a kernel that reads a page before its
// copy completed reads stale bytes. Every format; two requests with cached context, so
// the attention CTAs run several pages each.
TEST(CudaPrefill, PageCopiesLandingLate) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Case c;
    c.reqs = {{512, 3000}, {300, 9000}};
    c.hq = 16;
    c.hkv = 1;
    c.format = f;
    c.host_cache = true;
    c.seed = 77;
    check_case(c, std::string(kv_format_name(f)) + " 16/1, caches in host memory");
  }
}

TEST(CudaPrefill, BitwiseDeterministic) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Case c;
    c.reqs = kMixed;
    c.format = f;
    c.messy = true;
    const Inputs in = make_inputs(c);
    const Result a = run_gpu(c, in), b = run_gpu(c, in);
    EXPECT_EQ(std::memcmp(a.out.view().data, b.out.view().data, a.out.bytes()), 0) << kv_format_name(f);
    EXPECT_EQ(std::memcmp(a.lse.view().data, b.lse.view().data, a.lse.bytes()), 0) << kv_format_name(f);
  }
}

// Random batches of 1..8 requests: q_len 1..200 (often 1), prefix 0, page-aligned or
// ending mid-page; every format and head split; messy or local-first top-k; top-k width K
// 5 or 16; LSE on/off.
TEST(CudaPrefill, RandomBatches) {
  REQUIRE_GPU();
  const int heads[][2] = {{64, 4}, {32, 2}, {16, 1}, {8, 1}};
  Rng rng(2024);
  std::uniform_int_distribution<int> nreq(1, 8), qlen(1, 200), pages(0, 40), mid(1, 127), pick(0, 3);
  for (int it = 0; it < 12; ++it) {
    Case c;
    const int B = nreq(rng);
    for (int b = 0; b < B; ++b) {
      const int kind = pick(rng);
      const int q_len = kind == 0 ? 1 : qlen(rng);
      const int prefix = kind == 1 ? 0 : pages(rng) * 128 + (kind == 2 ? mid(rng) : 0);
      c.reqs.push_back({q_len, prefix});
    }
    c.format = static_cast<KvFormat>(it % 3 == 0 ? KvFormat::bf16 : it % 3 == 1 ? KvFormat::fp8 : KvFormat::nvfp4);
    c.hq = heads[it % 4][0];
    c.hkv = heads[it % 4][1];
    c.with_lse = it % 5 != 2;
    c.messy = it % 2 == 0;
    c.local_first = it % 3 != 1;
    c.v_swizzled = it % 4 == 3;
    c.topk_k = it % 4 == 1 ? 5 : 16;  // K < 16: fewer slots and partials
    c.seed = 100 + it;
    check_case(c, "random batch " + std::to_string(it) + " (" + kv_format_name(c.format) + " " +
                      std::to_string(c.hq) + "/" + std::to_string(c.hkv) + ", B " + std::to_string(B) + ")");
  }
}

// The plan's CSR has Hkv x B x (block-table width) rows. Hot rows (32 sub-counters per
// row: at least 1024 entries per row on average), warm rows of a small plan (32
// sub-counters: at least 256 per row, rows x 32 within the fused scan), more than 65,536
// rows (the scans in three kernels instead of one) and more than 2^19 rows (one counter
// per row).
TEST(CudaPrefill, PlanShapes) {
  REQUIRE_GPU();
  Case hot;  // 16 pages, 32,768 top-k slots (the sub-counter rule counts slots)
  hot.reqs = {{2048, 0}};
  hot.hq = 16;
  hot.hkv = 1;
  hot.seed = 31;
  check_case(hot, "hot rows: 16/1, 2048 rows, prefix 0");
  hot.format = KvFormat::nvfp4;
  hot.messy = true;
  check_case(hot, "hot rows: nvfp4, messy");
  Case warm;  // 24 pages, 16,384 top-k slots: 683 per row
  warm.reqs = {{1024, 2048}};
  warm.hq = 16;
  warm.hkv = 1;
  warm.format = KvFormat::fp8;
  warm.seed = 33;
  check_case(warm, "warm rows: 16/1, 1024 rows, prefix 2048");
  Rng rng(77);
  std::uniform_int_distribution<int> qlen(1, 9);
  for (const int reqs : {9, 64}) {  // x 8 KV heads x 1,100 columns: 79,200 and 563,200 rows
    Case c;
    std::uniform_int_distribution<int> prefix(0, reqs == 9 ? 3000 : 700);
    for (int b = 0; b < reqs; ++b) c.reqs.push_back({qlen(rng), prefix(rng)});
    c.hq = 8;
    c.hkv = 8;
    c.min_width = 1100;
    c.messy = reqs == 9;
    c.format = reqs == 9 ? KvFormat::fp8 : KvFormat::bf16;
    c.seed = 40 + reqs;
    check_case(c, "wide block table: " + std::to_string(reqs) + " requests x 8 KV heads x 1100 columns");
  }
}

// Sets FLASHMSA_PLAN_BUCKETS for a test and restores the caller's value (or its absence)
// afterwards, even when a check bails out of the test early.
struct PlanBucketsEnv {
  PlanBucketsEnv() {
    const char* v = std::getenv("FLASHMSA_PLAN_BUCKETS");
    had = v != nullptr;
    if (had) old = v;
  }
  ~PlanBucketsEnv() {
    if (had) ::setenv("FLASHMSA_PLAN_BUCKETS", old.c_str(), 1);
    else ::unsetenv("FLASHMSA_PLAN_BUCKETS");
  }
  bool had = false;
  std::string old;
};

// Two plan paths, deterministically (the random shapes above reach them too, depending on
// their draws and the SM count):
// - tail units (tail_split, prefill_kvouter_detail.cuh): rows of the last KV head split off
//   a 4-tile unit where that head has between SMs and 3 x SMs CSR rows. One request with
//   SMs + 4 pages and 1,024 queries gives every earlier page about 15,000 / (SMs + 4)
//   entries (12-28 tiles of 8 queries on a 132-SM H200), so nearly every row splits;
//   run on both plans (the bucketed one builds these units in plan_units_bucketed);
// - the single-kernel row scan (scan_single: more than 16,384 sub-counters, at most 16
//   scan blocks of 4,096 rows) over two blocks with non-empty rows in the second: 8 KV
//   heads x 22 requests x 24 columns = 4,224 rows x 8 sub-counters, the last KV head's
//   rows of the later requests past row 4,096.
TEST(CudaPrefill, TailUnitsAndSingleScan) {
  REQUIRE_GPU();
  int dev = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  {
    const PlanBucketsEnv guard;
    for (const char* plan : {"0", "2"})  // the CSR plan, then the bucketed one (this shape's default)
      for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
        ::setenv("FLASHMSA_PLAN_BUCKETS", plan, 1);
        Case c;
        c.reqs = {{1024, (sms + 4) * 128 - 1024}};
        c.hq = 16;
        c.hkv = 1;
        c.format = f;
        c.seed = 60 + static_cast<int>(f);
        check_case(c, std::string("tail units: ") + kv_format_name(f) + " 16/1, " + std::to_string(sms + 4) +
                          " pages, FLASHMSA_PLAN_BUCKETS=" + plan);
      }
  }
  Case w;
  Rng rng(71);
  std::uniform_int_distribution<int> qlen(1, 40), prefix(2600, 3000);
  for (int b = 0; b < 22; ++b) w.reqs.push_back({qlen(rng), prefix(rng)});
  w.hq = 8;
  w.hkv = 8;
  w.min_width = 24;
  w.format = KvFormat::fp8;
  w.seed = 70;
  check_case(w, "single-kernel scan: 8 KV heads x 22 requests x 24 columns");
}

// The two plan paths (prefill_plan.cu) on plans small enough for bucketed lists
// (plan_count_bucketed + plan_units_bucketed, the default there; FLASHMSA_PLAN_BUCKETS=2
// makes the call fail where they would not run) and forced onto the CSR list
// (FLASHMSA_PLAN_BUCKETS=0: plan_count, plan_units, plan_fill): both match the CPU, and
// bitwise each other (which unit or tile holds a (query, page) does not change its
// partial). Shapes: one KV head; four KV heads with messy top-k (order classes of several
// heads); 8 KV heads at group size 1 with K = 5; 1,192 rows (plan_units_bucketed's second
// row per thread).
TEST(CudaPrefill, BucketedPlanMatchesCsrPlan) {
  REQUIRE_GPU();
  const PlanBucketsEnv guard;
  std::vector<Case> cases(4);
  cases[0].reqs = {{1024, 2048}};
  cases[0].hq = 16;
  cases[0].hkv = 1;
  cases[0].format = KvFormat::fp8;
  cases[1].reqs = {{300, 1000}, {77, 0}, {1, 130}};
  cases[1].format = KvFormat::nvfp4;
  cases[1].messy = true;
  cases[2].reqs = {{200, 100}, {5, 0}};
  cases[2].hq = 8;
  cases[2].hkv = 8;
  cases[2].topk_k = 5;
  cases[3].reqs = {{64, 19000}, {64, 19000}};  // 4 KV heads x 2 requests x 149 pages
  cases[3].format = KvFormat::bf16;
  std::uint64_t seed = 120;
  for (Case& c : cases) {
    c.seed = seed++;
    const std::string what = std::string(kv_format_name(c.format)) + " " + std::to_string(c.hq) + "/" +
                             std::to_string(c.hkv) + ", T " + std::to_string(c.reqs[0].q_len);
    const Inputs in = make_inputs(c);
    ::setenv("FLASHMSA_PLAN_BUCKETS", "2", 1);
    const Result a = run_gpu(c, in);
    ::setenv("FLASHMSA_PLAN_BUCKETS", "0", 1);
    const Result b = run_gpu(c, in);
    const Result ref = run_cpu(c, in);
    expect_close(a, ref, c.format != KvFormat::bf16, "bucketed: " + what);
    expect_close(b, ref, c.format != KvFormat::bf16, "CSR: " + what);
    EXPECT_EQ(std::memcmp(a.out.view().data, b.out.view().data, a.out.bytes()), 0) << what;
    EXPECT_EQ(std::memcmp(a.lse.view().data, b.lse.view().data, a.lse.bytes()), 0) << what;
  }
}

// Queries whose top-k lacks their own page (the page of their position, where the causal
// mask bites; the indexer always selects it, but the op takes any top-k, D1): every third
// query of each request omits it, so its own page's keys are not attended, and with
// prefix 0 the first page's such queries have no valid slot at all (0 and -inf, D5).
// Chunks that start mid-page (prefix 1000, 127) and q_len 1, at G = 16, 8 and 1. (An
// unmapped page is not a valid input: the op's validation rejects a block-table entry
// outside [0, num_pages).)
TEST(CudaPrefill, MissingOwnPage) {
  REQUIRE_GPU();
  const int heads[][2] = {{16, 1}, {8, 1}, {8, 8}};
  std::uint64_t seed = 90;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4})
    for (auto& h : heads) {
      Case c;
      c.reqs = {{300, 0}, {1, 0}, {140, 1000}, {5, 127}, {64, 256}};
      c.format = f;
      c.hq = h[0];
      c.hkv = h[1];
      c.drop_own = 3;
      c.local_first = seed % 2 == 0;
      c.seed = seed++;
      check_case(c, std::string("missing own page: ") + kv_format_name(f) + " " + std::to_string(h[0]) + "/" +
                        std::to_string(h[1]));
    }
}

// No host synchronisation and a stream-ordered workspace: the call captures into a CUDA
// graph, and replays of the graph match the CPU backend.
TEST(CudaPrefill, GraphCapture) {
  REQUIRE_GPU();
  for (KvFormat f : {KvFormat::bf16, KvFormat::nvfp4}) {
    Case c;
    c.reqs = {{300, 1000}, {1, 0}, {64, 127}};
    c.format = f;
    c.hq = 32;
    c.hkv = 2;
    const Inputs in = make_inputs(c);
    expect_close(run_gpu(c, in, true), run_cpu(c, in), f != KvFormat::bf16,
                 std::string("graph ") + kv_format_name(f));
  }
}

// The v1 query-outer kernel stays selectable for the side-by-side measurement. It loads
// unused token slots unmasked (0 x NaN in its PV product), so its cases keep finite
// garbage there.
TEST(CudaPrefill, QueryOuterStillMatches) {
  REQUIRE_GPU();
  struct EnvGuard {  // unset even when a check bails out of the test early
    EnvGuard() { ::setenv("FLASHMSA_PREFILL_KERNEL", "query_outer", 1); }
    ~EnvGuard() { ::unsetenv("FLASHMSA_PREFILL_KERNEL"); }
  } guard;
  for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
    Case c;
    c.reqs = kMixed;
    c.format = f;
    c.hq = 16;
    c.hkv = 1;
    c.messy = true;
    c.nan_slots = false;
    check_case(c, std::string("query-outer ") + kv_format_name(f));
  }
}

}  // namespace
}  // namespace flashmsa

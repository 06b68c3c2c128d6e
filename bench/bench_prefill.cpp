// Prefill sparse attention benchmark (issue: Hopper prefill): one request of q_len new
// tokens after `prefix` cached ones, top-16 pages per (row, KV head) chosen at random
// with the local page forced, shuffled block table; each format. Median of `--reps`
// CUDA-event timings after warm-up; effective TFLOP/s over the keys actually visible to
// each query (4 x 128 x Hq per query-key pair), as a fraction of the measured H200
// peaks (BF16 807, FP8 1487 TFLOP/s).
//
//   build/bench_prefill [--cases "16/1:8192:0,16/1:8192:32768,..."] [--reps 10] [--csv FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"

using namespace flashmsa;

namespace {

struct Shape {
  int hq, hkv, q_len, prefix;
};

std::vector<Shape> parse(const std::string& s) {
  std::vector<Shape> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    Shape sh{};
    if (std::sscanf(item.c_str(), "%d/%d:%d:%d", &sh.hq, &sh.hkv, &sh.q_len, &sh.prefix) == 4) out.push_back(sh);
  }
  return out;
}

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  std::string cases = "16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:0,64/4:8192:32768";
  std::string csv;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--cases") cases = argv[i + 1];
    else if (a == "--reps") reps = std::stoi(argv[i + 1]);
    else if (a == "--csv") csv = argv[i + 1];
  }
  FILE* fp = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (fp) std::fprintf(fp, "hq,hkv,q_len,prefix,format,us,tflops,frac_of_peak\n");
  for (const Shape& sh : parse(cases)) {
    const int T = sh.q_len, seq = sh.q_len + sh.prefix, pages = (seq + 127) / 128;
    std::mt19937_64 rng(7);
    std::vector<std::int32_t> perm(static_cast<size_t>(pages));
    for (int i = 0; i < pages; ++i) perm[static_cast<size_t>(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::int32_t> topk(static_cast<size_t>(T) * sh.hkv * 16, -1);
    double pairs = 0;  // visible (query, key) pairs
    for (int j = 0; j < T; ++j) {
      const int pos = sh.prefix + j, local = pos / 128;
      const int nh = std::min(local, 15);
      pairs += static_cast<double>(sh.hkv) * (nh * 128 + pos % 128 + 1);
      for (int g = 0; g < sh.hkv; ++g) {
        std::int32_t* e = topk.data() + (static_cast<size_t>(j) * sh.hkv + g) * 16;
        for (int k = 0; k < nh; ++k) {
          int cand;
          bool dup;
          do {  // distinct random history pages
            cand = static_cast<int>(rng() % static_cast<std::uint64_t>(local));
            dup = std::find(e, e + k, cand) != e + k;
          } while (dup);
          e[k] = cand;
        }
        e[nh] = local;
      }
    }
    const double flops = 4.0 * 128 * (sh.hq / sh.hkv) * pairs;
    std::int32_t cu_h[2] = {0, T}, seq_h[1] = {seq};
    for (KvFormat fmt : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
      const bool fp8q = fmt != KvFormat::bf16;
      const std::int64_t dlast = fmt == KvFormat::nvfp4 ? 64 : 128;
      const std::int64_t es = fmt == KvFormat::bf16 ? 2 : 1;
      const std::int64_t side = static_cast<std::int64_t>(pages) * sh.hkv * 128 * dlast * es;
      void *q, *k, *v, *ks = nullptr, *vs = nullptr, *out, *d_topk, *bt, *cu, *sl;
      CK(cudaMalloc(&q, static_cast<size_t>(T) * sh.hq * 128 * (fp8q ? 1 : 2)));
      CK(cudaMalloc(&k, static_cast<size_t>(side)));
      CK(cudaMalloc(&v, static_cast<size_t>(side)));
      if (fmt == KvFormat::nvfp4) {
        CK(cudaMalloc(&ks, static_cast<size_t>(pages) * sh.hkv * 128 * 8));
        CK(cudaMalloc(&vs, static_cast<size_t>(pages) * sh.hkv * 128 * 8));
        CK(cudaMemset(ks, 0x38, static_cast<size_t>(pages) * sh.hkv * 128 * 8));
        CK(cudaMemset(vs, 0x38, static_cast<size_t>(pages) * sh.hkv * 128 * 8));
      }
      CK(cudaMalloc(&out, static_cast<size_t>(T) * sh.hq * 128 * 2));
      CK(cudaMalloc(&d_topk, topk.size() * 4));
      CK(cudaMalloc(&bt, static_cast<size_t>(pages) * 4));
      CK(cudaMalloc(&cu, 8));
      CK(cudaMalloc(&sl, 4));
      CK(cudaMemset(q, 0x22, static_cast<size_t>(T) * sh.hq * 128 * (fp8q ? 1 : 2)));
      CK(cudaMemset(k, 0x22, static_cast<size_t>(side)));
      CK(cudaMemset(v, 0x22, static_cast<size_t>(side)));
      CK(cudaMemcpy(d_topk, topk.data(), topk.size() * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(bt, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(cu, cu_h, 8, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(sl, seq_h, 4, cudaMemcpyHostToDevice));
      const DType ddt = fmt == KvFormat::bf16 ? DType::bf16 : fmt == KvFormat::fp8 ? DType::e4m3 : DType::u8;
      SparseAttentionPrefillArgs a;
      a.q = make_view(q, fp8q ? DType::e4m3 : DType::bf16, {T, sh.hq, 128}, Device::cuda);
      a.kv.format = fmt;
      a.kv.k.data = make_view(k, ddt, {pages, sh.hkv, 128, dlast}, Device::cuda);
      a.kv.v.data = make_view(v, ddt, {pages, sh.hkv, 128, dlast}, Device::cuda);
      if (ks) {
        a.kv.k.block_scale = make_view(ks, DType::e4m3, {pages, sh.hkv, 128, 8}, Device::cuda);
        a.kv.v.block_scale = make_view(vs, DType::e4m3, {pages, sh.hkv, 128, 8}, Device::cuda);
      }
      a.topk_indices = make_view(d_topk, DType::i32, {T, sh.hkv, 16}, Device::cuda);
      a.block_table = make_view(bt, DType::i32, {1, pages}, Device::cuda);
      a.cu_seqlens_q = make_view(cu, DType::i32, {2}, Device::cuda);
      a.seq_lens = make_view(sl, DType::i32, {1}, Device::cuda);
      a.q_scale = fp8q ? 0.05f : 1.0f;
      a.out = make_view(out, DType::bf16, {T, sh.hq, 128}, Device::cuda);
      Status st = sparse_attention_prefill(a);
      if (!st.ok()) {
        std::fprintf(stderr, "%s\n", st.message().c_str());
        return 1;
      }
      CK(cudaDeviceSynchronize());
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<float> ms;
      for (int r = 0; r < reps + 2; ++r) {
        CK(cudaEventRecord(e0));
        sparse_attention_prefill(a);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float t = 0;
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (r >= 2) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double us = ms[ms.size() / 2] * 1000.0;
      const double tf = flops / (us * 1e-6) / 1e12;
      const double peak = fp8q ? 1487.0 : 807.0;
      std::printf("prefill %2d/%d q_len %6d prefix %7d  %-5s  %10.1f us  %7.1f TFLOP/s  %5.1f%% of %s peak\n",
                  sh.hq, sh.hkv, sh.q_len, sh.prefix, kv_format_name(fmt), us, tf, 100 * tf / peak,
                  fp8q ? "FP8" : "BF16");
      std::fflush(stdout);
      if (fp)
        std::fprintf(fp, "%d,%d,%d,%d,%s,%.2f,%.2f,%.4f\n", sh.hq, sh.hkv, sh.q_len, sh.prefix,
                     kv_format_name(fmt), us, tf, tf / peak);
      for (void* p : {q, k, v, ks, vs, out, d_topk, bt, cu, sl}) cudaFree(p);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
    }
  }
  if (fp) std::fclose(fp);
  return 0;
}

// Indexer benchmark (issue: Hopper indexer): page scores + top-16 on the GPU.
// Prefill: one request of q_len rows over kv_len tokens; decode: batch x Q rows at a
// given context. Index q e4m3 over an e4m3 index-K cache (and bf16/bf16), median of
// `--reps` CUDA-event timings after warm-up. Reports us, score TFLOP/s (2 x 128 x H per
// visible query-key pair) against the 1487 FP8 / 807 BF16 peaks, and, for decode, the
// index-K bytes read per second against 4.2 TB/s.
//
//   build/bench_indexer [--reps 3] [--csv FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"

using namespace flashmsa;

namespace {

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
      return false;                                                                           \
    }                                                                                         \
  } while (0)

struct Shape {
  const char* kind;  // "prefill" or "decode"
  int batch, q, heads;
  long long kv;
};

bool run(const Shape& sh, bool fp8, int reps, FILE* csv) {
  const bool decode = std::string(sh.kind) == "decode";
  const int B = sh.batch, rows = decode ? sh.batch * sh.q : sh.q;
  const long long pages_per_req = (sh.kv + 127) / 128;
  const long long pages = pages_per_req * B;
  const size_t es = fp8 ? 1 : 2;
  void *q, *k, *topk, *bt, *cu, *sl;
  CK(cudaMalloc(&q, static_cast<size_t>(rows) * sh.heads * 128 * es));
  CK(cudaMalloc(&k, static_cast<size_t>(pages) * 128 * 128 * es));
  CK(cudaMalloc(&topk, static_cast<size_t>(rows) * sh.heads * 16 * 4));
  CK(cudaMalloc(&bt, static_cast<size_t>(pages) * 4));
  CK(cudaMalloc(&cu, static_cast<size_t>(B + 1) * 4));
  CK(cudaMalloc(&sl, static_cast<size_t>(B) * 4));
  CK(cudaMemset(q, 0x31, static_cast<size_t>(rows) * sh.heads * 128 * es));
  // Distinct page maxima: a ramp of byte values over pages (timing does not depend on it).
  std::vector<unsigned char> kh(static_cast<size_t>(128 * 128 * es));
  for (long long p = 0; p < pages; ++p) {
    std::fill(kh.begin(), kh.end(), static_cast<unsigned char>(0x20 + p % 23));
    CK(cudaMemcpy(static_cast<char*>(k) + p * 128 * 128 * es, kh.data(), kh.size(), cudaMemcpyHostToDevice));
  }
  std::vector<std::int32_t> bth(static_cast<size_t>(pages)), cuh(static_cast<size_t>(B + 1)), slh(static_cast<size_t>(B));
  for (long long i = 0; i < pages; ++i) bth[static_cast<size_t>(i)] = static_cast<std::int32_t>(i);
  for (int b = 0; b <= B; ++b) cuh[static_cast<size_t>(b)] = decode ? b * sh.q : (b == 0 ? 0 : sh.q);
  for (int b = 0; b < B; ++b) slh[static_cast<size_t>(b)] = static_cast<std::int32_t>(sh.kv);
  CK(cudaMemcpy(bt, bth.data(), bth.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(cu, cuh.data(), cuh.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sl, slh.data(), slh.size() * 4, cudaMemcpyHostToDevice));
  IndexKCache cache;
  cache.format = fp8 ? KvFormat::fp8 : KvFormat::bf16;
  cache.data = make_view(k, fp8 ? DType::e4m3 : DType::bf16, {pages, 128, 128}, Device::cuda);
  const DType qdt = fp8 ? DType::e4m3 : DType::bf16;
  auto call = [&]() -> Status {
    if (decode) {
      IndexerDecodeArgs a;
      a.q = make_view(q, qdt, {rows, sh.heads, 128}, Device::cuda);
      a.index_k = cache;
      a.block_table = make_view(bt, DType::i32, {B, pages_per_req}, Device::cuda);
      a.seq_lens = make_view(sl, DType::i32, {B}, Device::cuda);
      a.queries_per_request = sh.q;
      a.topk_indices = make_view(topk, DType::i32, {rows, sh.heads, 16}, Device::cuda);
      return indexer_decode(a);
    }
    IndexerPrefillArgs a;
    a.q = make_view(q, qdt, {rows, sh.heads, 128}, Device::cuda);
    a.index_k = cache;
    a.block_table = make_view(bt, DType::i32, {B, pages_per_req}, Device::cuda);
    a.cu_seqlens_q = make_view(cu, DType::i32, {B + 1}, Device::cuda);
    a.seq_lens = make_view(sl, DType::i32, {B}, Device::cuda);
    a.topk_indices = make_view(topk, DType::i32, {rows, sh.heads, 16}, Device::cuda);
    return indexer_prefill(a);
  };
  Status st = call();
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return false;
  }
  CK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {
    CK(cudaEventRecord(e0));
    call();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float t = 0;
    CK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1000.0;
  // Visible history keys per row: all complete pages before the local one.
  double pairs = 0;
  for (int r = 0; r < rows; ++r) {
    const long long pos = decode ? sh.kv - sh.q + r % sh.q : sh.kv - sh.q + r;
    pairs += static_cast<double>(pos / 128) * 128;
  }
  const double tf = 2.0 * 128 * sh.heads * pairs / (us * 1e-6) / 1e12;
  const double peak = fp8 ? 1487.0 : 807.0;
  const double kbytes = static_cast<double>(pages) * 128 * 128 * es;
  const double tbs = kbytes / (us * 1e-6) / 1e12;
  std::printf("indexer %-7s B=%-3d q=%-5d H=%d kv=%-8lld %-4s %10.1f us  %7.1f TFLOP/s (%4.1f%%)  index-K %5.2f TB/s (%4.1f%%)\n",
              sh.kind, B, sh.q, sh.heads, sh.kv, fp8 ? "e4m3" : "bf16", us, tf, 100 * tf / peak, tbs,
              100 * tbs / 4.2);
  std::fflush(stdout);
  if (csv)
    std::fprintf(csv, "%s,%d,%d,%d,%lld,%s,%.2f,%.3f,%.4f\n", sh.kind, B, sh.q, sh.heads, sh.kv,
                 fp8 ? "e4m3" : "bf16", us, tf, tbs);
  for (void* p : {q, k, topk, bt, cu, sl}) cudaFree(p);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 3;
  std::string csv;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--reps") reps = std::stoi(argv[i + 1]);
    else if (a == "--csv") csv = argv[i + 1];
  }
  FILE* fp = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (fp) std::fprintf(fp, "kind,batch,q,heads,kv,dtype,us,tflops,index_k_tb_s\n");
  // v1 kernel: shapes kept small enough to finish quickly (the 1M-token prefill
  // and 128K decode shapes need the tensor-core version).
  const Shape shapes[] = {{"prefill", 1, 128, 1, 32768}, {"prefill", 1, 128, 4, 32768},
                          {"decode", 8, 8, 4, 32768},    {"decode", 32, 8, 4, 16384}};
  for (const Shape& s : shapes)
    for (bool fp8 : {true, false})
      if (!run(s, fp8, reps, fp)) return 1;
  if (fp) std::fclose(fp);
  return 0;
}

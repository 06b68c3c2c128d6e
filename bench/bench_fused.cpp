// Fused QK-norm + RoPE + cache insert benchmark (issue 6): T tokens of one layer,
// heads 64/4 and 16/1, BF16 path (bf16 q / caches) and FP8 path (e4m3 q, index q,
// fp8 K/V and index-K caches). Median of `--reps` CUDA-event timings after warm-up;
// effective GB/s over the bytes that must move (qkv row read, cos/sin row, positions and
// slots; q, index q, K, V and index-K written) against the measured 4.2 TB/s.
//
//   build/bench_fused [--heads 64/4,16/1] [--tokens 1,64,8192,65536] [--reps 50] [--csv FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"
#include "flashmsa/fused.h"

#include "bench_util.h"

using namespace flashmsa;
using flashmsa::bench::split;

namespace {

constexpr double kPeakGBs = 4200.0;

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

struct DevBuf {
  void* p = nullptr;
  ~DevBuf() { cudaFree(p); }
};

}  // namespace

int main(int argc, char** argv) {
  std::string heads = "64/4,16/1", tokens = "1,64,8192,65536", csv;
  int reps = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--heads") heads = argv[i + 1];
    else if (a == "--tokens") tokens = argv[i + 1];
    else if (a == "--reps") reps = std::stoi(argv[i + 1]);
    else if (a == "--csv") csv = argv[i + 1];
  }
  FILE* fp = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (fp) std::fprintf(fp, "hq,hkv,tokens,path,us,gbs,frac_of_peak\n");
  std::printf("%-8s %8s %-5s %10s %10s %8s\n", "heads", "tokens", "path", "us", "GB/s", "of 4.2");
  const int max_pos = 1 << 20;
  for (const std::string& hs : split(heads)) {
    int hq = 0, hkv = 0;
    if (std::sscanf(hs.c_str(), "%d/%d", &hq, &hkv) != 2) continue;
    for (const std::string& ts : split(tokens)) {
      const int t = std::stoi(ts);
      const int pages = (t + 127) / 128;
      const std::int64_t row = (hq + 3LL * hkv) * 128 + 128;
      for (int fp8 = 0; fp8 < 2; ++fp8) {
        const std::size_t es = fp8 ? 1 : 2;
        DevBuf qkv, w, cs, pos, slots, kv, ik, q, iq;
        CK(cudaMalloc(&qkv.p, static_cast<std::size_t>(t) * row * 2));
        CK(cudaMemset(qkv.p, 0x3c, static_cast<std::size_t>(t) * row * 2));
        CK(cudaMalloc(&w.p, 4 * 128 * 2));
        CK(cudaMemset(w.p, 0, 4 * 128 * 2));
        CK(cudaMalloc(&cs.p, static_cast<std::size_t>(max_pos) * 64 * 2));
        CK(cudaMemset(cs.p, 0x3c, static_cast<std::size_t>(max_pos) * 64 * 2));
        std::vector<std::int32_t> h(static_cast<std::size_t>(t));
        for (int i = 0; i < t; ++i) h[static_cast<std::size_t>(i)] = i;
        CK(cudaMalloc(&pos.p, static_cast<std::size_t>(t) * 4 + 16));
        CK(cudaMemcpy(pos.p, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&slots.p, static_cast<std::size_t>(t) * 4 + 16));
        CK(cudaMemcpy(slots.p, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMalloc(&kv.p, static_cast<std::size_t>(pages) * hkv * 128 * 256 * es));
        CK(cudaMalloc(&ik.p, static_cast<std::size_t>(pages) * 128 * 128 * es));
        CK(cudaMalloc(&q.p, static_cast<std::size_t>(t) * hq * 128 * es));
        CK(cudaMalloc(&iq.p, static_cast<std::size_t>(t) * hkv * 128 * es));

        const DType d8 = fp8 ? DType::e4m3 : DType::bf16;
        const KvFormat f = fp8 ? KvFormat::fp8 : KvFormat::bf16;
        FusedQkvInsertArgs a;
        a.qkv = make_view(qkv.p, DType::bf16, {t, row}, Device::cuda);
        auto* wp = static_cast<std::uint16_t*>(w.p);
        a.q_norm_weight = make_view(wp, DType::bf16, {128}, Device::cuda);
        a.k_norm_weight = make_view(wp + 128, DType::bf16, {128}, Device::cuda);
        a.index_q_norm_weight = make_view(wp + 256, DType::bf16, {128}, Device::cuda);
        a.index_k_norm_weight = make_view(wp + 384, DType::bf16, {128}, Device::cuda);
        a.cos_sin_cache = make_view(cs.p, DType::bf16, {max_pos, 64}, Device::cuda);
        a.positions = make_view(pos.p, DType::i32, {t}, Device::cuda);
        a.num_q_heads = hq;
        a.num_kv_heads = hkv;
        a.num_index_heads = hkv;
        a.slot_mapping = make_view(slots.p, DType::i32, {t}, Device::cuda);
        a.index_slot_mapping = a.slot_mapping;
        Status s = packed_kv_views(make_view(kv.p, d8, {pages, hkv, 128, 256}, Device::cuda), f,
                                   1.0f, 1.0f, &a.kv);
        if (!s.ok()) {
          std::fprintf(stderr, "%s\n", s.message().c_str());
          return 1;
        }
        a.index_k.format = f;
        a.index_k.data = make_view(ik.p, d8, {pages, 128, 128}, Device::cuda);
        a.q_out = make_view(q.p, d8, {t, hq, 128}, Device::cuda);
        a.q_scale = fp8 ? 0.05f : 1.0f;
        a.index_q_out = make_view(iq.p, d8, {t, hkv, 128}, Device::cuda);

        for (int i = 0; i < 5; ++i) {
          s = fused_qknorm_rope_insert(a);
          if (!s.ok()) {
            std::fprintf(stderr, "%s\n", s.message().c_str());
            return 1;
          }
        }
        CK(cudaDeviceSynchronize());
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<float> ms;
        for (int r = 0; r < reps; ++r) {
          CK(cudaEventRecord(e0));
          (void)fused_qknorm_rope_insert(a);
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float m = 0;
          CK(cudaEventElapsedTime(&m, e0, e1));
          ms.push_back(m);
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        std::sort(ms.begin(), ms.end());
        const double us = ms[ms.size() / 2] * 1e3;
        const double bytes =
            static_cast<double>(t) *
            (row * 2.0 + 64 * 2 + 4 * 3 +                          // qkv row, cos/sin, pos + slots
             (hq * 128.0 + hkv * 128.0) * es +                     // q, index q
             2.0 * hkv * 128 * es + 128.0 * es);                   // K, V, index K
        const double gbs = bytes / (us * 1e3);
        const char* path = fp8 ? "fp8" : "bf16";
        std::printf("%-8s %8d %-5s %10.2f %10.1f %7.1f%%\n", hs.c_str(), t, path, us, gbs,
                    100.0 * gbs / kPeakGBs);
        if (fp) std::fprintf(fp, "%d,%d,%d,%s,%.3f,%.1f,%.4f\n", hq, hkv, t, path, us, gbs, gbs / kPeakGBs);
      }
    }
  }
  if (fp) std::fclose(fp);
  return 0;
}

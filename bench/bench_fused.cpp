// Fused QK-norm + RoPE + cache insert benchmark (issue 6): T tokens of one layer,
// heads 64/4 and 16/1, one path per cache format:
//   bf16     bf16 q / index q, bf16 K/V and index-K caches
//   fp8      e4m3 q (q_scale 0.05) / index q, fp8 K/V (k_scale 0.03, v_scale 0.7), fp8 index K
//   nvfp4    e4m3 q / index q, NVFP4 K/V (linear planes) and NVFP4 index K
//   nvfp4hs  as nvfp4 with vLLM's head-slot page [pages, 2*Hkv, 128, 72], swizzled scales
// us: median over `--reps` replays of a CUDA graph of calls that rotate over copies of
// the per-call buffers (enough for 256 MB, at most 32: cold L2 from about 800 tokens at
// 16/1), per call; us_call: median of single calls between CUDA events, including the
// host-side validation and launch. Effective GB/s (from us) over the bytes that must move
// (qkv row read, cos/sin row, positions, slot mapping (the index slot mapping aliases it);
// q, index q, K, V and index-K written: 128 values at the element size, NVFP4 64 code
// bytes + 8 scale bytes per row) against the measured 4.2 TB/s. The input values are
// random normal
// BF16 (so the FP8 / NVFP4 quantisation takes its common paths).
//
//   build/bench_fused [--heads 64/4,16/1] [--tokens 1,64,8192,65536]
//                     [--paths bf16,fp8,nvfp4,nvfp4hs] [--reps 50] [--csv FILE]
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
using flashmsa::bench::DevBuf;
using flashmsa::bench::split;

namespace {

constexpr double kPeakGBs = 4200.0;

}  // namespace

int main(int argc, char** argv) {
  if (!flashmsa::bench::require_cuda_device("bench_fused")) return 2;
  std::string heads = "64/4,16/1", tokens = "1,64,8192,65536", paths = "bf16,fp8,nvfp4,nvfp4hs", csv;
  int reps = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--heads") heads = argv[i + 1];
    else if (a == "--tokens") tokens = argv[i + 1];
    else if (a == "--reps") reps = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--csv") csv = argv[i + 1];
    else if (a == "--paths") paths = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  FILE* fp = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (fp) std::fprintf(fp, "hq,hkv,tokens,path,us,gbs,frac_of_peak,us_call\n");
  std::printf("%-8s %8s %-8s %10s %10s %8s %10s\n", "heads", "tokens", "path", "us", "GB/s", "of 4.2",
              "us_call");
  const int max_pos = 1 << 20;
  std::vector<std::uint16_t> pattern(std::size_t{1} << 20);
  {
    std::uint64_t st = 88172645463325252ULL;
    for (auto& e : pattern) {  // sum of 4 uniforms ~ normal, as BF16
      float acc = 0.0f;
      for (int k = 0; k < 4; ++k) {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        acc += static_cast<float>(st >> 40) * (1.0f / 16777216.0f) - 0.5f;
      }
      e = float_to_bf16(acc * 1.7f);
    }
  }
  for (const std::string& hs : split(heads)) {
    int hq = 0, hkv = 0;
    if (std::sscanf(hs.c_str(), "%d/%d", &hq, &hkv) != 2) continue;
    for (const std::string& ts : split(tokens)) {
      const int t = std::stoi(ts);
      const int pages = (t + 127) / 128;
      const std::int64_t row = (hq + 3LL * hkv) * 128 + 128;
      for (const std::string& path : split(paths)) {
        const bool bf16 = path == "bf16", fp8 = path == "fp8", nv = path == "nvfp4",
                   nvhs = path == "nvfp4hs";
        if (!bf16 && !fp8 && !nv && !nvhs) {
          std::fprintf(stderr, "unknown path '%s' (bf16, fp8, nvfp4, nvfp4hs)\n", path.c_str());
          return 2;
        }
        const bool nvfp4 = nv || nvhs;
        const std::size_t es = bf16 ? 2 : 1;             // q / index q element size
        const double cache_row = bf16 ? 256.0 : fp8 ? 128.0 : 72.0;  // bytes per cache row
        // Cold L2: the calls of a timed graph rotate over `sets` copies of every per-call
        // buffer (qkv, q, index q, K/V and index-K caches): enough for 256 MB, at most 32
        // copies (so below about 800 tokens at 16/1 the rotation fits in L2: warm).
        const std::size_t qkv_bytes = static_cast<std::size_t>(t) * row * 2;
        // K/V cache: packed [pages, Hkv, 128, 256] (bf16 / fp8) or 2 * Hkv * 128 * 72 bytes
        // per page (nvfp4: head-slot page, or the same bytes split into 4 linear planes).
        const std::size_t kv_bytes = static_cast<std::size_t>(pages) * hkv * 128 *
                                     static_cast<std::size_t>(2 * cache_row);
        const std::size_t ik_bytes = static_cast<std::size_t>(pages) * 128 * static_cast<std::size_t>(cache_row);
        const std::size_t q_bytes = static_cast<std::size_t>(t) * hq * 128 * es;
        const std::size_t iq_bytes = static_cast<std::size_t>(t) * hkv * 128 * es;
        const std::size_t set_bytes = qkv_bytes + kv_bytes + ik_bytes + q_bytes + iq_bytes;
        const int sets = static_cast<int>(std::min<std::size_t>(32, (std::size_t{256} << 20) / set_bytes + 1));
        DevBuf qkv, w, cs, pos, slots, kv, ik, q, iq;
        CUDA_CK(cudaMalloc(&qkv.p, qkv_bytes * sets));
        {  // a 2^20-value random pattern, tiled over every copy of the qkv buffer
          const std::size_t total = static_cast<std::size_t>(t) * row * sets;
          for (std::size_t off = 0; off < total; off += pattern.size()) {
            const std::size_t n = std::min(pattern.size(), total - off);
            CUDA_CK(cudaMemcpy(static_cast<std::uint16_t*>(qkv.p) + off, pattern.data(), n * 2,
                          cudaMemcpyHostToDevice));
          }
        }
        CUDA_CK(cudaMalloc(&w.p, 4 * 128 * 2));
        CUDA_CK(cudaMemset(w.p, 0, 4 * 128 * 2));
        CUDA_CK(cudaMalloc(&cs.p, static_cast<std::size_t>(max_pos) * 64 * 2));
        CUDA_CK(cudaMemset(cs.p, 0x3c, static_cast<std::size_t>(max_pos) * 64 * 2));
        std::vector<std::int32_t> h(static_cast<std::size_t>(t));
        for (int i = 0; i < t; ++i) h[static_cast<std::size_t>(i)] = i;
        CUDA_CK(cudaMalloc(&pos.p, static_cast<std::size_t>(t) * 4 + 16));
        CUDA_CK(cudaMemcpy(pos.p, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CK(cudaMalloc(&slots.p, static_cast<std::size_t>(t) * 4 + 16));
        CUDA_CK(cudaMemcpy(slots.p, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CK(cudaMalloc(&kv.p, kv_bytes * sets));
        CUDA_CK(cudaMalloc(&ik.p, ik_bytes * sets));
        CUDA_CK(cudaMalloc(&q.p, q_bytes * sets));
        CUDA_CK(cudaMalloc(&iq.p, iq_bytes * sets));

        const DType dq = bf16 ? DType::bf16 : DType::e4m3;
        auto build = [&](int set, FusedQkvInsertArgs& a) -> Status {
          void* QKV = static_cast<char*>(qkv.p) + qkv_bytes * set;
          void* KV = static_cast<char*>(kv.p) + kv_bytes * set;
          void* IK = static_cast<char*>(ik.p) + ik_bytes * set;
          void* QO = static_cast<char*>(q.p) + q_bytes * set;
          void* IQ = static_cast<char*>(iq.p) + iq_bytes * set;
          a.qkv = make_view(QKV, DType::bf16, {t, row}, Device::cuda);
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
          Status s;
          if (nvhs) {
            s = nvfp4_head_slot_views(make_view(KV, DType::u8, {pages, 2 * hkv, 128, 72}, Device::cuda),
                                      true, true, 0.03f, 0.7f, &a.kv);
          } else if (nv) {
            auto* b8 = static_cast<std::uint8_t*>(KV);
            const std::int64_t dplane = static_cast<std::int64_t>(pages) * hkv * 128 * 64;
            const std::int64_t splane = static_cast<std::int64_t>(pages) * hkv * 128 * 8;
            a.kv.format = KvFormat::nvfp4;
            a.kv.k.data = make_view(b8, DType::u8, {pages, hkv, 128, 64}, Device::cuda);
            a.kv.v.data = make_view(b8 + dplane, DType::u8, {pages, hkv, 128, 64}, Device::cuda);
            a.kv.k.block_scale = make_view(b8 + 2 * dplane, DType::e4m3, {pages, hkv, 128, 8}, Device::cuda);
            a.kv.v.block_scale =
                make_view(b8 + 2 * dplane + splane, DType::e4m3, {pages, hkv, 128, 8}, Device::cuda);
            a.kv.k.global_scale = 0.03f;
            a.kv.v.global_scale = 0.7f;
          } else {
            s = packed_kv_views(make_view(KV, dq, {pages, hkv, 128, 256}, Device::cuda),
                                bf16 ? KvFormat::bf16 : KvFormat::fp8, bf16 ? 1.0f : 0.03f,
                                bf16 ? 1.0f : 0.7f, &a.kv);
          }
          if (!s.ok()) return s;
          if (nvfp4) {
            auto* i8 = static_cast<std::uint8_t*>(IK);
            a.index_k.format = KvFormat::nvfp4;
            a.index_k.data = make_view(i8, DType::u8, {pages, 128, 64}, Device::cuda);
            a.index_k.block_scale = make_view(i8 + static_cast<std::int64_t>(pages) * 128 * 64,
                                              DType::e4m3, {pages, 128, 8}, Device::cuda);
          } else {
            a.index_k.format = bf16 ? KvFormat::bf16 : KvFormat::fp8;
            a.index_k.data = make_view(IK, dq, {pages, 128, 128}, Device::cuda);
          }
          a.q_out = make_view(QO, dq, {t, hq, 128}, Device::cuda);
          a.q_scale = bf16 ? 1.0f : 0.05f;
          a.index_q_out = make_view(IQ, dq, {t, hkv, 128}, Device::cuda);
          return Status::Ok();
        };
        std::vector<FusedQkvInsertArgs> args(static_cast<std::size_t>(sets));
        for (int set = 0; set < sets; ++set) {
          const Status st = build(set, args[static_cast<std::size_t>(set)]);
          if (!st.ok()) {
            std::fprintf(stderr, "%s\n", st.message().c_str());
            return 1;
          }
        }
        FusedQkvInsertArgs& a = args[0];
        Status s;

        for (int i = 0; i < 5; ++i) {
          s = fused_qknorm_rope_insert(a);
          if (!s.ok()) {
            std::fprintf(stderr, "%s\n", s.message().c_str());
            return 1;
          }
        }
        CUDA_CK(cudaDeviceSynchronize());
        cudaEvent_t e0, e1;
        CUDA_CK(cudaEventCreate(&e0));
        CUDA_CK(cudaEventCreate(&e1));
        // (1) kernel time: a CUDA graph of `calls` calls rotating over the buffer sets
        // (cold L2), replayed `reps` times; median replay time / calls.
        const int calls = std::max(sets, 8);
        cudaStream_t stream;
        CUDA_CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CUDA_CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        for (int c = 0; c < calls; ++c) {
          FusedQkvInsertArgs ac = args[static_cast<std::size_t>(c % sets)];
          ac.stream = stream;
          s = fused_qknorm_rope_insert(ac);
          if (!s.ok()) {
            std::fprintf(stderr, "%s\n", s.message().c_str());
            cudaGraph_t g = nullptr;
            (void)cudaStreamEndCapture(stream, &g);
            if (g) cudaGraphDestroy(g);
            return 1;
          }
        }
        CUDA_CK(cudaStreamEndCapture(stream, &graph));
        CUDA_CK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CK(cudaGraphLaunch(exec, stream));  // warm-up replay
        std::vector<float> ms;
        for (int r = 0; r < reps; ++r) {
          CUDA_CK(cudaEventRecord(e0, stream));
          CUDA_CK(cudaGraphLaunch(exec, stream));
          CUDA_CK(cudaEventRecord(e1, stream));
          CUDA_CK(cudaEventSynchronize(e1));
          float m = 0;
          CUDA_CK(cudaEventElapsedTime(&m, e0, e1));
          ms.push_back(m / calls);
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
        cudaStreamDestroy(stream);
        // (2) one call between events on the default stream, including the host-side
        // validation and launch (what an eager caller sees).
        std::vector<float> ms_call;
        for (int r = 0; r < reps; ++r) {
          CUDA_CK(cudaEventRecord(e0));
          (void)fused_qknorm_rope_insert(args[static_cast<std::size_t>(r % sets)]);
          CUDA_CK(cudaEventRecord(e1));
          CUDA_CK(cudaEventSynchronize(e1));
          float m = 0;
          CUDA_CK(cudaEventElapsedTime(&m, e0, e1));
          ms_call.push_back(m);
        }
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        std::sort(ms.begin(), ms.end());
        std::sort(ms_call.begin(), ms_call.end());
        const double us = ms[ms.size() / 2] * 1e3;
        const double us_call = ms_call[ms_call.size() / 2] * 1e3;
        const double bytes =
            static_cast<double>(t) *
            (row * 2.0 + 64 * 2 + 4 * 2 +                          // qkv row, cos/sin, pos + slots
             (hq * 128.0 + hkv * 128.0) * es +                     // q, index q
             (2.0 * hkv + 1.0) * cache_row);                       // K, V, index K
        const double gbs = bytes / (us * 1e3);
        std::printf("%-8s %8d %-8s %10.2f %10.1f %7.1f%% %10.2f\n", hs.c_str(), t, path.c_str(), us,
                    gbs, 100.0 * gbs / kPeakGBs, us_call);
        if (fp)
          std::fprintf(fp, "%d,%d,%d,%s,%.3f,%.1f,%.4f,%.3f\n", hq, hkv, t, path.c_str(), us, gbs,
                       gbs / kPeakGBs, us_call);
      }
    }
  }
  if (fp) std::fclose(fp);
  return 0;
}

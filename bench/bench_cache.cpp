// Cache write path benchmark (issue 6): cache_insert in every K/V format (bf16, fp8
// packed view, nvfp4 linear, nvfp4 head-slot with swizzled scales), index_cache_insert
// (bf16, fp8, nvfp4), quantize_query_e4m3 (Hq heads) and dense nvfp4_to_fp8 (T*Hkv
// rows) and nvfp4_to_fp8_selected (decode-like: one top-16 row per 128 tokens, random
// logical pages of a single request spanning the P pages, head-slot swizzled cache),
// at each token count and head configuration. Slots: consecutive tokens fill
// shuffled pages (a prefill). Each timed call runs after an L2 flush (256 MiB memset
// outside the timed events); median of `--reps` CUDA-event timings after 2 warm-ups.
// GB/s counts the bytes read (inputs + slot mapping) and written (cache rows + scales;
// selected: 72 bytes read and 128 written per token row of each unique (page, head) pair,
// both sides, counted on the host),
// as a fraction of the measured 4.2 TB/s H200 copy ceiling.
//
//   build/bench_cache [--tokens 1,64,8192,65536] [--heads 64/4,16/1] [--reps 20] [--csv FILE]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"

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
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// Device buffers freed at the end of a configuration.
struct Arena {
  std::vector<void*> ptrs;
  void* get(std::size_t bytes, int fill = -1) {
    void* p = nullptr;
    CK(cudaMalloc(&p, bytes ? bytes : 16));
    if (fill >= 0) CK(cudaMemset(p, fill, bytes));
    ptrs.push_back(p);
    return p;
  }
  ~Arena() {
    for (void* p : ptrs) cudaFree(p);
  }
};

void* upload_random_bf16(Arena& a, std::size_t n, std::uint64_t seed) {
  std::vector<std::uint16_t> h(n);
  std::uint64_t s = seed | 1;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    h[i] = float_to_bf16(static_cast<float>(static_cast<std::int32_t>(s >> 32)) * (4.0f / 2147483648.0f));
  }
  void* d = a.get(n * 2);
  CK(cudaMemcpy(d, h.data(), n * 2, cudaMemcpyHostToDevice));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  if (!flashmsa::bench::require_cuda_device("bench_cache")) return 2;
  std::string tokens_arg = "1,64,8192,65536", heads_arg = "64/4,16/1", csv;
  int reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tokens") tokens_arg = argv[i + 1];
    else if (a == "--heads") heads_arg = argv[i + 1];
    else if (a == "--reps") reps = std::max(1, std::stoi(argv[i + 1]));
    else if (a == "--csv") csv = argv[i + 1];
    else {
      std::fprintf(stderr, "unknown option %s (--tokens, --heads, --reps, --csv)\n", a.c_str());
      return 2;
    }
  }
  FILE* fp = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (fp) std::fprintf(fp, "op,format,hq,hkv,tokens,us,bytes,gbs,frac_of_peak\n");
  const std::size_t flush_bytes = 256u << 20;
  void* flush = nullptr;
  CK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  std::printf("%-14s %-16s %6s %7s %10s %10s %9s %7s\n", "op", "format", "heads", "tokens", "us",
              "MB", "GB/s", "%peak");
  for (const std::string& hs : split(heads_arg)) {
    int hq = 0, hkv = 0;
    if (std::sscanf(hs.c_str(), "%d/%d", &hq, &hkv) != 2) continue;
    for (const std::string& ts : split(tokens_arg)) {
      const std::int64_t T = std::stoll(ts);
      const std::int64_t P = (T + 127) / 128 + 1;
      Arena a;
      // Slots: token i -> page perm[i / 128], offset i % 128.
      std::mt19937_64 rng(static_cast<std::uint64_t>(T) * 31 + static_cast<std::uint64_t>(hkv));
      std::vector<std::int32_t> perm(static_cast<std::size_t>(P)), slots(static_cast<std::size_t>(T));
      for (std::int64_t p = 0; p < P; ++p) perm[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(p);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (std::int64_t i = 0; i < T; ++i)
        slots[static_cast<std::size_t>(i)] = perm[static_cast<std::size_t>(i / 128)] * 128 + static_cast<std::int32_t>(i % 128);
      void* d_slots = a.get(static_cast<std::size_t>(T) * 4);
      CK(cudaMemcpy(d_slots, slots.data(), static_cast<std::size_t>(T) * 4, cudaMemcpyHostToDevice));
      const TensorView sm = make_view(d_slots, DType::i32, {T}, Device::cuda);
      const std::size_t kv_elems = static_cast<std::size_t>(T * hkv * 128);
      const TensorView k = make_view(upload_random_bf16(a, kv_elems, 1), DType::bf16, {T, hkv, 128}, Device::cuda);
      const TensorView v = make_view(upload_random_bf16(a, kv_elems, 2), DType::bf16, {T, hkv, 128}, Device::cuda);
      const TensorView ik = make_view(upload_random_bf16(a, static_cast<std::size_t>(T) * 128, 3), DType::bf16, {T, 128}, Device::cuda);

      struct Case {
        std::string op, fmt;
        double bytes;
        std::function<Status()> fn;
      };
      std::vector<Case> cases;
      const double TH = static_cast<double>(T) * hkv, slot_bytes = 4.0 * T;
      const double kv_read = 2 * TH * 256 + slot_bytes;
      {  // K/V bf16, separate caches
        const TensorView kc = make_view(a.get(static_cast<std::size_t>(P * hkv * 128 * 256)), DType::bf16, {P, hkv, 128, 128}, Device::cuda);
        const TensorView vc = make_view(a.get(static_cast<std::size_t>(P * hkv * 128 * 256)), DType::bf16, {P, hkv, 128, 128}, Device::cuda);
        PagedKvCache c;
        c.format = KvFormat::bf16;
        c.k.data = kc;
        c.v.data = vc;
        cases.push_back({"cache_insert", "bf16", kv_read + 2 * TH * 256, [=] { return cache_insert(k, v, sm, c); }});
      }
      {  // K/V fp8, vLLM packed [P, Hkv, 128, 256]
        const TensorView buf = make_view(a.get(static_cast<std::size_t>(P * hkv * 128 * 256)), DType::e4m3, {P, hkv, 128, 256}, Device::cuda);
        PagedKvCache c;
        if (!packed_kv_views(buf, KvFormat::fp8, 0.05f, 0.02f, &c).ok()) return 1;
        cases.push_back({"cache_insert", "fp8", kv_read + 2 * TH * 128, [=] { return cache_insert(k, v, sm, c); }});
      }
      {  // K/V nvfp4, separate linear planes
        PagedKvCache c;
        c.format = KvFormat::nvfp4;
        for (PagedCacheSide* s : {&c.k, &c.v}) {
          s->data = make_view(a.get(static_cast<std::size_t>(P * hkv * 128 * 64)), DType::u8, {P, hkv, 128, 64}, Device::cuda);
          s->block_scale = make_view(a.get(static_cast<std::size_t>(P * hkv * 128 * 8)), DType::e4m3, {P, hkv, 128, 8}, Device::cuda);
          s->global_scale = 0.1f;
        }
        cases.push_back({"cache_insert", "nvfp4-linear", kv_read + 2 * TH * 72, [=] { return cache_insert(k, v, sm, c); }});
      }
      {  // K/V nvfp4, vLLM head-slot pages, swizzled scales
        const TensorView buf = make_view(a.get(static_cast<std::size_t>(P * 2 * hkv * 128 * 72)), DType::u8, {P, 2 * hkv, 128, 72}, Device::cuda);
        PagedKvCache c;
        if (!nvfp4_head_slot_views(buf, true, true, 0.1f, 0.1f, &c).ok()) return 1;
        cases.push_back({"cache_insert", "nvfp4-headslot", kv_read + 2 * TH * 72, [=] { return cache_insert(k, v, sm, c); }});
      }
      const double idx_read = static_cast<double>(T) * 256 + slot_bytes;
      for (KvFormat f : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
        IndexKCache c;
        c.format = f;
        const std::int64_t w = f == KvFormat::nvfp4 ? 64 : 128;
        const DType dt = f == KvFormat::bf16 ? DType::bf16 : f == KvFormat::fp8 ? DType::e4m3 : DType::u8;
        c.data = make_view(a.get(static_cast<std::size_t>(P * 128 * w * (f == KvFormat::bf16 ? 2 : 1))), dt, {P, 128, w}, Device::cuda);
        if (f == KvFormat::nvfp4) c.block_scale = make_view(a.get(static_cast<std::size_t>(P * 128 * 8)), DType::e4m3, {P, 128, 8}, Device::cuda);
        const double wr = static_cast<double>(T) * (f == KvFormat::bf16 ? 256 : f == KvFormat::fp8 ? 128 : 72);
        cases.push_back({"index_insert", kv_format_name(f), idx_read + wr, [=] { return index_cache_insert(ik, sm, c); }});
      }
      {  // query quantisation, Hq heads
        const std::size_t n = static_cast<std::size_t>(T * hq * 128);
        const TensorView q = make_view(upload_random_bf16(a, n, 4), DType::bf16, {T, hq, 128}, Device::cuda);
        const TensorView q8 = make_view(a.get(n), DType::e4m3, {T, hq, 128}, Device::cuda);
        cases.push_back({"quantize_q", "e4m3", static_cast<double>(n) * 3, [=] { return quantize_query_e4m3(q, 0.05f, q8); }});
      }
      {  // dense NVFP4 -> FP8 of T*Hkv rows
        const std::int64_t R = T * hkv;
        const TensorView pk = make_view(a.get(static_cast<std::size_t>(R * 64), 0x5a), DType::u8, {R, 64}, Device::cuda);
        const TensorView ps = make_view(a.get(static_cast<std::size_t>(R * 8), 0x38), DType::e4m3, {R, 8}, Device::cuda);
        const TensorView po = make_view(a.get(static_cast<std::size_t>(R * 128)), DType::e4m3, {R, 128}, Device::cuda);
        cases.push_back({"nvfp4_to_fp8", "dense", static_cast<double>(R) * (72 + 128), [=] { return nvfp4_to_fp8(pk, ps, po); }});
      }
      {  // selected pages: R = ceil(T/128) rows of top-16 logical pages, one request
        const std::int64_t R = (T + 127) / 128, K = 16;
        std::vector<std::int32_t> tk(static_cast<std::size_t>(R * hkv * K));
        std::uniform_int_distribution<std::int32_t> ld(0, static_cast<std::int32_t>(P - 1));
        std::vector<char> seen(static_cast<std::size_t>(P * hkv), 0);
        std::int64_t uniq = 0;
        for (std::size_t e = 0; e < tk.size(); ++e) {
          tk[e] = ld(rng);
          const std::size_t pair = static_cast<std::size_t>(perm[static_cast<std::size_t>(tk[e])]) * hkv +
                                   (e / K) % static_cast<std::size_t>(hkv);
          if (!seen[pair]) seen[pair] = 1, ++uniq;
        }
        void* d_tk = a.get(tk.size() * 4);
        CK(cudaMemcpy(d_tk, tk.data(), tk.size() * 4, cudaMemcpyHostToDevice));
        void* d_bt = a.get(perm.size() * 4);
        CK(cudaMemcpy(d_bt, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
        const std::int64_t cap = std::min(R * hkv * K, P * hkv);
        Nvfp4ToFp8SelectedArgs sa;
        const TensorView buf = make_view(a.get(static_cast<std::size_t>(P * 2 * hkv * 128 * 72), 0x5a), DType::u8,
                                         {P, 2 * hkv, 128, 72}, Device::cuda);
        if (!nvfp4_head_slot_views(buf, true, true, 1.0f, 1.0f, &sa.kv).ok()) return 1;
        sa.topk = make_view(d_tk, DType::i32, {R, hkv, K}, Device::cuda);
        sa.block_table = make_view(d_bt, DType::i32, {1, P}, Device::cuda);
        sa.rows_per_request = static_cast<int>(R);
        sa.k_out = make_view(a.get(static_cast<std::size_t>(cap) * 128 * 128), DType::e4m3, {cap, 128, 128}, Device::cuda);
        sa.v_out = make_view(a.get(static_cast<std::size_t>(cap) * 128 * 128), DType::e4m3, {cap, 128, 128}, Device::cuda);
        sa.pairs = make_view(a.get(static_cast<std::size_t>(cap) * 8), DType::i32, {cap, 2}, Device::cuda);
        sa.compact_topk = make_view(a.get(tk.size() * 4), DType::i32, {R, hkv, K}, Device::cuda);
        sa.num_pairs = make_view(a.get(4), DType::i32, {1}, Device::cuda);
        sa.workspace = make_view(a.get(static_cast<std::size_t>(P * hkv) * 4), DType::i32, {P * hkv}, Device::cuda);
        cases.push_back({"nvfp4_to_fp8", "selected", static_cast<double>(uniq) * 2 * 128 * (72 + 128),
                         [=] { return nvfp4_to_fp8_selected(sa); }});
      }

      for (const Case& c : cases) {
        Status st = c.fn();
        if (!st.ok()) {
          std::fprintf(stderr, "%s %s: %s\n", c.op.c_str(), c.fmt.c_str(), st.message().c_str());
          return 1;
        }
        CK(cudaDeviceSynchronize());
        std::vector<float> ms;
        for (int r = 0; r < reps + 2; ++r) {
          CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
          CK(cudaEventRecord(e0));
          c.fn();
          CK(cudaEventRecord(e1));
          CK(cudaEventSynchronize(e1));
          float t = 0;
          CK(cudaEventElapsedTime(&t, e0, e1));
          if (r >= 2) ms.push_back(t);
        }
        CK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        const double us = ms[ms.size() / 2] * 1000.0;
        const double gbs = c.bytes / (us * 1e-6) / 1e9;
        std::printf("%-14s %-16s %3d/%-2d %7lld %10.2f %10.2f %9.1f %6.1f%%\n", c.op.c_str(), c.fmt.c_str(), hq, hkv,
                    static_cast<long long>(T), us, c.bytes / 1e6, gbs, 100.0 * gbs / kPeakGBs);
        std::fflush(stdout);
        if (fp)
          std::fprintf(fp, "%s,%s,%d,%d,%lld,%.3f,%.0f,%.2f,%.4f\n", c.op.c_str(), c.fmt.c_str(), hq, hkv,
                       static_cast<long long>(T), us, c.bytes, gbs, gbs / kPeakGBs);
      }
    }
  }
  if (fp) std::fclose(fp);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(flush);
  return 0;
}

// Prefill sparse attention benchmark (issue 4: Hopper prefill): one request of q_len new
// tokens after `prefix` cached ones, top-16 pages per (row, KV head) with the local page
// forced, shuffled block table; each format; both kernels (KV-outer, the default, and the
// v1 query-outer one via FLASHMSA_PREFILL_KERNEL=query_outer) in the same run. Median
// of `--reps` CUDA-event timings after warm-up, of one call captured in a CUDA graph
// (KV-outer; see time_call) and, as `eager_us`, of plain calls, each timed call after an
// L2 flush that also keeps the GPU busy while the host launches it (so the host's launch
// latency stays out of the time); effective TFLOP/s over the keys actually
// visible to each query (4 x 128 x Hq per query-key pair), as a fraction of the measured
// H200 peaks (BF16 807, FP8 1487 TFLOP/s). For KV-outer the breakdown plan / attention /
// combine comes from FLASHMSA_PREFILL_STOP_AFTER=plan|attention runs (differences of
// medians).
//
// Inputs (--data): `random` (default) fills q, k and v with random values (bench_fill.h:
// BF16 about N(0, 1); E4M3 as E4M3_sat(16 N(0, 1)) with q_scale = k_scale = v_scale =
// 1/16; NVFP4 uniform codes, block scales 0.25 .. 0.5); `constant` is the pattern of
// sessions 1-26 (every byte 0x22, NVFP4 scales 1.0), kept to compare with their numbers.
// --flush 0 drops the L2 flush before each timed call (the method of sessions 1-26).
//
// Energy (--energy-ms MS, default 0: off; 2000 is a good window): NVML's energy counter (bench_energy.h) over
// back-to-back replays of the whole call, of the plan alone and of plan + attention
// (FLASHMSA_PREFILL_STOP_AFTER), each for about that many milliseconds: mJ per call, the
// mean power, and the whole call's time per call in that sustained regime (us_sustained:
// no idle time between calls, so a card at its power cap stays there). On random inputs the H200 runs at its 700 W cap, where a call's time
// depends on the energy around it but energy adds up, so the per-stage energies (plan,
// attention = (plan + attention) - plan, combine = call - (plan + attention)) are the
// breakdown that differences of times no longer give. Run it apart from the single-call
// timings: its windows hold the card at its cap for seconds, and the timings of the next
// case then start hot (session 27 run F: Q8KV8 474 against 448 us at the floor case).
//
// Selections (--selection, comma list):
//   random  : 15 distinct uniformly random history pages per (row, KV head);
//   indexer : "real-indexer-like": blocks of 64 neighbouring rows share a random base
//             set of 15 history pages, each row replaces 2 of them at random.
//
//   build-pre/bench_prefill [--cases "16/1:8192:0,16/1:8192:32768,..."] [--reps 10]
//       [--selection random,indexer] [--kernels kv_outer,query_outer] [--csv FILE]
//       [--data random|constant] [--flush 1|0] [--energy-ms 0|2000]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"

#include "bench_energy.h"
#include "bench_fill.h"
#include "bench_util.h"

using namespace flashmsa;
using flashmsa::bench::split;

namespace {

struct Shape {
  int hq, hkv, q_len, prefix;
};

std::vector<Shape> parse(const std::string& s) {
  std::vector<Shape> out;
  for (const std::string& item : split(s)) {
    Shape sh{};
    if (std::sscanf(item.c_str(), "%d/%d:%d:%d", &sh.hq, &sh.hkv, &sh.q_len, &sh.prefix) == 4) out.push_back(sh);
  }
  return out;
}

// Top-16 rows [T, hkv, 16]; returns the visible (query, key) pairs per KV head summed.
double make_topk(const Shape& sh, const std::string& selection, std::mt19937_64& rng,
                 std::vector<std::int32_t>& topk) {
  const int T = sh.q_len;
  topk.assign(static_cast<size_t>(T) * sh.hkv * 16, -1);
  double pairs = 0;
  std::vector<int> base;
  auto draw = [&](int local, std::vector<int>& into, int n) {  // distinct, not in `into`
    while (static_cast<int>(into.size()) < n) {
      const int cand = static_cast<int>(rng() % static_cast<std::uint64_t>(local));
      if (std::find(into.begin(), into.end(), cand) == into.end()) into.push_back(cand);
    }
  };
  for (int g = 0; g < sh.hkv; ++g)
    for (int j = 0; j < T; ++j) {
      const int pos = sh.prefix + j, local = pos / 128;
      const int nh = std::min(local, 15);
      if (g == 0) pairs += static_cast<double>(sh.hkv) * (nh * 128 + pos % 128 + 1);
      std::vector<int> pick;
      if (selection == "indexer" && nh == 15) {
        if (j % 64 == 0 || static_cast<int>(base.size()) != 15 || base.back() >= local) {
          base.clear();
          draw(local, base, 15);
        }
        pick = base;
        for (int r = 0; r < 2; ++r) pick.erase(pick.begin() + static_cast<long>(rng() % pick.size()));
        draw(local, pick, 15);
      } else {
        draw(local, pick, nh);
      }
      std::int32_t* e = topk.data() + (static_cast<size_t>(j) * sh.hkv + g) * 16;
      for (int k = 0; k < nh; ++k) e[k] = pick[static_cast<size_t>(k)];
      e[nh] = local;
    }
  return pairs;
}

// One call (on a.stream) captured into an instantiated CUDA graph; null on failure.
cudaGraphExec_t capture_call(const SparseAttentionPrefillArgs& a) {
  const cudaStream_t s = static_cast<cudaStream_t>(a.stream);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return nullptr;
  const bool ok = sparse_attention_prefill(a).ok();
  const bool ended = cudaStreamEndCapture(s, &g) == cudaSuccess;
  const bool inst = ended && ok && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
  if (g != nullptr) cudaGraphDestroy(g);
  return inst ? exec : nullptr;
}

// Median milliseconds of `reps` timed calls after 2 untimed ones; negative on failure.
// eager: each call between two events on its stream, synchronised per call.
// graph: the call captured once into a CUDA graph, each replay between two events (the
//   method of bench_decode and bench_indexer; an engine that enqueues ahead of the GPU
//   sees this).
// Before each call, a memset of `flush_bytes` at `flush` (when not null) evicts L2 and
// keeps the stream busy, so the host has enqueued the call (eager: most of its launches)
// before the GPU reaches e0. Without it (sessions 1-26), the graph launch showed as idle
// GPU time after e0, and eager calls also showed the host's enqueue gaps before the
// short plan kernels. The memset leaves L2 full of dirty lines, whose write-back the
// timed call pays (a small cost beside its 0.5 GB of partials).
float time_call(SparseAttentionPrefillArgs a, int reps, cudaEvent_t e0, cudaEvent_t e1, cudaStream_t s, bool graph,
                void* flush, std::size_t flush_bytes) {
  a.stream = s;
  cudaGraphExec_t exec = nullptr;
  if (graph && (exec = capture_call(a)) == nullptr) return -1;
  std::vector<float> ms;
  bool failed = false;
  for (int r = 0; r < reps + 2 && !failed; ++r) {
    if (flush != nullptr) failed = cudaMemsetAsync(flush, r & 0xff, flush_bytes, s) != cudaSuccess;
    if (!failed) failed = cudaEventRecord(e0, s) != cudaSuccess;
    if (!failed) failed = graph ? cudaGraphLaunch(exec, s) != cudaSuccess : !sparse_attention_prefill(a).ok();
    if (!failed) failed = cudaEventRecord(e1, s) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess;
    float t = 0;
    if (!failed) failed = cudaEventElapsedTime(&t, e0, e1) != cudaSuccess;
    if (!failed && r >= 2) ms.push_back(t);
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (failed) return -1;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Energy per call in mJ (*mj), mean power in W (*watts) and time per call in us
// (*us_call) over back-to-back replays of one captured call, about `ms` milliseconds of
// them (after 3 warm-up replays; at least 20): the sustained regime, with no idle time
// between calls. False if the capture, a launch or the counter fails.
bool energy_call(SparseAttentionPrefillArgs a, double ms, float call_ms, cudaEvent_t e0, cudaEvent_t e1,
                 cudaStream_t s, const bench::EnergyCounter& ec, double* mj, double* watts, double* us_call) {
  a.stream = s;
  const cudaGraphExec_t exec = capture_call(a);
  if (exec == nullptr) return false;
  const int calls = static_cast<int>(std::min(1e6, std::max(20.0, ms / std::max(static_cast<double>(call_ms), 1e-3))));
  bool good = true;
  for (int r = 0; r < 3 && good; ++r) good = cudaGraphLaunch(exec, s) == cudaSuccess;
  good = good && cudaStreamSynchronize(s) == cudaSuccess;
  unsigned long long j0 = 0, j1 = 0;
  good = good && ec.read_fresh(&j0) && cudaEventRecord(e0, s) == cudaSuccess;
  for (int r = 0; r < calls && good; ++r) good = cudaGraphLaunch(exec, s) == cudaSuccess;
  good = good && cudaEventRecord(e1, s) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess && ec.read_fresh(&j1);
  float el = 0;
  good = good && cudaEventElapsedTime(&el, e0, e1) == cudaSuccess && el > 0;
  cudaGraphExecDestroy(exec);
  if (!good) return false;
  *mj = static_cast<double>(j1 - j0) / calls;
  *watts = static_cast<double>(j1 - j0) / el;
  *us_call = 1000.0 * el / calls;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!flashmsa::bench::require_cuda_device("bench_prefill")) return 2;
  std::string cases = "16/1:8192:0,16/1:8192:32768,16/1:16384:114688,64/4:8192:0,64/4:8192:32768";
  std::string csv, selections = "random,indexer", kernels = "kv_outer,query_outer";
  int reps = 10;
  std::string data = "random";
  int flush_on = 1;
  double energy_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--cases") cases = argv[i + 1];
    else if (a == "--reps") reps = std::stoi(argv[i + 1]);
    else if (a == "--csv") csv = argv[i + 1];
    else if (a == "--selection") selections = argv[i + 1];
    else if (a == "--kernels") kernels = argv[i + 1];
    else if (a == "--data") data = argv[i + 1];
    else if (a == "--flush") flush_on = std::stoi(argv[i + 1]);
    else if (a == "--energy-ms") energy_ms = std::stod(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "unknown option %s (--cases, --reps, --csv, --selection, --kernels, --data, --flush, --energy-ms)\n",
                   a.c_str());
      return 2;
    }
  }
  if (data != "random" && data != "constant") {
    std::fprintf(stderr, "--data: expected random or constant, got '%s'\n", data.c_str());
    return 2;
  }
  const bool random_data = data == "random";
  std::printf("inputs: %s values; L2 flush before each timed call: %s\n", data.c_str(), flush_on ? "yes" : "no");
  std::unique_ptr<bench::EnergyCounter> energy;  // opened only when asked for
  if (energy_ms > 0) energy = std::make_unique<bench::EnergyCounter>();
  const bool want_energy = energy != nullptr && energy->ok();
  if (energy_ms > 0 && !want_energy) std::printf("energy: NVML's energy counter is not available; no energy columns\n");
  // The KV-outer path takes its workspace from the stream-ordered pool: keep what it
  // frees instead of returning it to the OS at every synchronisation.
  {
    int dev = 0;
    cudaMemPool_t pool;
    CUDA_CK(cudaGetDevice(&dev));
    CUDA_CK(cudaDeviceGetDefaultMemPool(&pool, dev));
    std::uint64_t keep = UINT64_MAX;
    CUDA_CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }
  FILE* fp = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (fp)
    std::fprintf(fp, "hq,hkv,q_len,prefix,selection,format,kernel,us,tflops,frac_of_peak,plan_us,attention_us,combine_us,timing,eager_us,"
                    "mj_call,mj_plan,mj_attention,mj_combine,watts_call,us_sustained\n");
  cudaEvent_t e0, e1;
  CUDA_CK(cudaEventCreate(&e0));
  CUDA_CK(cudaEventCreate(&e1));
  cudaStream_t stream;
  CUDA_CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* flush = nullptr;
  const std::size_t flush_bytes = static_cast<std::size_t>(bench::kColdBytes);
  if (flush_on) CUDA_CK(cudaMalloc(&flush, flush_bytes));
  for (const Shape& sh : parse(cases))
    for (const std::string& sel : split(selections)) {
      const int T = sh.q_len, seq = sh.q_len + sh.prefix, pages = (seq + 127) / 128;
      std::mt19937_64 rng(7);
      std::vector<std::int32_t> perm(static_cast<size_t>(pages));
      for (int i = 0; i < pages; ++i) perm[static_cast<size_t>(i)] = i;
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<std::int32_t> topk;
      const double pairs = make_topk(sh, sel, rng, topk);
      const double flops = 4.0 * 128 * (sh.hq / sh.hkv) * pairs;
      std::int32_t cu_h[2] = {0, T}, seq_h[1] = {seq};
      for (KvFormat fmt : {KvFormat::bf16, KvFormat::fp8, KvFormat::nvfp4}) {
        const bool fp8q = fmt != KvFormat::bf16;
        const std::int64_t dlast = fmt == KvFormat::nvfp4 ? 64 : 128;
        const std::int64_t es = fmt == KvFormat::bf16 ? 2 : 1;
        const std::int64_t side = static_cast<std::int64_t>(pages) * sh.hkv * 128 * dlast * es;
        void *q, *k, *v, *ks = nullptr, *vs = nullptr, *out, *d_topk, *bt, *cu, *sl;
        CUDA_CK(cudaMalloc(&q, static_cast<size_t>(T) * sh.hq * 128 * (fp8q ? 1 : 2)));
        CUDA_CK(cudaMalloc(&k, static_cast<size_t>(side)));
        CUDA_CK(cudaMalloc(&v, static_cast<size_t>(side)));
        const std::int64_t scale_bytes = static_cast<std::int64_t>(pages) * sh.hkv * 128 * 8;
        if (fmt == KvFormat::nvfp4) {
          CUDA_CK(cudaMalloc(&ks, static_cast<size_t>(scale_bytes)));
          CUDA_CK(cudaMalloc(&vs, static_cast<size_t>(scale_bytes)));
        }
        CUDA_CK(cudaMalloc(&out, static_cast<size_t>(T) * sh.hq * 128 * 2));
        CUDA_CK(cudaMalloc(&d_topk, topk.size() * 4));
        CUDA_CK(cudaMalloc(&bt, static_cast<size_t>(pages) * 4));
        CUDA_CK(cudaMalloc(&cu, 8));
        CUDA_CK(cudaMalloc(&sl, 4));
        const std::int64_t q_bytes = static_cast<std::int64_t>(T) * sh.hq * 128 * (fp8q ? 1 : 2);
        bench::InputScales scales;
        CUDA_CK(bench::fill_attention_inputs(random_data, fmt, q, q_bytes, k, v, side, ks, vs, scale_bytes, &scales));
        CUDA_CK(cudaMemcpy(d_topk, topk.data(), topk.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CK(cudaMemcpy(bt, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CK(cudaMemcpy(cu, cu_h, 8, cudaMemcpyHostToDevice));
        CUDA_CK(cudaMemcpy(sl, seq_h, 4, cudaMemcpyHostToDevice));
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
        a.q_scale = scales.q;
        a.kv.k.global_scale = a.kv.v.global_scale = scales.kv;
        a.out = make_view(out, DType::bf16, {T, sh.hq, 128}, Device::cuda);
        const double peak = fp8q ? 1487.0 : 807.0;
        for (const std::string& kern : split(kernels)) {
          const bool kv = kern == "kv_outer";
          if (kv) unsetenv("FLASHMSA_PREFILL_KERNEL");
          else setenv("FLASHMSA_PREFILL_KERNEL", "query_outer", 1);
          Status st = sparse_attention_prefill(a);
          if (!st.ok()) {
            std::fprintf(stderr, "%s\n", st.message().c_str());
            return 1;
          }
          CUDA_CK(cudaDeviceSynchronize());
          // The query-outer kernel is timed eagerly only (not part of the graph method).
          const bool graph = kv;
          const float ms_all = time_call(a, reps, e0, e1, stream, graph, flush, flush_bytes);
          const float ms_eager = graph ? time_call(a, reps, e0, e1, stream, false, flush, flush_bytes) : ms_all;
          float ms_plan = 0, ms_attn = 0;
          if (kv) {
            setenv("FLASHMSA_PREFILL_STOP_AFTER", "plan", 1);
            ms_plan = time_call(a, reps, e0, e1, stream, graph, flush, flush_bytes);
            setenv("FLASHMSA_PREFILL_STOP_AFTER", "attention", 1);
            ms_attn = time_call(a, reps, e0, e1, stream, graph, flush, flush_bytes);
            unsetenv("FLASHMSA_PREFILL_STOP_AFTER");
          }
          CUDA_CK(cudaGetLastError());
          if (ms_all < 0 || ms_eager < 0 || ms_plan < 0 || ms_attn < 0) {
            std::fprintf(stderr, "timing failed\n");
            return 1;
          }
          const double us = ms_all * 1000.0, tf = flops / (us * 1e-6) / 1e12;
          const double plan_us = ms_plan * 1000.0, attn_us = (ms_attn - ms_plan) * 1000.0,
                       comb_us = (ms_all - ms_attn) * 1000.0;
          // Energy per call of the whole call, the plan, plan + attention (KV-outer only).
          double mj_all = 0, mj_plan = 0, mj_pa = 0, w_all = 0, us_sus = 0, w_unused = 0, us_unused = 0;
          bool have_energy = false;
          if (kv && want_energy) {  // the timings above succeeded (checked before), so their ms are > 0
            have_energy = energy_call(a, energy_ms, ms_all, e0, e1, stream, *energy, &mj_all, &w_all, &us_sus);
            setenv("FLASHMSA_PREFILL_STOP_AFTER", "plan", 1);
            have_energy = have_energy &&
                          energy_call(a, energy_ms, ms_plan, e0, e1, stream, *energy, &mj_plan, &w_unused, &us_unused);
            setenv("FLASHMSA_PREFILL_STOP_AFTER", "attention", 1);
            have_energy = have_energy &&
                          energy_call(a, energy_ms, ms_attn, e0, e1, stream, *energy, &mj_pa, &w_unused, &us_unused);
            unsetenv("FLASHMSA_PREFILL_STOP_AFTER");
            if (!have_energy) std::printf("energy: a measurement failed for this case\n");
          }
          std::printf("prefill %2d/%d q_len %6d prefix %7d %-7s %-5s %-11s %10.1f us %7.1f TFLOP/s %5.1f%% of %s",
                      sh.hq, sh.hkv, sh.q_len, sh.prefix, sel.c_str(), kv_format_name(fmt), kern.c_str(), us, tf,
                      100 * tf / peak, fp8q ? "FP8" : "BF16");
          if (kv)
            std::printf("  (plan %.1f, attention %.1f, combine %.1f us; eager %.1f us)", plan_us, attn_us, comb_us,
                        ms_eager * 1000.0);
          if (have_energy)
            std::printf("  sustained %.1f us, %.1f mJ/call at %.0f W (plan %.1f, attention %.1f, combine %.1f mJ)", us_sus,
                        mj_all, w_all, mj_plan, mj_pa - mj_plan, mj_all - mj_pa);
          std::printf("\n");
          std::fflush(stdout);
          if (fp) {
            std::fprintf(fp, "%d,%d,%d,%d,%s,%s,%s,%.2f,%.2f,%.4f,", sh.hq, sh.hkv, sh.q_len, sh.prefix, sel.c_str(),
                         kv_format_name(fmt), kern.c_str(), us, tf, tf / peak);
            if (kv) std::fprintf(fp, "%.2f,%.2f,%.2f,%s,%.2f,", plan_us, attn_us, comb_us, graph ? "graph" : "eager", ms_eager * 1000.0);
            else std::fprintf(fp, ",,,eager,%.2f,", us);
            if (have_energy)
              std::fprintf(fp, "%.2f,%.2f,%.2f,%.2f,%.1f,%.2f\n", mj_all, mj_plan, mj_pa - mj_plan, mj_all - mj_pa, w_all,
                           us_sus);
            else std::fprintf(fp, ",,,,,\n");
          }
        }
        unsetenv("FLASHMSA_PREFILL_KERNEL");
        for (void* p : {q, k, v, ks, vs, out, d_topk, bt, cu, sl}) cudaFree(p);
      }
    }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
  cudaFree(flush);
  if (fp) std::fclose(fp);
  return 0;
}

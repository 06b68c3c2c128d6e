// Indexer benchmark (issue 5: Hopper indexer): page scores + top-16 on the GPU.
//
//  prefill  one request of q_len rows at the end of a kv-token context (bf16 / e4m3 q
//           and index-K), 1 and 4 index heads: (2048, 1M) and (128, 32768).
//  decode   the decode suites of data/msa-workloads/decode-workloads.json ("full" 28
//           cases, "low_latency" 12; Q = 8 drafts per request, or --q), e4m3 index q over
//           an e4m3 ("fp8") or NVFP4 ("nvfp4") index-K cache, or bf16 / bf16 ("bf16").
//           One IndexerDecodePlan; a CUDA graph of max(--calls, sets) plan.run calls
//           whose block tables rotate over page sets larger than 3x L2 together (cold
//           index-K reads), 3 warm-up replays, median of --reps replays.
//  topk     topk_select alone on device scores: batch 64 x Q 8 x 4 heads rows at 1,024
//           and 8,192 pages, spread and all-equal scores.
// Reports us per call, score TFLOP/s (2 x 128 x H per scored query-key pair: every token
// of every history page of every row) and its fraction of the 1487 (FP8) / 807 (BF16)
// dense peaks, and for decode the index-K bytes of the history pages per second against
// 4.2 TB/s. Prefill: CUDA events around single calls after 2 warm-up calls, median.
//
//   build/bench_indexer [--what prefill,decode,topk] [--suite full|low_latency|all]
//                       [--heads 4] [--formats fp8,nvfp4] [--q Q] [--calls 20] [--reps 10]
//                       [--fp8-qk exact|e4m3|e4m3_split] [--no-split] [--csv FILE]
//                       [--case SUBSTR]   (decode cases whose name contains SUBSTR)
// Decode also prints "dtopk" (topk_select alone on the call's [B*Q*H, width] shape) and
// "dscore" (total - dtopk: the scoring kernels, with index-K TB/s) unless --no-split.
// The E4M3 scoring path (--fp8-qk, else FLASHMSA_FP8_QK, default exact) is in the format
// column (fp8/exact, e4m3/e4m3_split, ...).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_suites.h"
#include "bench_util.h"
#include "cuda/sm90/indexer_kernels.h"
#include "flashmsa/flashmsa.h"
#include "workloads.h"

using namespace flashmsa;

namespace {

using bench::kColdBytes;
using bench::kCopyPeakTBs;
using bench::split;
constexpr double kFp8Peak = 1487.0, kBf16Peak = 807.0;  // measured dense peaks, TFLOP/s

struct Owned {
  std::vector<void*> p;
  ~Owned() {
    for (void* x : p) cudaFree(x);
  }
  void* alloc(std::size_t bytes) {
    void* x = nullptr;
    if (cudaMalloc(&x, bytes < 16 ? 16 : bytes) != cudaSuccess) return nullptr;
    p.push_back(x);
    return x;
  }
};

FILE* g_csv = nullptr;
bool g_split_decode = true;  // decode: also time top-k alone and report scoring = total - top-k

void report(const char* kind, const std::string& name, const std::string& fmt, int heads, int batch, int q,
            long long kv, double us, double tflops, double peak, double tbs) {
  std::printf("%-7s %-16s %-6s H=%d B=%-3d q=%-5d kv=%-8lld %10.2f us  %7.1f TFLOP/s (%5.1f%% of %.0f)",
              kind, name.c_str(), fmt.c_str(), heads, batch, q, kv, us, tflops, 100 * tflops / peak, peak);
  if (tbs > 0) std::printf("  index-K %5.2f TB/s (%5.1f%% of 4.2)", tbs, 100 * tbs / kCopyPeakTBs);
  std::printf("\n");
  std::fflush(stdout);
  if (g_csv)
    std::fprintf(g_csv, "%s,%s,%s,%d,%d,%d,%lld,%.3f,%.3f,%.4f,%.4f,%.4f\n", kind, name.c_str(), fmt.c_str(),
                 heads, batch, q, kv, us, tflops, tflops / peak, tbs, tbs / kCopyPeakTBs);
}

// Random index data: E4M3 bytes without NaN codes, or BF16 in [-1, 1).
std::vector<unsigned char> random_bytes(std::size_t n, bool e4m3, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> v(n);
  if (e4m3) {
    for (auto& b : v) b = static_cast<unsigned char>(rng() & 0xf7);  // exponent <= 14: finite
  } else {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (std::size_t i = 0; i + 1 < n; i += 2) {
      const std::uint16_t b = float_to_bf16(u(rng));
      std::memcpy(&v[i], &b, 2);
    }
  }
  return v;
}

// Fills `pages` pages of `page_bytes` from a pool of 61 random pages.
bool fill_pages(void* dst, long long pages, std::size_t page_bytes, bool e4m3, std::uint64_t seed) {
  const int pool = 61;
  std::vector<unsigned char> src = random_bytes(page_bytes * pool, e4m3, seed);
  const long long per = 256;  // pages per copy
  std::vector<unsigned char> buf(page_bytes * per);
  for (long long p0 = 0; p0 < pages; p0 += per) {
    const long long n = std::min(per, pages - p0);
    for (long long i = 0; i < n; ++i)
      std::memcpy(&buf[i * page_bytes], &src[((p0 + i) % pool) * page_bytes], page_bytes);
    CUDA_OK(cudaMemcpy(static_cast<char*>(dst) + p0 * page_bytes, buf.data(), n * page_bytes, cudaMemcpyHostToDevice));
  }
  return true;
}

// Scored query-key pairs of one row at position pos: every history page.
double pairs_of(long long pos) { return pos < 0 ? 0.0 : static_cast<double>(pos / 128) * 128.0; }

bool bench_prefill(int q_len, long long kv, int H, bool fp8, int reps) {
  Owned o;
  const long long pages = (kv + 127) / 128;
  const std::size_t es = fp8 ? 1 : 2;
  const std::size_t page_bytes = 128 * 128 * es;
  void* q = o.alloc(static_cast<std::size_t>(q_len) * H * 128 * es);
  void* k = o.alloc(pages * page_bytes);
  void* topk = o.alloc(static_cast<std::size_t>(q_len) * H * 16 * 4);
  void* bt = o.alloc(pages * 4);
  void* cu = o.alloc(8);
  void* sl = o.alloc(4);
  if (!q || !k || !topk || !bt || !cu || !sl) {
    std::fprintf(stderr, "out of device memory\n");
    return false;
  }
  std::vector<unsigned char> qh = random_bytes(static_cast<std::size_t>(q_len) * H * 128 * es, fp8, 7);
  CUDA_OK(cudaMemcpy(q, qh.data(), qh.size(), cudaMemcpyHostToDevice));
  if (!fill_pages(k, pages, page_bytes, fp8, 11)) return false;
  std::vector<std::int32_t> bth(pages);
  for (long long i = 0; i < pages; ++i) bth[i] = static_cast<std::int32_t>((i * 7919) % pages);  // scattered
  const std::int32_t cuh[2] = {0, q_len}, slh = static_cast<std::int32_t>(kv);
  CUDA_OK(cudaMemcpy(bt, bth.data(), pages * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(cu, cuh, 8, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(sl, &slh, 4, cudaMemcpyHostToDevice));
  const DType dt = fp8 ? DType::e4m3 : DType::bf16;
  IndexerPrefillArgs a;
  a.q = make_view(q, dt, {q_len, H, 128}, Device::cuda);
  a.index_k.format = fp8 ? KvFormat::fp8 : KvFormat::bf16;
  a.index_k.data = make_view(k, dt, {pages, 128, 128}, Device::cuda);
  a.block_table = make_view(bt, DType::i32, {1, pages}, Device::cuda);
  a.cu_seqlens_q = make_view(cu, DType::i32, {2}, Device::cuda);
  a.seq_lens = make_view(sl, DType::i32, {1}, Device::cuda);
  a.topk_indices = make_view(topk, DType::i32, {q_len, H, 16}, Device::cuda);
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {
    CUDA_OK(cudaEventRecord(e0));
    Status st = indexer_prefill(a);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return false;
    }
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= 2) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1000.0;
  double pairs = 0;
  for (int r = 0; r < q_len; ++r) pairs += pairs_of(kv - q_len + r);
  const double tf = 2.0 * 128 * H * pairs / (us * 1e-6) / 1e12;
  report("prefill", "q" + std::to_string(q_len) + "_kv" + std::to_string(kv),
         fp8 ? std::string("e4m3/") + cuda::fp8_qk_name(cuda::indexer_fp8_qk_default()) : std::string("bf16"), H, 1,
         q_len, kv, us, tf, fp8 ? kFp8Peak : kBf16Peak, 0.0);
  return true;
}

// Times `calls` enqueues of `fn(i)` as one CUDA graph: 3 warm-up replays, median of reps.
template <class Fn>
bool time_graph(Fn fn, int calls, int reps, double* us_per_call) {
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 2; ++i)
    if (!fn(i, s)) return false;  // first calls outside capture (kernel attributes)
  CUDA_OK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i)
    if (!fn(i, s)) {
      cudaStreamEndCapture(s, &g);
      return false;
    }
  CUDA_OK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t ge;
  CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < reps + 3; ++r) {
    CUDA_OK(cudaEventRecord(e0, s));
    CUDA_OK(cudaGraphLaunch(ge, s));
    CUDA_OK(cudaEventRecord(e1, s));
    CUDA_OK(cudaEventSynchronize(e1));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
    if (r >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  *us_per_call = ms[ms.size() / 2] * 1000.0 / calls;
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  return true;
}

bool time_topk(int rows, int width, const std::vector<std::int32_t>& lps, bool equal, int calls, int reps,
               double* us);

bool bench_decode(const tools::WorkloadCase& wc, const std::string& fmt, int H, int calls, int reps) {
  Owned o;
  const int B = wc.batch_size, Q = wc.q_len_per_req;
  const bool nvfp4 = fmt == "nvfp4", bf16 = fmt == "bf16";
  long long width = 1, pages_per_set = 0, hist_pages = 0;
  double pairs = 0;
  for (int b = 0; b < B; ++b) {
    const long long s = wc.seq_lens[b];
    width = std::max(width, (s + 127) / 128);
    pages_per_set += (s + 127) / 128;
    hist_pages += s > 0 ? (s - 1) / 128 : 0;  // pages below the last draft's local page
    for (int j = 0; j < Q; ++j) pairs += pairs_of(s - Q + j);
  }
  const std::size_t page_bytes = nvfp4 ? 128 * 64 : bf16 ? 128 * 128 * 2 : 128 * 128;
  const std::size_t scale_bytes = nvfp4 ? 128 * 8 : 0;
  const std::size_t set_bytes = pages_per_set * (page_bytes + scale_bytes);
  // Enough page sets (and calls per graph) that the sets together exceed 3x L2.
  const std::int64_t need_sets = std::max<std::int64_t>(
      1, (kColdBytes + static_cast<std::int64_t>(set_bytes) - 1) / std::max<std::int64_t>(set_bytes, 1));
  const int graph_calls = static_cast<int>(std::max<std::int64_t>(calls, std::min<std::int64_t>(need_sets, 4096)));
  const int sets = static_cast<int>(std::min<std::int64_t>(need_sets, graph_calls));
  const long long pages = pages_per_set * sets;
  void* k = o.alloc(pages * page_bytes);
  void* ks = nvfp4 ? o.alloc(pages * scale_bytes) : nullptr;
  const std::size_t qes = bf16 ? 2 : 1;
  void* q = o.alloc(static_cast<std::size_t>(B) * Q * H * 128 * qes);
  void* topk = o.alloc(static_cast<std::size_t>(B) * Q * H * 16 * 4);
  void* bt = o.alloc(static_cast<std::size_t>(sets) * B * width * 4);
  void* sl = o.alloc(static_cast<std::size_t>(B) * 4);
  if (!k || (nvfp4 && !ks) || !q || !topk || !bt || !sl) {
    std::fprintf(stderr, "out of device memory\n");
    return false;
  }
  if (!fill_pages(k, pages, page_bytes, !bf16, 21)) return false;
  if (nvfp4 && !fill_pages(ks, pages, scale_bytes, true, 22)) return false;
  std::vector<unsigned char> qh = random_bytes(static_cast<std::size_t>(B) * Q * H * 128 * qes, !bf16, 23);
  CUDA_OK(cudaMemcpy(q, qh.data(), qh.size(), cudaMemcpyHostToDevice));
  std::vector<std::int32_t> bth(static_cast<std::size_t>(sets) * B * width, 0), slh(B);
  long long next = 0;
  for (int st = 0; st < sets; ++st)
    for (int b = 0; b < B; ++b)
      for (long long j = 0; j < (wc.seq_lens[b] + 127) / 128; ++j)
        bth[(static_cast<std::size_t>(st) * B + b) * width + j] = static_cast<std::int32_t>(next++);
  for (int b = 0; b < B; ++b) slh[b] = wc.seq_lens[b];
  CUDA_OK(cudaMemcpy(bt, bth.data(), bth.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(sl, slh.data(), slh.size() * 4, cudaMemcpyHostToDevice));
  IndexerDecodeArgs a;
  a.q = make_view(q, bf16 ? DType::bf16 : DType::e4m3, {B * Q, H, 128}, Device::cuda);
  a.index_k.format = nvfp4 ? KvFormat::nvfp4 : bf16 ? KvFormat::bf16 : KvFormat::fp8;
  a.index_k.data = nvfp4 ? make_view(k, DType::u8, {pages, 128, 64}, Device::cuda)
                         : make_view(k, bf16 ? DType::bf16 : DType::e4m3, {pages, 128, 128}, Device::cuda);
  if (nvfp4) a.index_k.block_scale = make_view(ks, DType::e4m3, {pages, 128, 8}, Device::cuda);
  a.seq_lens = make_view(sl, DType::i32, {B}, Device::cuda);
  a.queries_per_request = Q;
  a.topk_indices = make_view(topk, DType::i32, {B * Q, H, 16}, Device::cuda);
  // One plan for the step (as an engine would for all layers): no allocation per call.
  IndexerDecodePlan plan;
  IndexerDecodePlanArgs pa;
  pa.max_batch = B;
  pa.queries_per_request = Q;
  pa.heads = H;
  pa.max_pages_per_request = width;
  Status pst = plan.plan(pa);
  if (!pst.ok()) {
    std::fprintf(stderr, "%s\n", pst.message().c_str());
    return false;
  }
  double us = 0;
  const bool ok = time_graph(
      [&](int i, cudaStream_t s) {
        IndexerDecodeArgs c = a;
        c.block_table = make_view(static_cast<std::int32_t*>(bt) + static_cast<std::size_t>(i % sets) * B * width,
                                  DType::i32, {B, width}, Device::cuda);
        c.stream = s;
        Status st = plan.run(c);
        if (!st.ok()) std::fprintf(stderr, "%s\n", st.message().c_str());
        return st.ok();
      },
      graph_calls, reps, &us);
  if (!ok) return false;
  const std::string label = bf16 ? fmt : fmt + "/" + cuda::fp8_qk_name(cuda::indexer_fp8_qk_default());
  const double tf = 2.0 * 128 * H * pairs / (us * 1e-6) / 1e12;
  const double bytes = static_cast<double>(hist_pages) * (page_bytes + scale_bytes);
  report("decode", wc.id, label, H, B, Q, wc.max_seq_len(), us, tf, bf16 ? kBf16Peak : kFp8Peak, bytes / (us * 1e-6) / 1e12);
  if (!g_split_decode) return true;
  // The same call's top-k alone (topk_select on [B*Q*H, width] spread scores, each row's
  // own local page), and the scoring time = total - top-k (index-K TB/s on it).
  std::vector<std::int32_t> lps;
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < Q; ++j)
      for (int h = 0; h < H; ++h) {
        const long long pos = static_cast<long long>(wc.seq_lens[b]) - Q + j;
        lps.push_back(pos < 0 ? -1 : static_cast<std::int32_t>(std::min<long long>(pos / 128, width)));
      }
  double us_topk = 0;
  if (!time_topk(B * Q * H, static_cast<int>(width), lps, false, calls, reps, &us_topk)) return false;
  const double us_s = std::max(us - us_topk, 1e-3);
  report("dtopk", wc.id, label, H, B, Q, wc.max_seq_len(), us_topk, 0.0, 1.0, 0.0);
  report("dscore", wc.id, label, H, B, Q, wc.max_seq_len(), us_s, 2.0 * 128 * H * pairs / (us_s * 1e-6) / 1e12,
         bf16 ? kBf16Peak : kFp8Peak, bytes / (us_s * 1e-6) / 1e12);
  return true;
}

// topk_select alone: rows x width scores, local page = width (all columns ranked).
// topk_select alone on device scores f32 [rows, width], spread (normal, sd 10) or all-equal,
// local page of row r = lps[r]; us per call.
bool time_topk(int rows, int width, const std::vector<std::int32_t>& lps, bool equal, int calls, int reps,
               double* us) {
  Owned o;
  float* sc = static_cast<float*>(o.alloc(static_cast<std::size_t>(rows) * width * 4));
  std::int32_t* lp = static_cast<std::int32_t*>(o.alloc(static_cast<std::size_t>(rows) * 4));
  std::int32_t* out = static_cast<std::int32_t*>(o.alloc(static_cast<std::size_t>(rows) * 16 * 4));
  if (!sc || !lp || !out) return false;
  std::vector<float> h(static_cast<std::size_t>(rows) * width, 1.0f);
  if (!equal) {
    std::mt19937 rng(5);
    std::normal_distribution<float> n(0.f, 10.f);
    for (auto& x : h) x = n(rng);
  }
  CUDA_OK(cudaMemcpy(sc, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(lp, lps.data(), lps.size() * 4, cudaMemcpyHostToDevice));
  return time_graph(
      [&](int, cudaStream_t s) {
        Status st = topk_select(make_view(sc, DType::f32, {rows, width}, Device::cuda),
                                make_view(lp, DType::i32, {rows}, Device::cuda),
                                make_view(out, DType::i32, {rows, 16}, Device::cuda), s);
        if (!st.ok()) std::fprintf(stderr, "%s\n", st.message().c_str());
        return st.ok();
      },
      calls, reps, us);
}

// topk_select alone: rows x width scores, local page = width (all columns ranked).
bool bench_topk(int rows, int width, bool equal, int calls, int reps) {
  double us = 0;
  if (!time_topk(rows, width, std::vector<std::int32_t>(rows, width), equal, calls, reps, &us)) return false;
  report("topk", std::string(equal ? "all_equal" : "spread") + "_p" + std::to_string(width), "f32", 1, rows, 1,
         static_cast<long long>(width) * 128, us, 0.0, 1.0, 0.0);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!flashmsa::bench::require_cuda_device("bench_indexer")) return 2;
  std::string what = "prefill,decode,topk", suite = "all", heads = "4", formats = "fp8,nvfp4", csv, only;
  int calls = 20, reps = 10, q_override = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--what") what = next();
    else if (a == "--suite") suite = next();
    else if (a == "--heads") heads = next();
    else if (a == "--formats") formats = next();
    else if (a == "--q") q_override = std::stoi(next());
    else if (a == "--calls") calls = std::stoi(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--csv") csv = next();
    else if (a == "--case") only = next();  // decode cases whose name contains this
    else if (a == "--fp8-qk") {  // E4M3 scoring path (overrides FLASHMSA_FP8_QK)
      const std::string m = next();
      cuda::set_indexer_fp8_qk_default(m == "e4m3" ? cuda::Fp8Qk::kE4m3
                                       : m == "e4m3_split" ? cuda::Fp8Qk::kE4m3Split
                                                           : cuda::Fp8Qk::kExact);
    } else if (a == "--no-split") g_split_decode = false;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!csv.empty()) {
    g_csv = std::fopen(csv.c_str(), "w");
    if (g_csv)
      std::fprintf(g_csv, "kind,case,format,heads,batch,q,kv,us,tflops,frac_of_peak,index_k_tb_s,frac_of_4.2\n");
  }
  const std::vector<std::string> parts = split(what, ',');
  auto want = [&](const char* w) { return std::find(parts.begin(), parts.end(), w) != parts.end(); };
  if (want("prefill")) {
    for (bool fp8 : {true, false})
      for (int H : {1, 4}) {
        if (!bench_prefill(2048, 1LL << 20, H, fp8, std::max(3, reps / 2))) return 1;
        if (!bench_prefill(128, 32768, H, fp8, reps)) return 1;
      }
  }
  if (want("decode")) {
    std::vector<std::pair<std::string, std::vector<tools::WorkloadCase>>> suites;
    if (!flashmsa::bench::load_decode_suites(suite, {"full", "low_latency"}, q_override, &suites)) return 2;
    for (auto& [name, cases] : suites)
      for (const std::string& f : split(formats, ','))
        for (const std::string& h : split(heads, ','))
          for (auto& c : cases)
            if (only.empty() || c.id.find(only) != std::string::npos)
              if (!bench_decode(c, f, std::stoi(h), calls, reps)) return 1;
  }
  if (want("topk")) {
    // Issue 5's floor case "batch 64 x Q 8 at 128K context" with the benchmark's 4 index
    // heads: 64 x 8 x 4 = 2,048 selections over 1,024 pages (<= 20 us), spread and
    // all-equal; 8,192 pages (1M context) for flatness.
    for (int width : {1024, 8192})
      for (bool equal : {false, true})
        if (!bench_topk(64 * 8 * 4, width, equal, calls, reps)) return 1;
  }
  if (g_csv) std::fclose(g_csv);
  return 0;
}

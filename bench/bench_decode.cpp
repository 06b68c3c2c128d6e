// Decode sparse attention benchmark (issue: Hopper decode). For every case of the decode
// suites (data/msa-workloads/decode-workloads.json: "full" 28 cases, "low_latency" 12),
// each head split and each format: one plan, a CUDA graph of `--calls` run() calls whose
// inputs rotate over enough disjoint page sets that every call reads cold (> 3x L2)
// memory, 3 warm-up replays, median of `--reps` timed replays (CUDA events).
// Reports us per call and effective TB/s over the distinct selected page bytes read
// (K + V, plus block scales for NVFP4), and the fraction of the measured 4.2 TB/s.
//
//   build/bench_decode [--suite full|low_latency|all] [--heads 64/4,16/1] [--formats bf16,fp8,nvfp4]
//                      [--calls 120] [--reps 20] [--q Q] [--csv FILE]
// --q overrides the suites' 8 queries per request (1..32) keeping their lengths.
// --data random (default: q, k, v random as in bench_fill.h, E4M3 with 1/16 scales) or
// constant (every byte 0x22, NVFP4 scales 1.0: the inputs of sessions 1-26).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bench_fill.h"
#include "bench_suites.h"
#include "bench_util.h"
#include "flashmsa/flashmsa.h"
#include "workloads.h"

using namespace flashmsa;

namespace {

using bench::kColdBytes;
using bench::kCopyPeakTBs;
using bench::split;

bool g_random_data = true;  // --data

struct Row {
  std::string suite, name, format;
  int hq, hkv, batch, q;
  double us, tbs, frac, distinct_mb;
  int splits;
  std::string kernel;  // SparseDecodePlan::kernel()
};

template <class T>
T* dalloc(std::int64_t count, std::vector<void*>& owned) {
  void* p = nullptr;
  if (cudaMalloc(&p, static_cast<size_t>(count) * sizeof(T)) != cudaSuccess) return nullptr;
  owned.push_back(p);
  return static_cast<T*>(p);
}

bool bench_case(const tools::WorkloadCase& wc, const std::string& suite, int hq, int hkv,
                KvFormat fmt, int calls, int reps, std::vector<Row>* rows) {
  const int B = wc.batch_size, Q = wc.q_len_per_req;
  const int nrows = B * Q;
  std::mt19937_64 rng(12345);
  // Selected pages per call (one rotation set): local + 15 random history pages per (row, head).
  std::int64_t max_pages = 0, pages_per_set = 0;
  for (int b = 0; b < B; ++b) {
    const std::int64_t np = (wc.seq_lens[static_cast<size_t>(b)] + 127) / 128;
    max_pages = std::max(max_pages, np);
    pages_per_set += np;
  }
  const std::int64_t page_bytes_side =
      fmt == KvFormat::bf16 ? 128 * 128 * 2 : fmt == KvFormat::fp8 ? 128 * 128 : 128 * 64 + 128 * 8;
  // Topk + distinct bytes of one set.
  std::vector<std::int32_t> topk(static_cast<size_t>(nrows) * hkv * 16, -1);
  std::int64_t distinct_pages = 0;  // (request, head, logical page) triples
  for (int b = 0; b < B; ++b) {
    const std::int64_t seq = wc.seq_lens[static_cast<size_t>(b)];
    std::set<std::pair<int, int>> used;
    for (int j = 0; j < Q; ++j) {
      const std::int64_t pos = seq - Q + j;
      const int local = static_cast<int>(pos / 128);
      for (int g = 0; g < hkv; ++g) {
        std::int32_t* e = topk.data() + ((static_cast<size_t>(b) * Q + j) * hkv + g) * 16;
        std::vector<int> hist(static_cast<size_t>(local));
        for (int i = 0; i < local; ++i) hist[static_cast<size_t>(i)] = i;
        // Drafts of one request share most of their selection (as real indexers do).
        std::mt19937_64 r2(static_cast<std::uint64_t>(b) * 131 + static_cast<std::uint64_t>(g));
        std::shuffle(hist.begin(), hist.end(), r2);
        const int nh = std::min(local, 15);
        for (int k = 0; k < nh; ++k) e[k] = hist[static_cast<size_t>(k)];
        e[nh] = local;
        for (int k = 0; k <= nh; ++k) used.insert({g, e[k]});
      }
    }
    distinct_pages += static_cast<std::int64_t>(used.size());
  }
  const std::int64_t distinct_bytes = distinct_pages * 2 * page_bytes_side;
  const int sets = static_cast<int>(std::max<std::int64_t>(1, (kColdBytes + distinct_bytes - 1) / std::max<std::int64_t>(distinct_bytes, 1)));
  const int nsets = std::min(sets, calls);
  const std::int64_t num_pages = pages_per_set * nsets;
  const std::int64_t cache_bytes = num_pages * hkv * 2 * page_bytes_side;
  if (cache_bytes > 100LL * 1024 * 1024 * 1024) {
    std::fprintf(stderr, "skip %s: cache %.1f GB\n", wc.id.c_str(), cache_bytes / 1e9);
    return true;
  }

  std::vector<void*> owned;
  const int qbytes = fmt == KvFormat::bf16 ? 2 : 1;
  const std::int64_t side_data = fmt == KvFormat::nvfp4 ? 64 : 128 * qbytes / (fmt == KvFormat::bf16 ? 1 : 1);
  const std::int64_t elems_side = num_pages * hkv * 128 * (fmt == KvFormat::nvfp4 ? 64 : 128);
  auto* k = dalloc<std::uint8_t>(elems_side * (fmt == KvFormat::bf16 ? 2 : 1), owned);
  auto* v = dalloc<std::uint8_t>(elems_side * (fmt == KvFormat::bf16 ? 2 : 1), owned);
  std::uint8_t* ks = nullptr;
  std::uint8_t* vs = nullptr;
  if (fmt == KvFormat::nvfp4) {
    ks = dalloc<std::uint8_t>(num_pages * hkv * 128 * 8, owned);
    vs = dalloc<std::uint8_t>(num_pages * hkv * 128 * 8, owned);
  }
  auto* q = dalloc<std::uint8_t>(static_cast<std::int64_t>(nrows) * hq * 128 * qbytes, owned);
  auto* out = dalloc<std::uint16_t>(static_cast<std::int64_t>(nrows) * hq * 128, owned);
  auto* d_topk = dalloc<std::int32_t>(static_cast<std::int64_t>(topk.size()), owned);
  auto* d_seq = dalloc<std::int32_t>(B, owned);
  auto* d_bt = dalloc<std::int32_t>(static_cast<std::int64_t>(nsets) * B * max_pages, owned);
  if (!k || !v || !q || !out || !d_topk || !d_seq || !d_bt || (fmt == KvFormat::nvfp4 && (!ks || !vs))) {
    for (void* p : owned) cudaFree(p);
    std::fprintf(stderr, "skip %s: allocation failed\n", wc.id.c_str());
    return true;
  }
  (void)side_data;
  // Values: random by default (bench_fill.h; constant data can time optimistically).
  const std::int64_t kv_bytes = elems_side * (fmt == KvFormat::bf16 ? 2 : 1);
  const std::int64_t scale_bytes = num_pages * hkv * 128 * 8, q_bytes = static_cast<std::int64_t>(nrows) * hq * 128 * qbytes;
  bench::InputScales scales;
  CUDA_OK(bench::fill_attention_inputs(g_random_data, fmt, q, q_bytes, k, v, kv_bytes, ks, vs, scale_bytes, &scales));
  CUDA_OK(cudaMemcpy(d_topk, topk.data(), topk.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(d_seq, wc.seq_lens.data(), static_cast<size_t>(B) * 4, cudaMemcpyHostToDevice));
  {
    // Block tables: set s maps request b's pages to a disjoint random range of physical pages.
    std::vector<std::int32_t> perm(static_cast<size_t>(num_pages));
    for (std::int64_t i = 0; i < num_pages; ++i) perm[static_cast<size_t>(i)] = static_cast<std::int32_t>(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<std::int32_t> bt(static_cast<size_t>(nsets) * B * max_pages, 0);
    std::int64_t next = 0;
    for (int s = 0; s < nsets; ++s)
      for (int b = 0; b < B; ++b) {
        const std::int64_t np = (wc.seq_lens[static_cast<size_t>(b)] + 127) / 128;
        for (std::int64_t j = 0; j < np; ++j)
          bt[(static_cast<size_t>(s) * B + b) * max_pages + j] = perm[static_cast<size_t>(next++)];
      }
    CUDA_OK(cudaMemcpy(d_bt, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice));
  }

  SparseDecodePlan plan;
  DecodePlanArgs pa;
  pa.batch_size = B;
  pa.queries_per_request = Q;
  pa.num_q_heads = hq;
  pa.num_kv_heads = hkv;
  pa.max_pages_per_request = static_cast<int>(max_pages);
  pa.kv_format = fmt;
  pa.q_dtype = fmt == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
  pa.device = Device::cuda;
  Status st = plan.plan(pa);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return false;
  }
  const DType data_dt = fmt == KvFormat::bf16 ? DType::bf16 : fmt == KvFormat::fp8 ? DType::e4m3 : DType::u8;
  const std::int64_t dlast = fmt == KvFormat::nvfp4 ? 64 : 128;
  PagedKvCache kv;
  kv.format = fmt;
  kv.k.data = make_view(k, data_dt, {num_pages, hkv, 128, dlast}, Device::cuda);
  kv.v.data = make_view(v, data_dt, {num_pages, hkv, 128, dlast}, Device::cuda);
  if (fmt == KvFormat::nvfp4) {
    kv.k.block_scale = make_view(ks, DType::e4m3, {num_pages, hkv, 128, 8}, Device::cuda);
    kv.v.block_scale = make_view(vs, DType::e4m3, {num_pages, hkv, 128, 8}, Device::cuda);
  }
  if (fmt == KvFormat::fp8) kv.k.global_scale = kv.v.global_scale = scales.kv;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  DecodeRunArgs ra;
  ra.q = make_view(q, pa.q_dtype, {nrows, hq, 128}, Device::cuda);
  ra.kv = kv;
  ra.topk_indices = make_view(d_topk, DType::i32, {nrows, hkv, 16}, Device::cuda);
  ra.seq_lens = make_view(d_seq, DType::i32, {B}, Device::cuda);
  ra.out = make_view(out, DType::bf16, {nrows, hq, 128}, Device::cuda);
  ra.q_scale = scales.q;
  ra.stream = stream;
  auto args_for = [&](int s) {
    DecodeRunArgs a = ra;
    a.block_table = make_view(d_bt + static_cast<std::int64_t>(s) * B * max_pages, DType::i32, {B, max_pages}, Device::cuda);
    return a;
  };
  st = plan.run(args_for(0));  // warm-up outside capture
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return false;
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < calls; ++i) plan.run(args_for(i % nsets));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CUDA_OK(cudaGraphLaunch(exec, stream));
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    CUDA_OK(cudaEventRecord(e0, stream));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaEventRecord(e1, stream));
    CUDA_OK(cudaEventSynchronize(e1));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1000.0 / calls;
  Row row;
  row.suite = suite;
  row.name = wc.id;
  row.format = kv_format_name(fmt);
  row.hq = hq;
  row.hkv = hkv;
  row.batch = B;
  row.q = Q;
  row.us = us;
  row.distinct_mb = distinct_bytes / 1e6;
  row.tbs = distinct_bytes / (us * 1e-6) / 1e12;
  row.frac = row.tbs / kCopyPeakTBs;
  row.splits = plan.num_splits();
  row.kernel = plan.kernel();
  rows->push_back(row);
  std::printf("%-12s %-16s %-6s %2d/%d  B=%-3d Q=%d  %-8s splits=%d  %9.2f us  %7.1f MB  %6.3f TB/s  %5.1f%%\n",
              suite.c_str(), wc.id.c_str(), row.format.c_str(), hq, hkv, B, Q, row.kernel.c_str(), row.splits, us,
              row.distinct_mb, row.tbs, 100 * row.frac);
  std::fflush(stdout);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaStreamDestroy(stream);
  for (void* p : owned) cudaFree(p);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string suite = "all", heads = "64/4,16/1", formats = "bf16,fp8,nvfp4", csv, only_cases;
  int calls = 120, reps = 20, q_override = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--suite") suite = next();
    else if (a == "--heads") heads = next();
    else if (a == "--formats") formats = next();
    else if (a == "--calls") calls = std::stoi(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--csv") csv = next();
    else if (a == "--q") q_override = std::stoi(next());
    else if (a == "--cases") only_cases = next();  // comma-separated case ids
    else if (a == "--data") {
      const std::string d = next();
      if (d != "random" && d != "constant") {
        std::fprintf(stderr, "--data: expected random or constant, got '%s'\n", d.c_str());
        return 2;
      }
      g_random_data = d == "random";
    }
    else if (a == "--help" || a == "-h") {
      std::printf(
          "bench_decode [--suite full|low_latency|all] [--heads 64/4,16/1] [--formats bf16,fp8,nvfp4]\n"
          "             [--q N (queries per request; case names keep the suite's _q8)] [--cases id,id]\n"
          "             [--calls 120] [--reps 20] [--csv FILE] [--data random|constant]\n"
          "Decode attention per call inside a CUDA graph over rotated inputs (cold L2); needs a GPU.\n"
          "Hooks: FLASHMSA_DECODE_KERNEL=warp_mma|warp_mma_dsplit|tile, FLASHMSA_DECODE_SPLITS=N, FLASHMSA_DECODE_MERGE=combine (warp-MMA kernel).\n");
      return 0;
    } else {
      std::fprintf(stderr, "unknown option %s (try --help)\n", a.c_str());
      return 2;
    }
  }
  if (!flashmsa::bench::require_cuda_device("bench_decode")) return 2;  // after --help
  std::vector<std::pair<std::string, std::vector<tools::WorkloadCase>>> suites;
  if (!flashmsa::bench::load_decode_suites(suite, {"low_latency", "full"}, q_override, &suites)) return 2;
  std::vector<Row> rows;
  for (const std::string& f : split(formats, ',')) {
    const KvFormat fmt = f == "bf16" ? KvFormat::bf16 : f == "fp8" ? KvFormat::fp8 : KvFormat::nvfp4;
    for (const std::string& h : split(heads, ',')) {
      const int hq = std::stoi(h.substr(0, h.find('/'))), hkv = std::stoi(h.substr(h.find('/') + 1));
      for (auto& [name, cases] : suites)
        for (auto& c : cases) {
          if (!only_cases.empty() && ("," + only_cases + ",").find("," + c.id + ",") == std::string::npos) continue;
          if (!bench_case(c, name, hq, hkv, fmt, calls, reps, &rows)) return 1;
        }
    }
  }
  if (!csv.empty()) {
    FILE* fp = std::fopen(csv.c_str(), "w");
    if (fp) {
      std::fprintf(fp, "suite,case,format,hq,hkv,batch,q,splits,us,distinct_mb,tb_s,frac_of_4.2,kernel\n");
      for (auto& r : rows)
        std::fprintf(fp, "%s,%s,%s,%d,%d,%d,%d,%d,%.3f,%.3f,%.4f,%.4f,%s\n", r.suite.c_str(), r.name.c_str(),
                     r.format.c_str(), r.hq, r.hkv, r.batch, r.q, r.splits, r.us, r.distinct_mb, r.tbs, r.frac,
                     r.kernel.c_str());
      std::fclose(fp);
    }
  }
  return 0;
}

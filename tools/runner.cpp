// FlashMSA tools — the run engine (see runner.h).
#include "runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <new>
#include <ostream>
#include <sstream>

#include "check.h"
#include "device_mem.h"
#include "common/parallel.h"
#include "flashmsa/attention.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/indexer.h"
#include "flashmsa/numerics.h"
#include "flashmsa/version.h"
#include "hash_rng.h"

namespace flashmsa::tools {

namespace {

constexpr int kD = kHeadDim;
/// Per-tensor scale of fp8 / nvfp4 K and V, and of nothing else: "amax / 448" with
/// amax = 6, the 6-sigma bound of the unit-RMS synthetic data (values beyond saturate).
constexpr float kKvGlobalScale = 6.0f / 448.0f;

Status bad(const std::string& msg) { return Status(StatusCode::kInvalidArgument, msg); }

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string gib(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return os.str();
}

/// Bytes per token per KV head of K + V (+ scales) in a cache format.
std::int64_t kv_bytes_per_token_head(KvFormat f) {
  switch (f) {
    case KvFormat::bf16: return 2 * kD * 2;
    case KvFormat::fp8: return 2 * kD;
    case KvFormat::nvfp4: return 2 * (kD / 2 + kD / 16);
  }
  return 0;
}

std::int64_t index_bytes_per_token(KvFormat f) { return f == KvFormat::bf16 ? 2 * kD : kD; }

/// Rows (in order) of a case: request and position of each query row (D4).
void enumerate_rows(const WorkloadCase& c, std::vector<std::int32_t>* req, std::vector<std::int32_t>* pos) {
  req->clear();
  pos->clear();
  for (int r = 0; r < c.batch_size; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    for (std::int32_t j = 0; j < c.query_lens[ri]; ++j) {
      req->push_back(r);
      pos->push_back(c.prefix_lens[ri] + j);
    }
  }
}

std::uint64_t vec_key(std::uint64_t ck, Stream s, std::int64_t r, std::int64_t t, std::int64_t head) {
  return derive(derive(derive(ck, static_cast<std::uint64_t>(s)), static_cast<std::uint64_t>(r)),
                (static_cast<std::uint64_t>(t) << 8) | static_cast<std::uint64_t>(head));
}

/// A contiguous view of the first n rows of a rank-2/3 HostTensor.
TensorView first_rows(const HostTensor& t, std::int64_t n) {
  TensorView v = t.view();
  v.shape[0] = n;
  return v;
}

/// 64-bit digest of a byte range (for the determinism fingerprint).
std::uint64_t digest_bytes(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
  }
  std::uint64_t w = 0;
  std::memcpy(&w, p + i, n - i);
  return mix64(h ^ w ^ (static_cast<std::uint64_t>(n) << 56));
}

Status parse_kv_format(const std::string& s, KvFormat* f) {
  if (s == "bf16") *f = KvFormat::bf16;
  else if (s == "fp8") *f = KvFormat::fp8;
  else if (s == "nvfp4") *f = KvFormat::nvfp4;
  else return bad("--kv-dtype '" + s + "': expected bf16, fp8 or nvfp4");
  return Status::Ok();
}

}  // namespace

Status parse_heads(const std::string& s, int* hq, int* hkv) {
  static const char* kAllowed[] = {"64/4", "32/2", "16/1", "8/1"};
  for (const char* a : kAllowed) {
    if (s == a) {
      *hq = std::atoi(a);
      *hkv = std::atoi(std::strchr(a, '/') + 1);
      return Status::Ok();
    }
  }
  return bad("--heads '" + s +
             "': unsupported head split; expected one of 64/4, 32/2, 16/1, 8/1 (Q heads / KV heads "
             "per rank: TP1, TP2, TP4, TP8 of MiniMax-M3)");
}

// ---------------------------------------------------------------------------------
// Cost and memory models

double estimate_cpu_seconds(const WorkloadCase& c, const RunOptions& o) {
  const double hkv = o.num_kv_heads, hq = o.num_q_heads;
  // Input generation: 2 * Hkv K/V vectors + 1 index-K vector per KV token, q and index q
  // per row; ~0.25 us per 128-vector including the cache insert.
  const double rows = static_cast<double>(c.total_q());
  const double gen = (static_cast<double>(c.total_kv()) * (2 * hkv + 1) + rows * (hq + hkv)) * 0.25e-6;
  // Indexer: every (row, history token) pair costs one 128-dim dot per index head.
  double hist_tokens = 0, attn_keys = 0;
  for (std::size_t i = 0; i < c.query_lens.size(); ++i) {
    const double p0 = c.prefix_lens[i], q = c.query_lens[i];
    const double mean_pos = p0 + (q - 1) / 2.0;
    hist_tokens += q * std::floor(mean_pos / 128.0) * 128.0;
    attn_keys += q * std::min(2048.0, mean_pos + 1);
  }
  const double indexer = hist_tokens * hkv * kD / 4e9;          // ~4 GMAC/s
  const double attention = attn_keys * hq * 2 * kD / 4e9;       // QK and PV
  // Check: 8 rows of exact page scores in FP64 plus the attention rows.
  const double check = o.check ? (8.0 * c.max_seq_len() * hkv * kD) / 5e8 + 0.01 : 0.0;
  return gen + indexer + attention + check + 0.005;
}

std::int64_t estimate_host_bytes(const WorkloadCase& c, const RunOptions& o) {
  const std::int64_t hq = o.num_q_heads, hkv = o.num_kv_heads;
  const std::int64_t pages = c.total_pages() + 1;  // + scratch page
  const std::int64_t T = c.total_q();
  std::int64_t b = 0;
  b += pages * kPageSize * hkv * kv_bytes_per_token_head(o.kv_format);   // K/V cache
  b += pages * kPageSize * index_bytes_per_token(o.index_format);        // index-K cache
  b += T * hq * kD * (2 + 1 + 2);     // q bf16, q e4m3, out bf16
  b += T * hq * 4;                    // lse
  b += T * hkv * kD * (2 + 1);        // index q bf16 + e4m3
  b += T * (hkv * kD * 2 * 2 + kD * 2 + 4);  // new K, V, index K, slots
  b += T * hkv * kMaxTopk * 4;        // top-k
  b += 8192LL * (hkv * kD * 2 * 2 + kD * 2 + 4);  // prefix insertion chunk
  b += static_cast<std::int64_t>(c.batch_size) * c.max_pages() * 4 + pages * 8;  // tables
  b += pages * hkv;                   // distinct-page bitmap
  return b;
}

// ---------------------------------------------------------------------------------
// Selection

Status default_selection(const std::string& dir, const RunOptions& opts, std::vector<WorkloadCase>* out) {
  std::vector<WorkloadCase> prefill;
  FLASHMSA_RETURN_IF_ERROR(load_prefill_benchmark(dir, &prefill));
  std::vector<std::size_t> idx(prefill.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::vector<double> cost(prefill.size());
  for (std::size_t i = 0; i < prefill.size(); ++i) cost[i] = estimate_cpu_seconds(prefill[i], opts);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return cost[a] < cost[b]; });
  out->clear();
  std::vector<char> taken(prefill.size(), 0);
  for (std::size_t k = 0; k < idx.size() && out->size() < 4; ++k) {
    out->push_back(prefill[idx[k]]);
    taken[idx[k]] = 1;
  }
  for (int min_batch : {2, 3}) {
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (prefill[idx[k]].batch_size >= min_batch) {
        if (!taken[idx[k]]) {
          out->push_back(prefill[idx[k]]);
          taken[idx[k]] = 1;
        }
        break;
      }
    }
  }
  // The two highest-weight (representative) cases estimated under 10 s on a CPU.
  std::vector<WorkloadCase> by_weight;
  FLASHMSA_RETURN_IF_ERROR(select_top_weighted(prefill, static_cast<int>(prefill.size()), &by_weight));
  int heavy = 0;
  for (const WorkloadCase& c : by_weight) {
    if (heavy == 2 || c.weight <= 0) break;
    if (taken[static_cast<std::size_t>(c.order)] || estimate_cpu_seconds(c, opts) > 10.0) continue;
    out->push_back(c);
    taken[static_cast<std::size_t>(c.order)] = 1;
    ++heavy;
  }
  for (const char* id : {"b1_s1000_q8", "b4_s32000_q8", "b8_s1000_q8", "b8_s10000_q8", "b32_s4000_q8"}) {
    WorkloadCase c;
    FLASHMSA_RETURN_IF_ERROR(find_case(dir, id, &c));
    out->push_back(std::move(c));
  }
  // Fill up with further representative prefill cases (highest weight first, each
  // estimated under 10 s) while the whole selection stays under kDefaultBudgetSeconds.
  constexpr double kDefaultBudgetSeconds = 45.0;
  double total = 0;
  for (const WorkloadCase& c : *out) total += estimate_cpu_seconds(c, opts);
  std::vector<WorkloadCase> extra;
  for (const WorkloadCase& c : by_weight) {
    if (c.weight <= 0) break;
    if (taken[static_cast<std::size_t>(c.order)]) continue;
    const double e = estimate_cpu_seconds(c, opts);
    if (e > 10.0 || total + e > kDefaultBudgetSeconds) continue;
    extra.push_back(c);
    taken[static_cast<std::size_t>(c.order)] = 1;
    total += e;
  }
  // Keep all prefill cases before the decode ones.
  std::size_t first_decode = 0;
  while (first_decode < out->size() && (*out)[first_decode].kind == CaseKind::prefill) ++first_decode;
  out->insert(out->begin() + static_cast<std::ptrdiff_t>(first_decode), extra.begin(), extra.end());
  return Status::Ok();
}

Status resolve_request(const RunRequest& req, RunOptions* o, std::vector<WorkloadCase>* cases) {
  *o = RunOptions{};
  FLASHMSA_RETURN_IF_ERROR(parse_heads(req.heads, &o->num_q_heads, &o->num_kv_heads));
  FLASHMSA_RETURN_IF_ERROR(parse_kv_format(req.kv_dtype, &o->kv_format));
  if (req.index_dtype == "bf16") o->index_format = KvFormat::bf16;
  else if (req.index_dtype == "fp8") o->index_format = KvFormat::fp8;
  else return bad("--index-dtype '" + req.index_dtype + "': expected bf16 or fp8");
  o->device_request = req.device;
  if (req.device == "cpu") {
    o->device = Device::cpu;
  } else if (req.device == "auto") {
    o->device = (built_with_cuda() && tools_have_cuda() && cuda_device_count() > 0) ? Device::cuda : Device::cpu;
  } else if (req.device == "cuda") {
    if (!built_with_cuda())
      return bad("--device cuda: this build of FlashMSA has no CUDA kernels (configure with "
                 "-DFLASHMSA_CUDA=ON on a machine with nvcc and an SM90 target), use --device cpu");
    if (!tools_have_cuda())
      return bad("--device cuda: the flashmsa CLI was built without the CUDA runtime "
                 "(flashmsa_tools needs FLASHMSA_TOOLS_CUDA), use --device cpu");
    if (cuda_device_count() == 0) return bad("--device cuda: no CUDA device is visible, use --device cpu");
    o->device = Device::cuda;
  } else {
    return bad("--device '" + req.device + "': expected cpu, cuda or auto");
  }
  if (req.threads < 0) return bad("--threads " + std::to_string(req.threads) + ": expected >= 0 (0 = all cores)");
  if (!(req.max_memory_gb > 0)) {
    std::ostringstream os;
    os << "--max-memory-gb " << req.max_memory_gb << ": expected a positive number of GiB";
    return bad(os.str());
  }
  if (req.check_rows < 1 || req.check_rows > 4096)
    return bad("--check-rows " + std::to_string(req.check_rows) + ": expected 1..4096");
  if (req.warmup < 0 || req.warmup > 100)
    return bad("--warmup " + std::to_string(req.warmup) + ": expected 0..100");
  if (req.cases == 0 || req.cases < -1 || (req.cases_given && req.cases < 1))
    return bad("--cases " + std::to_string(req.cases) + ": expected a positive number of cases");
  for (std::size_t i = 0; i < req.case_ids.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (req.case_ids[i] == req.case_ids[j])
        return bad("--case " + req.case_ids[i] + ": given more than once (each case runs once)");
  o->seed = req.seed;
  o->threads = req.threads;
  o->max_memory_gb = req.max_memory_gb;
  o->check_rows = req.check_rows;
  o->warmup = req.warmup;
  o->json_path = req.json_path;
  FLASHMSA_RETURN_IF_ERROR(find_data_dir(req.data_dir, &o->data_dir));

  cases->clear();
  const bool default_run = req.workload.empty() && req.cases < 0 && req.case_ids.empty();
  o->check = req.check >= 0 ? (req.check == 1) : default_run;
  if (default_run) {
    FLASHMSA_RETURN_IF_ERROR(default_selection(o->data_dir, *o, cases));
    o->selection = "default";
    return Status::Ok();
  }
  if (req.cases > 0 && req.workload.empty())
    return bad("--cases " + std::to_string(req.cases) + ": needs --workload prefill|decode|lowlat");
  std::ostringstream sel;
  if (!req.workload.empty()) {
    Workload w;
    if (!parse_workload(req.workload, &w))
      return bad("--workload '" + req.workload + "': expected prefill, decode or lowlat");
    std::vector<WorkloadCase> all;
    FLASHMSA_RETURN_IF_ERROR(load_workload(o->data_dir, w, &all));
    if (req.cases > 0 || req.case_ids.empty()) {
      std::vector<WorkloadCase> top;
      FLASHMSA_RETURN_IF_ERROR(select_top_weighted(all, req.cases > 0 ? req.cases : static_cast<int>(all.size()), &top));
      *cases = std::move(top);
      sel << "workload " << workload_name(w);
      if (req.cases > 0 && static_cast<std::size_t>(req.cases) < all.size())
        sel << ", " << req.cases << " highest-weight cases";
      else if (req.cases > 0)
        sel << ", all " << all.size() << " cases (--cases " << req.cases << ")";
    }
  }
  for (const std::string& id : req.case_ids) {
    WorkloadCase c;
    FLASHMSA_RETURN_IF_ERROR(find_case(o->data_dir, id, &c));
    sel << (sel.tellp() > 0 ? ", " : "") << "case " << id;
    // A case the --workload/--cases selection already holds runs once.
    const bool held = std::any_of(cases->begin(), cases->end(), [&](const WorkloadCase& x) { return x.id == c.id; });
    if (!held) cases->push_back(std::move(c));
  }
  o->selection = sel.str();
  return Status::Ok();
}

// ---------------------------------------------------------------------------------
// Running a case

namespace {

struct CaseState {
  // geometry
  int B = 0, Hq = 0, Hkv = 0;
  std::int64_t T = 0, P = 0, W = 0;
  bool decode = false;
  int Q = 0;
  std::vector<std::int32_t> row_req, row_pos;
  std::vector<std::int64_t> page_base;  // first logical->physical index per request
  std::vector<std::int32_t> perm;       // physical page of global logical page
  HostTensor block_table, seq_lens, cu_seqlens;
  HostTensor k_data, v_data, k_scale, v_scale, ik_data;
  PagedKvCache kv;
  IndexKCache ik;
  HostTensor q, q8, iq, iq8, k_new, v_new, ik_new, slot_new, topk, out, lse;
  float q_scale = 1.0f;  ///< e4m3 query scale (fp8 / nvfp4 caches)
};

std::int32_t slot_of(const CaseState& s, std::int64_t r, std::int64_t t) {
  const std::int32_t phys = s.perm[static_cast<std::size_t>(s.page_base[static_cast<std::size_t>(r)] + t / kPageSize)];
  return static_cast<std::int32_t>(phys * kPageSize + t % kPageSize);
}

Status setup_case(const WorkloadCase& c, const RunOptions& o, CaseState* s) {
  s->B = c.batch_size;
  s->Hq = o.num_q_heads;
  s->Hkv = o.num_kv_heads;
  s->T = c.total_q();
  s->decode = c.kind == CaseKind::decode;
  s->Q = s->decode ? c.q_len_per_req : 0;
  s->W = c.max_pages();
  s->P = c.total_pages();
  const std::uint64_t ck = case_key(o.seed, c.id);
  const int threads = o.threads;
  enumerate_rows(c, &s->row_req, &s->row_pos);

  // Pages: a random permutation of the physical pages; unused table entries point at a
  // scratch page P (never read: beyond every request's length).
  s->perm.resize(static_cast<std::size_t>(s->P));
  for (std::int64_t i = 0; i < s->P; ++i) s->perm[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  const std::uint64_t pk = derive(ck, static_cast<std::uint64_t>(Stream::pages));
  for (std::int64_t i = s->P - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(uniform_below(draw64(pk, static_cast<std::uint64_t>(i)), static_cast<std::uint64_t>(i + 1)));
    std::swap(s->perm[static_cast<std::size_t>(i)], s->perm[static_cast<std::size_t>(j)]);
  }
  s->page_base.resize(static_cast<std::size_t>(s->B));
  s->block_table.reset(DType::i32, {s->B, s->W});
  s->seq_lens.reset(DType::i32, {s->B});
  s->cu_seqlens.reset(DType::i32, {s->B + 1});
  {
    std::int64_t base = 0;
    auto* bt = s->block_table.data<std::int32_t>();
    for (int r = 0; r < s->B; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const std::int64_t np = (c.seq_lens[ri] + kPageSize - 1) / kPageSize;
      s->page_base[ri] = base;
      for (std::int64_t b = 0; b < s->W; ++b)
        bt[r * s->W + b] = b < np ? s->perm[static_cast<std::size_t>(base + b)] : static_cast<std::int32_t>(s->P);
      base += np;
      s->seq_lens.data<std::int32_t>()[r] = c.seq_lens[ri];
      s->cu_seqlens.data<std::int32_t>()[r + 1] = s->cu_seqlens.data<std::int32_t>()[r] + c.query_lens[ri];
    }
  }

  // Caches (P + 1 pages: the scratch page last).
  const std::int64_t NP = s->P + 1;
  s->kv.format = o.kv_format;
  switch (o.kv_format) {
    case KvFormat::bf16:
      s->k_data.reset(DType::bf16, {NP, s->Hkv, kPageSize, kD});
      s->v_data.reset(DType::bf16, {NP, s->Hkv, kPageSize, kD});
      break;
    case KvFormat::fp8:
      s->k_data.reset(DType::e4m3, {NP, s->Hkv, kPageSize, kD});
      s->v_data.reset(DType::e4m3, {NP, s->Hkv, kPageSize, kD});
      s->kv.k.global_scale = s->kv.v.global_scale = kKvGlobalScale;
      break;
    case KvFormat::nvfp4:
      s->k_data.reset(DType::u8, {NP, s->Hkv, kPageSize, kD / 2});
      s->v_data.reset(DType::u8, {NP, s->Hkv, kPageSize, kD / 2});
      s->k_scale.reset(DType::e4m3, {NP, s->Hkv, kPageSize, kD / 16});
      s->v_scale.reset(DType::e4m3, {NP, s->Hkv, kPageSize, kD / 16});
      s->kv.k.block_scale = s->k_scale.view();
      s->kv.v.block_scale = s->v_scale.view();
      s->kv.k.global_scale = s->kv.v.global_scale = kKvGlobalScale;
      break;
  }
  s->kv.k.data = s->k_data.view();
  s->kv.v.data = s->v_data.view();
  s->ik.format = o.index_format;
  s->ik_data.reset(o.index_format == KvFormat::bf16 ? DType::bf16 : DType::e4m3, {NP, kPageSize, kD});
  s->ik.data = s->ik_data.view();

  // Prefix tokens (cached context): generated and inserted in chunks, untimed.
  const std::int64_t kChunk = 8192;
  HostTensor ck_buf(DType::bf16, {kChunk, s->Hkv, kD}), cv_buf(DType::bf16, {kChunk, s->Hkv, kD});
  HostTensor cik_buf(DType::bf16, {kChunk, kD}), cslot(DType::i32, {kChunk});
  std::vector<std::pair<std::int32_t, std::int32_t>> items;  // (request, token)
  items.reserve(static_cast<std::size_t>(kChunk));
  auto flush = [&]() -> Status {
    const auto n = static_cast<std::int64_t>(items.size());
    if (n == 0) return Status::Ok();
    detail::parallel_for(n, threads, [&](std::int64_t i, int) {
      const auto [r, t] = items[static_cast<std::size_t>(i)];
      for (int g = 0; g < s->Hkv; ++g) {
        normal_rms1_bf16(vec_key(ck, Stream::k, r, t, g), ck_buf.data<std::uint16_t>() + (i * s->Hkv + g) * kD);
        normal_rms1_bf16(vec_key(ck, Stream::v, r, t, g), cv_buf.data<std::uint16_t>() + (i * s->Hkv + g) * kD);
      }
      normal_rms1_bf16(vec_key(ck, Stream::index_k, r, t, 0), cik_buf.data<std::uint16_t>() + i * kD);
      cslot.data<std::int32_t>()[i] = slot_of(*s, r, t);
    });
    FLASHMSA_RETURN_IF_ERROR(cache_insert(first_rows(ck_buf, n), first_rows(cv_buf, n), first_rows(cslot, n), s->kv));
    FLASHMSA_RETURN_IF_ERROR(index_cache_insert(first_rows(cik_buf, n), first_rows(cslot, n), s->ik));
    items.clear();
    return Status::Ok();
  };
  for (int r = 0; r < s->B; ++r) {
    for (std::int32_t t = 0; t < c.prefix_lens[static_cast<std::size_t>(r)]; ++t) {
      items.emplace_back(r, t);
      if (static_cast<std::int64_t>(items.size()) == kChunk) FLASHMSA_RETURN_IF_ERROR(flush());
    }
  }
  FLASHMSA_RETURN_IF_ERROR(flush());

  // New tokens of the call and the queries.
  const std::int64_t T = s->T;
  s->k_new.reset(DType::bf16, {T, s->Hkv, kD});
  s->v_new.reset(DType::bf16, {T, s->Hkv, kD});
  s->ik_new.reset(DType::bf16, {T, kD});
  s->slot_new.reset(DType::i32, {T});
  s->q.reset(DType::bf16, {T, s->Hq, kD});
  s->iq.reset(DType::bf16, {T, s->Hkv, kD});
  detail::parallel_for(T, threads, [&](std::int64_t i, int) {
    const std::int32_t r = s->row_req[static_cast<std::size_t>(i)];
    const std::int32_t p = s->row_pos[static_cast<std::size_t>(i)];
    for (int g = 0; g < s->Hkv; ++g) {
      normal_rms1_bf16(vec_key(ck, Stream::k, r, p, g), s->k_new.data<std::uint16_t>() + (i * s->Hkv + g) * kD);
      normal_rms1_bf16(vec_key(ck, Stream::v, r, p, g), s->v_new.data<std::uint16_t>() + (i * s->Hkv + g) * kD);
      normal_rms1_bf16(vec_key(ck, Stream::index_q, r, p, g), s->iq.data<std::uint16_t>() + (i * s->Hkv + g) * kD);
    }
    normal_rms1_bf16(vec_key(ck, Stream::index_k, r, p, 0), s->ik_new.data<std::uint16_t>() + i * kD);
    for (int h = 0; h < s->Hq; ++h)
      normal_rms1_bf16(vec_key(ck, Stream::q, r, p, h), s->q.data<std::uint16_t>() + (i * s->Hq + h) * kD);
    s->slot_new.data<std::int32_t>()[i] = slot_of(*s, r, p);
  });
  if (o.kv_format != KvFormat::bf16) {
    s->q8.reset(DType::e4m3, {T, s->Hq, kD});
    // amax-based query scale (a calibration input, so not timed): q8 = E4M3_sat(q / q_scale),
    // q_scale = amax(|q|) / 448. The max is order-independent, so per-thread maxima are exact.
    const int nt = std::max(1, threads > 0 ? threads : detail::default_num_threads());
    std::vector<float> part(static_cast<std::size_t>(nt), 0.0f);
    const auto* qb = s->q.data<const std::uint16_t>();
    const std::int64_t per_row = static_cast<std::int64_t>(s->Hq) * kD;
    detail::parallel_for(T, nt, [&](std::int64_t i, int tid) {
      float m = part[static_cast<std::size_t>(tid)];
      for (std::int64_t e = i * per_row; e < (i + 1) * per_row; ++e) m = std::max(m, std::fabs(bf16_to_float(qb[e])));
      part[static_cast<std::size_t>(tid)] = m;
    });
    float amax = 0.0f;
    for (float m : part) amax = std::max(amax, m);
    s->q_scale = amax > 0.0f ? amax / 448.0f : 1.0f;
  }
  if (o.index_format != KvFormat::bf16) s->iq8.reset(DType::e4m3, {T, s->Hkv, kD});
  s->topk.reset(DType::i32, {T, s->Hkv, kMaxTopk});
  s->out.reset(DType::bf16, {T, s->Hq, kD});
  s->lse.reset(DType::f32, {T, s->Hq});
  return Status::Ok();
}

/// Selected visible keys, distinct (page, head) pairs and FLOPs from the top-k output.
void account_work(const WorkloadCase& c, const RunOptions& o, const CaseState& s, CaseResult* res) {
  const int G = s.Hq / s.Hkv;
  std::vector<std::uint8_t> seen(static_cast<std::size_t>((s.P + 1) * s.Hkv), 0);
  const auto* tk = s.topk.data<const std::int32_t>();
  const auto* bt = s.block_table.data<const std::int32_t>();
  std::int64_t visible = 0, hist_tokens = 0, distinct = 0;
  for (std::int64_t i = 0; i < s.T; ++i) {
    const std::int32_t r = s.row_req[static_cast<std::size_t>(i)];
    const std::int64_t p = s.row_pos[static_cast<std::size_t>(i)];
    const std::int64_t L = p / kPageSize;
    const std::int64_t npages = (c.seq_lens[static_cast<std::size_t>(r)] + kPageSize - 1) / kPageSize;
    hist_tokens += L * kPageSize;
    for (int g = 0; g < s.Hkv; ++g) {
      const std::int32_t* e = tk + (i * s.Hkv + g) * kMaxTopk;
      for (int k = 0; k < kMaxTopk; ++k) {
        const std::int32_t b = e[k];
        if (b < 0 || b >= npages || b > L) continue;
        bool dup = false;
        for (int k2 = 0; k2 < k; ++k2) dup = dup || e[k2] == b;
        if (dup) continue;
        visible += b < L ? kPageSize : p - L * kPageSize + 1;
        const std::int64_t phys = bt[r * s.W + b];
        auto& flag = seen[static_cast<std::size_t>(phys * s.Hkv + g)];
        if (!flag) {
          flag = 1;
          ++distinct;
        }
      }
    }
  }
  res->visible_keys = visible;
  res->distinct_pages = distinct;
  res->selected_bytes = distinct * kPageSize * kv_bytes_per_token_head(o.kv_format);
  res->attention_flops = static_cast<double>(visible) * G * 4.0 * kD;
  res->indexer_flops = static_cast<double>(hist_tokens) * s.Hkv * 2.0 * kD;
  res->attention_tflops = res->attention_ms > 0 ? res->attention_flops / (res->attention_ms * 1e-3) / 1e12 : 0;
  res->indexer_tflops = res->indexer_ms > 0 ? res->indexer_flops / (res->indexer_ms * 1e-3) / 1e12 : 0;
  res->gbps = res->attention_ms > 0 ? static_cast<double>(res->selected_bytes) / (res->attention_ms * 1e-3) / 1e9 : 0;
  if (c.useful_flops >= 0 && res->indexer_ms > 0)
    res->workload_useful_tflops = static_cast<double>(c.useful_flops) * s.Hkv / (res->indexer_ms * 1e-3) / 1e12;
}

/// The tensors the three stages read and write, on one device (host: CaseState's own
/// tensors; cuda: the DeviceState copies).
struct StageViews {
  Device device = Device::cpu;
  PagedKvCache kv;
  IndexKCache ik;
  TensorView k_new, v_new, ik_new, slot_new, q, iq, q8, iq8;
  TensorView block_table, cu_seqlens, seq_lens, topk, out, lse;
  TensorView q_used, iq_used;  ///< what the indexer / attention read (bf16 or e4m3)
};

void set_used(const RunOptions& o, StageViews* v) {
  v->q_used = o.kv_format != KvFormat::bf16 ? v->q8 : v->q;
  v->iq_used = o.index_format != KvFormat::bf16 ? v->iq8 : v->iq;
}

StageViews host_views(const CaseState& s, const RunOptions& o) {
  StageViews v;
  v.device = Device::cpu;
  v.kv = s.kv;
  v.ik = s.ik;
  v.k_new = s.k_new.view();
  v.v_new = s.v_new.view();
  v.ik_new = s.ik_new.view();
  v.slot_new = s.slot_new.view();
  v.q = s.q.view();
  v.iq = s.iq.view();
  if (o.kv_format != KvFormat::bf16) v.q8 = s.q8.view();
  if (o.index_format != KvFormat::bf16) v.iq8 = s.iq8.view();
  v.block_table = s.block_table.view();
  v.cu_seqlens = s.cu_seqlens.view();
  v.seq_lens = s.seq_lens.view();
  v.topk = s.topk.view();
  v.out = s.out.view();
  v.lse = s.lse.view();
  set_used(o, &v);
  return v;
}

/// Stage 1: the call's new tokens into the caches, the queries quantised (fp8 / nvfp4
/// K/V: q8 = E4M3_sat(q / q_scale); fp8 index cache: iq8 = E4M3_sat(iq), no scale).
Status insert_stage(const StageViews& v, const RunOptions& o, float q_scale) {
  FLASHMSA_RETURN_IF_ERROR(cache_insert(v.k_new, v.v_new, v.slot_new, v.kv));
  FLASHMSA_RETURN_IF_ERROR(index_cache_insert(v.ik_new, v.slot_new, v.ik));
  if (o.kv_format != KvFormat::bf16) FLASHMSA_RETURN_IF_ERROR(quantize_query_e4m3(v.q, q_scale, v.q8));
  if (o.index_format != KvFormat::bf16)  // plain E4M3_sat, no scale (spec 2.1 item 4)
    FLASHMSA_RETURN_IF_ERROR(quantize_query_e4m3(v.iq, 1.0f, v.iq8));
  return Status::Ok();
}

/// Stage 2: the indexer (top-k into v.topk).
Status indexer_stage(const StageViews& v, const CaseState& s) {
  if (!s.decode) {
    IndexerPrefillArgs a;
    a.q = v.iq_used;
    a.index_k = v.ik;
    a.block_table = v.block_table;
    a.cu_seqlens_q = v.cu_seqlens;
    a.seq_lens = v.seq_lens;
    a.topk_indices = v.topk;
    return indexer_prefill(a);
  }
  IndexerDecodeArgs a;
  a.q = v.iq_used;
  a.index_k = v.ik;
  a.block_table = v.block_table;
  a.seq_lens = v.seq_lens;
  a.queries_per_request = s.Q;
  a.topk_indices = v.topk;
  return indexer_decode(a);
}

/// Runs `fn` and returns its status; *ms = its wall time (on cuda between two
/// cudaDeviceSynchronize calls, so the kernels are included).
template <typename Fn>
Status timed(Device dev, Fn&& fn, double* ms) {
  if (dev == Device::cuda) FLASHMSA_RETURN_IF_ERROR(cuda_synchronize());
  const auto t0 = std::chrono::steady_clock::now();
  const Status st = fn();
  if (!st.ok()) return st;
  if (dev == Device::cuda) FLASHMSA_RETURN_IF_ERROR(cuda_synchronize());
  *ms = ms_since(t0);
  return Status::Ok();
}

/// Stage 3: attention (prefill op, or decode plan + run; the plan is timed separately
/// as plan_ms). Sets attention_ms / plan_ms on success; Unsupported is returned as is.
Status attention_stage(const StageViews& v, const CaseState& s, const RunOptions& o, float q_scale,
                       CaseResult* res) {
  if (!s.decode) {
    SparseAttentionPrefillArgs a;
    a.q = v.q_used;
    a.kv = v.kv;
    a.topk_indices = v.topk;
    a.block_table = v.block_table;
    a.cu_seqlens_q = v.cu_seqlens;
    a.seq_lens = v.seq_lens;
    a.q_scale = q_scale;
    a.out = v.out;
    a.lse = v.lse;
    return timed(v.device, [&] { return sparse_attention_prefill(a); }, &res->attention_ms);
  }
  DecodePlanArgs pa;
  pa.batch_size = s.B;
  pa.queries_per_request = s.Q;
  pa.num_q_heads = s.Hq;
  pa.num_kv_heads = s.Hkv;
  pa.max_pages_per_request = static_cast<int>(s.W);
  pa.topk = kMaxTopk;
  pa.kv_format = o.kv_format;
  pa.q_dtype = v.q_used.dtype;
  pa.device = v.device;
  if (v.device == Device::cpu) pa.num_threads = o.threads;
  SparseDecodePlan plan;
  FLASHMSA_RETURN_IF_ERROR(timed(
      v.device,
      [&]() -> Status {
        FLASHMSA_RETURN_IF_ERROR(SparseDecodePlan::can_implement(pa));
        return plan.plan(pa);
      },
      &res->plan_ms));
  DecodeRunArgs a;
  a.q = v.q_used;
  a.kv = v.kv;
  a.topk_indices = v.topk;
  a.block_table = v.block_table;
  a.seq_lens = v.seq_lens;
  a.q_scale = q_scale;
  a.out = v.out;
  a.lse = v.lse;
  return timed(v.device, [&] { return plan.run(a); }, &res->attention_ms);
}

/// Device copies of a case's tensors (--device cuda).
struct DeviceState {
  DeviceBuffer k, v, ks, vs, ik, k_new, v_new, ik_new, slot_new, q, iq, q8, iq8;
  DeviceBuffer block_table, cu_seqlens, seq_lens, topk, out, lse;

  /// Copies the host caches (all of them: data and block scales) to the device.
  Status upload_caches(const CaseState& s) {
    FLASHMSA_RETURN_IF_ERROR(k.upload(s.kv.k.data));
    FLASHMSA_RETURN_IF_ERROR(v.upload(s.kv.v.data));
    FLASHMSA_RETURN_IF_ERROR(ks.upload(s.kv.k.block_scale));
    FLASHMSA_RETURN_IF_ERROR(vs.upload(s.kv.v.block_scale));
    return ik.upload(s.ik.data);
  }

  StageViews views(const CaseState& s, const RunOptions& o) const {
    StageViews r;
    r.device = Device::cuda;
    r.kv = s.kv;
    r.kv.k.data = k.view();
    r.kv.v.data = v.view();
    r.kv.k.block_scale = ks.view();
    r.kv.v.block_scale = vs.view();
    r.ik = s.ik;
    r.ik.data = ik.view();
    r.k_new = k_new.view();
    r.v_new = v_new.view();
    r.ik_new = ik_new.view();
    r.slot_new = slot_new.view();
    r.q = q.view();
    r.iq = iq.view();
    r.q8 = q8.view();
    r.iq8 = iq8.view();
    r.block_table = block_table.view();
    r.cu_seqlens = cu_seqlens.view();
    r.seq_lens = seq_lens.view();
    r.topk = topk.view();
    r.out = out.view();
    r.lse = lse.view();
    set_used(o, &r);
    return r;
  }
};

/// Compares a device buffer with a host tensor of the same bytes, in chunks; on the
/// first difference sets *mismatch (if empty) to a message naming `what`.
Status compare_device(const DeviceBuffer& d, const TensorView& host, const char* what, std::string* mismatch) {
  if (!host.defined() || !mismatch->empty()) return Status::Ok();
  const std::size_t n = static_cast<std::size_t>(host.numel()) * dtype_size(host.dtype);
  if (d.bytes() != n) {
    *mismatch = std::string("device ") + what + " has a different size than the host one";
    return Status::Ok();
  }
  constexpr std::size_t kChunk = std::size_t{64} << 20;
  std::vector<std::uint8_t> buf(std::min(n, kChunk));
  const auto* h = static_cast<const std::uint8_t*>(host.data);
  for (std::size_t off = 0; off < n; off += kChunk) {
    const std::size_t len = std::min(kChunk, n - off);
    FLASHMSA_RETURN_IF_ERROR(d.download_bytes(off, buf.data(), len));
    if (std::memcmp(buf.data(), h + off, len) != 0) {
      std::size_t i = 0;
      while (buf[i] == h[off + i]) ++i;
      std::ostringstream os;
      os << "device insert: " << what << " differs from the host insert at byte " << (off + i) << " of " << n
         << " (device 0x" << std::hex << static_cast<int>(buf[i]) << ", host 0x" << static_cast<int>(h[off + i])
         << ")";
      *mismatch = os.str();
      return Status::Ok();
    }
  }
  return Status::Ok();
}

/// --device cuda: the three stages on the GPU, each timed between two
/// cudaDeviceSynchronize calls. The caches as set up (prefix tokens), the call's new
/// tokens, the queries and the metadata are copied to the GPU first (untimed); outputs
/// are poisoned before their stage (out / lse / q8 / iq8: 0xff = NaN; top-k: 0x7f, an
/// out-of-range page id, since 0xff would read as the legitimate -1). A stage whose op
/// returns Unsupported runs on the CPU (host tensors) instead and its result is copied
/// to the GPU for the next stage; res->*_device records where each ran. top-k, out and
/// lse are copied back. With --check the host insert also runs (untimed) so the host
/// caches are the check's reference, and *device_mismatch names the first device cache /
/// quantised query byte that differs from them ("" when all are equal).
Status run_stages_cuda(CaseState& s, const RunOptions& o, const StageViews& hv, CaseResult* res,
                       std::string* device_mismatch) {
  const float q_scale = s.q_scale;
  bool host_inserted = false;
  auto ensure_host_insert = [&]() -> Status {
    if (host_inserted) return Status::Ok();
    FLASHMSA_RETURN_IF_ERROR(insert_stage(hv, o, q_scale));
    host_inserted = true;
    return Status::Ok();
  };
  DeviceState d;
  FLASHMSA_RETURN_IF_ERROR(d.upload_caches(s));
  FLASHMSA_RETURN_IF_ERROR(d.k_new.upload(hv.k_new));
  FLASHMSA_RETURN_IF_ERROR(d.v_new.upload(hv.v_new));
  FLASHMSA_RETURN_IF_ERROR(d.ik_new.upload(hv.ik_new));
  FLASHMSA_RETURN_IF_ERROR(d.slot_new.upload(hv.slot_new));
  FLASHMSA_RETURN_IF_ERROR(d.q.upload(hv.q));
  FLASHMSA_RETURN_IF_ERROR(d.iq.upload(hv.iq));
  FLASHMSA_RETURN_IF_ERROR(d.block_table.upload(hv.block_table));
  FLASHMSA_RETURN_IF_ERROR(d.cu_seqlens.upload(hv.cu_seqlens));
  FLASHMSA_RETURN_IF_ERROR(d.seq_lens.upload(hv.seq_lens));
  FLASHMSA_RETURN_IF_ERROR(d.q8.allocate(hv.q8));
  FLASHMSA_RETURN_IF_ERROR(d.iq8.allocate(hv.iq8));
  FLASHMSA_RETURN_IF_ERROR(d.topk.allocate(hv.topk));
  FLASHMSA_RETURN_IF_ERROR(d.out.allocate(hv.out));
  FLASHMSA_RETURN_IF_ERROR(d.lse.allocate(hv.lse));
  StageViews dv = d.views(s, o);

  // --warmup: `o.warmup` untimed calls of a stage before its timed call (the first call
  // in a process, or the first with a larger workspace, pays for lazy module loading,
  // first-use attributes and workspace-pool growth). A warm-up that returns Unsupported
  // stops; the timed call then takes the CPU path as usual. Outputs are poisoned after
  // the warm-up, and the insert's caches are restored, so the timed call alone produces
  // what the check reads.
  auto warm_up = [&](auto&& fn) -> Status {
    for (int w = 0; w < o.warmup; ++w) {
      const Status ws = fn();
      if (ws.code() == StatusCode::kUnsupported) return Status::Ok();
      FLASHMSA_RETURN_IF_ERROR(ws);
    }
    return o.warmup > 0 ? cuda_synchronize() : Status::Ok();
  };

  // Stage 1: insert.
  if (o.warmup > 0) {
    FLASHMSA_RETURN_IF_ERROR(warm_up([&] { return insert_stage(dv, o, q_scale); }));
    FLASHMSA_RETURN_IF_ERROR(d.upload_caches(s));  // the caches as set up again (untimed)
    dv = d.views(s, o);
  }
  FLASHMSA_RETURN_IF_ERROR(d.q8.fill_bytes(0xff));
  FLASHMSA_RETURN_IF_ERROR(d.iq8.fill_bytes(0xff));
  Status st = timed(Device::cuda, [&] { return insert_stage(dv, o, q_scale); }, &res->insert_ms);
  if (st.ok()) {
    res->insert_device = "cuda";
  } else if (st.code() == StatusCode::kUnsupported) {
    res->insert_device = "cpu";
    FLASHMSA_RETURN_IF_ERROR(timed(Device::cpu, [&] { return ensure_host_insert(); }, &res->insert_ms));
    FLASHMSA_RETURN_IF_ERROR(d.upload_caches(s));  // untimed: the next stages read them
    FLASHMSA_RETURN_IF_ERROR(d.q8.upload(hv.q8));
    FLASHMSA_RETURN_IF_ERROR(d.iq8.upload(hv.iq8));
    dv = d.views(s, o);
  } else {
    return st;
  }

  // Stage 2: indexer.
  FLASHMSA_RETURN_IF_ERROR(warm_up([&] { return indexer_stage(dv, s); }));
  FLASHMSA_RETURN_IF_ERROR(d.topk.fill_bytes(0x7f));
  st = timed(Device::cuda, [&] { return indexer_stage(dv, s); }, &res->indexer_ms);
  if (st.ok()) {
    res->indexer_device = "cuda";
    FLASHMSA_RETURN_IF_ERROR(d.topk.download(hv.topk));
  } else if (st.code() == StatusCode::kUnsupported) {
    res->indexer_device = "cpu";
    FLASHMSA_RETURN_IF_ERROR(ensure_host_insert());  // untimed
    FLASHMSA_RETURN_IF_ERROR(timed(Device::cpu, [&] { return indexer_stage(hv, s); }, &res->indexer_ms));
    FLASHMSA_RETURN_IF_ERROR(d.topk.upload(hv.topk));
  } else {
    return st;
  }

  // Stage 3: attention.
  FLASHMSA_RETURN_IF_ERROR(warm_up([&] { return attention_stage(dv, s, o, q_scale, res); }));
  FLASHMSA_RETURN_IF_ERROR(d.out.fill_bytes(0xff));
  FLASHMSA_RETURN_IF_ERROR(d.lse.fill_bytes(0xff));
  res->plan_ms = 0;
  st = attention_stage(dv, s, o, q_scale, res);
  if (st.ok()) {
    res->attention_device = "cuda";
    FLASHMSA_RETURN_IF_ERROR(d.out.download(hv.out));
    FLASHMSA_RETURN_IF_ERROR(d.lse.download(hv.lse));
  } else if (st.code() == StatusCode::kUnsupported) {
    res->attention_device = "cpu";
    res->plan_ms = 0;
    FLASHMSA_RETURN_IF_ERROR(ensure_host_insert());  // untimed
    FLASHMSA_RETURN_IF_ERROR(attention_stage(hv, s, o, q_scale, res));
  } else {
    return st;
  }

  // --check: the host caches and quantised queries become the reference (the host
  // insert, untimed), and the device ones must equal them byte for byte.
  if (o.check && res->insert_device == "cuda") {
    FLASHMSA_RETURN_IF_ERROR(ensure_host_insert());
    std::string& mm = *device_mismatch;
    FLASHMSA_RETURN_IF_ERROR(compare_device(d.k, s.kv.k.data, "K cache", &mm));
    FLASHMSA_RETURN_IF_ERROR(compare_device(d.v, s.kv.v.data, "V cache", &mm));
    FLASHMSA_RETURN_IF_ERROR(compare_device(d.ks, s.kv.k.block_scale, "K block scales", &mm));
    FLASHMSA_RETURN_IF_ERROR(compare_device(d.vs, s.kv.v.block_scale, "V block scales", &mm));
    FLASHMSA_RETURN_IF_ERROR(compare_device(d.ik, s.ik.data, "index-K cache", &mm));
    FLASHMSA_RETURN_IF_ERROR(compare_device(d.q8, hv.q8, "e4m3 query", &mm));
    FLASHMSA_RETURN_IF_ERROR(compare_device(d.iq8, hv.iq8, "e4m3 index query", &mm));
  }
  return Status::Ok();
}

Status run_case_impl(const WorkloadCase& c, const RunOptions& o, CaseResult* res) {
  using clock = std::chrono::steady_clock;
  res->rows = c.total_q();
  res->kv_tokens = c.total_kv();
  res->pages = c.total_pages();
  res->workload_useful_flops = c.useful_flops;
  res->est_host_bytes = estimate_host_bytes(c, o);
  const double budget = o.max_memory_gb * 1024.0 * 1024.0 * 1024.0;
  if (static_cast<double>(res->est_host_bytes) > budget) {
    std::ostringstream os;
    os << "needs about " << gib(static_cast<double>(res->est_host_bytes)) << " of host memory for "
       << res->kv_tokens << " KV tokens (" << kv_format_name(o.kv_format) << " cache, " << o.num_kv_heads
       << " KV heads), above the --max-memory-gb budget of " << o.max_memory_gb
       << " GiB; not allocated (raise --max-memory-gb on a larger machine)";
    res->status = "skipped (memory)";
    res->error = os.str();
    return Status::Ok();
  }
  for (std::size_t i = 0; i < c.seq_lens.size(); ++i)
    if (c.seq_lens[i] > kMaxContext)
      return bad("case " + c.id + ": request length " + std::to_string(c.seq_lens[i]) +
                 " exceeds the supported context of 1,048,576 tokens (D10)");

  CaseState s;
  auto t0 = clock::now();
  FLASHMSA_RETURN_IF_ERROR(setup_case(c, o, &s));
  res->setup_ms = ms_since(t0);

  // The stages: insert the call's new tokens (+ quantise the queries), indexer, attention.
  // With --device cuda they run on the GPU (run_stages_cuda); an op without a CUDA kernel
  // in this build (Unsupported) runs on the CPU instead, and the report says so.
  const float q_scale = s.q_scale;
  res->q_scale = q_scale;
  res->k_scale = s.kv.k.global_scale;
  res->v_scale = s.kv.v.global_scale;
  const StageViews hv = host_views(s, o);
  std::string device_mismatch;
  if (o.device == Device::cuda) {
    FLASHMSA_RETURN_IF_ERROR(run_stages_cuda(s, o, hv, res, &device_mismatch));
  } else {
    FLASHMSA_RETURN_IF_ERROR(timed(Device::cpu, [&] { return insert_stage(hv, o, q_scale); }, &res->insert_ms));
    FLASHMSA_RETURN_IF_ERROR(timed(Device::cpu, [&] { return indexer_stage(hv, s); }, &res->indexer_ms));
    FLASHMSA_RETURN_IF_ERROR(attention_stage(hv, s, o, q_scale, res));
  }
  const TensorView q_used = hv.q_used;
  const TensorView iq_used = hv.iq_used;

  account_work(c, o, s, res);

  // Determinism fingerprint and a full scan for non-finite outputs.
  std::uint64_t h = 0x464c4153484d5341ULL;
  h = digest_bytes(h, s.out.view().data, s.out.bytes());
  h = digest_bytes(h, s.lse.view().data, s.lse.bytes());
  h = digest_bytes(h, s.topk.view().data, s.topk.bytes());
  {
    std::ostringstream os;
    os << std::hex << std::setw(16) << std::setfill('0') << h;
    res->output_digest = os.str();
  }
  std::int64_t nonfinite = 0;
  const auto* ob = s.out.data<const std::uint16_t>();
  for (std::int64_t i = 0; i < s.out.numel(); ++i) nonfinite += (ob[i] & 0x7f80) == 0x7f80 ? 1 : 0;
  const auto* lb = s.lse.data<const float>();
  for (std::int64_t i = 0; i < s.lse.numel(); ++i) nonfinite += std::isfinite(lb[i]) ? 0 : 1;

  if (!o.inject_fault.empty() && s.T > 0) {
    if (o.inject_fault == "out") {
      auto* e = s.out.data<std::uint16_t>();
      e[0] = float_to_bf16(bf16_to_float(e[0]) + 0.25f);
    } else if (o.inject_fault == "lse") {
      s.lse.data<float>()[(s.T - 1) * s.Hq] += 0.01f;
    } else if (o.inject_fault == "topk") {
      auto* e = s.topk.data<std::int32_t>() + (s.T - 1) * s.Hkv * kMaxTopk;
      e[1] = e[0];
    }
  }
  if (o.check) {
    CheckInputs in;
    in.num_q_heads = s.Hq;
    in.num_kv_heads = s.Hkv;
    in.q = q_used;
    in.q_scale = q_scale;
    in.softmax_scale = kDefaultSoftmaxScale;
    in.kv = s.kv;
    in.index_k = s.ik;
    in.index_q = iq_used;
    in.block_table = s.block_table.view();
    in.seq_lens = c.seq_lens;
    in.row_request = s.row_req;
    in.row_position = s.row_pos;
    in.topk = s.topk.view();
    in.out = s.out.view();
    in.lse = s.lse.view();
    in.check_rows = o.check_rows;
    in.threads = o.threads;
    res->check = run_check(in);
    if (!device_mismatch.empty()) {
      res->check.pass = false;
      res->check.message = device_mismatch + (res->check.message.empty() ? "" : "; " + res->check.message);
    }
  }
  res->status = "ok";
  if (nonfinite > 0) {
    res->status = "failed";
    res->error = std::to_string(nonfinite) + " non-finite values in out / lse (every row has a visible key)";
  } else if (res->check.enabled && !res->check.pass) {
    res->status = "failed";
    res->error = res->check.message;
  }
  res->pass = res->status == "ok";
  return Status::Ok();
}

}  // namespace

CaseResult run_case(const WorkloadCase& c, const RunOptions& o) {
  CaseResult res;
  res.wc = c;
  try {
    const Status s = run_case_impl(c, o, &res);
    if (!s.ok()) {
      res.status = "error";
      res.error = s.message();
      res.pass = false;
    }
  } catch (const std::bad_alloc&) {
    res.status = "error";
    res.error = "out of host memory (estimated " + gib(static_cast<double>(res.est_host_bytes)) +
                "); lower --max-memory-gb so such cases are skipped up front";
    res.pass = false;
  } catch (const std::exception& e) {
    res.status = "error";
    res.error = std::string("unexpected exception: ") + e.what();
    res.pass = false;
  }
  return res;
}

void compute_totals(RunReport* rep) {
  Totals w, u;
  double w_ins = 0, w_idx = 0, w_att = 0, w_fa = 0, w_fi = 0, w_b = 0;
  double u_ins = 0, u_idx = 0, u_att = 0, u_fa = 0, u_fi = 0, u_b = 0;
  rep->passed = 0;
  rep->total = static_cast<int>(rep->cases.size());
  for (const CaseResult& r : rep->cases) {
    if (r.pass) ++rep->passed;
    if (r.status != "ok" && r.status != "failed") continue;  // did not run
    const double wt = r.wc.weight;
    if (wt > 0) {
      ++w.cases;
      w.weight += wt;
      w_ins += wt * r.insert_ms;
      w_idx += wt * r.indexer_ms;
      w_att += wt * r.attention_ms;
      w_fa += wt * r.attention_flops;
      w_fi += wt * r.indexer_flops;
      w_b += wt * static_cast<double>(r.selected_bytes);
    } else {
      ++u.cases;
      u_ins += r.insert_ms;
      u_idx += r.indexer_ms;
      u_att += r.attention_ms;
      u_fa += r.attention_flops;
      u_fi += r.indexer_flops;
      u_b += static_cast<double>(r.selected_bytes);
    }
  }
  auto fill = [](Totals* t, double norm, double ins, double idx, double att, double fa, double fi, double b) {
    if (norm <= 0) return;
    t->mean_insert_ms = ins / norm;
    t->mean_indexer_ms = idx / norm;
    t->mean_attention_ms = att / norm;
    t->mean_total_ms = (ins + idx + att) / norm;
    t->attention_tflops = att > 0 ? fa / (att * 1e-3) / 1e12 : 0;
    t->indexer_tflops = idx > 0 ? fi / (idx * 1e-3) / 1e12 : 0;
    t->gbps = att > 0 ? b / (att * 1e-3) / 1e9 : 0;
  };
  fill(&w, w.weight, w_ins, w_idx, w_att, w_fa, w_fi, w_b);
  fill(&u, u.cases, u_ins, u_idx, u_att, u_fa, u_fi, u_b);
  rep->weighted = w;
  rep->unweighted = u;
}

RunReport run_cases(const std::vector<WorkloadCase>& cases, const RunOptions& o, std::ostream* progress) {
  RunReport rep;
  rep.options = o;
  int k = 0;
  for (const WorkloadCase& c : cases) {
    ++k;
    CaseResult r = run_case(c, o);
    if (progress) {
      std::ostream& os = *progress;
      os << "[" << k << "/" << cases.size() << "] " << c.id << " ("
         << (c.kind == CaseKind::prefill ? "prefill" : "decode") << ", B=" << c.batch_size
         << ", rows=" << r.rows << ", kv=" << r.kv_tokens << "): ";
      if (r.status == "ok" || r.status == "failed") {
        os << std::fixed << std::setprecision(2) << "setup " << r.setup_ms / 1000.0 << " s, insert "
           << r.insert_ms << " ms, indexer " << r.indexer_ms << " ms, attention " << r.attention_ms << " ms";
        if (o.device == Device::cuda)
          os << " (insert/indexer/attention on " << r.insert_device << "/" << r.indexer_device << "/"
             << r.attention_device << ")";
        if (c.useful_flops >= 0) os << ", workload useful_flops " << c.useful_flops;
        if (r.check.enabled)
          os << std::scientific << std::setprecision(2) << ", max err " << r.check.max_abs_err
             << std::fixed << std::setprecision(6) << ", cos " << r.check.cosine;
        os << (r.pass ? " -> pass" : " -> FAIL: " + r.error);
      } else {
        os << r.status << ": " << r.error;
      }
      os << std::defaultfloat << "\n" << std::flush;
    }
    rep.cases.push_back(std::move(r));
  }
  compute_totals(&rep);
  return rep;
}

}  // namespace flashmsa::tools

// SparseDecodePlan: lifetime, DecodePlanCache, and the CUDA (SM90) plan/run path.
// The CPU path and all argument validation live in attention.cpp; run_cuda() receives
// validated arguments.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "flashmsa/attention.h"
#include "ops/attention_cuda.h"

#ifdef FLASHMSA_WITH_CUDA
#include "cuda/sm90/decode_attention.h"
#include "cuda/sm90/prefill_kvouter.h"
#endif

namespace flashmsa {

SparseDecodePlan::~SparseDecodePlan() { release(); }

SparseDecodePlan::SparseDecodePlan(SparseDecodePlan&& o) noexcept { *this = std::move(o); }

SparseDecodePlan& SparseDecodePlan::operator=(SparseDecodePlan&& o) noexcept {
  if (this != &o) {
    release();
    planned_ = o.planned_;
    args_ = o.args_;
    num_threads_ = o.num_threads_;
    workspace_ = std::move(o.workspace_);
    num_splits_ = o.num_splits_;
    queries_per_cta_ = o.queries_per_cta_;
    cluster_merge_ = o.cluster_merge_;
    kernel_ = o.kernel_;
    device_workspace_ = o.device_workspace_;
    device_workspace_bytes_ = o.device_workspace_bytes_;
    o.planned_ = false;
    o.device_workspace_ = nullptr;
    o.device_workspace_bytes_ = 0;
  }
  return *this;
}

void SparseDecodePlan::release() {
#ifdef FLASHMSA_WITH_CUDA
  if (device_workspace_ != nullptr) cuda::device_free(device_workspace_);
#endif
  device_workspace_ = nullptr;
  device_workspace_bytes_ = 0;
}

#ifndef FLASHMSA_WITH_CUDA

Status SparseDecodePlan::plan_cuda() {
  return Status::Unsupported("SparseDecodePlan::plan", "device cuda",
                             "this build of FlashMSA has no CUDA kernels (configure with nvcc)");
}

Status SparseDecodePlan::run_cuda(const DecodeRunArgs&) {
  return Status::Unsupported("SparseDecodePlan::run", "device cuda",
                             "this build of FlashMSA has no CUDA kernels (configure with nvcc)");
}

namespace detail {
Status run_prefill_cuda(const SparseAttentionPrefillArgs&) {
  return Status::Unsupported("sparse_attention_prefill", "device cuda",
                             "this build of FlashMSA has no CUDA kernels (configure with nvcc)");
}
}  // namespace detail

#else

namespace {
/// Benchmark hook FLASHMSA_DECODE_SPLITS=N (1..16) replaces the split heuristic (0: not
/// set or out of range); logged once.
int forced_decode_splits() {
  static const int n = [] {
    const char* e = std::getenv("FLASHMSA_DECODE_SPLITS");
    const int v = e != nullptr ? std::atoi(e) : 0;
    if (v < 1 || v > 16) return 0;
    std::fprintf(stderr, "flashmsa: FLASHMSA_DECODE_SPLITS=%d: decode plans use %d splits\n", v, v);
    return v;
  }();
  return n;
}
}  // namespace

Status SparseDecodePlan::plan_cuda() {
  const char* op = "SparseDecodePlan::plan";
  release();
  int sms = 0;
  if (int err = cuda::device_sm_count(&sms))
    return Status(StatusCode::kInvalidArgument,
                  std::string("flashmsa::") + op + ": no usable CUDA device: " + cuda::error_string(err));
  const int rows = args_.batch_size * args_.queries_per_request;
  const cuda::DecodeSchedule sched = cuda::choose_decode_schedule(
      args_.batch_size, args_.queries_per_request, args_.num_q_heads, args_.num_kv_heads, sms,
      args_.kv_format == KvFormat::bf16);
  const int per_cta = sched.queries_per_cta;
  queries_per_cta_ = per_cta;
  bool dsplit = sched.dims_split;
  num_splits_ = sched.num_splits;
  if (const int forced = forced_decode_splits()) {
    num_splits_ = forced;
    // The automatic variant follows the split count actually launched.
    if (sched.warp_mma && !sched.kernel_forced)
      dsplit = cuda::warp_mma_dims_split(num_splits_, args_.kv_format == KvFormat::bf16);
  }
  // Warp-MMA splits merge inside a thread-block cluster (no workspace) when every cluster
  // of a launch fits on the GPU at once; FLASHMSA_DECODE_MERGE=combine (read at every
  // plan) sends them to the combine kernel instead.
  const char* merge_env = std::getenv("FLASHMSA_DECODE_MERGE");
  const bool force_combine = merge_env != nullptr && std::strcmp(merge_env, "combine") == 0;
  const int fmt = static_cast<int>(args_.kv_format);
  const long long clusters = static_cast<long long>(rows) * args_.num_kv_heads;
  // With 8 splits the automatic variant follows the dims-split rule for 8.
  const bool dsplit8 = sched.kernel_forced ? dsplit : cuda::warp_mma_dims_split(8, args_.kv_format == KvFormat::bf16);
  if (sched.warp_mma && num_splits_ == 16 && !force_combine && forced_decode_splits() == 0 &&
      clusters > cuda::warp_mma_cluster_capacity(fmt, num_splits_, dsplit) &&
      clusters <= cuda::warp_mma_cluster_capacity(fmt, 8, dsplit8)) {
    // 8 splits whose clusters all fit beat 16 with the combine kernel (H200, session 13,
    // docs/bench/h200-2026-11-29-s13: b2 Q1 64/4 BF16 10.7 us against 12.6 us, FP8 9.2
    // against 11.5; b1 Q8 16/1 BF16 10.4 against 11.8). Halving further (8 -> 4, 4 -> 2)
    // measured slower in most cases (b1 Q8 64/4 BF16 20.3 us with 2 splits, 15.9 with 4).
    num_splits_ = 8;
    dsplit = dsplit8;
  }
  if (sched.warp_mma && num_splits_ == 8 && !dsplit && args_.kv_format != KvFormat::bf16 && !force_combine &&
      forced_decode_splits() == 0 && clusters > cuda::warp_mma_cluster_capacity(fmt, 8, false)) {
    // FP8 / NVFP4 (token split): 8 splits whose clusters do not all fit (the combine kernel
    // would merge them) -> 6. H200, session 34 (docs/bench/h200-2026-12-01-s34): with 16
    // row CTAs (16 clusters of 8 against 15 resident) 6 splits ran 1.08-1.15x faster in
    // all 15 FP8 shapes of run H, and 1.04-1.24x (FP8 and NVFP4) over the low-latency
    // suite in run I; with 10-14 row CTAs, whose 8-CTA clusters fit, 8 splits stay
    // 1.08-1.18x faster than 6 (run J). BF16 keeps its 8-split dims-split variant.
    num_splits_ = 6;
  }
  kernel_ = sched.warp_mma ? (dsplit ? "warp_mma_dsplit" : "warp_mma") : (sched.serial_tile ? "tile_serial" : "tile");
  cluster_merge_ = sched.warp_mma && num_splits_ > 1 && !force_combine &&
                   clusters <= cuda::warp_mma_cluster_capacity(fmt, num_splits_, dsplit);
  const std::int64_t floats =
      cluster_merge_ ? 0 : cuda::decode_workspace_floats(rows, args_.num_q_heads, num_splits_);
  if (floats > 0) {
    device_workspace_bytes_ = static_cast<std::size_t>(floats) * sizeof(float);
    if (int err = cuda::device_malloc(&device_workspace_, static_cast<std::int64_t>(device_workspace_bytes_))) {
      device_workspace_ = nullptr;
      device_workspace_bytes_ = 0;
      return Status::Internal(op, "workspace allocation of " + std::to_string(floats * 4) +
                                      " bytes failed: " + cuda::error_string(err));
    }
  }
  return Status::Ok();
}

namespace {
void copy3(std::int64_t (&dst)[3], const TensorView& t) {
  dst[0] = t.stride[0];
  dst[1] = t.stride[1];
  dst[2] = t.stride[2];
}

/// Kernel parameters shared by prefill and decode (both argument structs, and both
/// parameter structs, name them alike).
template <class P = cuda::DecodeParams, class Args>
P params_from(const Args& a) {
  P p;
  p.q = a.q.data;
  p.q_row_stride = a.q.stride[0];
  p.q_head_stride = a.q.stride[1];
  p.k_data = a.kv.k.data.data;
  p.v_data = a.kv.v.data.data;
  copy3(p.k_stride, a.kv.k.data);
  copy3(p.v_stride, a.kv.v.data);
  if (a.kv.format == KvFormat::nvfp4) {
    p.k_scale = a.kv.k.block_scale.template ptr<const std::uint8_t>();
    p.v_scale = a.kv.v.block_scale.template ptr<const std::uint8_t>();
    copy3(p.ks_stride, a.kv.k.block_scale);
    copy3(p.vs_stride, a.kv.v.block_scale);
    p.k_swizzled = a.kv.k.scale_swizzled;
    p.v_swizzled = a.kv.v.scale_swizzled;
  }
  p.topk = a.topk_indices.template ptr<const std::int32_t>();
  copy3(p.topk_stride, a.topk_indices);
  p.topk_k = static_cast<int>(a.topk_indices.shape[2]);
  p.block_table = a.block_table.template ptr<const std::int32_t>();
  p.bt_stride[0] = a.block_table.stride[0];
  p.bt_stride[1] = a.block_table.stride[1];
  p.bt_width = a.block_table.shape[1];
  p.seq_lens = a.seq_lens.template ptr<const std::int32_t>();
  p.seq_lens_stride = a.seq_lens.stride[0];
  p.batch = static_cast<int>(a.seq_lens.shape[0]);
  p.num_rows = static_cast<int>(a.q.shape[0]);
  p.num_q_heads = static_cast<int>(a.q.shape[1]);
  p.num_kv_heads = static_cast<int>(a.kv.k.data.shape[1]);
  p.num_pages = a.kv.k.data.shape[0];
  p.c = a.softmax_scale * a.q_scale * a.kv.k.global_scale;
  p.v_global = a.kv.v.global_scale;
  p.out = a.out.template ptr<std::uint16_t>();
  p.out_row_stride = a.out.stride[0];
  p.out_head_stride = a.out.stride[1];
  if (a.lse.defined()) {
    p.lse = a.lse.template ptr<float>();
    p.lse_row_stride = a.lse.stride[0];
    p.lse_head_stride = a.lse.stride[1];
  }
  return p;
}

Status launch(const char* op, const cuda::DecodeParams& p, KvFormat format, DType q_dtype,
              void* stream) {
  const int err = cuda::launch_sparse_attention(p, static_cast<int>(format), q_dtype == DType::e4m3, stream);
  if (err != 0) return Status::Internal(op, std::string("kernel launch failed: ") + cuda::error_string(err));
  return Status::Ok();
}
}  // namespace

Status SparseDecodePlan::run_cuda(const DecodeRunArgs& a) {
  cuda::DecodeParams p = params_from(a);
  p.queries_per_request = args_.queries_per_request;
  p.queries_per_cta = queries_per_cta_;
  p.num_splits = num_splits_;
  p.cluster_merge = cluster_merge_;
  if (num_splits_ > 1 && !cluster_merge_) {  // workspace layout: decode_attention.h, DecodeParams::o_partial
    const std::int64_t slots = static_cast<std::int64_t>(p.num_rows) * p.num_q_heads * num_splits_;
    p.o_partial = static_cast<float*>(device_workspace_);
    p.lse_partial = p.o_partial + slots * 128;
  }
  p.dims_split = std::strcmp(kernel_, "warp_mma_dsplit") == 0;
  p.serial_tile = std::strcmp(kernel_, "tile_serial") == 0;
  if (std::strcmp(kernel_, "warp_mma") == 0 || p.dims_split) {
    const int err = cuda::launch_sparse_attention_warp_mma(p, static_cast<int>(a.kv.format),
                                                           a.q.dtype == DType::e4m3, a.stream);
    if (err != 0)
      return Status::Internal("SparseDecodePlan::run", std::string("kernel launch failed: ") + cuda::error_string(err));
    return Status::Ok();
  }
  return launch("SparseDecodePlan::run", p, a.kv.format, a.q.dtype, a.stream);
}

namespace detail {
namespace {
/// FLASHMSA_PREFILL_KERNEL=query_outer selects the v1 query-outer kernel shared with
/// decode (kept for the side-by-side measurement of issue 4); anything else: KV-outer.
bool prefill_query_outer() {
  const char* e = std::getenv("FLASHMSA_PREFILL_KERNEL");
  return e != nullptr && std::strcmp(e, "query_outer") == 0;
}

/// Benchmark hook FLASHMSA_PREFILL_STOP_AFTER=plan|attention (KV-outer only): the
/// output is not written then; only bench_prefill's stage breakdown sets it.
int prefill_stop_after() {
  const char* e = std::getenv("FLASHMSA_PREFILL_STOP_AFTER");
  if (e == nullptr) return 0;
  if (std::strcmp(e, "plan") == 0) return 1;
  if (std::strcmp(e, "attention") == 0) return 2;
  return 0;
}
}  // namespace

Status run_prefill_cuda(const SparseAttentionPrefillArgs& a) {
  const char* op = "sparse_attention_prefill";
  if (!prefill_query_outer()) {
    auto p = params_from<cuda::PrefillParams>(a);
    p.cu_seqlens = a.cu_seqlens_q.ptr<const std::int32_t>();
    p.cu_stride = a.cu_seqlens_q.stride[0];
    p.stop_after = prefill_stop_after();
    p.q_e4m3 = a.kv.format != KvFormat::bf16;
    const std::int64_t partial_rows = static_cast<std::int64_t>(p.topk_k) * p.num_rows * p.num_q_heads;
    if (partial_rows > cuda::kMaxPartialRows)
      return Status::InvalidArgument(op, "q", "top-k x query rows x num_q_heads <= 2^31 - 1 (prefill in smaller chunks of query rows)",
                                     std::to_string(partial_rows));
    if (p.num_rows >= cuda::kMaxQueryRows)
      return Status::InvalidArgument(op, "q", "fewer than 2^27 query rows per call (prefill in smaller chunks of query rows)",
                                     std::to_string(p.num_rows) + " rows");
    const int err = cuda::launch_prefill_kvouter(p, static_cast<int>(a.kv.format), a.stream);
    if (err == 0) return Status::Ok();
    if (cuda::is_out_of_memory(err)) {
      // The KV-outer workspace (mostly the BF16 partial outputs, top-k x rows x Hq x 128)
      // grows with the rows of one call: say how much, and what to do.
      const std::int64_t mib = (cuda::prefill_kvouter_workspace_bytes(p) + (1 << 20) - 1) >> 20;
      return Status::Internal(op, "the KV-outer workspace of " + std::to_string(mib) + " MiB for " +
                                      std::to_string(p.num_rows) + " query rows x " +
                                      std::to_string(p.num_q_heads) + " heads x top-k " +
                                      std::to_string(p.topk_k) +
                                      " could not be allocated (" + cuda::error_string(err) +
                                      "): prefill in smaller chunks of query rows");
    }
    return Status::Internal(op, std::string("KV-outer launch failed: ") + cuda::error_string(err));
  }
  cuda::DecodeParams p = params_from(a);
  p.cu_seqlens = a.cu_seqlens_q.ptr<const std::int32_t>();
  p.cu_stride = a.cu_seqlens_q.stride[0];
  p.queries_per_cta = cuda::queries_per_cta(true, 1, p.num_q_heads / p.num_kv_heads);
  p.num_splits = 1;  // no workspace: one pass per (query block, KV head)
  return launch(op, p, a.kv.format, a.q.dtype, a.stream);
}
}  // namespace detail

#endif

}  // namespace flashmsa

namespace flashmsa {

Status DecodePlanCache::get(const DecodePlanArgs& a, SparseDecodePlan** plan) {
  if (plan == nullptr)
    return Status::InvalidArgument("DecodePlanCache::get", "plan", "a non-null output pointer",
                                   "nullptr");
  int ordinal = -1;  // CUDA plans: the current device (workspace is per GPU)
#ifdef FLASHMSA_WITH_CUDA
  if (a.device == Device::cuda) cuda::device_ordinal(&ordinal);
#endif
  const Key key{a.batch_size,  a.queries_per_request, a.num_q_heads,
                a.num_kv_heads, a.max_pages_per_request, a.topk,
                static_cast<int>(a.kv_format), static_cast<int>(a.q_dtype),
                static_cast<int>(a.device), a.num_threads, ordinal};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    auto fresh = std::make_unique<SparseDecodePlan>();
    FLASHMSA_RETURN_IF_ERROR(fresh->plan(a));
    it = plans_.emplace(key, std::move(fresh)).first;
  }
  *plan = it->second.get();
  return Status::Ok();
}

}  // namespace flashmsa

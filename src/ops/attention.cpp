// Public sparse attention operations (include/flashmsa/attention.h): argument
// validation (D3, D7, D10) and dispatch to the CPU core (src/cpu/attention_cpu.cpp).
#include "flashmsa/attention.h"

#include <string>
#include <utility>
#include <vector>

#include "common/parallel.h"
#include "common/validate.h"
#include "cpu/attention_cpu.h"
#include "ops/attention_cuda.h"

namespace flashmsa {

namespace {

constexpr const char* kPrefillOp = "sparse_attention_prefill";
constexpr const char* kPlanOp = "SparseDecodePlan::plan";
constexpr const char* kRunOp = "SparseDecodePlan::run";

using detail::to_string;

using detail::float_string;

bool on_cuda(const TensorView& t) { return t.defined() && t.device == Device::cuda; }

bool any_on_cuda(std::initializer_list<const TensorView*> views) {
  for (const TensorView* v : views)
    if (on_cuda(*v)) return true;
  return false;
}

bool kv_on_cuda(const PagedKvCache& kv) {
  return any_on_cuda({&kv.k.data, &kv.k.block_scale, &kv.v.data, &kv.v.block_scale});
}

Status cuda_unsupported(const char* op) {
  return Status::Unsupported(op, "device cuda",
                             std::string("this build has no CUDA kernels for ") + op + " yet");
}

/// D7 format pairs: (bf16, bf16), (e4m3, fp8), (e4m3, nvfp4).
Status check_format_pair(const char* op, DType q_dtype, KvFormat format) {
  const bool ok = (q_dtype == DType::bf16 && format == KvFormat::bf16) ||
                  (q_dtype == DType::e4m3 && (format == KvFormat::fp8 || format == KvFormat::nvfp4));
  if (!ok)
    return Status::Unsupported(
        op, std::string("q dtype ") + dtype_name(q_dtype) + " with a " + kv_format_name(format) +
                " KV cache",
        "supported (q, kv) pairs are (bf16, bf16), (e4m3, fp8) and (e4m3, nvfp4) (D7)");
  return Status::Ok();
}

Status check_q_scale(const char* op, DType q_dtype, float q_scale) {
  if (q_dtype == DType::bf16) {
    if (q_scale != 1.0f)
      return Status::InvalidArgument(op, "q_scale", "1 for a bf16 query", float_string(q_scale));
    return Status::Ok();
  }
  return detail::check_positive_finite(op, "q_scale", q_scale);
}

/// Shared tensor checks of prefill and decode. `rows` = T (or B*Q), `hq` from q.
/// On success *num_pages, *hkv, *k are set.
Status check_common(const char* op, const TensorView& q, const PagedKvCache& kv,
                    const TensorView& topk, float softmax_scale, float q_scale,
                    const TensorView& out, const TensorView& lse, bool require_out,
                    std::int64_t* num_pages, std::int64_t* hkv, std::int64_t* k) {
  // q
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "q", q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "q", q, {DType::bf16, DType::e4m3}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "q", q, {-1, -1, kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "q", q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "q", q));
  const std::int64_t rows = q.shape[0];
  const std::int64_t hq = q.shape[1];
  // kv
  FLASHMSA_RETURN_IF_ERROR(detail::check_kv_cache(op, kv, num_pages, hkv));
  FLASHMSA_RETURN_IF_ERROR(check_format_pair(op, q.dtype, kv.format));
  FLASHMSA_RETURN_IF_ERROR(detail::check_gqa(op, hq, *hkv));
  // scalars
  FLASHMSA_RETURN_IF_ERROR(check_q_scale(op, q.dtype, q_scale));
  FLASHMSA_RETURN_IF_ERROR(detail::check_positive_finite(op, "softmax_scale", softmax_scale));
  // topk
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "topk_indices", topk));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "topk_indices", topk, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "topk_indices", topk, {rows, *hkv, -1}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "topk_indices", topk));
  *k = topk.shape[2];
  if (*k < 1 || *k > kMaxTopk)
    return Status::InvalidArgument(op, "topk_indices", "K (dim 2) in 1..16 (D10)",
                                   topk.describe());
  // out / lse
  if (require_out || out.defined()) {
    FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "out", out));
    FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "out", out, {DType::bf16}));
    FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "out", out, {rows, hq, kHeadDim}));
    FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "out", out));
  }
  if (lse.defined()) {
    FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "lse", lse, {DType::f32}));
    FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "lse", lse, {rows, hq}));
    FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "lse", lse));
  }
  return Status::Ok();
}

inline std::int32_t read_i32(const TensorView& t, std::int64_t i) {
  return t.ptr<const std::int32_t>()[i * t.stride[0]];
}

/// Every defined tensor of a prefill or decode call (both structs name them alike) must
/// be on `device`; the error names the first one that is not.
template <class Args>
Status check_all_on(const char* op, const Args& a, Device device) {
  const std::pair<const char*, const TensorView*> views[] = {
      {"q", &a.q},
      {"topk_indices", &a.topk_indices},
      {"block_table", &a.block_table},
      {"seq_lens", &a.seq_lens},
      {"out", &a.out},
      {"lse", &a.lse},
      {"kv.k.data", &a.kv.k.data},
      {"kv.v.data", &a.kv.v.data},
      {"kv.k.block_scale", &a.kv.k.block_scale},
      {"kv.v.block_scale", &a.kv.v.block_scale}};
  for (const auto& [name, view] : views)
    if (view->defined()) FLASHMSA_RETURN_IF_ERROR(detail::check_device(op, name, *view, device));
  return Status::Ok();
}

/// The CPU job fields shared by prefill and decode (both argument structs name them alike).
template <class Args>
cpu::AttentionJob job_from(const Args& a, std::int64_t rows, std::int64_t hkv, std::int64_t k) {
  cpu::AttentionJob job;
  job.q = a.q;
  job.kv = a.kv;
  job.topk = a.topk_indices;
  job.block_table = a.block_table;
  job.seq_lens = a.seq_lens;
  job.softmax_scale = a.softmax_scale;
  job.q_scale = a.q_scale;
  job.out = a.out;
  job.lse = a.lse;
  job.num_rows = rows;
  job.num_q_heads = a.q.shape[1];
  job.num_kv_heads = hkv;
  job.topk_k = k;
  return job;
}

}  // namespace

// ---------------------------------------------------------------------------
// Validators (shared with the FP64 reference)

namespace detail {

Status validate_prefill_args(const char* op, const SparseAttentionPrefillArgs& a,
                             bool require_out, AttentionGeometry* geo) {
  if (any_on_cuda({&a.q, &a.topk_indices, &a.block_table, &a.cu_seqlens_q, &a.seq_lens, &a.out,
                   &a.lse}) ||
      kv_on_cuda(a.kv))
    return cuda_unsupported(op);
  std::int64_t num_pages = 0, hkv = 0, k = 0;
  FLASHMSA_RETURN_IF_ERROR(check_common(op, a.q, a.kv, a.topk_indices, a.softmax_scale,
                                        a.q_scale, a.out, a.lse, require_out, &num_pages, &hkv,
                                        &k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_varlen_metadata(op, a.cu_seqlens_q, a.seq_lens,
                                                         a.block_table, a.q.shape[0], num_pages));
  geo->rows = a.q.shape[0];
  geo->num_q_heads = a.q.shape[1];
  geo->num_kv_heads = hkv;
  geo->topk_k = k;
  geo->num_pages = num_pages;
  return Status::Ok();
}

Status validate_decode_args(const char* op, const DecodeRunArgs& a, int queries_per_request,
                            bool require_out, AttentionGeometry* geo) {
  if (any_on_cuda({&a.q, &a.topk_indices, &a.block_table, &a.seq_lens, &a.out, &a.lse}) ||
      kv_on_cuda(a.kv))
    return cuda_unsupported(op);
  if (queries_per_request < 1 || queries_per_request > 32)
    return Status::InvalidArgument(op, "queries_per_request", "1..32 (D10)",
                                   to_string(queries_per_request));
  std::int64_t num_pages = 0, hkv = 0, k = 0;
  FLASHMSA_RETURN_IF_ERROR(check_common(op, a.q, a.kv, a.topk_indices, a.softmax_scale,
                                        a.q_scale, a.out, a.lse, require_out, &num_pages, &hkv,
                                        &k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_decode_metadata(op, a.seq_lens, a.block_table, num_pages));
  const std::int64_t rows = a.seq_lens.shape[0] * queries_per_request;
  if (a.q.shape[0] != rows)
    return Status::InvalidArgument(op, "q", "B * Q = " + to_string(rows) + " rows",
                                   a.q.describe());
  geo->rows = rows;
  geo->num_q_heads = a.q.shape[1];
  geo->num_kv_heads = hkv;
  geo->topk_k = k;
  geo->num_pages = num_pages;
  return Status::Ok();
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Prefill

namespace {
/// CUDA prefill: every tensor on cuda, the same tensor checks as the CPU path except
/// the metadata contents (they live on the device; the kernel applies the D1 rules and
/// bounds checks itself).
Status prefill_on_cuda(const SparseAttentionPrefillArgs& a) {
  const char* op = kPrefillOp;
  FLASHMSA_RETURN_IF_ERROR(check_all_on(op, a, Device::cuda));
  if (a.cu_seqlens_q.defined())
    FLASHMSA_RETURN_IF_ERROR(detail::check_device(op, "cu_seqlens_q", a.cu_seqlens_q, Device::cuda));
  std::int64_t num_pages = 0, hkv = 0, k = 0;
  FLASHMSA_RETURN_IF_ERROR(check_common(op, a.q, a.kv, a.topk_indices, a.softmax_scale, a.q_scale,
                                        a.out, a.lse, true, &num_pages, &hkv, &k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "seq_lens", a.seq_lens));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "seq_lens", a.seq_lens, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "seq_lens", a.seq_lens, 1));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "seq_lens", a.seq_lens));
  const std::int64_t batch = a.seq_lens.shape[0];
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "cu_seqlens_q", a.cu_seqlens_q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "cu_seqlens_q", a.cu_seqlens_q, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "cu_seqlens_q", a.cu_seqlens_q, {batch + 1}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "cu_seqlens_q", a.cu_seqlens_q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "block_table", a.block_table));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "block_table", a.block_table, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "block_table", a.block_table, {batch, -1}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "block_table", a.block_table));
  if (batch < 1 && a.q.shape[0] > 0)
    return Status::InvalidArgument(op, "seq_lens", "at least one request for T > 0 rows",
                                   a.seq_lens.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "out", a.out));  // vector stores
  if (a.q.shape[0] == 0) return Status::Ok();
  return detail::run_prefill_cuda(a);
}
}  // namespace

Status sparse_attention_prefill(const SparseAttentionPrefillArgs& a) {
  if (a.q.defined() && a.q.device == Device::cuda) return prefill_on_cuda(a);
  detail::AttentionGeometry geo;
  FLASHMSA_RETURN_IF_ERROR(detail::validate_prefill_args(kPrefillOp, a, true, &geo));
  const std::int64_t total_q = geo.rows;
  const std::int64_t hkv = geo.num_kv_heads;
  const std::int64_t k = geo.topk_k;
  if (total_q == 0) return Status::Ok();

  // Row -> (request, position) tables (D4): p = seq_len - q_len + j.
  const std::int64_t batch = a.seq_lens.shape[0];
  std::vector<std::int32_t> row_request(static_cast<std::size_t>(total_q));
  std::vector<std::int64_t> row_position(static_cast<std::size_t>(total_q));
  for (std::int64_t r = 0; r < batch; ++r) {
    const std::int64_t begin = read_i32(a.cu_seqlens_q, r);
    const std::int64_t end = read_i32(a.cu_seqlens_q, r + 1);
    const std::int64_t seq_len = read_i32(a.seq_lens, r);
    for (std::int64_t row = begin; row < end; ++row) {
      row_request[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(r);
      row_position[static_cast<std::size_t>(row)] = seq_len - (end - begin) + (row - begin);
    }
  }

  cpu::AttentionJob job = job_from(a, total_q, hkv, k);
  job.row_request = row_request.data();
  job.row_position = row_position.data();

  const int threads = detail::default_num_threads();
  std::vector<float> scratch(static_cast<std::size_t>(threads) *
                             cpu::attention_scratch_floats(job.num_q_heads / hkv));
  cpu::run_sparse_attention(job, threads, scratch.data());
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Decode plan / run

Status SparseDecodePlan::can_implement(const DecodePlanArgs& a) {
  const char* op = kPlanOp;
#ifndef FLASHMSA_WITH_CUDA
  if (a.device == Device::cuda) return cuda_unsupported(op);
#endif
  if (a.batch_size <= 0)
    return Status::InvalidArgument(op, "batch_size", "> 0", to_string(a.batch_size));
  if (a.queries_per_request < 1 || a.queries_per_request > 32)
    return Status::InvalidArgument(op, "queries_per_request", "1..32 (D10)",
                                   to_string(a.queries_per_request));
  FLASHMSA_RETURN_IF_ERROR(detail::check_gqa(op, a.num_q_heads, a.num_kv_heads));
  if (static_cast<std::int64_t>(a.batch_size) * a.queries_per_request * a.num_q_heads > (1LL << 28))
    return Status::InvalidArgument(op, "batch_size",
                                   "batch_size * queries_per_request * num_q_heads <= 2^28",
                                   to_string(a.batch_size));
  if (a.max_pages_per_request < 1 || a.max_pages_per_request > kMaxContext / kPageSize)
    return Status::InvalidArgument(op, "max_pages_per_request", "1..8192 (D10)",
                                   to_string(a.max_pages_per_request));
  if (a.topk < 1 || a.topk > kMaxTopk)
    return Status::InvalidArgument(op, "topk", "1..16 (D10)", to_string(a.topk));
  if (a.q_dtype != DType::bf16 && a.q_dtype != DType::e4m3)
    return Status::InvalidArgument(op, "q_dtype", "bf16 or e4m3", dtype_name(a.q_dtype));
  FLASHMSA_RETURN_IF_ERROR(check_format_pair(op, a.q_dtype, a.kv_format));
  if (a.num_threads < 0)
    return Status::InvalidArgument(op, "num_threads", ">= 0 (0 = default)",
                                   to_string(a.num_threads));
  return Status::Ok();
}

Status SparseDecodePlan::plan(const DecodePlanArgs& a) {
  planned_ = false;
  release();
  workspace_.clear();
  num_splits_ = 1;
  queries_per_cta_ = 1;
  cluster_merge_ = false;
  kernel_ = "cpu";
  FLASHMSA_RETURN_IF_ERROR(can_implement(a));
  args_ = a;
  if (a.device == Device::cuda) {
    // Device workspace and split choice: src/ops/attention_cuda.cpp.
    FLASHMSA_RETURN_IF_ERROR(plan_cuda());
    planned_ = true;
    return Status::Ok();
  }
  num_threads_ = a.num_threads > 0 ? a.num_threads : detail::default_num_threads();
  const std::int64_t group = a.num_q_heads / a.num_kv_heads;
  workspace_.assign(static_cast<std::size_t>(num_threads_) * cpu::attention_scratch_floats(group),
                    0.0f);
  planned_ = true;
  return Status::Ok();
}

Status SparseDecodePlan::run(const DecodeRunArgs& a) {
  const char* op = kRunOp;
  if (!planned_)
    return Status::InvalidArgument(op, "plan", "a planned SparseDecodePlan (call plan() first)",
                                   "an unplanned SparseDecodePlan");
  const DecodePlanArgs& p = args_;
  FLASHMSA_RETURN_IF_ERROR(check_all_on(op, a, p.device));  // every tensor on the planned device
  const std::int64_t rows = static_cast<std::int64_t>(p.batch_size) * p.queries_per_request;

  // Consistency with the plan, before the generic checks, so messages name the plan.
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "q", a.q));
  if (a.q.dtype != p.q_dtype)
    return Status::InvalidArgument(op, "q", std::string("dtype ") + dtype_name(p.q_dtype) +
                                                " (as planned)",
                                   std::string("dtype ") + dtype_name(a.q.dtype));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(
      op, "q", a.q, {rows, p.num_q_heads, kHeadDim}));
  if (a.kv.format != p.kv_format)
    return Status::InvalidArgument(op, "kv.format",
                                   std::string(kv_format_name(p.kv_format)) + " (as planned)",
                                   kv_format_name(a.kv.format));

  std::int64_t num_pages = 0, hkv = 0, k = 0;
  FLASHMSA_RETURN_IF_ERROR(check_common(op, a.q, a.kv, a.topk_indices, a.softmax_scale,
                                        a.q_scale, a.out, a.lse, true, &num_pages, &hkv, &k));
  if (hkv != p.num_kv_heads)
    return Status::InvalidArgument(op, "kv.k.data",
                                   "num_kv_heads " + to_string(p.num_kv_heads) + " (as planned)",
                                   a.kv.k.data.describe());
  if (k != p.topk)
    return Status::InvalidArgument(op, "topk_indices",
                                   "K (dim 2) = " + to_string(p.topk) + " (as planned)",
                                   a.topk_indices.describe());

  // seq_lens / block_table against the planned capacity.
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "seq_lens", a.seq_lens));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "seq_lens", a.seq_lens, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "seq_lens", a.seq_lens, {p.batch_size}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "seq_lens", a.seq_lens));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "block_table", a.block_table));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "block_table", a.block_table, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "block_table", a.block_table, {p.batch_size, -1}));
  if (a.block_table.shape[1] < p.max_pages_per_request)
    return Status::InvalidArgument(op, "block_table",
                                   "at least max_pages_per_request = " +
                                       to_string(p.max_pages_per_request) + " columns",
                                   a.block_table.describe());
  // CUDA: tensor contents live on the device and are not read on the host; the kernel
  // applies the same skipping rules (D1) and bounds checks itself.
  if (p.device == Device::cuda) {
    FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "block_table", a.block_table));
    FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "out", a.out));
    return run_cuda(a);
  }

  const std::int64_t capacity = static_cast<std::int64_t>(p.max_pages_per_request) * kPageSize;
  for (std::int64_t b = 0; b < p.batch_size; ++b) {
    const std::int64_t s = read_i32(a.seq_lens, b);
    if (s < 0 || s > capacity)
      return Status::InvalidArgument(op, "seq_lens[" + to_string(b) + "]",
                                     "a length in [0, max_pages_per_request * 128 = " +
                                         to_string(capacity) + "]",
                                     to_string(s));
  }
  FLASHMSA_RETURN_IF_ERROR(
      detail::check_decode_metadata(op, a.seq_lens, a.block_table, num_pages));

  cpu::AttentionJob job = job_from(a, rows, hkv, k);
  job.queries_per_request = p.queries_per_request;
  cpu::run_sparse_attention(job, num_threads_, workspace_.data());
  return Status::Ok();
}

}  // namespace flashmsa

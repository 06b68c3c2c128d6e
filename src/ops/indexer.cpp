// Public indexer operations: validation, then the CPU backend (src/cpu/indexer_cpu.cpp).
#include "flashmsa/indexer.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

#include "common/parallel.h"
#include "common/validate.h"
#include "cpu/indexer_cpu.h"

#ifdef FLASHMSA_WITH_CUDA
#include "cuda/sm90/indexer_kernels.h"
#endif

namespace flashmsa {
namespace {

using detail::to_string;

/// Largest decode queries per request of the indexer (MSA decode indexers: Q = 1..16).
constexpr std::int64_t kMaxIndexerQueries = 16;

inline std::int32_t at_i32(const TensorView& t, std::int64_t i) {
  return t.ptr<const std::int32_t>()[i * t.stride[0]];
}

using detail::resolve_device;  // device rule (common/validate.h)

#ifdef FLASHMSA_WITH_CUDA
// Shape-only checks of the metadata tensors (contents stay on the device).
Status check_metadata_shapes(const char* op, const TensorView* cu_seqlens_q,
                             const TensorView& seq_lens, const TensorView& block_table) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "seq_lens", seq_lens));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "seq_lens", seq_lens, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "seq_lens", seq_lens, 1));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "seq_lens", seq_lens));
  const std::int64_t batch = seq_lens.shape[0];
  if (cu_seqlens_q != nullptr) {
    FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "cu_seqlens_q", *cu_seqlens_q));
    FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "cu_seqlens_q", *cu_seqlens_q, {DType::i32}));
    FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "cu_seqlens_q", *cu_seqlens_q, {batch + 1}));
    FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "cu_seqlens_q", *cu_seqlens_q));
  }
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "block_table", block_table));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "block_table", block_table, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "block_table", block_table, {batch, -1}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "block_table", block_table));
  return Status::Ok();
}
#endif

// Index q: bf16 | e4m3 [T, H, 128], H in 1..8, innermost stride 1, 16-byte aligned.
Status check_index_q(const char* op, const TensorView& q) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "q", q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "q", q, {DType::bf16, DType::e4m3}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "q", q, 3));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "q", q, {-1, -1, kHeadDim}));
  if (q.shape[1] < 1 || q.shape[1] > kMaxKvHeads)
    return Status::InvalidArgument(op, "q", "index heads (dim 1) in 1..8 (D10)", q.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "q", q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "q", q));
  return Status::Ok();
}

// topk_indices: i32 [T, H, K], K in 1..16, any non-negative strides.
Status check_topk_out(const char* op, const char* arg, const TensorView& topk, std::int64_t rows,
                      std::int64_t heads) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, arg, topk));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, arg, topk, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, arg, topk, 3));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, arg, topk, {rows, heads, -1}));
  if (topk.shape[2] < 1 || topk.shape[2] > kMaxTopk)
    return Status::InvalidArgument(op, arg, "K (dim 2) in 1..16", topk.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, arg, topk));
  return Status::Ok();
}

// page_scores (optional): f32 [T, H, W], W >= max L, any non-negative strides.
Status check_page_scores(const char* op, const TensorView& ps, std::int64_t rows,
                         std::int64_t heads, std::int64_t max_l) {
  if (!ps.defined()) return Status::Ok();
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "page_scores", ps, {DType::f32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "page_scores", ps, 3));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "page_scores", ps, {rows, heads, -1}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "page_scores", ps));
  if (max_l >= 0 && ps.shape[2] < max_l)
    return Status::InvalidArgument(
        op, "page_scores",
        "width (dim 2) >= the largest local page L = " + to_string(max_l) + " over all rows",
        ps.describe());
  return Status::Ok();
}

#ifdef FLASHMSA_WITH_CUDA
// The CUDA path, on validated shapes (metadata contents checked by the kernels).
Status run_cuda(const char* op, const TensorView& q, const IndexKCache& ik,
                const TensorView& block_table, const TensorView* cu_seqlens_q,
                const TensorView& seq_lens, int queries_per_request, const TensorView& topk,
                const TensorView& page_scores, void* stream, void* workspace = nullptr,
                std::size_t workspace_bytes = 0) {
  cuda::IndexerParams p;
  p.q = q.data;
  p.q_e4m3 = q.dtype == DType::e4m3;
  p.q_stride[0] = q.stride[0];
  p.q_stride[1] = q.stride[1];
  p.k_format = static_cast<int>(ik.format);
  p.k_data = static_cast<const unsigned char*>(ik.data.data);
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(ik.data.dtype));
  p.k_stride[0] = ik.data.stride[0] * es;
  p.k_stride[1] = ik.data.stride[1] * es;
  if (ik.format == KvFormat::nvfp4) {
    p.k_scale = static_cast<const unsigned char*>(ik.block_scale.data);
    p.ks_stride[0] = ik.block_scale.stride[0];
    p.ks_stride[1] = ik.block_scale.stride[1];
    p.k_global = ik.global_scale;
  }
  p.num_pages = ik.data.shape[0];
  p.block_table = block_table.ptr<const std::int32_t>();
  p.bt_stride[0] = block_table.stride[0];
  p.bt_stride[1] = block_table.stride[1];
  p.bt_width = block_table.shape[1];
  p.seq_lens = seq_lens.ptr<const std::int32_t>();
  p.seq_stride = seq_lens.stride[0];
  if (cu_seqlens_q != nullptr) {
    p.cu_seqlens = cu_seqlens_q->ptr<const std::int32_t>();
    p.cu_stride = cu_seqlens_q->stride[0];
  }
  p.batch = static_cast<int>(seq_lens.shape[0]);
  p.queries_per_request = queries_per_request;
  p.num_rows = q.shape[0];
  p.heads = static_cast<int>(q.shape[1]);
  p.topk = topk.ptr<std::int32_t>();
  for (int i = 0; i < 3; ++i) p.topk_stride[i] = topk.stride[i];
  p.topk_k = static_cast<int>(topk.shape[2]);
  if (page_scores.defined()) {
    p.page_scores = page_scores.ptr<float>();
    for (int i = 0; i < 3; ++i) p.ps_stride[i] = page_scores.stride[i];
    p.ps_width = page_scores.shape[2];
  }
  const int err = cuda::launch_indexer(p, stream, workspace, workspace_bytes);
  if (err != 0)
    return Status::Internal(op, std::string("kernel launch failed: ") + cuda::indexer_error_string(err));
  return Status::Ok();
}
#endif

#ifndef FLASHMSA_WITH_CUDA
Status cuda_unsupported(const char* op) {
  return Status::Unsupported(op, "device cuda",
                             "this build of FlashMSA has no CUDA kernels (configure with nvcc)");
}
#endif

}  // namespace

Status indexer_prefill(const IndexerPrefillArgs& a) {
  const char* op = "indexer_prefill";
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_device(
      op, {{"q", &a.q}, {"index_k.data", &a.index_k.data},
           {"index_k.block_scale", &a.index_k.block_scale}, {"block_table", &a.block_table},
           {"cu_seqlens_q", &a.cu_seqlens_q}, {"seq_lens", &a.seq_lens},
           {"topk_indices", &a.topk_indices}, {"page_scores", &a.page_scores}},
      &on_cuda));
  if (on_cuda) {
#ifndef FLASHMSA_WITH_CUDA
    return cuda_unsupported(op);
#else
    FLASHMSA_RETURN_IF_ERROR(check_index_q(op, a.q));
    std::int64_t num_pages = 0;
    FLASHMSA_RETURN_IF_ERROR(detail::check_index_k_cache(op, a.index_k, &num_pages));
    FLASHMSA_RETURN_IF_ERROR(check_metadata_shapes(op, &a.cu_seqlens_q, a.seq_lens, a.block_table));
    FLASHMSA_RETURN_IF_ERROR(
        check_topk_out(op, "topk_indices", a.topk_indices, a.q.shape[0], a.q.shape[1]));
    FLASHMSA_RETURN_IF_ERROR(
        check_page_scores(op, a.page_scores, a.q.shape[0], a.q.shape[1], -1));
    if (a.seq_lens.shape[0] < 1 && a.q.shape[0] > 0)
      return Status::InvalidArgument(op, "seq_lens", "at least one request for T > 0 rows",
                                     a.seq_lens.describe());
    return run_cuda(op, a.q, a.index_k, a.block_table, &a.cu_seqlens_q, a.seq_lens, 1,
                    a.topk_indices, a.page_scores, a.stream);
#endif
  }
  FLASHMSA_RETURN_IF_ERROR(check_index_q(op, a.q));
  const std::int64_t T = a.q.shape[0];
  const std::int64_t H = a.q.shape[1];
  std::int64_t num_pages = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_index_k_cache(op, a.index_k, &num_pages));
  FLASHMSA_RETURN_IF_ERROR(detail::check_varlen_metadata(op, a.cu_seqlens_q, a.seq_lens,
                                                         a.block_table, T, num_pages));
  FLASHMSA_RETURN_IF_ERROR(check_topk_out(op, "topk_indices", a.topk_indices, T, H));

  cpu::IndexerProblem p;
  const std::int64_t B = a.seq_lens.shape[0];
  std::int64_t max_l = 0;
  for (std::int64_t r = 0; r < B; ++r) {
    cpu::IndexerRequest req;
    req.row_begin = at_i32(a.cu_seqlens_q, r);
    req.num_rows = at_i32(a.cu_seqlens_q, r + 1) - req.row_begin;
    req.first_pos = at_i32(a.seq_lens, r) - req.num_rows;  // D4: bottom-right aligned
    if (req.num_rows > 0)
      max_l = std::max<std::int64_t>(max_l, (req.first_pos + req.num_rows - 1) / kPageSize);
    p.requests.push_back(req);
  }
  FLASHMSA_RETURN_IF_ERROR(check_page_scores(op, a.page_scores, T, H, max_l));

  p.q = a.q;
  p.index_k = a.index_k;
  p.block_table = a.block_table;
  p.topk = a.topk_indices;
  p.page_scores = a.page_scores;
  cpu::run_indexer(p);
  return Status::Ok();
}

namespace {
// The device rule of indexer_decode's tensors.
Status resolve_decode_device(const char* op, const IndexerDecodeArgs& a, bool* on_cuda) {
  return resolve_device(
      op, {{"q", &a.q}, {"index_k.data", &a.index_k.data},
           {"index_k.block_scale", &a.index_k.block_scale}, {"block_table", &a.block_table},
           {"seq_lens", &a.seq_lens}, {"topk_indices", &a.topk_indices},
           {"page_scores", &a.page_scores}},
      on_cuda);
}
}  // namespace

#ifdef FLASHMSA_WITH_CUDA
namespace {
// indexer_decode on cuda tensors: shape checks, then the kernels (workspace: the plan's,
// or nullptr = stream-ordered allocation).
Status indexer_decode_cuda(const char* op, const IndexerDecodeArgs& a, void* workspace,
                           std::size_t workspace_bytes) {
  FLASHMSA_RETURN_IF_ERROR(check_index_q(op, a.q));
  const std::int64_t Q = a.queries_per_request;
  if (Q < 1 || Q > kMaxIndexerQueries)
    return Status::InvalidArgument(op, "queries_per_request", "a value in 1..16", to_string(Q));
  std::int64_t num_pages = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_index_k_cache(op, a.index_k, &num_pages));
  FLASHMSA_RETURN_IF_ERROR(check_metadata_shapes(op, nullptr, a.seq_lens, a.block_table));
  const std::int64_t B = a.seq_lens.shape[0];
  if (a.q.shape[0] != B * Q)
    return Status::InvalidArgument(
        op, "q", "B * Q = " + to_string(B) + " * " + to_string(Q) + " = " + to_string(B * Q) +
                     " rows (dim 0)",
        a.q.describe());
  FLASHMSA_RETURN_IF_ERROR(
      check_topk_out(op, "topk_indices", a.topk_indices, a.q.shape[0], a.q.shape[1]));
  FLASHMSA_RETURN_IF_ERROR(
      check_page_scores(op, a.page_scores, a.q.shape[0], a.q.shape[1], -1));
  return run_cuda(op, a.q, a.index_k, a.block_table, nullptr, a.seq_lens,
                  static_cast<int>(Q), a.topk_indices, a.page_scores, a.stream, workspace,
                  workspace_bytes);
}
}  // namespace
#endif

Status indexer_decode(const IndexerDecodeArgs& a) {
  const char* op = "indexer_decode";
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_decode_device(op, a, &on_cuda));
  if (on_cuda) {
#ifndef FLASHMSA_WITH_CUDA
    return cuda_unsupported(op);
#else
    return indexer_decode_cuda(op, a, nullptr, 0);
#endif
  }
  FLASHMSA_RETURN_IF_ERROR(check_index_q(op, a.q));
  const std::int64_t T = a.q.shape[0];
  const std::int64_t H = a.q.shape[1];
  const std::int64_t Q = a.queries_per_request;
  if (Q < 1 || Q > kMaxIndexerQueries)
    return Status::InvalidArgument(op, "queries_per_request", "a value in 1..16", to_string(Q));
  std::int64_t num_pages = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_index_k_cache(op, a.index_k, &num_pages));
  FLASHMSA_RETURN_IF_ERROR(detail::check_decode_metadata(op, a.seq_lens, a.block_table, num_pages));
  const std::int64_t B = a.seq_lens.shape[0];
  if (T != B * Q)
    return Status::InvalidArgument(
        op, "q", "B * Q = " + to_string(B) + " * " + to_string(Q) + " = " + to_string(B * Q) +
                     " rows (dim 0)",
        a.q.describe());
  FLASHMSA_RETURN_IF_ERROR(check_topk_out(op, "topk_indices", a.topk_indices, T, H));

  cpu::IndexerProblem p;
  std::int64_t max_l = 0;
  for (std::int64_t r = 0; r < B; ++r) {
    cpu::IndexerRequest req;
    req.row_begin = r * Q;
    req.num_rows = Q;
    req.first_pos = at_i32(a.seq_lens, r) - Q;  // D4; may be < 0 (padding, D5)
    const std::int64_t last = req.first_pos + Q - 1;
    if (last >= 0) max_l = std::max<std::int64_t>(max_l, last / kPageSize);
    p.requests.push_back(req);
  }
  FLASHMSA_RETURN_IF_ERROR(check_page_scores(op, a.page_scores, T, H, max_l));

  p.q = a.q;
  p.index_k = a.index_k;
  p.block_table = a.block_table;
  p.topk = a.topk_indices;
  p.page_scores = a.page_scores;
  cpu::run_indexer(p);
  return Status::Ok();
}

IndexerDecodePlan::~IndexerDecodePlan() {
#ifdef FLASHMSA_WITH_CUDA
  if (workspace_ != nullptr) cuda::indexer_device_free(workspace_);
#endif
}

Status IndexerDecodePlan::plan(const IndexerDecodePlanArgs& c) {
  const char* op = "IndexerDecodePlan::plan";
  if (c.max_batch < 1)
    return Status::InvalidArgument(op, "max_batch", "a value >= 1", to_string(c.max_batch));
  if (c.queries_per_request < 1 || c.queries_per_request > kMaxIndexerQueries)
    return Status::InvalidArgument(op, "queries_per_request", "a value in 1..16",
                                   to_string(c.queries_per_request));
  if (c.heads < 1 || c.heads > kMaxKvHeads)
    return Status::InvalidArgument(op, "heads", "index heads in 1..8 (D10)", to_string(c.heads));
  if (c.max_pages_per_request < 1)
    return Status::InvalidArgument(op, "max_pages_per_request", "a value >= 1",
                                   to_string(c.max_pages_per_request));
  planned_ = false;
  if (c.device == Device::cuda) {
#ifndef FLASHMSA_WITH_CUDA
    return cuda_unsupported(op);
#else
    const std::size_t bytes = cuda::indexer_workspace_bytes(
        c.max_batch * c.queries_per_request, c.heads, c.max_pages_per_request,
        static_cast<int>(c.max_batch), false);
    if (bytes > workspace_bytes_ || workspace_ == nullptr) {
      if (workspace_ != nullptr) cuda::indexer_device_free(workspace_);
      workspace_ = nullptr;
      workspace_bytes_ = 0;
      if (int err = cuda::indexer_device_malloc(&workspace_, bytes))
        return Status::InvalidArgument(op, "max_pages_per_request",
                                       "a workspace that fits on the device (" + to_string(static_cast<std::int64_t>(bytes)) + " bytes)",
                                       std::string("cudaMalloc: ") + cuda::indexer_error_string(err));
      workspace_bytes_ = bytes;
    }
#endif
  }
  args_ = c;
  planned_ = true;
  return Status::Ok();
}

Status IndexerDecodePlan::run(const IndexerDecodeArgs& a) const {
  const char* op = "IndexerDecodePlan::run";
  if (!planned_) return Status::InvalidArgument(op, "plan", "a planned IndexerDecodePlan", "not planned");
  if (!a.q.defined() || !a.seq_lens.defined() || !a.block_table.defined())
    return indexer_decode(a);  // its errors name the missing tensor
  if (a.q.device != args_.device)
    return Status::InvalidArgument(op, "q", std::string("device ") + (args_.device == Device::cuda ? "cuda" : "cpu") + " (planned)",
                                   a.q.describe());
  if (a.queries_per_request != args_.queries_per_request)
    return Status::InvalidArgument(op, "queries_per_request", "the planned " + to_string(args_.queries_per_request),
                                   to_string(a.queries_per_request));
  if (a.seq_lens.rank != 1 || a.seq_lens.shape[0] > args_.max_batch)
    return Status::InvalidArgument(op, "seq_lens", "[B] with B <= max_batch = " + to_string(args_.max_batch),
                                   a.seq_lens.describe());
  if (a.block_table.rank != 2 || a.block_table.shape[1] > args_.max_pages_per_request)
    return Status::InvalidArgument(op, "block_table",
                                   "width <= max_pages_per_request = " + to_string(args_.max_pages_per_request),
                                   a.block_table.describe());
  if (a.q.rank != 3 || a.q.shape[1] != args_.heads)
    return Status::InvalidArgument(op, "q", "the planned " + to_string(args_.heads) + " index heads (dim 1)",
                                   a.q.describe());
  if (args_.device != Device::cuda) return indexer_decode(a);
#ifndef FLASHMSA_WITH_CUDA
  return cuda_unsupported(op);
#else
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_decode_device(op, a, &on_cuda));
  return indexer_decode_cuda(op, a, workspace_, workspace_bytes_);
#endif
}

Status topk_select(const TensorView& scores, const TensorView& local_page,
                   const TensorView& topk, void* stream) {
  const char* op = "topk_select";
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_device(
      op, {{"scores", &scores}, {"local_page", &local_page}, {"topk", &topk}}, &on_cuda));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "local_page", local_page));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "local_page", local_page, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "local_page", local_page, 1));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "local_page", local_page));
  const std::int64_t R = local_page.shape[0];
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "scores", scores));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "scores", scores, {DType::f32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "scores", scores, {R, -1}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "scores", scores));
  if (scores.shape[1] > kMaxContext / kPageSize)  // the GPU kernel holds at most 8,192 candidates
    return Status::InvalidArgument(op, "scores", "at most 8192 history pages per row (dim 1, D10)",
                                   scores.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "topk", topk));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "topk", topk, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "topk", topk, {R, -1}));
  if (topk.shape[1] < 1 || topk.shape[1] > kMaxTopk)
    return Status::InvalidArgument(op, "topk", "K (dim 1) in 1..16", topk.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "topk", topk));
  if (on_cuda) {
#ifndef FLASHMSA_WITH_CUDA
    return cuda_unsupported(op);
#else
    // local_page contents stay on the device: history columns >= W rank as NaN.
    cuda::TopkSelectParams p;
    p.scores = scores.ptr<const float>();
    p.s_stride[0] = scores.stride[0];
    p.s_stride[1] = scores.stride[1];
    p.width = scores.shape[1];
    p.local_page = local_page.ptr<const std::int32_t>();
    p.lp_stride = local_page.stride[0];
    p.topk = topk.ptr<std::int32_t>();
    p.topk_stride[0] = topk.stride[0];
    p.topk_stride[1] = topk.stride[1];
    p.k = static_cast<int>(topk.shape[1]);
    p.rows = R;
    const int err = cuda::launch_topk_select(p, stream);
    if (err != 0)
      return Status::Internal(op, std::string("kernel launch failed: ") + cuda::indexer_error_string(err));
    return Status::Ok();
#endif
  }
  const int K = static_cast<int>(topk.shape[1]);
  const std::int64_t W = scores.shape[1];
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t L = at_i32(local_page, r);
    if (L + 1 > K && L > W)
      return Status::InvalidArgument(
          op, "local_page[" + to_string(r) + "]",
          "L <= scores width W = " + to_string(W) + " when L + 1 > K = " + to_string(K),
          to_string(L));
  }
  detail::parallel_for(R, 0, [&](std::int64_t r, int) {
    cpu::select_topk_row(scores.ptr<const float>() + r * scores.stride[0], scores.stride[1],
                         at_i32(local_page, r), K,
                         topk.ptr<std::int32_t>() + r * topk.stride[0], topk.stride[1]);
  });
  return Status::Ok();
}

}  // namespace flashmsa

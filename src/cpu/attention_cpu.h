// Internal (CPU backend): the block-sparse attention core shared by prefill and decode
// (spec 3.1-3.4, D1, D4-D7). Inputs must have been validated by src/ops/attention.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashmsa/attention.h"
#include "flashmsa/cache.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa::cpu {

/// One validated attention launch over `num_rows` query rows.
///
/// Row -> (request b, position p) mapping (D4):
///   prefill (row_request != nullptr): b = row_request[row], p = row_position[row];
///   decode  (row_request == nullptr): b = row / queries_per_request,
///           p = seq_lens[b] - queries_per_request + row % queries_per_request.
/// A row with p < 0 or with no visible key is empty: out = 0, lse = -inf (D5).
struct AttentionJob {
  TensorView q;            ///< bf16 | e4m3 [rows, Hq, 128], innermost stride 1
  PagedKvCache kv;         ///< validated cache (format matches q, see D7)
  TensorView topk;         ///< i32 [rows, Hkv, K], any non-negative strides
  TensorView block_table;  ///< i32 [B, W]
  TensorView seq_lens;     ///< i32 [B]
  float softmax_scale = kDefaultSoftmaxScale;
  float q_scale = 1.0f;
  TensorView out;          ///< bf16 [rows, Hq, 128], innermost stride 1
  TensorView lse;          ///< optional f32 [rows, Hq]
  std::int64_t num_rows = 0;
  std::int64_t num_q_heads = 0;
  std::int64_t num_kv_heads = 0;
  std::int64_t topk_k = 0;
  const std::int32_t* row_request = nullptr;   ///< prefill: [rows]
  const std::int64_t* row_position = nullptr;  ///< prefill: [rows]
  std::int64_t queries_per_request = 1;        ///< decode: Q
};

/// Floats of per-thread scratch needed by run_sparse_attention for GQA group size G:
/// q rows (G x 128) + raw logits (G x 2048) + accumulators (G x 128) + one decoded page
/// of K or V rows (128 x 128): at most 208 KiB per thread (G = 16).
std::size_t attention_scratch_floats(std::int64_t group_size);

/// Runs the job on `num_threads` threads (> 0) with detail::parallel_for over
/// (row, KV head) work items. `scratch` holds num_threads * attention_scratch_floats(G)
/// floats. Bitwise deterministic for any thread count: each item is computed by one
/// thread with a fixed order (valid pages sorted ascending, tokens ascending).
void run_sparse_attention(const AttentionJob& job, int num_threads, float* scratch);

}  // namespace flashmsa::cpu

namespace flashmsa::detail {

/// Geometry established by the attention validators.
struct AttentionGeometry {
  std::int64_t rows = 0;          ///< T (prefill) or B*Q (decode)
  std::int64_t num_q_heads = 0;   ///< Hq
  std::int64_t num_kv_heads = 0;  ///< Hkv
  std::int64_t topk_k = 0;        ///< K
  std::int64_t num_pages = 0;     ///< physical pages of the cache
};

/// Full argument validation of sparse_attention_prefill (defined in
/// src/ops/attention.cpp), reused by the FP64 reference. With require_out = false an
/// absent args.out is accepted (a present one is still checked). `op` names the caller.
Status validate_prefill_args(const char* op, const SparseAttentionPrefillArgs& args,
                             bool require_out, AttentionGeometry* geometry);

/// Plan-free validation of decode tensors for `queries_per_request` (1..32) queries per
/// request: q rows must equal seq_lens.shape[0] * Q; same tensor checks as
/// SparseDecodePlan::run except the plan consistency and capacity checks.
Status validate_decode_args(const char* op, const DecodeRunArgs& args, int queries_per_request,
                            bool require_out, AttentionGeometry* geometry);

}  // namespace flashmsa::detail

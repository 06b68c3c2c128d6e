// FlashMSA — the MSA lightning indexer: page scores and top-k page selection.
//
// Semantics (spec 2.2-2.8, D1, D2, D4, D5):
//   score s_h(p, t) = sum_d q[row, h, d] * K(t, d)      raw FP32 dot product, no scale
//   page score B_h(p, b) = max over the 128 tokens t of logical page b, for b < L = p // 128
//   selection: n = L + 1 visible pages; if n <= K: 0, 1, ..., L;
//              else the K-1 best history pages by (score desc, page id asc), then L.
//   NaN scores rank below every finite score. Unused slots are -1. A row whose
//   position p < 0 (padding, D5) gets all -1.
// One selection per index head; index head h drives KV head h (num index heads = Hkv).
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashmsa/cache.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa {

/// Arguments of indexer_prefill (varlen, chunked prefill over cached context).
struct IndexerPrefillArgs {
  TensorView q;             ///< index q: bf16 | e4m3 [T, H, 128], H = index heads 1..8,
                            ///< innermost stride 1, 16-byte aligned
  IndexKCache index_k;      ///< index-K cache, already holding every token of every request
  TensorView block_table;   ///< i32 [B, max_pages]: logical page -> physical page
  TensorView cu_seqlens_q;  ///< i32 [B+1]: rows of request r are [cu[r], cu[r+1]); cu[0]=0, cu[B]=T
  TensorView seq_lens;      ///< i32 [B]: final KV length incl. this chunk (>= q_len)
  /// out i32 [T, H, K], K in 1..16, any strides (token-major or head-major view).
  TensorView topk_indices;
  /// optional out f32 [T, H, W]: page scores; entry b < L holds B_h(p, b); entries
  /// b >= L (never ranked) are written -inf. W must be >= max over rows of L.
  TensorView page_scores;
  /// cuda only: the cudaStream_t to run on (nullptr = default stream); ignored on cpu.
  void* stream = nullptr;
};

/// Devices: every defined tensor must be on one device; the first defined tensor (in
/// the order q, index_k.data, index_k.block_scale, block_table, cu_seqlens_q, seq_lens,
/// topk_indices, page_scores) decides, and a tensor on the other device is an
/// InvalidArgument naming it. All on cpu: the CPU backend (synchronous). All on cuda:
/// the SM90 kernels (src/cuda/sm90/indexer_kernels.h), asynchronous on `stream`, tensor-core
/// page scores within 2e-4 relative of the CPU backend (policy D8; bitwise deterministic)
/// and the exact D1 selection on them; Unsupported in a build
/// without CUDA kernels. On cuda the host never reads tensor contents, so only the
/// dtype / rank / shape / stride / alignment checks apply; the metadata-content rules
/// (cu_seqlens monotone from 0 to T, q_len <= seq_len, block-table width and entries,
/// page_scores width >= max L) are NOT checked: with metadata breaking them the kernels
/// skip what is out of range instead (rows outside every request are left untouched;
/// history pages whose block-table entry is outside [0, num_pages) or beyond the
/// block-table width score NaN; page_scores columns beyond its width are not written),
/// never touching memory out of range; the results of such rows are unspecified.
///
/// Top-k page selection for chunked prefill. Query row j of request r sits at
/// p = seq_len_r - q_len_r + j (D4). Errors: InvalidArgument naming the argument
/// (device, dtype, rank, shape, stride, alignment, heads vs top-k heads, on cpu the
/// metadata rules listed in docs/architecture.md and page_scores too narrow); Unsupported
/// for cuda tensors in a build without CUDA kernels.
Status indexer_prefill(const IndexerPrefillArgs& args);

/// Arguments of indexer_decode (Q queries per request, MTP).
struct IndexerDecodeArgs {
  TensorView q;             ///< index q: bf16 | e4m3 [B*Q, H, 128], row = b*Q + j,
                            ///< innermost stride 1, 16-byte aligned
  IndexKCache index_k;      ///< index-K cache
  TensorView block_table;   ///< i32 [B, max_pages]
  TensorView seq_lens;      ///< i32 [B]: KV length incl. the Q new tokens; 0 = padding
  int queries_per_request = 1;  ///< Q in 1..16
  TensorView topk_indices;  ///< out i32 [B*Q, H, K], K in 1..16, any strides
  TensorView page_scores;   ///< optional out f32 [B*Q, H, W], as in prefill
  void* stream = nullptr;   ///< cuda only: cudaStream_t (nullptr = default stream)
};

/// Top-k page selection for decode: query j of request b sits at p = seq_len_b - Q + j
/// (D4); p < 0 gives a row of -1 (D5). Devices and errors: as indexer_prefill, plus
/// 'queries_per_request' outside 1..16 and q rows != B*Q.
Status indexer_decode(const IndexerDecodeArgs& args);

/// Capacity of an IndexerDecodePlan.
struct IndexerDecodePlanArgs {
  std::int64_t max_batch = 0;             ///< requests per step (B <= max_batch at run)
  int queries_per_request = 1;            ///< Q in 1..16 (run must use the same Q)
  int heads = 1;                          ///< index heads 1..8 (run must match)
  std::int64_t max_pages_per_request = 0; ///< block-table width capacity (run: width <= it)
  Device device = Device::cuda;
};

/// Decode indexer plan: the device workspace (page scores f32 [B*Q, H, width]) is sized
/// and allocated once by plan() from the capacity (never from sequence lengths), so run()
/// - once per layer of a step - allocates nothing, syncs nothing and reads no metadata on
/// the host: a CUDA graph of a step captured once replays with updated seq_lens / block
/// tables / index q / caches in place. run() is indexer_decode with the plan's workspace
/// (same arguments, checks and results); on cpu it is indexer_decode. One plan per stream:
/// concurrent runs of one plan race on the workspace.
class IndexerDecodePlan {
 public:
  IndexerDecodePlan() = default;
  ~IndexerDecodePlan();
  IndexerDecodePlan(const IndexerDecodePlan&) = delete;
  IndexerDecodePlan& operator=(const IndexerDecodePlan&) = delete;
  /// Validates the capacity and (cuda) allocates the workspace with cudaMalloc on the
  /// current device; call it outside graph capture. Errors: InvalidArgument naming the
  /// field (max_batch, queries_per_request, heads, max_pages_per_request) or the failed
  /// allocation; Unsupported for cuda in a build without CUDA kernels.
  Status plan(const IndexerDecodePlanArgs& args);
  /// Runs one layer. Errors: those of indexer_decode; InvalidArgument when not planned or
  /// when the arguments exceed the capacity (naming 'seq_lens', 'block_table', 'q',
  /// 'queries_per_request') or are on another device than planned.
  Status run(const IndexerDecodeArgs& args) const;
  bool planned() const { return planned_; }
  std::size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  bool planned_ = false;
  IndexerDecodePlanArgs args_;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

/// The selection rule alone (D1, D2), on given scores; used by the indexers and tests.
///   scores      f32 [R, W], W <= 8192 (D10): scores[r, b] for history pages b < local_page[r]
///   local_page  i32 [R]: L per row; L < 0 means an empty row (all -1); L <= W required
///               when L + 1 > K (the history must be present in `scores`)
///   topk        out i32 [R, K], K in 1..16
///   stream      cuda only: the cudaStream_t (nullptr = default stream)
/// Devices as indexer_prefill (first of scores, local_page, topk decides). On cuda the
/// same top-k kernel as the indexers (asynchronous); local_page contents are not read on
/// the host, columns b >= W of a row with L > W rank as NaN. Errors: InvalidArgument
/// naming 'scores', 'local_page' or 'topk' (device, dtype, rank, rows, K range, on cpu
/// history beyond W); Unsupported for cuda tensors in a build without CUDA kernels.
Status topk_select(const TensorView& scores, const TensorView& local_page,
                   const TensorView& topk, void* stream = nullptr);

}  // namespace flashmsa

// Internal (CPU backend): the MSA lightning indexer — page scores and top-k selection.
// Inputs must have been validated by src/ops/indexer.cpp (spec 2.2-2.8, D1, D2, D4, D5).
#pragma once

#include <cstdint>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/tensor.h"

namespace flashmsa::cpu {

/// The query rows of one request: rows [row_begin, row_begin + num_rows) of q sit at
/// positions first_pos + j (D4; first_pos may be negative for decode padding rows, D5).
/// Logical page b of the request is physical page block_table[request, b].
struct IndexerRequest {
  std::int64_t row_begin = 0;
  std::int64_t num_rows = 0;
  std::int64_t first_pos = 0;
};

/// A validated indexer problem (prefill and decode share it).
struct IndexerProblem {
  TensorView q;            ///< bf16 | e4m3 [T, H, 128], innermost stride 1
  IndexKCache index_k;     ///< validated index-K cache
  TensorView block_table;  ///< i32 [B, W], entries used are in range
  std::vector<IndexerRequest> requests;  ///< one per block-table row, rows disjoint
  TensorView topk;         ///< out i32 [T, H, K], K in 1..16, any non-negative strides
  TensorView page_scores;  ///< optional out f32 [T, H, W'], W' >= max L
};

/// Computes page scores and the D1 top-k for every row of every request of `p`.
/// Rows outside every request are left untouched. Multithreaded with
/// detail::parallel_for; bitwise deterministic for any thread count (D9).
void run_indexer(const IndexerProblem& p);

/// The D1/D2 selection rule for one row (the single implementation used everywhere).
///   scores[b * score_stride] for b < L: page scores of the history pages (read only
///   when L + 1 > K); L < 0: empty row; K in 1..16.
/// Writes out[j * out_stride] for j < K:
///   L < 0:       -1 everywhere;
///   L + 1 <= K:  0, 1, ..., L, then -1;
///   otherwise:   the K-1 best b < L by (score desc, id asc), NaN below every other
///                value (-inf included), then L.
void select_topk_row(const float* scores, std::int64_t score_stride, std::int64_t L, int K,
                     std::int32_t* out, std::int64_t out_stride);

/// Page score of one history page for `nv` query vectors (exposed for tests/benchmarks;
/// dispatches at run time to an AVX2 build of the kernel where the CPU has it):
///   kt   float [128 dims][128 tokens]: the page's index keys, transposed;
///   q    float [nv][128] contiguous query vectors;
///   out[v * out_stride] = max over tokens t of sum_d q[v][d] * kt[d][t]  (sequential
///   FP32 sum over d = 0..127, no FMA), NaN dot products ignored (NaN only when all
///   128 are NaN).
void page_max_scores(const float* kt, const float* q, int nv, float* out,
                     std::int64_t out_stride);

/// page_max_scores with the baseline kernel forced (no AVX2 clone). Bitwise equal to
/// page_max_scores; exposed so that tests can check exactly that.
void page_max_scores_baseline(const float* kt, const float* q, int nv, float* out,
                              std::int64_t out_stride);

}  // namespace flashmsa::cpu

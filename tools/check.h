// FlashMSA tools — the CLI's --check: FP64 spot checks of attention and top-k selection.
#pragma once

#include <cstdint>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/tensor.h"
#include "runner.h"

namespace flashmsa::tools {

/// Everything the check needs about one finished case. Row i of the call belongs to
/// request row_request[i] and sits at position row_position[i] (D4).
struct CheckInputs {
  int num_q_heads = 0;
  int num_kv_heads = 0;
  TensorView q;              ///< attention query as the kernel saw it: bf16 | e4m3 [T, Hq, 128]
  float q_scale = 1.0f;      ///< e4m3 dequant scale
  float softmax_scale = 0.0f;
  PagedKvCache kv;
  IndexKCache index_k;
  TensorView index_q;        ///< indexer query as the kernel saw it: bf16 | e4m3 [T, Hkv, 128]
  TensorView block_table;    ///< i32 [B, W]
  std::vector<std::int32_t> seq_lens;     ///< [B]
  std::vector<std::int32_t> row_request;  ///< [T]
  std::vector<std::int32_t> row_position; ///< [T]
  TensorView topk;           ///< i32 [T, Hkv, 16] produced by the indexer
  TensorView out;            ///< bf16 [T, Hq, 128] produced by attention
  TensorView lse;            ///< f32 [T, Hq]
  int check_rows = 8;        ///< rows to sample, spread evenly, first and last included
  int threads = 0;
};

/// The rows a check samples: n rows spread evenly over [0, T), first and last included.
std::vector<std::int64_t> sample_rows(std::int64_t total_rows, int n);

/// Runs the check (spec D8):
///  attention: for each sampled row and every Q head, an FP64 softmax over exactly the
///    keys {t : t // 128 in S, t <= p} of the row's top-k set S (D1 filtering), on the
///    dequantised inputs (q value * q_scale, K * k_scale, V * v_scale; no rounding of P
///    modelled), compared with reference::compare under Tolerance::for_q_dtype:
///    bf16 atol = rtol = 3e-2, cosine >= 0.9999, LSE 1e-3; fp8 / nvfp4 5e-2, 0.999, 3e-3;
///  top-k: for each sampled row and KV head, the exact FP64 page scores (max over the 128
///    tokens of each history page) are recomputed; with L = p // 128 the row must hold
///    0..L (L + 1 <= 16) or 15 distinct history pages then L (D1), every selected page must
///    score >= s15 - tol and every page scoring > s15 + tol must be selected
///    (tol = 2e-4 * max(|s15|, |s16|) + 1e-6), and the history slots must be ordered by
///    score within tol. So the sets are equal wherever s15 - s16 > tol.
CheckResult run_check(const CheckInputs& in);

}  // namespace flashmsa::tools

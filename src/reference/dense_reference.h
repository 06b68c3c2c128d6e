// FP64 dense attention reference (spec 3.1, 3.8, D1, D4-D8) — for tests and the CLI's
// --check. Deliberately naive: one query row at a time, double precision everywhere,
// keys visited in ascending position order. Not part of the installed library.
//
// Typical use (CLI --check of a prefill call):
//
//   std::vector<double> ref_out, ref_lse;
//   reference::ReferenceOptions opt;           // sparse (top-k) semantics, no P rounding
//   FLASHMSA_RETURN_IF_ERROR(reference::reference_prefill(args, opt, &ref_out, &ref_lse));
//   auto got_out = reference::to_double(args.out);
//   auto got_lse = reference::to_double(args.lse);
//   auto cmp = reference::compare(got_out, ref_out, got_lse, ref_lse,
//                                 reference::Tolerance::for_q_dtype(args.q.dtype));
//   if (!cmp.pass) std::cerr << cmp.summary() << "\n";
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashmsa/attention.h"
#include "flashmsa/cache.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa::reference {

/// Dequantized K/V of ONE request of one layer, materialized as FP32.
///   k, v: [num_kv_heads][seq_len][128] row-major, logical token order.
///   Values are what cpu::load_cache_row_f32 returns, i.e. WITHOUT the per-tensor
///   global scale (bf16: the value; fp8: the e4m3 value; nvfp4: E4M3_sat(e2m1 * block
///   scale)); the global scales are kept separately in k_scale / v_scale.
///   Full value of K[g, t, d] = k[(g*seq_len + t)*128 + d] * k_scale (same for V).
struct DenseKv {
  std::int64_t num_kv_heads = 0;
  std::int64_t seq_len = 0;
  std::vector<float> k;
  std::vector<float> v;
  float k_scale = 1.0f;  ///< kv.k.global_scale
  float v_scale = 1.0f;  ///< kv.v.global_scale
  const float* k_row(std::int64_t g, std::int64_t t) const {
    return k.data() + (g * seq_len + t) * 128;
  }
  const float* v_row(std::int64_t g, std::int64_t t) const {
    return v.data() + (g * seq_len + t) * 128;
  }
};

/// Dequantizes tokens [0, seq_len) of request `request` of `cache` through
/// `block_table` (i32 [B, W], logical page -> physical page, any strides) into *out.
/// Validates the cache (any KvFormat), the block table (request < B,
/// ceil(seq_len/128) <= W, used entries in [0, num_pages)) and seq_len in
/// [0, 1048576]. Memory: 2 * Hkv * seq_len * 128 floats.
/// Errors: InvalidArgument naming the argument (op "reference::dequantize_request_kv").
Status dequantize_request_kv(const PagedKvCache& cache, const TensorView& block_table,
                             std::int64_t request, std::int64_t seq_len, DenseKv* out);

/// Which rounding points of the kernels the reference models in the PV product.
/// The normaliser and LSE always use the unrounded probabilities.
enum class ProbRounding {
  none,      ///< exact FP64 softmax (the semantic oracle; compare with D8 tolerances)
  bf16,      ///< PV operand = bf16(exp(z - m)) (BF16 path of D7)
  e4m3_448,  ///< PV operand = E4M3_sat(448 * exp(z - m)), normaliser 448 * sum (spec 3.4)
};

/// FP64 attention of one query row (spec 3.1) for all Hq heads.
///   q           [Hq][128] dequantized query row (bf16 value, or e4m3 value; any q_scale
///               is folded into `c`)
///   num_q_heads Hq, a multiple of kv.num_kv_heads; head h uses KV head h / (Hq/Hkv)
///   position    p (D4); p < 0 gives an empty row
///   pages       nullptr = dense causal (every key t <= p, t < seq_len); otherwise
///               [Hkv][pages_per_head] logical page ids of each KV head: entries < 0,
///               >= ceil(seq_len/128) or > p/128 are ignored, duplicates count once (D1)
///   c           full logit scale: softmax_scale * q_scale * kv.k_scale (D6)
///   v_scale     output scale (kv.v_scale for fp8/nvfp4, 1 for bf16)
///   out         [Hq][128]: sum_t softmax(z)_t * V[t] * v_scale
///   lse         [Hq]: ln sum_t exp(z_t), z_t = c * q . K[t] (natural log)
/// An empty row (p < 0 or no visible key, D5) gives out = 0 and lse = -inf.
void attention_row(const DenseKv& kv, const float* q, std::int64_t num_q_heads,
                   std::int64_t position, const std::int32_t* pages, int pages_per_head,
                   double c, double v_scale, ProbRounding rounding, double* out, double* lse);

/// Options of reference_prefill / reference_decode.
struct ReferenceOptions {
  /// false: restrict keys to the pages of args.topk_indices (sparse semantics, D1);
  /// true: dense causal attention over every key t <= p (ignores the top-k).
  bool dense = false;
  ProbRounding rounding = ProbRounding::none;
  /// Optional subset of query rows to compute (others are left NaN in out / lse);
  /// empty = all rows. Useful to spot-check long workloads.
  std::vector<std::int64_t> rows;
};

/// FP64 reference of sparse_attention_prefill on the same inputs (args.out / args.lse
/// are ignored). Validates args exactly like sparse_attention_prefill.
///   out  resized to T * Hq * 128 (row-major [T, Hq, 128])
///   lse  resized to T * Hq (row-major [T, Hq])
/// c = softmax_scale * q_scale * k_global_scale, v_scale = v_global_scale; q rows are
/// decoded with cpu::load_row_f32 (bf16 or e4m3 value).
Status reference_prefill(const SparseAttentionPrefillArgs& args, const ReferenceOptions& options,
                         std::vector<double>* out, std::vector<double>* lse);

/// FP64 reference of SparseDecodePlan::run for `queries_per_request` (Q) queries per
/// request: row b*Q + j sits at p = seq_lens[b] - Q + j (D4). Validates like
/// sparse_attention_prefill would (shapes, formats, metadata). Outputs as above with
/// T = B * Q.
Status reference_decode(const DecodeRunArgs& args, int queries_per_request,
                        const ReferenceOptions& options, std::vector<double>* out,
                        std::vector<double>* lse);

/// Reads any bf16 / f16 / f32 / e4m3 / i32 view (any strides, rank 1..4) into a
/// row-major vector<double>. An undefined view gives an empty vector.
std::vector<double> to_double(const TensorView& t);

/// D8 tolerance policy.
struct Tolerance {
  double atol = 3e-2;        ///< element-wise |a - b| <= atol + rtol * |b|
  double rtol = 3e-2;
  double min_cosine = 0.9999;  ///< global cosine similarity of the outputs
  double lse_atol = 1e-3;      ///< |lse_a - lse_b| (absolute, natural log)
  static Tolerance bf16() { return Tolerance{3e-2, 3e-2, 0.9999, 1e-3}; }
  static Tolerance fp8() { return Tolerance{5e-2, 5e-2, 0.999, 3e-3}; }
  /// bf16() for a bf16 query, fp8() otherwise (Q8KV8 / Q8KV4).
  static Tolerance for_q_dtype(DType q_dtype) {
    return q_dtype == DType::bf16 ? bf16() : fp8();
  }
};

/// Result of compare().
struct Comparison {
  bool pass = true;
  std::int64_t count = 0;            ///< output elements compared
  std::int64_t num_mismatch = 0;     ///< elements outside atol + rtol*|expected|
  double max_abs_err = 0.0;          ///< over finite pairs
  std::int64_t worst_index = -1;     ///< flat index of the largest violation (or largest
                                     ///< error when none violates); -1 when count == 0
  double cosine = 1.0;               ///< global cosine similarity (1 when both are zero)
  double max_lse_err = 0.0;          ///< over LSE pairs that are both finite
  std::int64_t worst_lse_index = -1;
  std::int64_t nonfinite_mismatch = 0;  ///< positions where NaN / +-Inf differ (out and lse)
  std::string summary() const;       ///< one line, for logs and test failures
};

/// Compares `actual` against `expected` (same length, flat) under `tol` (D8):
/// every element within atol + rtol*|expected|, NaN / Inf at identical positions
/// (same value for infinities), cosine >= min_cosine, and every LSE pair within
/// lse_atol (pairs of equal infinities match). Lengths that differ fail the check.
/// `actual_lse` / `expected_lse` may both be empty.
Comparison compare(const std::vector<double>& actual, const std::vector<double>& expected,
                   const std::vector<double>& actual_lse, const std::vector<double>& expected_lse,
                   const Tolerance& tol);

}  // namespace flashmsa::reference

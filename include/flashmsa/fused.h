// FlashMSA — fused projection-row kernel: Gemma RMSNorm + partial NeoX RoPE on Q, K,
// index q and index k, then K/V and index-K cache inserts and the query outputs
// (spec 1.3, 2.1, 6.2 `fused_minimax_m3_qknorm_rope_kv_insert`; issue 6).
//
// Per token i (position p = positions[i]) the packed projection row
//   qkv[i] = [ q (Hq*128) | k (Hkv*128) | v (Hkv*128) | index_q (Hidx*128) | index_k (128) ]
// is processed per 128-wide head vector x (BF16 -> FP32):
//   norm:  y_d = (x_d * r) * (1 + w_d),  r = 1 / sqrt(ss / 128 + eps),  ss = sum_d x_d^2
//          (Gemma RMSNorm; one weight vector of 128 shared by every head of a branch:
//          q_norm_weight for Q heads, k_norm_weight for K heads, index_q_norm_weight for
//          the Hidx index-q heads, index_k_norm_weight for the single index key)
//   RoPE:  my reading of spec 2.1 item 3: rotary dim 64 of 128, NeoX split-half pairs
//          (j, j+32) for j in [0, 32); c_j = cos_sin_cache[p, j], s_j = cos_sin_cache[p, 32+j]
//          (vLLM layout: 32 cos then 32 sin per position, BF16 values, i.e. the table is
//          BF16-rounded as in HF and vLLM; cos_j = cos(p * inv_freq_j),
//          inv_freq_j = 5e6^(-2j/64) when built from the model's rope_theta):
//            y'_j    = y_j * c_j - y_{j+32} * s_j
//            y'_{j+32} = y_{j+32} * c_j + y_j * s_j
//          dims [64, 128) pass through.
//   Everything stays FP32 between norm and RoPE and is rounded ONCE at the end (vLLM fused
//   kernel behaviour, spec 2.1 precision note).
// Outputs:
//   q_out[i, h]        bf16: RNE(y');  e4m3: E4M3_sat(y' / q_scale) (from FP32, one rounding)
//   index_q_out[i, h]  bf16: RNE(y');  e4m3: E4M3_sat(y') (no scale, spec 2.1 item 4)
//   K cache            kb = RNE_bf16(y') (the normed, rotated K rounded to BF16 once), then
//                      written exactly as cache_insert writes a bf16 K row: bf16 copy,
//                      fp8 E4M3_sat(kb / k.global_scale), nvfp4 block quantisation
//   V cache            the raw V row of qkv (no norm, no RoPE), as cache_insert writes it
//   index-K cache      ib = RNE_bf16(y') of the index key, written as index_cache_insert
//                      does: bf16 copy, fp8 E4M3_sat(ib), nvfp4 block quantisation
//
// Exact FP32 evaluation order (so the CPU and GPU backends agree bit for bit): every
// operation is a single IEEE-754 binary32 operation rounded to nearest even, no fused
// multiply-add; ss is summed as 32 partial sums ps_l = ((x_{4l}^2 + x_{4l+1}^2) +
// x_{4l+2}^2) + x_{4l+3}^2 (l = 0..31, starting from 0) combined by a butterfly
// ps_l += ps_{l+o} for o = 16, 8, 4, 2, 1 (ss = ps_0); sqrt and the division are
// correctly rounded; (1 + w_d) is rounded before the multiply; each RoPE product is
// rounded before the add/subtract.
#pragma once

#include "flashmsa/cache.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa {

/// Rotary dimensions of MiniMax-M3 (partial RoPE, spec 1.1): width of cos_sin_cache rows.
inline constexpr int kRotaryDim = 64;

/// Arguments of fused_qknorm_rope_insert. All tensors on the same device (all cpu or all
/// cuda). Every tensor needs innermost stride 1 and 16-byte alignment (address and outer
/// strides in bytes) unless stated otherwise.
struct FusedQkvInsertArgs {
  /// bf16 [T, (Hq + 2*Hkv + Hidx)*128 + 128], packed row (spec 1.3). Not modified.
  TensorView qkv;
  TensorView q_norm_weight;        ///< bf16 [128], shared by all Q heads
  TensorView k_norm_weight;        ///< bf16 [128], shared by all K heads
  TensorView index_q_norm_weight;  ///< bf16 [128], shared by all index-q heads
  TensorView index_k_norm_weight;  ///< bf16 [128], the single index key
  /// bf16 [max_pos, 64]: row p = 32 cos then 32 sin values for position p.
  TensorView cos_sin_cache;
  /// i32 [T] (int32 rather than vLLM's int64: positions are < 2^20 by D10), any
  /// non-negative stride. CPU: every value must be in [0, max_pos). CUDA: values are not
  /// read on the host; an out-of-range position is not rotated (cos 1, sin 0) and causes
  /// no out-of-bounds read.
  TensorView positions;
  float eps = 1e-6f;               ///< RMSNorm epsilon, finite and >= 0
  int num_q_heads = 64;            ///< Hq (D10: Hq / Hkv in {1, 2, 4, 8, 16})
  int num_kv_heads = 4;            ///< Hkv in 1..8
  int num_index_heads = 4;         ///< Hidx, must equal num_kv_heads (D10)
  /// i32 [T]: K/V cache slot = physical_page * 128 + offset; < 0 skips the token.
  /// CPU: values must be < num_pages*128, duplicate slots: the last token wins.
  /// CUDA: values are not read on the host; a slot >= num_pages*128 is skipped;
  /// duplicate slots: the bytes of that cache row (data and block scales) are
  /// unspecified, possibly a mix of the tokens (as cache_insert, flashmsa/cache.h).
  TensorView slot_mapping;
  PagedKvCache kv;                 ///< K/V cache, any format (nvfp4: linear or head-slot views)
  /// i32 [T]: index-K cache slots, same rules as slot_mapping.
  TensorView index_slot_mapping;
  IndexKCache index_k;             ///< index-K cache, any format
  TensorView q_out;                ///< out bf16 | e4m3 [T, Hq, 128]
  float q_scale = 1.0f;            ///< e4m3 q_out: q8 = E4M3_sat(q / q_scale), finite > 0; bf16: must be 1
  TensorView index_q_out;          ///< out bf16 | e4m3 [T, Hidx, 128] (e4m3: no scale)
  void* stream = nullptr;          ///< cudaStream_t for CUDA tensors (0 = default); ignored on CPU
};

/// Fused QK-norm + RoPE + cache insert of a layer's new tokens (see the header comment
/// for the exact math). T = qkv.shape[0] may be 0 (nothing is written).
/// CPU: parallel over tokens; all checks (including every position and slot value) run
/// before any byte is written. CUDA (SM90, all tensors on cuda): a half-warp per head
/// vector (lane = 8 dims, 16-byte loads), 8 vectors per warp, every cache format
/// (bf16, fp8, nvfp4 linear / swizzled) with the cache bytes of the CPU backend;
/// asynchronous on `stream`, no allocation, graph-capturable.
/// Errors: InvalidArgument naming the argument ('qkv', 'q_norm_weight', 'cos_sin_cache',
/// 'positions[i]', 'eps', 'num_index_heads', 'slot_mapping[i]', 'kv.k.data',
/// 'index_k.data', 'q_out', 'q_scale', 'index_q_out', ...), including a tensor whose
/// device differs from qkv's; Unsupported for CUDA tensors in a build without CUDA kernels.
Status fused_qknorm_rope_insert(const FusedQkvInsertArgs& args);

}  // namespace flashmsa

// Internal: SM90 fused QK-norm + partial RoPE + K/V / index-K cache insert
// (flashmsa/fused.h has the semantics). Host-side interface, includable from plain C++.
//
// Design: an 8-lane group processes one 128-wide head vector, lane j owning dims
// [a, a+8) and [a+32, a+40) with a = 8j (j < 4) or 8j + 32 (j >= 4), so that lanes 0..3
// hold both halves of every rotary pair (RoPE without shuffles) and each lane moves two
// 16-byte words. A warp's work unit is 4 consecutive tokens (one per group) and a chunk
// of their head vectors (chunk c of C: vectors c, c + C, ..., so the costlier K / V /
// index-K vectors spread over the chunks), walked in the same order by the 4 groups, so
// the Q / K / V / index paths never diverge inside a warp; the next vector's loads are issued before the
// current one is processed. Per token the vectors are Hq Q heads, Hkv K heads, Hkv V
// heads, Hidx index-q heads and the index key. The chunk count per token is chosen on the
// host from the resident-warp count (waves x unit length, see choose_chunks). The sum of
// squares is four 4-element partial sums per lane combined by lane-xor 4, in-lane, xor 2,
// xor 1 and in-lane adds, which is exactly the 32-partial-sum butterfly of
// flashmsa/fused.h. Every FP32 operation uses explicitly rounded intrinsics (__fmul_rn,
// __fadd_rn, __fdiv_rn, __fsqrt_rn), so no FMA contraction happens and the results equal
// the CPU backend's bit for bit. Division-free quantisation: every x / scale (FP8 E4M3,
// the NVFP4 block scale and codes) is the correctly rounded FMA quotient quotient_rn of
// quant_device.cuh (equal to IEEE division), using the host's RN(1 / scale). The kernel is
// compiled per K/V cache format (bf16, fp8 E4M3, nvfp4 linear or swizzled scale planes);
// the index-K cache format is a runtime switch. Vectors are processed by a loop that is
// not unrolled (one copy of the per-vector code).
#pragma once

#include <cstdint>

#include "cuda/sm90/cache_kernels.h"

namespace flashmsa::cuda {

struct FusedQkvParams {
  const std::uint16_t* qkv = nullptr;  // bf16 [T, row]
  std::int64_t qkv_row_stride = 0;
  const std::uint16_t* q_w = nullptr;   // bf16 [128] each
  const std::uint16_t* k_w = nullptr;
  const std::uint16_t* iq_w = nullptr;
  const std::uint16_t* ik_w = nullptr;
  const std::uint16_t* cos_sin = nullptr;  // bf16 [max_pos, 64]
  std::int64_t cos_sin_row_stride = 0;
  std::int64_t max_pos = 0;
  const std::int32_t* positions = nullptr;
  std::int64_t positions_stride = 1;
  const std::int32_t* slots = nullptr;
  std::int64_t slots_stride = 1;
  const std::int32_t* index_slots = nullptr;
  std::int64_t index_slots_stride = 1;
  int num_tokens = 0;
  int nq = 0, nkv = 0, nidx = 0;
  float eps = 1e-6f;
  // K/V cache: kv_format 0 = bf16, 1 = fp8, 2 = nvfp4 (flashmsa::KvFormat values);
  // byte strides, global_scale = k_scale / v_scale.
  int kv_format = 0;
  CacheSideParams k, v;
  std::int64_t kv_num_pages = 0;
  // Index-K cache (same format codes; fp8 has no scale: global_scale 1; head stride 0).
  int index_format = 0;
  CacheSideParams ik;
  std::int64_t index_num_pages = 0;
  // Query outputs (element strides).
  void* q_out = nullptr;
  bool q_e4m3 = false;
  std::int64_t q_stride[2] = {0, 0};  // token, head
  float q_scale = 1.0f;
  // RN(1 / scale) of q_scale, k/v/ik global_scale: set by launch_fused_qknorm_rope_insert
  // (host IEEE division), so that the kernel divides without computing reciprocals.
  float q_rcp = 1.0f, k_rcp = 1.0f, v_rcp = 1.0f, ik_rcp = 1.0f;
  void* iq_out = nullptr;
  bool iq_e4m3 = false;
  std::int64_t iq_stride[2] = {0, 0};
};

/// Launches the fused kernel on `stream` (a cudaStream_t). Returns a cudaError_t value
/// (0 = success); error_string() of decode_attention.h describes it.
int launch_fused_qknorm_rope_insert(const FusedQkvParams& p, void* stream);

}  // namespace flashmsa::cuda

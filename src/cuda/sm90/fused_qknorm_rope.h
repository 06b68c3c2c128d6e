// Internal: SM90 fused QK-norm + partial RoPE + K/V / index-K cache insert
// (flashmsa/fused.h has the semantics). Host-side interface, includable from plain C++.
//
// Design: a 16-lane half-warp processes one 128-wide head vector, lane j owning dims
// [8j, 8j+8) (one 16-byte load and one 16/8/4-byte store); a warp owns 8 consecutive head
// vectors of the flat (token, vector) space, 4 per half, whose qkv loads are all issued
// before any math (64 bytes per lane in flight). Per token the vectors are Hq Q heads,
// Hkv K heads, Hkv V heads, Hidx index-q heads and the index key. The sum of squares is
// two 4-element partial sums per lane combined by a xor butterfly (8, 4, 2, 1) and a final
// add, which is exactly the 32-partial-sum order of flashmsa/fused.h; the RoPE partner of
// lane j < 4 is lane j + 4. Every FP32 operation uses explicitly rounded intrinsics
// (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn), so no FMA contraction happens and the
// results equal the CPU backend's bit for bit. Division-free quantisation: every
// x / scale (FP8 E4M3, the NVFP4 block scale and codes) is the correctly rounded FMA
// quotient quotient_rn of quant_device.cuh (equal to IEEE division), using the host's
// RN(1 / scale) from the launcher. The 4 vectors of a half are processed by a loop that
// is not unrolled (one copy of the code, about 3k SASS instructions instead of 14k).
// Caches: bf16, fp8 (E4M3) and nvfp4 (linear or swizzled scale planes, the quantisation
// of quant_device.cuh shared with cache_insert) for K/V and the index-K cache.
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

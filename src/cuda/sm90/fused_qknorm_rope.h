// Internal: SM90 fused QK-norm + partial RoPE + K/V / index-K cache insert
// (flashmsa/fused.h has the semantics). Host-side interface, includable from plain C++.
//
// Design: a warp processes 4 consecutive head vectors (their loads issued
// together for more bytes in flight); per token the vectors are Hq Q heads,
// Hkv K heads, Hkv V heads, Hidx index-q heads and the index key. Lane l owns dims
// [4l, 4l+4) (one 8-byte load); the sum of squares is a xor butterfly (16, 8, 4, 2, 1),
// the RoPE partner of lane l < 8 is lane l + 8 (and vice versa). Every FP32 operation
// uses the explicitly rounded intrinsics (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn),
// so no FMA contraction happens and the results equal the CPU backend's bit for bit.
// Caches: bf16 and fp8 (E4M3) K/V and index-K are written directly. NVFP4 caches are
// NOT supported on the GPU yet (the entry point returns Unsupported before launching).
#pragma once

#include <cstdint>

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
  // K/V cache: kv_format 0 = bf16, 1 = fp8 (flashmsa::KvFormat values).
  int kv_format = 0;
  void* k_data = nullptr;
  void* v_data = nullptr;
  std::int64_t k_stride[3] = {0, 0, 0};  // page, head, token (elements)
  std::int64_t v_stride[3] = {0, 0, 0};
  std::int64_t kv_num_pages = 0;
  float k_global_scale = 1.0f, v_global_scale = 1.0f;
  // Index-K cache: format 0 = bf16, 1 = fp8 (no scale).
  int index_format = 0;
  void* ik_data = nullptr;
  std::int64_t ik_stride[2] = {0, 0};  // page, token (elements)
  std::int64_t index_num_pages = 0;
  // Query outputs.
  void* q_out = nullptr;
  bool q_e4m3 = false;
  std::int64_t q_stride[2] = {0, 0};  // token, head
  float q_scale = 1.0f;
  void* iq_out = nullptr;
  bool iq_e4m3 = false;
  std::int64_t iq_stride[2] = {0, 0};
};

/// Launches the fused kernel on `stream` (a cudaStream_t). Returns a cudaError_t value
/// (0 = success); error_string() of decode_attention.h describes it.
int launch_fused_qknorm_rope_insert(const FusedQkvParams& p, void* stream);

}  // namespace flashmsa::cuda

// SM90 fused QK-norm + partial RoPE + cache insert (design in fused_qknorm_rope.h,
// semantics in flashmsa/fused.h).
#include "cuda/sm90/fused_qknorm_rope.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

namespace flashmsa::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kVecPerWarp = 4;  // head vectors per warp (loads issued together)
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float bf16_bits_to_float(unsigned bits) {
  return __uint_as_float((bits & 0xffffu) << 16);
}
__device__ __forceinline__ unsigned float_to_bf16_bits(float x) {
  return static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(x)));
}
__device__ __forceinline__ unsigned float_to_e4m3(float x) {
  return static_cast<unsigned>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// 4 consecutive bf16 (8 bytes, 8-byte aligned) -> 4 floats.
__device__ __forceinline__ void load4(const std::uint16_t* src, float (&x)[4]) {
  const uint2 v = *reinterpret_cast<const uint2*>(src);
  x[0] = bf16_bits_to_float(v.x);
  x[1] = bf16_bits_to_float(v.x >> 16);
  x[2] = bf16_bits_to_float(v.y);
  x[3] = bf16_bits_to_float(v.y >> 16);
}
__device__ __forceinline__ void store_bf16x4(void* dst, const unsigned (&b)[4]) {
  uint2 v;
  v.x = b[0] | (b[1] << 16);
  v.y = b[2] | (b[3] << 16);
  *reinterpret_cast<uint2*>(dst) = v;
}
__device__ __forceinline__ void store_e4m3x4(void* dst, const float (&y)[4], float divisor,
                                             bool divide) {
  unsigned w = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float v = divide ? __fdiv_rn(y[i], divisor) : y[i];
    w |= float_to_e4m3(v) << (8 * i);
  }
  *reinterpret_cast<unsigned*>(dst) = w;
}

// bf16 bits (4) -> cache row chunk: bf16 copy or E4M3_sat(x / scale).
__device__ __forceinline__ void store_cache4(void* dst, const unsigned (&b)[4], int format,
                                             float scale) {
  if (format == 0) {
    store_bf16x4(dst, b);
  } else {
    float f[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = bf16_bits_to_float(b[i]);
    store_e4m3x4(dst, f, scale, true);
  }
}

// One head vector (global index g = token * per_token + vec) whose 4 bf16 values of this
// lane were already loaded into `raw`. Warp-uniform control flow (shuffles inside).
__device__ __forceinline__ void process_vector(const FusedQkvParams& p, unsigned g,
                                               unsigned per_token, int lane, uint2 raw) {
  const unsigned tok32 = g / per_token;
  const long long tok = tok32;
  const int vec = static_cast<int>(g - tok32 * per_token);
  const int k_begin = p.nq, v_begin = p.nq + p.nkv, iq_begin = p.nq + 2 * p.nkv;
  const int ik_vec = iq_begin + p.nidx;

  if (vec >= v_begin && vec < iq_begin) {  // V: raw insert
    const long long s = p.slots[tok * p.slots_stride];
    if (s < 0 || s >= p.kv_num_pages * 128) return;
    const long long page = s >> 7, t = s & 127, h = vec - v_begin;
    const std::size_t es = p.kv_format == 0 ? 2 : 1;
    char* dst = static_cast<char*>(p.v_data) +
                (page * p.v_stride[0] + h * p.v_stride[1] + t * p.v_stride[2] + 4 * lane) * es;
    const unsigned b[4] = {raw.x & 0xffffu, raw.x >> 16, raw.y & 0xffffu, raw.y >> 16};
    store_cache4(dst, b, p.kv_format, p.v_global_scale);
    return;
  }
  float x[4];
  x[0] = bf16_bits_to_float(raw.x);
  x[1] = bf16_bits_to_float(raw.x >> 16);
  x[2] = bf16_bits_to_float(raw.y);
  x[3] = bf16_bits_to_float(raw.y >> 16);

  const std::uint16_t* w = vec < k_begin ? p.q_w
                           : vec < v_begin ? p.k_w
                           : vec < ik_vec  ? p.iq_w
                                           : p.ik_w;
  float wf[4];
  load4(w + 4 * lane, wf);

  // Gemma RMSNorm, FP32, fixed order (see flashmsa/fused.h).
  float ps = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) ps = __fadd_rn(ps, __fmul_rn(x[i], x[i]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ps = __fadd_rn(ps, __shfl_xor_sync(kFull, ps, o));
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ps, 128.0f), p.eps)));
  float y[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) y[i] = __fmul_rn(__fmul_rn(x[i], r), __fadd_rn(1.0f, wf[i]));

  // Partial NeoX RoPE: lanes 0..7 hold dims [0, 32), lanes 8..15 dims [32, 64).
  float partner[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) partner[i] = __shfl_xor_sync(kFull, y[i], 8);
  const long long pos = p.positions[tok * p.positions_stride];
  if (lane < 16 && pos >= 0 && pos < p.max_pos) {
    const std::uint16_t* cs = p.cos_sin + pos * p.cos_sin_row_stride + 4 * (lane & 7);
    float c[4], s[4];
    load4(cs, c);
    load4(cs + 32, s);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float a = __fmul_rn(y[i], c[i]);
      const float b = __fmul_rn(partner[i], s[i]);
      y[i] = lane < 8 ? __fsub_rn(a, b) : __fadd_rn(a, b);
    }
  }

  if (vec < k_begin) {  // Q
    char* dst = static_cast<char*>(p.q_out) +
                (tok * p.q_stride[0] + static_cast<long long>(vec) * p.q_stride[1] + 4 * lane) *
                    (p.q_e4m3 ? 1 : 2);
    if (p.q_e4m3) {
      store_e4m3x4(dst, y, p.q_scale, true);
    } else {
      unsigned b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) b[i] = float_to_bf16_bits(y[i]);
      store_bf16x4(dst, b);
    }
    return;
  }
  if (vec >= iq_begin && vec < ik_vec) {  // index q
    const long long h = vec - iq_begin;
    char* dst = static_cast<char*>(p.iq_out) +
                (tok * p.iq_stride[0] + h * p.iq_stride[1] + 4 * lane) * (p.iq_e4m3 ? 1 : 2);
    if (p.iq_e4m3) {
      store_e4m3x4(dst, y, 1.0f, false);
    } else {
      unsigned b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) b[i] = float_to_bf16_bits(y[i]);
      store_bf16x4(dst, b);
    }
    return;
  }
  // K or index key: round to BF16 once, then the cache format.
  unsigned kb[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) kb[i] = float_to_bf16_bits(y[i]);
  if (vec < v_begin) {  // K
    const long long s = p.slots[tok * p.slots_stride];
    if (s < 0 || s >= p.kv_num_pages * 128) return;
    const long long page = s >> 7, t = s & 127, h = vec - k_begin;
    const std::size_t es = p.kv_format == 0 ? 2 : 1;
    char* dst = static_cast<char*>(p.k_data) +
                (page * p.k_stride[0] + h * p.k_stride[1] + t * p.k_stride[2] + 4 * lane) * es;
    store_cache4(dst, kb, p.kv_format, p.k_global_scale);
    return;
  }
  // index key
  const long long s = p.index_slots[tok * p.index_slots_stride];
  if (s < 0 || s >= p.index_num_pages * 128) return;
  const long long page = s >> 7, t = s & 127;
  const std::size_t es = p.index_format == 0 ? 2 : 1;
  char* dst = static_cast<char*>(p.ik_data) +
              (page * p.ik_stride[0] + t * p.ik_stride[1] + 4 * lane) * es;
  store_cache4(dst, kb, p.index_format, 1.0f);
}

// Each warp handles kVecPerWarp consecutive head vectors; their qkv loads are issued
// first so that more bytes are in flight per warp (the math per vector is unchanged).
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    fused_qknorm_rope_kernel(const FusedQkvParams p, unsigned total_vectors) {
  const int lane = threadIdx.x & 31;
  // The launcher guarantees total_vectors + kVecPerWarp * kWarpsPerBlock < 2^32.
  const unsigned warp = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const unsigned per_token = static_cast<unsigned>(p.nq + 2 * p.nkv + p.nidx + 1);
  const unsigned g0 = warp * kVecPerWarp;
  uint2 raw[kVecPerWarp];
#pragma unroll
  for (int k = 0; k < kVecPerWarp; ++k) {
    const unsigned g = g0 + k;
    if (g < total_vectors) {
      const unsigned tok = g / per_token, vec = g - tok * per_token;
      raw[k] = *reinterpret_cast<const uint2*>(p.qkv + static_cast<long long>(tok) * p.qkv_row_stride +
                                               static_cast<long long>(vec) * 128 + 4 * lane);
    }
  }
#pragma unroll
  for (int k = 0; k < kVecPerWarp; ++k)
    if (g0 + k < total_vectors) process_vector(p, g0 + k, per_token, lane, raw[k]);  // warp-uniform
}

}  // namespace

int launch_fused_qknorm_rope_insert(const FusedQkvParams& p, void* stream) {
  if (p.num_tokens <= 0) return 0;
  const long long per_token = p.nq + 2 * p.nkv + p.nidx + 1;
  const long long vectors = static_cast<long long>(p.num_tokens) * per_token;
  const long long per_block = static_cast<long long>(kWarpsPerBlock) * kVecPerWarp;
  const long long blocks = (vectors + per_block - 1) / per_block;
  if (blocks * per_block > 0xffffffffLL) return static_cast<int>(cudaErrorInvalidConfiguration);
  fused_qknorm_rope_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0,
                             static_cast<cudaStream_t>(stream)>>>(p, static_cast<unsigned>(vectors));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace flashmsa::cuda

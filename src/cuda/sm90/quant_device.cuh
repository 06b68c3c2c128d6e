// Internal, device-only: the FP8 E4M3 / NVFP4 conversions shared by the SM90 cache
// kernels (cache_kernels.cu) and the fused QK-norm + RoPE + insert kernel
// (fused_qknorm_rope.cu). Include from .cu files only.
//
// Bit-exactness with src/common/numerics.cpp: every FP32 operation the CPU performs is
// done here with the same IEEE round-to-nearest operation in the same order
// (__fmul_rn / __fdiv_rn, so no FMA contraction or fast division can change a bit; the
// divisions are the correctly rounded FMA quotient quotient_rn, equal to __fdiv_rn), and
// the narrow conversions are written out in integer arithmetic exactly as the CPU
// defines them, except e4m3_sat_nonneg (hardware saturating cvt, only for non-negative
// non-NaN inputs, where it equals the integer conversion).
#pragma once

// tests/test_quant_device_host.cpp compiles this header on the host (IEEE host operations
// standing in for the __*_rn intrinsics) to check it against src/common/numerics.cpp.
#ifndef FLASHMSA_QUANT_DEVICE_HOST_TEST
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#endif

namespace flashmsa::cuda::quant {

// float -> E4M3, saturating RNE, NaN -> 0x7F, sign always kept (float_to_e4m3_sat).
__device__ __forceinline__ unsigned f32_to_e4m3_sat(float x) {
  const unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fu;  // NaN
  const unsigned sign = (u >> 24) & 0x80u;
  const unsigned a = u & 0x7fffffffu;
  const float af = __uint_as_float(a);
  if (af >= 448.0f) return sign | 0x7eu;  // saturate (also +-inf)
  if (af < 0.015625f) {                    // subnormal grid 2^-9: exact scaling, RNE
    const float m = rintf(__fmul_rn(af, 512.0f));
    return sign | static_cast<unsigned>(m);  // m == 8 encodes 2^-6
  }
  int e = static_cast<int>(a >> 23) - 127;  // af >= 2^-6: a normal float
  const unsigned mant = a & 0x7fffffu;
  unsigned m3 = mant >> 20;
  const unsigned rem = mant & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (m3 & 1u))) ++m3;  // RNE on 3 mantissa bits
  if (m3 == 8u) {
    m3 = 0u;
    ++e;
  }
  return sign | (static_cast<unsigned>(e + 7) << 3) | m3;
}

// E4M3 bits -> float, exact (e4m3_to_float).
__device__ __forceinline__ float e4m3_to_f32(unsigned b) {
  const unsigned e = (b >> 3) & 0xfu, m = b & 7u;
  float v;
  if (e == 0xfu && m == 7u) v = __uint_as_float(0x7fc00000u);
  else if (e == 0u) v = __fmul_rn(static_cast<float>(m), 0.001953125f);  // m * 2^-9
  else v = __uint_as_float(((e + 120u) << 23) | (m << 20));
  return (b & 0x80u) ? -v : v;
}

// E2M1 code -> float (e2m1_to_float): 0, .5, 1, 1.5, 2, 3, 4, 6 and negatives.
__device__ __forceinline__ float e2m1_to_f32(unsigned code) {
  const unsigned e = (code >> 1) & 3u, m = code & 1u;
  const float mag = e == 0u ? (m ? 0.5f : 0.0f)
                            : __uint_as_float(((e + 126u) << 23) | (m << 22));
  return (code & 8u) ? -mag : mag;
}

// E4M3_sat of a non-negative, non-NaN float (+inf allowed): on the device the hardware
// conversion (saturating RNE, which equals f32_to_e4m3_sat on these inputs), in the host
// test the integer one.
__device__ __forceinline__ unsigned e4m3_sat_nonneg(float x) {
#ifdef FLASHMSA_QUANT_DEVICE_HOST_TEST
  return f32_to_e4m3_sat(x);
#else
  return static_cast<unsigned>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
#endif
}

// float_to_e2m1 of a value already clamped to [-6, 6] (not NaN), without the comparison
// chain: |v| < 1 rounds 2|v| to an integer (0, 1, 2) by adding 2^23 (RNE), |v| >= 1 rounds
// the float to one mantissa bit (RNE on the bit pattern) and reads the code from its
// exponent and that bit; no negative zero. Equal to float_to_e2m1 on [-6, 6] (the host
// test checks it on every float of that range's thresholds and a dense sweep).
__device__ __forceinline__ unsigned e2m1_of_clamped(float v) {
  const float a = fabsf(v);
  const unsigned u = __float_as_uint(a);
  const unsigned small = __float_as_uint(__fmaf_rn(a, 2.0f, 8388608.0f)) - 0x4b000000u;
  const unsigned big = ((u + 0x1fffffu + ((u >> 22) & 1u)) >> 22) - 252u;
  const unsigned c = a < 1.0f ? small : big;
  return (c != 0u && (__float_as_uint(v) >> 31) != 0u) ? (c | 8u) : c;
}

__device__ __forceinline__ float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// 8 bf16 (one 16-byte word) -> 8 floats, element 0 from the low half of in.x.
__device__ __forceinline__ void unpack8(const uint4& in, float (&x)[8]) {
  const unsigned w[4] = {in.x, in.y, in.z, in.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = bf16_lo(w[i]);
    x[2 * i + 1] = bf16_hi(w[i]);
  }
}

// RN(x / d) without a division, for a positive normal d in [2^-32, 2^32] and its
// correctly rounded reciprocal y = RN(1 / d) (Markstein's theorem: q0 = RN(x * y) is
// within one ulp of x / d, the residual r = x - d * q0 is exact in one FMA, and
// RN(q0 + r * y) is the correctly rounded quotient). The range guard keeps every
// intermediate normal: outside 2^-40 <= |q0| < 2^40 q0 itself is returned, which has the
// sign of x / d and is, like RN(x / d), below every E4M3 / E2M1 rounding threshold
// (both become a zero of that sign) or above the saturation bound (both saturate or clamp
// to the same code; NaN stays NaN). So every narrow conversion of the result equals the
// conversion of RN(x / d). Checked against IEEE division on the CPU for every BF16 x and
// 10^8 random / near-midpoint FP32 x over the E4M3 values, 6 and scale-like divisors.
__device__ __forceinline__ float quotient_rn(float x, float d, float y) {
  const float q0 = __fmul_rn(x, y);
  const float r = __fmaf_rn(-q0, d, x);
  const float q1 = __fmaf_rn(r, y, q0);
  const unsigned a = __float_as_uint(q0) & 0x7fffffffu;
  return a - 0x2b800000u < 0x53800000u - 0x2b800000u ? q1 : q0;  // 2^-40 <= |q0| < 2^40
}

// quotient_rn for a quotient that only feeds the NVFP4 code (clamp to [-6, 6], then
// E2M1): only the upper range guard is kept (one compare instead of two). Below 2^-40
// the corrected q1 may miss RN(x / d), but both are far below the first E2M1 threshold
// (0.25) and give code 0, which has no sign; |q0| >= 2^40, inf and NaN return q0 as
// quotient_rn does.
__device__ __forceinline__ float quotient_rn_e2m1(float x, float d, float y) {
  const float q0 = __fmul_rn(x, y);
  const float r = __fmaf_rn(-q0, d, x);
  const float q1 = __fmaf_rn(r, y, q0);
  return fabsf(q0) < 1099511627776.0f ? q1 : q0;  // 2^40
}

// The exact IEEE division, out of line: only for divisors outside quotient_rn's range
// (never on the model's scales), so its code stays out of the hot loops.
static __device__ __noinline__ float div_rn_out_of_line(float x, float d) { return __fdiv_rn(x, d); }

// Precomputed divisor: d and its correctly rounded reciprocal.
struct Divisor {
  float d;
  float rcp;   // RN(1 / d)
  bool fast;   // d is in [2^-32, 2^32]: quotient_rn applies
};

// rcp must be RN(1 / d) (host 1.0f / d, or __frcp_rn).
__device__ __forceinline__ Divisor make_divisor(float d, float rcp) {
  Divisor v;
  v.d = d;
  v.rcp = rcp;
  v.fast = d >= 2.3283064365386963e-10f && d <= 4294967296.0f;  // 2^-32 .. 2^32
  return v;
}
__device__ __forceinline__ Divisor make_divisor(float d) { return make_divisor(d, __frcp_rn(d)); }

// 8 correctly rounded quotients x[i] / d (see quotient_rn); the branch is uniform.
__device__ __forceinline__ void e4m3_safe_quotient8(const float (&x)[8], const Divisor& v,
                                                    float (&q)[8]) {
  if (v.fast) {
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = quotient_rn(x[i], v.d, v.rcp);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = div_rn_out_of_line(x[i], v.d);
  }
}

// 8 floats / d -> 8 E4M3 bytes (little endian: element 0 in the low byte).
__device__ __forceinline__ uint2 e4m3x8_div(const float (&x)[8], const Divisor& d) {
  float q[8];
  e4m3_safe_quotient8(x, d, q);
  unsigned lo = 0u, hi = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo |= f32_to_e4m3_sat(q[i]) << (8 * i);
    hi |= f32_to_e4m3_sat(q[i + 4]) << (8 * i);
  }
  return make_uint2(lo, hi);
}

// nvfp4_quantize_block16 for one half block: the 16-dim block is held by two adjacent
// lanes (lane ^ 1) of the 16-lane group `half_mask`, 8 values each. Returns the block's
// E4M3 scale bits (both lanes) and this lane's 4 bytes of packed E2M1 codes (element 0 in
// the low nibble of the low byte). gs = RN(1 / global_scale).
__device__ __forceinline__ unsigned nvfp4_quantize_half_block(const float (&x)[8], float gs,
                                                              unsigned half_mask,
                                                              unsigned* packed_out) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float a = fabsf(x[i]);
    if (a > amax) amax = a;  // NaN never wins a '>' comparison
  }
  const float other = __shfl_xor_sync(half_mask, amax, 1);
  if (other > amax) amax = other;
  // RN(1/6) is a compile-time constant; 6 and sf lie in quotient_rn's divisor range.
  const unsigned sbits = e4m3_sat_nonneg(quotient_rn(__fmul_rn(gs, amax), 6.0f, 1.0f / 6.0f));
  const float sf = e4m3_to_f32(sbits);
  // Branch-free (the halves of a lane interleave): with sf == 0 the reciprocal is +inf and
  // the codes computed below are discarded (all-zero block).
  const float ry = __frcp_rn(sf);
  unsigned packed = 0u;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float a = fminf(fmaxf(quotient_rn_e2m1(__fmul_rn(x[2 * k], gs), sf, ry), -6.0f), 6.0f);
    const float b = fminf(fmaxf(quotient_rn_e2m1(__fmul_rn(x[2 * k + 1], gs), sf, ry), -6.0f), 6.0f);
    packed |= (e2m1_of_clamped(a) | (e2m1_of_clamped(b) << 4)) << (8 * k);
  }
  if (!(sf > 0.0f)) packed = 0u;
  *packed_out = packed;
  return sbits;
}

// Byte offset of scale (tok, g) in a 128 x 8 scale plane: the 4x4 swizzle of
// nvfp4_scale_offset, or the linear plane's strides (bytes).
__device__ __forceinline__ long long nvfp4_scale_offset(int tok, int g, bool swizzled,
                                                        long long tok_stride, long long g_stride) {
  return swizzled ? static_cast<long long>(32 * (tok >> 2) + 4 * g + (tok & 3))
                  : tok * tok_stride + g * g_stride;
}

// 4 packed bytes of E2M1 codes (8 values) x one E4M3 scale -> 8 E4M3 bytes
// (nvfp4_to_e4m3: the product is exact in FP32, rounded once).
__device__ __forceinline__ uint2 nvfp4x8_to_e4m3(unsigned codes, unsigned scale_bits) {
  const float sf = e4m3_to_f32(scale_bits);
  unsigned lo = 0u, hi = 0u;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned b = (codes >> (8 * k)) & 0xffu;
    const unsigned c0 = f32_to_e4m3_sat(__fmul_rn(e2m1_to_f32(b & 0xfu), sf));
    const unsigned c1 = f32_to_e4m3_sat(__fmul_rn(e2m1_to_f32(b >> 4), sf));
    const unsigned pair = c0 | (c1 << 8);
    if (k < 2) lo |= pair << (16 * k);
    else hi |= pair << (16 * (k - 2));
  }
  return make_uint2(lo, hi);
}

}  // namespace flashmsa::cuda::quant

// SM90 kernels of the cache write path (see cache_kernels.h for the design).
//
// Bit-exactness with src/common/numerics.cpp: every FP32 operation the CPU performs is
// done here with the same IEEE round-to-nearest operation in the same order
// (__fmul_rn / __fdiv_rn, so no FMA contraction or fast division can change a bit), and
// the narrow conversions are written out in integer arithmetic exactly as the CPU
// defines them (no reliance on the hardware cvt's NaN / signed-zero behaviour).
#include "cuda/sm90/cache_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace flashmsa::cuda {
namespace {

constexpr int kThreads = 256;  // 16 rows of 16 threads per block
enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };

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

// float -> E2M1 code with the exact comparisons of float_to_e2m1 (no negative zero).
__device__ __forceinline__ unsigned f32_to_e2m1(float x) {
  if (isnan(x)) return 0u;
  const float a = fabsf(x);
  unsigned c;
  if (a <= 0.25f) c = 0u;
  else if (a < 0.75f) c = 1u;
  else if (a <= 1.25f) c = 2u;
  else if (a < 1.75f) c = 3u;
  else if (a <= 2.5f) c = 4u;
  else if (a < 3.5f) c = 5u;
  else if (a <= 5.0f) c = 6u;
  else c = 7u;
  if (c == 0u) return 0u;
  return (__float_as_uint(x) >> 31) ? (c | 8u) : c;
}

__device__ __forceinline__ float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ void unpack8(const uint4& in, float (&x)[8]) {
  const unsigned w[4] = {in.x, in.y, in.z, in.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = bf16_lo(w[i]);
    x[2 * i + 1] = bf16_hi(w[i]);
  }
}

// 8 floats / d -> 8 E4M3 bytes (little endian: element 0 in the low byte).
__device__ __forceinline__ uint2 e4m3x8_div(const float (&x)[8], float d) {
  unsigned lo = 0u, hi = 0u;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    lo |= f32_to_e4m3_sat(__fdiv_rn(x[i], d)) << (8 * i);
    hi |= f32_to_e4m3_sat(__fdiv_rn(x[i + 4], d)) << (8 * i);
  }
  return make_uint2(lo, hi);
}

template <int FMT>
__global__ void __launch_bounds__(kThreads) cache_insert_kernel(const CacheInsertParams p) {
  const long long gid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long row = gid >> 4;
  const int j = static_cast<int>(gid & 15);
  const long long per_token = static_cast<long long>(p.num_sides) * p.num_heads;
  if (row >= p.num_tokens * per_token) return;  // whole 16-lane groups leave together
  const long long t = row / per_token;
  const int r2 = static_cast<int>(row - t * per_token);
  const int side = r2 / p.num_heads;
  const int h = r2 - side * p.num_heads;
  const long long slot = p.slots[t * p.slot_stride];
  if (slot < 0 || slot >= p.num_slots) return;  // skipped / out of range: never written
  const long long page = slot >> 7;
  const int tok = static_cast<int>(slot & 127);

  const std::uint16_t* src = (side ? p.src[1] : p.src[0]) +
                             t * (side ? p.src_stride[1][0] : p.src_stride[0][0]) +
                             h * (side ? p.src_stride[1][1] : p.src_stride[0][1]) + 8 * j;
  const uint4 in = __ldg(reinterpret_cast<const uint4*>(src));
  const CacheSideParams& s = side ? p.side[1] : p.side[0];
  unsigned char* dst = s.data + page * s.data_stride[0] + h * s.data_stride[1] +
                       tok * s.data_stride[2];

  if constexpr (FMT == kBf16) {
    *reinterpret_cast<uint4*>(dst + 16 * j) = in;
  } else if constexpr (FMT == kFp8) {
    float x[8];
    unpack8(in, x);
    *reinterpret_cast<uint2*>(dst + 8 * j) = e4m3x8_div(x, s.global_scale);
  } else {
    // nvfp4_quantize_block16: the 16-dim block g = j / 2 is held by lanes (2g, 2g+1).
    float x[8];
    unpack8(in, x);
    const float gs = __fdiv_rn(1.0f, s.global_scale);
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float a = fabsf(x[i]);
      if (a > amax) amax = a;  // NaN never wins a '>' comparison
    }
    const unsigned lane = threadIdx.x & 31u;
    const unsigned mask = lane < 16u ? 0x0000ffffu : 0xffff0000u;
    const float other = __shfl_xor_sync(mask, amax, 1);
    if (other > amax) amax = other;
    const unsigned sbits = f32_to_e4m3_sat(__fdiv_rn(__fmul_rn(gs, amax), 6.0f));
    const float sf = e4m3_to_f32(sbits);
    unsigned packed = 0u;
    if (sf > 0.0f) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float a = fminf(fmaxf(__fdiv_rn(__fmul_rn(x[2 * k], gs), sf), -6.0f), 6.0f);
        const float b = fminf(fmaxf(__fdiv_rn(__fmul_rn(x[2 * k + 1], gs), sf), -6.0f), 6.0f);
        packed |= (f32_to_e2m1(a) | (f32_to_e2m1(b) << 4)) << (8 * k);
      }
    }
    *reinterpret_cast<unsigned*>(dst + 4 * j) = packed;
    if ((j & 1) == 0) {
      const int g = j >> 1;
      const long long off = s.swizzled ? static_cast<long long>(32 * (tok >> 2) + 4 * g + (tok & 3))
                                       : tok * s.scale_stride[2] + g * s.scale_stride[3];
      s.scale[page * s.scale_stride[0] + h * s.scale_stride[1] + off] =
          static_cast<unsigned char>(sbits);
    }
  }
}

__global__ void __launch_bounds__(kThreads) quantize_query_kernel(const QuantizeQueryParams p) {
  const long long gid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long row = gid >> 4;
  const int j = static_cast<int>(gid & 15);
  if (row >= p.num_tokens * p.num_heads) return;
  const long long t = row / p.num_heads;
  const int h = static_cast<int>(row - t * p.num_heads);
  const uint4 in = __ldg(reinterpret_cast<const uint4*>(p.q + t * p.q_stride[0] + h * p.q_stride[1] + 8 * j));
  float x[8];
  unpack8(in, x);
  *reinterpret_cast<uint2*>(p.out + t * p.out_stride[0] + h * p.out_stride[1] + 8 * j) =
      e4m3x8_div(x, p.q_scale);
}

__global__ void __launch_bounds__(kThreads) nvfp4_to_fp8_kernel(const Nvfp4ToFp8Params p) {
  const long long gid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long row = gid >> 4;
  const int j = static_cast<int>(gid & 15);
  if (row >= p.rows) return;
  const unsigned codes = __ldg(reinterpret_cast<const unsigned*>(p.packed + row * p.packed_stride + 4 * j));
  const float sf = e4m3_to_f32(p.scale[row * p.scale_stride + (j >> 1)]);
  unsigned lo = 0u, hi = 0u;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned b = (codes >> (8 * k)) & 0xffu;
    // nvfp4_to_e4m3: the product is exact in FP32, rounded once.
    const unsigned c0 = f32_to_e4m3_sat(__fmul_rn(e2m1_to_f32(b & 0xfu), sf));
    const unsigned c1 = f32_to_e4m3_sat(__fmul_rn(e2m1_to_f32(b >> 4), sf));
    const unsigned pair = c0 | (c1 << 8);
    if (k < 2) lo |= pair << (16 * k);
    else hi |= pair << (16 * (k - 2));
  }
  *reinterpret_cast<uint2*>(p.out + row * p.out_stride + 8 * j) = make_uint2(lo, hi);
}

unsigned blocks_for_rows(long long rows) {
  return static_cast<unsigned>((rows * 16 + kThreads - 1) / kThreads);
}

}  // namespace

int launch_cache_insert(const CacheInsertParams& p, void* stream) {
  const long long rows = p.num_tokens * p.num_sides * p.num_heads;
  if (rows <= 0) return 0;
  if (p.format < kBf16 || p.format > kNvfp4) return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = blocks_for_rows(rows);
  switch (p.format) {
    case kBf16: cache_insert_kernel<kBf16><<<blocks, kThreads, 0, s>>>(p); break;
    case kFp8: cache_insert_kernel<kFp8><<<blocks, kThreads, 0, s>>>(p); break;
    default: cache_insert_kernel<kNvfp4><<<blocks, kThreads, 0, s>>>(p); break;
  }
  return static_cast<int>(cudaGetLastError());
}

int launch_quantize_query_e4m3(const QuantizeQueryParams& p, void* stream) {
  const long long rows = p.num_tokens * p.num_heads;
  if (rows <= 0) return 0;
  quantize_query_kernel<<<blocks_for_rows(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

int launch_nvfp4_to_fp8(const Nvfp4ToFp8Params& p, void* stream) {
  if (p.rows <= 0) return 0;
  nvfp4_to_fp8_kernel<<<blocks_for_rows(p.rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

const char* cache_error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

}  // namespace flashmsa::cuda

// Random benchmark inputs, generated on the device (bench_fill.h). A counter-based hash
// (splitmix64 of seed and element index) gives every element its own value, so the fill
// costs one pass over the buffer whatever its size and needs no host copy.
#include "bench_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace flashmsa::bench {
namespace {

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// An approximately standard normal value from 64 random bits (Box-Muller, one output).
__device__ __forceinline__ float normal_of(std::uint64_t h) {
  const float u1 = (static_cast<float>(h >> 40) + 0.5f) * (1.0f / 16777216.0f);  // (0, 1)
  const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

__global__ void fill_kernel(std::uint8_t* dst, long long n, FillKind kind, std::uint64_t seed) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const std::uint64_t h = splitmix64(seed * 0x100000001b3ull + static_cast<std::uint64_t>(i));
    switch (kind) {
      case FillKind::bf16_normal: {  // n counts elements (2 bytes each)
        const __nv_bfloat16 b = __float2bfloat16_rn(normal_of(h));
        reinterpret_cast<__nv_bfloat16*>(dst)[i] = b;
        break;
      }
      case FillKind::e4m3_normal16:  // E4M3_sat(16 N(0, 1)): finite, no NaN code
        dst[i] = static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(16.0f * normal_of(h), __NV_SATFINITE, __NV_E4M3));
        break;
      case FillKind::uniform_bytes:
        dst[i] = static_cast<std::uint8_t>(h >> 56);
        break;
      case FillKind::e4m3_block_scale:  // E4M3 bytes 0x28 .. 0x30: 0.25 .. 0.5
        dst[i] = static_cast<std::uint8_t>(0x28 + (h >> 32) % 9);
        break;
    }
  }
}

}  // namespace

cudaError_t fill_attention_inputs(bool random, KvFormat fmt, void* q, long long q_bytes, void* k, void* v,
                                  long long kv_bytes, void* ks, void* vs, long long scale_bytes, InputScales* scales) {
  const bool e4m3_q = fmt != KvFormat::bf16;
  *scales = InputScales{};
  cudaError_t e = cudaSuccess;
  auto step = [&e](cudaError_t r) {
    if (e == cudaSuccess) e = r;
  };
  if (random) {
    const FillKind kv_kind = fmt == KvFormat::bf16  ? FillKind::bf16_normal
                             : fmt == KvFormat::fp8 ? FillKind::e4m3_normal16
                                                    : FillKind::uniform_bytes;
    step(fill_random(q, q_bytes, e4m3_q ? FillKind::e4m3_normal16 : FillKind::bf16_normal, 1));
    step(fill_random(k, kv_bytes, kv_kind, 2));
    step(fill_random(v, kv_bytes, kv_kind, 3));
    if (ks != nullptr) step(fill_random(ks, scale_bytes, FillKind::e4m3_block_scale, 4));
    if (vs != nullptr) step(fill_random(vs, scale_bytes, FillKind::e4m3_block_scale, 5));
    if (e4m3_q) scales->q = 1.0f / 16;
    if (fmt == KvFormat::fp8) scales->kv = 1.0f / 16;
  } else {
    step(cudaMemset(q, 0x22, static_cast<size_t>(q_bytes)));
    step(cudaMemset(k, 0x22, static_cast<size_t>(kv_bytes)));
    step(cudaMemset(v, 0x22, static_cast<size_t>(kv_bytes)));
    if (ks != nullptr) step(cudaMemset(ks, 0x38, static_cast<size_t>(scale_bytes)));
    if (vs != nullptr) step(cudaMemset(vs, 0x38, static_cast<size_t>(scale_bytes)));
    if (e4m3_q) scales->q = 0.05f;
  }
  step(cudaDeviceSynchronize());
  return e;
}

cudaError_t fill_random(void* dst, long long bytes, FillKind kind, std::uint64_t seed, cudaStream_t stream) {
  if (dst == nullptr || bytes <= 0 || (kind == FillKind::bf16_normal && bytes % 2 != 0)) return cudaErrorInvalidValue;
  const long long n = kind == FillKind::bf16_normal ? bytes / 2 : bytes;
  const int threads = 256;
  const long long want = (n + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(want < 65536 ? want : 65536);
  fill_kernel<<<blocks, threads, 0, stream>>>(static_cast<std::uint8_t*>(dst), n, kind, seed);
  return cudaGetLastError();
}

}  // namespace flashmsa::bench

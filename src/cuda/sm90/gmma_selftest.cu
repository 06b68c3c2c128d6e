// One-warpgroup check of gmma.cuh (see gmma_selftest.h).
#include "cuda/sm90/gmma_selftest.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/sm90/gmma.cuh"

namespace flashmsa::cuda {
namespace {

namespace g = sm90::gmma;

// Copies a [rows][row_bytes] row-major global tile into SW128 shared panels.
__device__ void load_k_major(std::uint8_t* smem, const std::uint8_t* src, int rows, int row_bytes) {
  for (int i = threadIdx.x; i < rows * row_bytes / 16; i += blockDim.x) {
    const int r = i / (row_bytes / 16), b = (i % (row_bytes / 16)) * 16;
    *reinterpret_cast<uint4*>(smem + g::sw128_offset(r, b, rows)) =
        *reinterpret_cast<const uint4*>(src + r * row_bytes + b);
  }
}

// Loads this thread's share of a 64 x 128 f32 tile in accumulator layout.
__device__ void load_acc(const float* a, float (&p)[64]) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  const int r = 16 * w + l / 4;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int c = 8 * j + 2 * (l % 4);
    p[4 * j + 0] = a[r * 128 + c];
    p[4 * j + 1] = a[r * 128 + c + 1];
    p[4 * j + 2] = a[(r + 8) * 128 + c];
    p[4 * j + 3] = a[(r + 8) * 128 + c + 1];
  }
}

__device__ void store_acc(float* d, const float (&acc)[64]) {
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  const int r = 16 * w + l / 4;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int c = 8 * j + 2 * (l % 4);
    d[r * 128 + c] = acc[4 * j + 0];
    d[r * 128 + c + 1] = acc[4 * j + 1];
    d[(r + 8) * 128 + c] = acc[4 * j + 2];
    d[(r + 8) * 128 + c + 1] = acc[4 * j + 3];
  }
}

// One instantiation per variant (GmmaSelftest), so each holds a single wgmma chain.
template <int variant>
__global__ void __launch_bounds__(128) selftest_kernel(const void* a, const void* b, float* d) {
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  std::uint8_t* smem = reinterpret_cast<std::uint8_t*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
  std::uint8_t* sa = smem;            // 64 x 256 B
  std::uint8_t* sb = smem + 16384;    // 128 x 256 B
  const auto* ab = static_cast<const std::uint8_t*>(a);
  const auto* bb = static_cast<const std::uint8_t*>(b);
  float acc[64];
  float p[64];
  if constexpr (variant == 0 || variant == 2) {
    const int row_bytes = variant == 0 ? 256 : 128;
    load_k_major(sa, ab, 64, row_bytes);
    load_k_major(sb, bb, 128, row_bytes);
  } else if constexpr (variant == 1) {
    // B as [K][N] bf16: rows are K (tokens), MN-major panels of 64 columns.
    load_k_major(sb, bb, 128, 256);
    load_acc(static_cast<const float*>(a), p);
  } else if constexpr (variant == 4) {
    // B as [K][N] e4m3, widened to f16 two bytes at a time into MN-major panels.
    for (int i = threadIdx.x; i < 128 * 64; i += blockDim.x) {
      const int k = i / 64, n = (i % 64) * 2;
      const std::uint16_t two = static_cast<std::uint16_t>(bb[k * 128 + n] | (bb[k * 128 + n + 1] << 8));
      *reinterpret_cast<std::uint32_t*>(sb + g::sw128_offset(k, n * 2, 128)) = g::e4m3x2_to_f16x2(two);
    }
    load_acc(static_cast<const float*>(a), p);
  } else {
    // B as [K][N] e4m3 -> K-major [N][K] with the RS K permutation inside each k32 step.
    for (int i = threadIdx.x; i < 128 * 128; i += blockDim.x) {
      const int k = i / 128, n = i % 128;
      const int kk = (k & ~31) + g::e4m3_rs_k_perm(k & 31);
      sb[g::sw128_offset(n, kk, 128)] = bb[k * 128 + n];
    }
    load_acc(static_cast<const float*>(a), p);
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  const std::uint32_t a0 = g::smem_addr(sa), b0 = g::smem_addr(sb);
  g::fence_operands(acc);
  // Register-A variants build every A fragment before the warpgroup fence, so no wgmma
  // reads a register written after it (ptxas would inject warpgroup.arrive, C7519).
  std::uint32_t fa[8][4];
  if constexpr (variant == 1 || variant == 4) {
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      if constexpr (variant == 1) g::bf16_a_from_acc(p, s, fa[s]);
      else g::f16_a_from_acc(p, s, fa[s]);
    }
  } else if constexpr (variant == 3) {
#pragma unroll
    for (int s = 0; s < 4; ++s) g::e4m3_a_from_acc(p, s, 1.0f, fa[s]);
  }
  g::fence();
  if constexpr (variant == 0) {
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const std::uint32_t off = (s % 4) * 32;  // k16 step inside a 128-byte panel row
      g::bf16_ss(g::desc_k_sw128(a0 + (s / 4) * 64 * 128 + off), g::desc_k_sw128(b0 + (s / 4) * 128 * 128 + off), acc, s > 0);
    }
  } else if constexpr (variant == 1) {
#pragma unroll
    for (int s = 0; s < 8; ++s) g::bf16_rs_bmn(fa[s], g::desc_mn_sw128(b0 + s * 16 * 128, 128 * 128), acc, s > 0);
  } else if constexpr (variant == 2) {
#pragma unroll
    for (int s = 0; s < 4; ++s) g::e4m3_ss(g::desc_k_sw128(a0 + s * 32), g::desc_k_sw128(b0 + s * 32), acc, s > 0);
  } else if constexpr (variant == 4) {
#pragma unroll
    for (int s = 0; s < 8; ++s) g::f16_rs_bmn(fa[s], g::desc_mn_sw128(b0 + s * 16 * 128, 128 * 128), acc, s > 0);
  } else {
#pragma unroll
    for (int s = 0; s < 4; ++s) g::e4m3_rs(fa[s], g::desc_k_sw128(b0 + s * 32), acc, s > 0);
  }
  g::commit();
  g::wait<0>();
  g::fence_operands(acc);
  store_acc(d, acc);
}

// One thread per (scale, word): word j holds code (i + j) % 16 in nibble i.
__global__ void nvfp4_lookup_kernel(std::uint8_t* out) {
  const int s = blockIdx.x, j = threadIdx.x;
  std::uint32_t w = 0;
  for (int i = 0; i < 8; ++i) w |= static_cast<std::uint32_t>((i + j) & 15) << (4 * i);
  const g::Nvfp4Lut lut = g::nvfp4_lut(static_cast<std::uint32_t>(s));
  uint2 e;
  g::nvfp4x8_lookup(w, lut, e.x, e.y);
  *reinterpret_cast<uint2*>(out + (s * 16 + j) * 8) = e;
}

}  // namespace

int nvfp4_lookup_selftest(std::uint8_t* out, void* stream) {
  nvfp4_lookup_kernel<<<256, 16, 0, static_cast<cudaStream_t>(stream)>>>(out);
  return static_cast<int>(cudaGetLastError());
}

int gmma_selftest(GmmaSelftest variant, const void* a, const void* b, float* d, void* stream) {
  const int smem = 16384 + 32768 + 1024;
  auto launch = [&](auto kernel) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    kernel<<<1, 128, smem, static_cast<cudaStream_t>(stream)>>>(a, b, d);
  };
  switch (static_cast<int>(variant)) {
    case 0: launch(selftest_kernel<0>); break;
    case 1: launch(selftest_kernel<1>); break;
    case 2: launch(selftest_kernel<2>); break;
    case 3: launch(selftest_kernel<3>); break;
    case 4: launch(selftest_kernel<4>); break;
    default: return static_cast<int>(cudaErrorInvalidValue);  // not a GmmaSelftest value
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace flashmsa::cuda

// Internal: a one-warpgroup check of the wgmma building blocks in gmma.cuh, run by
// tests/cuda/test_cuda_gmma.cpp against a CPU product. Host-side interface.
#pragma once

#include <cstdint>

namespace flashmsa::cuda {

/// Which gmma.cuh path to exercise; every variant computes a 64 x 128 x 128 product.
enum class GmmaSelftest : int {
  bf16_ss = 0,      ///< a bf16 [64][128] (M x K), b bf16 [128][128] as [N][K]; d = a b^T
  bf16_rs_bmn = 1,  ///< a f32 [64][128] -> bf16 registers, b bf16 [128][128] as [K][N]; d = a b
  e4m3_ss = 2,      ///< a e4m3 [64][128], b e4m3 [128][128] as [N][K]; d = a b^T
  e4m3_rs = 3,      ///< a f32 [64][128] -> e4m3 registers, b e4m3 [128][128] as [K][N]; d = a b
  f16_rs_bmn = 4,   ///< a f32 [64][128] -> f16 registers, b e4m3 [128][128] as [K][N] widened
                    ///< to f16 in shared memory (MN-major); d = a b
};

/// Runs one variant on device pointers (a, b as described, d f32 [64][128] row-major).
/// Returns the CUDA error code as an int (0 = success; cudaErrorInvalidValue for a value
/// that is not a GmmaSelftest variant).
int gmma_selftest(GmmaSelftest variant, const void* a, const void* b, float* d, void* stream);

/// The NVFP4 dequantisation every SM90 kernel uses (gmma.cuh: nvfp4_lut + nvfp4x8_lookup)
/// over every block-scale byte and every code in every nibble position: out u8
/// [256 scales][16 words][8], byte i of word j of scale s = E4M3_sat(e2m1(code) x s) for
/// code = (i + j) % 16 (spec 5.2). Returns the CUDA error code as an int (0 = success).
int nvfp4_lookup_selftest(std::uint8_t* out, void* stream);

}  // namespace flashmsa::cuda

// Random device-side inputs for the attention benchmarks (bench_prefill, bench_decode).
// Timing on constant data can be optimistic: the tensor cores and datapaths switch less
// (device/METHOD.md saw a BF16 matrix product 13 % faster on zeros), so the benchmarks
// time on random values like the dense peers (torch.randn).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace flashmsa::bench {

/// What fill_random writes.
enum class FillKind {
  bf16_normal,       ///< BF16, about N(0, 1); `bytes` must be even
  e4m3_normal16,     ///< E4M3_sat(16 x N(0, 1)), finite (pair with a 1/16 dequant scale)
  uniform_bytes,     ///< every byte uniform (NVFP4 codes: two E2M1 codes per byte)
  e4m3_block_scale,  ///< E4M3 block scales uniform over 0.25 .. 0.5 (bytes 0x28 .. 0x30)
};

/// Fills `bytes` bytes at device pointer `dst` on `stream` with values of `kind`, a
/// deterministic function of `seed` and the element index. Returns the launch error
/// (cudaErrorInvalidValue for a null pointer, a non-positive size or an odd size for
/// bf16_normal).
cudaError_t fill_random(void* dst, long long bytes, FillKind kind, std::uint64_t seed, cudaStream_t stream = nullptr);

}  // namespace flashmsa::bench

// Random device-side inputs for the attention benchmarks (bench_prefill, bench_decode).
// Timing on constant data can be optimistic: the tensor cores and datapaths switch less
// (device/METHOD.md saw a BF16 matrix product 13 % faster on zeros), so the benchmarks
// time on random values like the dense peers (torch.randn).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flashmsa/cache.h"  // KvFormat

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

/// The dequantisation scales that go with fill_attention_inputs' values.
struct InputScales {
  float q = 1.0f;   ///< q_scale of an E4M3 query (1 for BF16)
  float kv = 1.0f;  ///< k and v global scales of an FP8 cache (1 for BF16 and NVFP4)
};

/// Fills an attention benchmark's device inputs for KV format `fmt` and waits for it:
/// q (`q_bytes`; BF16 for KvFormat::bf16, else E4M3), k and v (`kv_bytes` each), and for
/// NVFP4 the block scales ks and vs (`scale_bytes` each; ignored when null).
/// - random: q, k, v as BF16 N(0, 1) / E4M3_sat(16 N(0, 1)) / uniform NVFP4 codes, block
///   scales uniform over 0.25 .. 0.5; scales 1/16 for E4M3 q and FP8 k, v.
/// - constant (the inputs of sessions 1-26): every byte 0x22, block scales 1.0 (0x38);
///   q_scale 0.05 for an E4M3 query.
/// Returns the first CUDA error.
cudaError_t fill_attention_inputs(bool random, KvFormat fmt, void* q, long long q_bytes, void* k, void* v,
                                  long long kv_bytes, void* ks, void* vs, long long scale_bytes, InputScales* scales);

}  // namespace flashmsa::bench

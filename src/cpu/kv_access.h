// Internal (CPU backend): decode rows of caches and queries to FP32.
// Values are returned WITHOUT the per-tensor global scale; callers fold it into the
// logit scale (K) or the output (V), as D7 prescribes. Inputs must have been validated.
#pragma once

#include <cstdint>

#include "flashmsa/cache.h"
#include "flashmsa/numerics.h"
#include "flashmsa/tensor.h"

namespace flashmsa::cpu {

/// 256-entry E4M3 -> float table (exact).
const float* e4m3_table();
/// [code][scale] -> float(E4M3_sat(e2m1(code) * e4m3(scale))), 16 x 256 entries.
const float* nvfp4_e4m3_table();

/// Element (row-major multi-index) pointer helpers.
template <class T>
inline const T* at(const TensorView& t, std::int64_t i0, std::int64_t i1) {
  return t.ptr<const T>() + i0 * t.stride[0] + i1 * t.stride[1];
}
template <class T>
inline const T* at(const TensorView& t, std::int64_t i0, std::int64_t i1, std::int64_t i2) {
  return t.ptr<const T>() + i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2];
}

/// Decodes a 128-dim bf16 or e4m3 vector (innermost stride 1) into out[128].
void load_row_f32(const void* row, DType dtype, float* out);

/// K or V row (physical page, head, token) of one cache side, as FP32:
/// bf16 -> value; fp8 -> e4m3 value; nvfp4 -> E4M3_sat(e2m1 * block_scale) (no global scale).
void load_cache_row_f32(const PagedCacheSide& side, KvFormat format, std::int64_t page,
                        std::int64_t head, int token, float* out);

/// Index-K row (physical page, token) as FP32, no global scale.
void load_index_k_row_f32(const IndexKCache& cache, std::int64_t page, int token, float* out);

}  // namespace flashmsa::cpu

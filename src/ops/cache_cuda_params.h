// Internal (host): TensorView -> kernel parameter helpers shared by src/ops/cache.cpp and
// src/ops/fused.cpp for the SM90 cache kernels. Only meaningful with FLASHMSA_WITH_CUDA.
#pragma once

#include <cstdint>

#include "cuda/sm90/cache_kernels.h"
#include "flashmsa/tensor.h"

namespace flashmsa::detail {

// Byte strides of a cache side for the kernels (data: page, head, token; scales: page,
// head, token, group). Index caches have no head dimension: head stride 0.
inline cuda::CacheSideParams side_params(const TensorView& data, const TensorView& scale,
                                         bool swizzled, float global_scale, bool has_heads) {
  cuda::CacheSideParams s;
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(data.dtype));
  s.data = static_cast<unsigned char*>(data.data);
  s.data_stride[0] = data.stride[0] * es;
  s.data_stride[1] = has_heads ? data.stride[1] * es : 0;
  s.data_stride[2] = (has_heads ? data.stride[2] : data.stride[1]) * es;
  if (scale.defined()) {
    s.scale = static_cast<unsigned char*>(scale.data);  // e4m3 / u8: 1 byte per element
    s.scale_stride[0] = scale.stride[0];
    s.scale_stride[1] = has_heads ? scale.stride[1] : 0;
    s.scale_stride[2] = has_heads ? scale.stride[2] : scale.stride[1];
    s.scale_stride[3] = has_heads ? scale.stride[3] : scale.stride[2];
  }
  s.swizzled = swizzled;
  s.global_scale = global_scale;
  return s;
}

}  // namespace flashmsa::detail

#include "cpu/kv_access.h"

#include <vector>

namespace flashmsa::cpu {

const float* e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int i = 0; i < 256; ++i) t[i] = e4m3_to_float(static_cast<std::uint8_t>(i));
    return t;
  }();
  return table.data();
}

const float* nvfp4_e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(16 * 256);
    for (int c = 0; c < 16; ++c)
      for (int s = 0; s < 256; ++s)
        t[c * 256 + s] = e4m3_to_float(
            nvfp4_to_e4m3(static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(s)));
    return t;
  }();
  return table.data();
}

void load_row_f32(const void* row, DType dtype, float* out) {
  if (dtype == DType::bf16) {
    const auto* p = static_cast<const std::uint16_t*>(row);
    for (int d = 0; d < kHeadDim; ++d) out[d] = bf16_to_float(p[d]);
  } else {
    const float* tab = e4m3_table();
    const auto* p = static_cast<const std::uint8_t*>(row);
    for (int d = 0; d < kHeadDim; ++d) out[d] = tab[p[d]];
  }
}

namespace {
void load_nvfp4_row(const std::uint8_t* data, const std::uint8_t* scale_plane, int token,
                    std::int64_t scale_token_stride, bool swizzled, float* out) {
  const float* tab = nvfp4_e4m3_table();
  for (int g = 0; g < 8; ++g) {
    const std::int64_t so =
        swizzled ? nvfp4_scale_offset(token, g, true) : token * scale_token_stride + g;
    const std::uint8_t s = scale_plane[so];
    for (int i = 0; i < 8; ++i) {
      const std::uint8_t byte = data[g * 8 + i];
      out[g * 16 + 2 * i] = tab[(byte & 0xf) * 256 + s];
      out[g * 16 + 2 * i + 1] = tab[(byte >> 4) * 256 + s];
    }
  }
}
}  // namespace

void load_cache_row_f32(const PagedCacheSide& side, KvFormat format, std::int64_t page,
                        std::int64_t head, int token, float* out) {
  const TensorView& d = side.data;
  if (format == KvFormat::nvfp4) {
    const auto* row = d.ptr<const std::uint8_t>() + page * d.stride[0] + head * d.stride[1] +
                      token * d.stride[2];
    const TensorView& s = side.block_scale;
    const auto* plane = s.ptr<const std::uint8_t>() + page * s.stride[0] + head * s.stride[1];
    load_nvfp4_row(row, plane, token, s.stride[2], side.scale_swizzled, out);
    return;
  }
  const std::size_t es = dtype_size(d.dtype);
  const auto* base = static_cast<const std::uint8_t*>(d.data) +
                     (page * d.stride[0] + head * d.stride[1] + token * d.stride[2]) * es;
  load_row_f32(base, d.dtype, out);
}

void load_index_k_row_f32(const IndexKCache& cache, std::int64_t page, int token, float* out) {
  const TensorView& d = cache.data;
  if (cache.format == KvFormat::nvfp4) {
    const auto* row = d.ptr<const std::uint8_t>() + page * d.stride[0] + token * d.stride[1];
    const TensorView& s = cache.block_scale;
    const auto* plane = s.ptr<const std::uint8_t>() + page * s.stride[0];
    load_nvfp4_row(row, plane, token, s.stride[1], false, out);
    return;
  }
  const std::size_t es = dtype_size(d.dtype);
  const auto* base = static_cast<const std::uint8_t*>(d.data) +
                     (page * d.stride[0] + token * d.stride[1]) * es;
  load_row_f32(base, d.dtype, out);
}

}  // namespace flashmsa::cpu

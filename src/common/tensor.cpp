#include "flashmsa/tensor.h"

#include <string>

#include "flashmsa/version.h"

namespace flashmsa {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::bf16:
    case DType::f16: return 2;
    case DType::f32:
    case DType::i32: return 4;
    case DType::e4m3:
    case DType::u8: return 1;
  }
  return 1;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f32: return "f32";
    case DType::i32: return "i32";
    case DType::e4m3: return "e4m3";
    case DType::u8: return "u8";
  }
  return "?";
}

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  std::int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

std::string TensorView::describe() const {
  // No iostreams (see detail::float_string in src/common/validate.h).
  std::string s = "[";
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  s += std::string("] ") + dtype_name(dtype) + " strides [";
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(stride[d]);
  return s + "] on " + device_name(device);
}

TensorView make_strided_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                             std::initializer_list<std::int64_t> stride, Device device) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.rank = static_cast<int>(shape.size() < kMaxRank ? shape.size() : kMaxRank);
  int d = 0;
  for (std::int64_t s : shape) {
    if (d < kMaxRank) v.shape[d] = s;
    ++d;
  }
  d = 0;
  for (std::int64_t s : stride) {
    if (d < kMaxRank) v.stride[d] = s;
    ++d;
  }
  return v;
}

TensorView make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                     Device device) {
  TensorView v = make_strided_view(data, dtype, shape, {}, device);
  std::int64_t s = 1;
  for (int d = v.rank - 1; d >= 0; --d) {
    v.stride[d] = s;
    s *= v.shape[d];
  }
  return v;
}

const char* version() { return FLASHMSA_VERSION_STRING; }

bool built_with_cuda() {
#ifdef FLASHMSA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace flashmsa

// FlashMSA — a small owning, 64-byte aligned, contiguous CPU tensor.
// Convenience for embedders, the CLI and tests; operations only ever see TensorView.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "flashmsa/tensor.h"

namespace flashmsa {

class HostTensor {
 public:
  HostTensor() = default;
  /// Allocates a zero-filled contiguous tensor of `shape` (rank 1..4).
  HostTensor(DType dtype, std::initializer_list<std::int64_t> shape) { reset(dtype, shape); }
  HostTensor(DType dtype, const std::vector<std::int64_t>& shape) { reset(dtype, shape); }

  void reset(DType dtype, const std::vector<std::int64_t>& shape) {
    view_ = TensorView{};
    view_.dtype = dtype;
    view_.rank = static_cast<int>(shape.size());
    std::int64_t n = 1;
    for (int d = view_.rank - 1; d >= 0; --d) {
      view_.shape[d] = shape[d];
      view_.stride[d] = n;
      n *= shape[d];
    }
    bytes_ = static_cast<std::size_t>(n) * dtype_size(dtype);
    storage_.reset(new std::uint8_t[bytes_ + 64]());
    auto addr = reinterpret_cast<std::uintptr_t>(storage_.get());
    view_.data = storage_.get() + ((64 - addr % 64) % 64);
  }

  const TensorView& view() const { return view_; }
  template <class T>
  T* data() const { return static_cast<T*>(view_.data); }
  std::size_t bytes() const { return bytes_; }
  std::int64_t numel() const { return view_.numel(); }
  void fill_bytes(std::uint8_t b) { if (bytes_) std::memset(view_.data, b, bytes_); }

 private:
  std::unique_ptr<std::uint8_t[]> storage_;
  std::size_t bytes_ = 0;
  TensorView view_;
};

}  // namespace flashmsa

// FlashMSA — a small owning, 64-byte aligned, contiguous CPU tensor.
// Convenience for embedders, the CLI and tests; operations only ever see TensorView.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashmsa/tensor.h"

namespace flashmsa {

/// Owning buffer + its contiguous TensorView (device cpu). Not copyable (moves only).
class HostTensor {
 public:
  HostTensor() = default;
  /// Allocates a zero-filled contiguous tensor of `shape` (rank 0..4, extents >= 0).
  /// Throws std::invalid_argument for a rank above kMaxRank or a negative extent
  /// (a programming error in the caller, not a data error).
  HostTensor(DType dtype, std::initializer_list<std::int64_t> shape) { reset(dtype, shape); }
  HostTensor(DType dtype, const std::vector<std::int64_t>& shape) { reset(dtype, shape); }

  /// Re-allocates as a zero-filled contiguous tensor of `shape` (see the constructor).
  void reset(DType dtype, const std::vector<std::int64_t>& shape) {
    if (shape.size() > static_cast<std::size_t>(kMaxRank))
      throw std::invalid_argument("flashmsa::HostTensor: rank " + std::to_string(shape.size()) +
                                  " exceeds kMaxRank = 4");
    for (std::int64_t e : shape)
      if (e < 0) throw std::invalid_argument("flashmsa::HostTensor: negative extent");
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

  /// Contiguous view of the whole buffer (64-byte aligned data, device cpu).
  const TensorView& view() const { return view_; }
  /// Typed pointer to element 0.
  template <class T>
  T* data() const { return static_cast<T*>(view_.data); }
  /// Size of the buffer in bytes (numel * dtype_size).
  std::size_t bytes() const { return bytes_; }
  /// Number of elements.
  std::int64_t numel() const { return view_.numel(); }
  /// Sets every byte to `b` (e.g. 0xFF poisons bf16/f32/e4m3 with NaN, i32 with -1).
  void fill_bytes(std::uint8_t b) { if (bytes_) std::memset(view_.data, b, bytes_); }

 private:
  std::unique_ptr<std::uint8_t[]> storage_;
  std::size_t bytes_ = 0;
  TensorView view_;
};

}  // namespace flashmsa

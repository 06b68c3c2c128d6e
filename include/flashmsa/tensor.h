// FlashMSA — dtypes, devices and the non-owning strided tensor view.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace flashmsa {

/// Element types. Storage is raw bits: bf16/f16 as uint16_t, e4m3 (OCP FP8 "fn",
/// spec 5.1) as uint8_t, NVFP4 data as u8 (two E2M1 codes per byte, element 2i in the
/// low nibble, spec 4.2).
enum class DType { bf16, f16, f32, i32, e4m3, u8 };

/// Size in bytes of one element of `t` (spec 4-5: bf16/f16 2, f32/i32 4, e4m3/u8 1).
std::size_t dtype_size(DType t);
/// "bf16", "f16", "f32", "i32", "e4m3", "u8".
const char* dtype_name(DType t);

/// Where the memory of a view lives.
enum class Device { cpu, cuda };
/// "cpu" or "cuda" (used in error messages).
const char* device_name(Device d);

/// Largest rank a TensorView can have.
inline constexpr int kMaxRank = 4;

/// Non-owning strided view of a tensor (PyTorch conventions).
///   data    — address of element [0, 0, ...]; nullptr means "absent" (optional args)
///   shape   — extent per dimension, shape[0..rank)
///   stride  — distance between neighbours per dimension, in ELEMENTS (not bytes);
///             may be any non-negative value (no copies are ever made)
/// Element [i0, .., i{r-1}] lives at data + sum(ik * stride[k]) * dtype_size(dtype).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int rank = 0;
  std::array<std::int64_t, kMaxRank> shape{};
  std::array<std::int64_t, kMaxRank> stride{};
  Device device = Device::cpu;

  /// True when the view points at memory (optional arguments use an undefined view).
  bool defined() const { return data != nullptr; }
  /// Extent of dimension d (0 <= d < rank; not checked).
  std::int64_t size(int d) const { return shape[d]; }
  std::int64_t numel() const;
  /// True when the strides are the row-major strides of the shape.
  bool is_contiguous() const;
  /// "[2, 4, 128] bf16 strides [512, 128, 1]" — used in error messages.
  std::string describe() const;
  /// Typed base pointer.
  template <class T>
  T* ptr() const { return static_cast<T*>(data); }
  /// Element offset (in elements) of a multi-index with `rank` entries.
  std::int64_t offset(std::initializer_list<std::int64_t> idx) const {
    std::int64_t o = 0;
    int k = 0;
    for (std::int64_t i : idx) o += i * stride[k++];
    return o;
  }
};

/// A contiguous (row-major) view over `data`. Only the first kMaxRank (4) extents of
/// `shape` are used: a longer list is truncated, so pass at most 4.
TensorView make_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                     Device device = Device::cpu);
/// A strided view; `stride` in elements, same length as `shape` (at most 4 entries, as
/// make_view). The view is not validated here: every operation validates its arguments.
TensorView make_strided_view(void* data, DType dtype, std::initializer_list<std::int64_t> shape,
                             std::initializer_list<std::int64_t> stride,
                             Device device = Device::cpu);

}  // namespace flashmsa

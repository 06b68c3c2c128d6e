// flashmsa._C — shared helpers of the torch binding: at::Tensor -> TensorView, Status ->
// Python exception, device / stream selection, cache descriptors from torch tensors.
#pragma once

#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"

#include <c10/core/DeviceGuard.h>
#ifdef FLASHMSA_PY_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

namespace flashmsa_py {

/// Raises the Status as a Python exception: ValueError for InvalidArgument, RuntimeError
/// otherwise; the message is the Status message.
void check_status(const flashmsa::Status& s);

/// Raises ValueError "flashmsa.<op>: argument '<arg>': expected <expected>, got <actual>".
[[noreturn]] void throw_arg(const char* op, const char* arg, const std::string& expected,
                            const std::string& actual);

/// "[2, 4, 128] bfloat16 (cuda:0) strides [512, 128, 1]".
std::string describe(const at::Tensor& t);

/// Non-owning view of `t` (rank <= 4; bf16, f16, f32, i32, float8_e4m3fn or uint8; cpu or
/// cuda). Raises ValueError naming `arg` otherwise. A tensor with no elements gets a
/// non-null placeholder address (the library reads absent optional views as nullptr).
flashmsa::TensorView to_view(const char* op, const char* arg, const at::Tensor& t);
/// Undefined view for an absent optional tensor.
flashmsa::TensorView to_view(const char* op, const char* arg, const std::optional<at::Tensor>& t);

/// Requires t.dim() == rank (used before reading sizes on the torch side).
void check_dim(const char* op, const char* arg, const at::Tensor& t, int64_t rank);

/// Device of an op call: checks that every defined tensor is on the device of the first
/// one (same CUDA ordinal too), makes that device current for the call and gives torch's
/// current stream on it (nullptr on the CPU).
class OpDevice {
 public:
  OpDevice(const char* op,
           std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors);
  void* stream() const { return stream_; }
  bool is_cuda() const { return device_.is_cuda(); }
  const c10::Device& device() const { return device_; }

 private:
  c10::Device device_{c10::kCPU};
  void* stream_ = nullptr;
  // Device-generic guard (dispatches to libc10_cuda): no CUDA runtime calls in this
  // module, whose only runtime is the flashmsa library's static one.
  std::optional<c10::DeviceGuard> guard_;
};

/// The K/V cache of a layer from one torch tensor (vLLM layouts, no copies):
///   bfloat16 [pages, Hkv, 128, 256]       -> KvFormat::bf16 (K = cols 0..127, V = 128..255)
///   float8_e4m3fn [pages, Hkv, 128, 256]  -> KvFormat::fp8 with k_scale / v_scale
///   uint8 [pages, 2*Hkv, 128, 72]         -> KvFormat::nvfp4 head-slot pages
flashmsa::PagedKvCache kv_cache_views(const char* op, const at::Tensor& kv_cache, double k_scale,
                                      double v_scale, bool k_swizzled, bool v_swizzled);

/// The index-K cache: bfloat16 / float8_e4m3fn [pages, 128, 128], or uint8 [pages, 128, 64]
/// codes plus `block_scale` float8_e4m3fn/uint8 [pages, 128, 8] (NVFP4, global scale).
flashmsa::IndexKCache index_cache_view(const char* op, const at::Tensor& index_cache,
                                       const std::optional<at::Tensor>& block_scale,
                                       double global_scale);

}  // namespace flashmsa_py


// FlashMSA tools — minimal CUDA device memory for the CLI's --device cuda path.
//
// Compiled with CUDA runtime calls only when FLASHMSA_TOOLS_CUDA is defined (the build
// links flashmsa_tools with the CUDA runtime); otherwise every function reports that
// the tools have no CUDA support and nothing CUDA-related is referenced.
#pragma once

#include <cstddef>

#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa::tools {

/// True when flashmsa_tools was built with the CUDA runtime (FLASHMSA_TOOLS_CUDA).
bool tools_have_cuda();

/// Number of visible CUDA devices (0 without CUDA support or without a device).
int cuda_device_count();

/// Waits for all device work (cudaDeviceSynchronize).
Status cuda_synchronize();

/// One device allocation holding a copy of a contiguous host tensor (move-only).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  /// Allocates device memory for `host` (contiguous, any dtype) and copies it there.
  /// An undefined `host` gives an undefined buffer (view().data == nullptr).
  Status upload(const TensorView& host);
  /// Allocates device memory for a tensor shaped like `host` without copying (contents
  /// undefined); an undefined `host` gives an undefined buffer.
  Status allocate(const TensorView& host);
  /// Sets every byte of the buffer to `value` (cudaMemset), e.g. 0xff to poison outputs.
  Status fill_bytes(int value);
  /// Copies the device contents back into `host` (same shape / bytes).
  Status download(const TensorView& host) const;
  /// Copies `bytes` device bytes starting at byte `offset` into `host`.
  Status download_bytes(std::size_t offset, void* host, std::size_t bytes) const;
  /// Device bytes of the tensor (numel * dtype size).
  std::size_t bytes() const { return view_.data ? static_cast<std::size_t>(view_.numel()) * dtype_size(view_.dtype) : 0; }
  /// The device tensor: the host view's shape and strides, device cuda.
  const TensorView& view() const { return view_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  TensorView view_;
};

}  // namespace flashmsa::tools

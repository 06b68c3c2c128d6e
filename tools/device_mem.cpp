// FlashMSA tools — CUDA device memory for the CLI (see device_mem.h).
#include "device_mem.h"

#include <string>
#include <utility>

#ifdef FLASHMSA_TOOLS_CUDA
#include <cuda_runtime.h>
#endif

namespace flashmsa::tools {

namespace {

std::size_t view_bytes(const TensorView& t) { return static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype); }

#ifdef FLASHMSA_TOOLS_CUDA
Status cuda_error(const char* what, cudaError_t e) {
  return Status(StatusCode::kInternal, std::string("flashmsa run: ") + what + ": " + cudaGetErrorString(e));
}
#else
Status no_cuda() {
  return Status::Unsupported("flashmsa run", "device cuda",
                             "the flashmsa tools were built without the CUDA runtime");
}
#endif

}  // namespace

bool tools_have_cuda() {
#ifdef FLASHMSA_TOOLS_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef FLASHMSA_TOOLS_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

Status cuda_synchronize() {
#ifdef FLASHMSA_TOOLS_CUDA
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) return cuda_error("cudaDeviceSynchronize", e);
  return Status::Ok();
#else
  return no_cuda();
#endif
}

DeviceBuffer::~DeviceBuffer() {
#ifdef FLASHMSA_TOOLS_CUDA
  if (ptr_) (void)cudaFree(ptr_);
#endif
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_), view_(o.view_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
  o.view_ = TensorView{};
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    std::swap(view_, o.view_);
  }
  return *this;
}

Status DeviceBuffer::upload(const TensorView& host) {
  FLASHMSA_RETURN_IF_ERROR(allocate(host));  // same shape on the device (or empty view)
  if (!host.defined()) return Status::Ok();
#ifdef FLASHMSA_TOOLS_CUDA
  const cudaError_t e = cudaMemcpy(ptr_, host.data, view_bytes(host), cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    view_ = TensorView{};
    return cuda_error("cudaMemcpy (host to device)", e);
  }
  return Status::Ok();
#else
  return no_cuda();
#endif
}

Status DeviceBuffer::allocate(const TensorView& host) {
  view_ = TensorView{};
  if (!host.defined()) return Status::Ok();
  if (!host.is_contiguous())
    return Status(StatusCode::kInternal, "flashmsa run: DeviceBuffer::allocate needs a contiguous tensor");
#ifdef FLASHMSA_TOOLS_CUDA
  const std::size_t bytes = view_bytes(host);
  if (ptr_ && bytes_ < bytes) {
    (void)cudaFree(ptr_);
    ptr_ = nullptr;
  }
  if (!ptr_) {
    const cudaError_t e = cudaMalloc(&ptr_, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess) {
      ptr_ = nullptr;
      return cuda_error("cudaMalloc", e);
    }
    bytes_ = bytes;
  }
  view_ = host;
  view_.data = ptr_;
  view_.device = Device::cuda;
  return Status::Ok();
#else
  return no_cuda();
#endif
}

Status DeviceBuffer::fill_bytes(int value) {
#ifdef FLASHMSA_TOOLS_CUDA
  if (!ptr_ || !view_.data) return Status::Ok();
  const cudaError_t e = cudaMemset(ptr_, value, view_bytes(view_));
  if (e != cudaSuccess) return cuda_error("cudaMemset", e);
  return Status::Ok();
#else
  (void)value;
  return no_cuda();
#endif
}

Status DeviceBuffer::download_bytes(std::size_t offset, void* host, std::size_t bytes) const {
#ifdef FLASHMSA_TOOLS_CUDA
  if (!ptr_ || offset + bytes > bytes_)
    return Status(StatusCode::kInternal, "flashmsa run: DeviceBuffer::download_bytes out of range");
  const cudaError_t e = cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_error("cudaMemcpy (device to host)", e);
  return Status::Ok();
#else
  (void)offset;
  (void)host;
  (void)bytes;
  return no_cuda();
#endif
}

Status DeviceBuffer::download(const TensorView& host) const {
#ifdef FLASHMSA_TOOLS_CUDA
  const std::size_t bytes = view_bytes(host);
  if (!ptr_ || bytes > bytes_)
    return Status(StatusCode::kInternal, "flashmsa run: DeviceBuffer::download size mismatch");
  const cudaError_t e = cudaMemcpy(host.data, ptr_, bytes, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_error("cudaMemcpy (device to host)", e);
  return Status::Ok();
#else
  (void)host;
  return no_cuda();
#endif
}

}  // namespace flashmsa::tools

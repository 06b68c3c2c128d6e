// Shared helpers of the GPU tests: device buffers, fills and the D8 comparison.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "flashmsa/flashmsa.h"

namespace flashmsa::cudatest {

inline bool has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define REQUIRE_GPU() \
  if (!::flashmsa::cudatest::has_gpu()) GTEST_SKIP() << "no CUDA device"

/// Device copy of a HostTensor with the same shape/strides.
class DeviceTensor {
 public:
  explicit DeviceTensor(const HostTensor& h) : bytes_(h.bytes()) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes_ ? bytes_ : 16), cudaSuccess);
    view_ = h.view();
    view_.data = ptr_;
    view_.device = Device::cuda;
    upload(h);
  }
  ~DeviceTensor() { cudaFree(ptr_); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  void upload(const HostTensor& h) {
    ASSERT_EQ(cudaMemcpy(ptr_, h.view().data, bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void download(HostTensor& h) const {
    ASSERT_EQ(cudaMemcpy(h.view().data, ptr_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  void poison() { ASSERT_EQ(cudaMemset(ptr_, 0xff, bytes_), cudaSuccess); }
  const TensorView& view() const { return view_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  TensorView view_;
};

/// A HostTensor copied into pinned, mapped host memory and viewed as a CUDA tensor (UVA):
/// kernels read it over the host link, so each page copy lands microseconds late (the
/// GPU tests' PageCopiesLandingLate cases).
class HostMappedTensor {
 public:
  explicit HostMappedTensor(const HostTensor& h) : bytes_(h.bytes()) {
    EXPECT_EQ(cudaHostAlloc(&ptr_, bytes_ ? bytes_ : 16, cudaHostAllocMapped), cudaSuccess);
    if (bytes_ != 0) std::memcpy(ptr_, h.view().data, bytes_);
    void* dev = nullptr;
    EXPECT_EQ(cudaHostGetDevicePointer(&dev, ptr_, 0), cudaSuccess);
    view_ = h.view();
    view_.data = dev;
    view_.device = Device::cuda;
  }
  ~HostMappedTensor() { cudaFreeHost(ptr_); }
  HostMappedTensor(const HostMappedTensor&) = delete;
  HostMappedTensor& operator=(const HostMappedTensor&) = delete;
  const TensorView& view() const { return view_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  TensorView view_;
};

/// Device copies of a set of host buffers: views that point into one of the host buffers
/// are rebased into its device copy, and every copy can be downloaded back.
class DeviceMirror {
 public:
  /// Copies `h` to the device (an undefined / empty tensor is skipped).
  void add(HostTensor& h) {
    if (h.view().defined()) entries_.push_back({&h, std::make_unique<DeviceTensor>(h)});
  }
  /// `v` (a view into one of the added host tensors) inside that tensor's device copy;
  /// an undefined view stays undefined.
  TensorView operator()(const TensorView& v) const {
    if (!v.defined()) return v;
    const auto* p = static_cast<const std::uint8_t*>(v.data);
    for (const Entry& e : entries_) {
      const auto* base = static_cast<const std::uint8_t*>(e.host->view().data);
      const std::size_t n = e.host->bytes();  // an empty tensor holds only its base address
      if (p < base || (n ? p >= base + n : p != base)) continue;
      TensorView r = v;
      r.data = static_cast<std::uint8_t*>(e.dev->view().data) + (p - base);
      r.device = Device::cuda;
      return r;
    }
    ADD_FAILURE() << "view " << v.describe() << " is not inside any mirrored buffer";
    return v;
  }
  /// Copies every tensor of `hosts`, then rebases every view of `views` in place.
  void mirror(std::initializer_list<HostTensor*> hosts, std::initializer_list<TensorView*> views) {
    for (HostTensor* h : hosts) add(*h);
    for (TensorView* v : views) *v = (*this)(*v);
  }
  /// Downloads every device copy into its host tensor.
  void download_all() const {
    for (const Entry& e : entries_) e.dev->download(*e.host);
  }

 private:
  struct Entry {
    HostTensor* host;
    std::unique_ptr<DeviceTensor> dev;
  };
  std::vector<Entry> entries_;
};

/// Fast uniform [-2, 2) bf16 fill (large caches; a 64-bit LCG is plenty for tests).
inline void fill_bf16_uniform(HostTensor& t, std::uint64_t seed) {
  auto* p = t.data<std::uint16_t>();
  std::uint64_t s = seed | 1;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = float_to_bf16(static_cast<float>(static_cast<std::int32_t>(s >> 32)) * (2.0f / 2147483648.0f));
  }
}

struct Result {
  HostTensor out, lse;
};

/// D8: element-wise atol/rtol, global cosine, LSE tolerance, identical inf/NaN positions.
inline void expect_close(const Result& gpu, const Result& cpu, bool fp8, const std::string& what) {
  const double tol = fp8 ? 5e-2 : 3e-2, cos_min = fp8 ? 0.999 : 0.9999, lse_tol = fp8 ? 3e-3 : 1e-3;
  const auto* a = gpu.out.data<std::uint16_t>();
  const auto* b = cpu.out.data<std::uint16_t>();
  double dot = 0, na = 0, nb = 0;
  std::int64_t bad = 0, first_bad = -1;
  for (std::int64_t i = 0; i < gpu.out.numel(); ++i) {
    const double x = bf16_to_float(a[i]), y = bf16_to_float(b[i]);
    if (!(std::fabs(x - y) <= tol + tol * std::fabs(y))) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  EXPECT_EQ(bad, 0) << what << ": first bad element " << first_bad << " gpu "
                    << (first_bad >= 0 ? bf16_to_float(a[first_bad]) : 0.0f) << " cpu "
                    << (first_bad >= 0 ? bf16_to_float(b[first_bad]) : 0.0f);
  if (nb > 0) EXPECT_GE(dot / std::sqrt(na * nb), cos_min) << what;
  const float* la = gpu.lse.data<float>();
  const float* lb = cpu.lse.data<float>();
  for (std::int64_t i = 0; i < gpu.lse.numel(); ++i) {
    if (std::isinf(lb[i])) {
      ASSERT_TRUE(std::isinf(la[i]) && la[i] < 0) << what << ": lse[" << i << "] = " << la[i];
    } else {
      ASSERT_NEAR(la[i], lb[i], lse_tol) << what << ": lse[" << i << "]";  // D8: absolute
    }
  }
}

}  // namespace flashmsa::cudatest

// Shared helpers of the GPU benchmarks.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace flashmsa::bench {

constexpr double kCopyPeakTBs = 4.2;  // measured device copy on the H200 (read + write)
constexpr std::int64_t kColdBytes = 3LL * 60 * 1024 * 1024;  // > 3x the H200's L2

/// Comma (or `sep`) separated list, empty items dropped.
inline std::vector<std::string> split(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

/// The benchmarks time SM90 kernels: true when a CUDA device is visible, else prints why
/// not ("<prog>: no CUDA device is visible ...") and returns false (the caller exits 2).
inline bool require_cuda_device(const char* prog) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return true;
  std::fprintf(stderr, "%s: no CUDA device is visible (%s); this benchmark times the SM90 kernels on a GPU\n",
               prog, e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
  (void)cudaGetLastError();
  return false;
}

/// A device allocation freed at scope exit (cudaMalloc into `p`).
struct DevBuf {
  void* p = nullptr;
  DevBuf() = default;
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  ~DevBuf() { cudaFree(p); }
};

}  // namespace flashmsa::bench

/// In a function returning bool: prints a failed CUDA call and returns false.
#define CUDA_OK(x)                                                                     \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                          \
      return false;                                                                    \
    }                                                                                  \
  } while (0)

/// In main(): prints a failed CUDA call and returns 1.
#define CUDA_CK(x)                                                                     \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                          \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

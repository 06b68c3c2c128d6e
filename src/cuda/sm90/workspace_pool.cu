// See workspace_pool.h.
#include "cuda/sm90/workspace_pool.h"
#include "cuda/sm90/workspace_pool_host.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace flashmsa::cuda {
namespace {

constexpr int kMaxDevices = 64;

// FLASHMSA_WORKSPACE_POOL=0: the device's default pool instead (A/B, or to share one pool).
bool pool_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FLASHMSA_WORKSPACE_POOL");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

std::mutex g_mu;
cudaMemPool_t g_pools[kMaxDevices] = {};
bool g_tried[kMaxDevices] = {};

// The pool of device `dev`, created on first use (nullptr: disabled, or creation failed,
// logged once).
cudaMemPool_t pool_of(int dev) {
  if (!pool_enabled()) return nullptr;
  if (dev < 0 || dev >= kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_tried[dev]) {
    g_tried[dev] = true;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = nullptr;
    // The first call may come during a stream capture (a graph-captured prefill):
    // creating a pool is a "potentially unsafe" call there and would invalidate the
    // capture (cudaErrorStreamCaptureUnsupported), so this thread creates it in relaxed
    // capture mode and restores its mode after.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const cudaError_t xerr = cudaThreadExchangeStreamCaptureMode(&mode);
    cudaError_t err = cudaMemPoolCreate(&pool, &props);
    if (err == cudaSuccess) {
      std::uint64_t keep = UINT64_MAX;  // never release mapped memory on synchronisation
      err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
      if (err != cudaSuccess) cudaMemPoolDestroy(pool);
    }
    if (xerr == cudaSuccess) (void)cudaThreadExchangeStreamCaptureMode(&mode);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      std::fprintf(stderr,
                   "flashmsa: no private workspace pool on device %d (%s); using the default pool "
                   "(logged once)\n",
                   dev, cudaGetErrorString(err));
      pool = nullptr;
    }
    g_pools[dev] = pool;
  }
  return g_pools[dev];
}

}  // namespace

cudaError_t workspace_alloc(void** ptr, std::size_t bytes, cudaStream_t stream) {
  int dev = 0;
  const cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  cudaMemPool_t pool = pool_of(dev);
  return pool != nullptr ? cudaMallocFromPoolAsync(ptr, bytes, pool, stream) : cudaMallocAsync(ptr, bytes, stream);
}

cudaError_t workspace_free(void* ptr, cudaStream_t stream) { return cudaFreeAsync(ptr, stream); }

int trim_workspace_pools() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (int dev = 0; dev < kMaxDevices; ++dev) {
    if (g_pools[dev] == nullptr) continue;
    const cudaError_t err = cudaMemPoolTrimTo(g_pools[dev], 0);
    if (err != cudaSuccess) return static_cast<int>(err);
  }
  return 0;
}

const char* cuda_error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

}  // namespace flashmsa::cuda

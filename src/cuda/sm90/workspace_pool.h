// Stream-ordered workspace allocation for the SM90 launchers (indexer prefill, prefill
// attention), from a FlashMSA-private memory pool per device.
//
// Why a private pool: the launchers size their workspace from the call's shapes (up to
// hundreds of MB: prefill partials, indexer page scores, the pre-converted index-K) and
// take it with a stream-ordered allocation per call. From the device's default pool
// (release threshold 0) every synchronisation returned that memory to the driver, and
// the next call mapped it again: on the H200 that cost about 380 us per call for the
// indexer's 269 MB of page scores at (2048, 1M, 4 heads), and twice that with the
// pre-converted copy (eager calls with a synchronisation between them; session 17).
// The private pool keeps what it has mapped (release threshold unlimited), so repeated
// calls reuse it, as PyTorch's caching allocator does; it does not change the default
// pool that the caller's own cudaMallocAsync uses. Memory held: the largest set of
// workspaces live at once, per device, until trim_workspace_pools()
// (workspace_pool_host.h; public: flashmsa::release_cached_workspace) or exit.
// Inside CUDA-graph capture these become the graph's allocation nodes, as before.
// FLASHMSA_WORKSPACE_POOL=0 uses the device's default pool instead.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace flashmsa::cuda {

/// `*ptr` = `bytes` of device memory on the current device, ordered on `stream`
/// (cudaMallocFromPoolAsync on the private pool; cudaMallocAsync if the pool cannot be
/// created, logged once). Returns the CUDA error of the allocation.
cudaError_t workspace_alloc(void** ptr, std::size_t bytes, cudaStream_t stream);

/// Frees a workspace_alloc pointer, ordered on `stream` (cudaFreeAsync).
cudaError_t workspace_free(void* ptr, cudaStream_t stream);

}  // namespace flashmsa::cuda

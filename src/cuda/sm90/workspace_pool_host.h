// Host-side (no CUDA headers) entry points of the workspace pool (workspace_pool.h), for
// the library's C++ sources.
#pragma once

namespace flashmsa::cuda {

/// Returns the unused memory of every private workspace pool created so far (one per
/// device) to the driver (cudaMemPoolTrimTo 0); memory of workspaces still in use by
/// enqueued work stays. Returns 0 or the first cudaError_t value; 0 when no pool exists.
int trim_workspace_pools();

/// cudaGetErrorString of a cudaError_t value.
const char* cuda_error_string(int err);

}  // namespace flashmsa::cuda

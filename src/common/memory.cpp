// release_cached_workspace (flashmsa/memory.h).
#include "flashmsa/memory.h"

#ifdef FLASHMSA_WITH_CUDA
#include "cuda/sm90/workspace_pool_host.h"
#endif

namespace flashmsa {

Status release_cached_workspace() {
#ifdef FLASHMSA_WITH_CUDA
  if (const int err = cuda::trim_workspace_pools())
    return Status::Internal("release_cached_workspace", std::string("cudaMemPoolTrimTo: ") + cuda::cuda_error_string(err));
#endif
  return Status::Ok();
}

}  // namespace flashmsa

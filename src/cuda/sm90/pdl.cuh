// Programmatic dependent launch (PDL, sm_90) for FlashMSA's back-to-back kernels.
//
// A kernel launched with `launch_pdl` may start while the previous kernel on the stream
// is still running: its CTAs become resident and run up to `pdl_wait()`, which returns
// once the previous grid has completed and its memory is visible. Everything a kernel
// reads or writes in global memory must come after `pdl_wait()` unless no earlier kernel
// can write it (the decode kernels wait first thing). `pdl_launch_dependents()` lets the
// next PDL kernel launch before this one ends. Without the launch attribute (or when
// the previous operation is not a kernel) both are no-ops and the stream order is the
// usual one. Captured CUDA graphs keep the programmatic edges.
#pragma once

#include <cuda_runtime.h>

namespace flashmsa::cuda::sm90 {

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent of the
/// previous kernel on `stream` (when `pdl` is true). Returns the launch error.
template <class... Params, class... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, cudaStream_t stream, bool pdl,
                       Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
#ifdef FLASHMSA_NO_PDL  // benchmark A/B builds only
  pdl = false;
#endif
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<Params>(args)...);
}

}  // namespace flashmsa::cuda::sm90

// Session 26 run H: what a chain of small programmatic-dependent kernels costs in a CUDA graph on the H200,
// the shape of the prefill plan (plan_zero, then plan_count / plan_units / plan_fill as PDL dependents that
// trigger at their start and wait before touching their predecessor's output). Each kernel does one
// dependent global round trip after its wait (read a counter its predecessor wrote, write the next one).
// Times one graph replay of a chain of n kernels (n = 1..6), grid g CTAs x 256 threads, median of 50.
// nvcc -O3 -gencode=arch=compute_90a,code=sm_90a pdl_chain.cu -o pdl_chain ; ./pdl_chain
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>

__global__ void k_first(int* buf) {  // a plain launch, like plan_zero
  buf[blockIdx.x * blockDim.x + threadIdx.x] = 0;
}
__global__ void k_dep(int* buf, int step) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  buf[i] = buf[i] + step;  // one round trip on what the predecessor wrote
}

static cudaError_t launch(bool pdl, int grid, cudaStream_t s, int* buf, int step) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = 256;
  cfg.stream = s;
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = a;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, k_dep, buf, step);
}

int main() {
  int* buf;
  cudaMalloc(&buf, 4096 * 256 * sizeof(int));
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int grid : {10, 512, 2048}) {
    for (int pdl = 0; pdl < 2; ++pdl) {
      std::printf("grid %4d x 256, %s:", grid, pdl ? "PDL " : "plain");
      for (int n = 1; n <= 6; ++n) {
        cudaGraph_t g;
        cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        k_first<<<grid, 256, 0, s>>>(buf);
        for (int k = 1; k < n; ++k) launch(pdl != 0, grid, s, buf, k);
        cudaStreamEndCapture(s, &g);
        cudaGraphExec_t x;
        cudaGraphInstantiate(&x, g, 0);
        std::vector<float> t;
        for (int r = 0; r < 60; ++r) {
          cudaEventRecord(e0, s);
          cudaGraphLaunch(x, s);
          cudaEventRecord(e1, s);
          cudaEventSynchronize(e1);
          float ms;
          cudaEventElapsedTime(&ms, e0, e1);
          if (r >= 10) t.push_back(ms * 1000.0f);
        }
        std::sort(t.begin(), t.end());
        std::printf("  n=%d %5.2f", n, t[t.size() / 2]);
        cudaGraphExecDestroy(x);
        cudaGraphDestroy(g);
      }
      std::printf("  us\n");
    }
  }
  std::printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}

// Session 26 run A: what the H200's HBM gives a read-mostly stream shaped like the
// prefill combine at the floor case (16/1, 8192, 32768): 537 MB of BF16 partials read
// (16 slots of 256 bytes per (query, head)), 33.5 MB of output written. Three kernels:
//   copy   : out[i] = in[i] over 268 MB each way (calibrates the 4.2 TB/s copy figure)
//   read   : every 16-byte word of the 537 MB read, one 16-byte word per thread written
//   r16w1  : out[i] = xor of 16 words 256 bytes apart in a 4 KB block (the combine's
//            16:1 read/write ratio and its per-(query, head) access pattern)
// nvcc -O3 -gencode=arch=compute_90a,code=sm_90a readbw.cu -o readbw ; ./readbw
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>

__global__ void copy_k(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = in[i];
}
// Each thread reads 16 words of one row block and writes one: rows of 16 threads (256 B
// of output) read 16 x 256 B = 4 KB contiguous, like one (query, head)'s 16 slots.
__global__ void r16w1_k(const uint4* __restrict__ in, uint4* __restrict__ out, long long nout) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nout; i += (long long)gridDim.x * blockDim.x) {
    const long long row = i >> 4, col = i & 15;
    const uint4* b = in + row * 256 + col;
    uint4 a[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) a[k] = __ldcs(b + 16 * k);
    uint4 r = a[0];
#pragma unroll
    for (int k = 1; k < 16; ++k) { r.x ^= a[k].x; r.y ^= a[k].y; r.z ^= a[k].z; r.w ^= a[k].w; }
    out[i] = r;
  }
}
__global__ void read_k(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
  uint4 r = make_uint4(0, 0, 0, 0);
  const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x, st = (long long)gridDim.x * blockDim.x;
  for (long long i = tid; i < n; i += 4 * st) {
    uint4 a[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) a[k] = i + k * st < n ? __ldcs(in + i + k * st) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int k = 0; k < 4; ++k) { r.x ^= a[k].x; r.y ^= a[k].y; r.z ^= a[k].z; r.w ^= a[k].w; }
  }
  out[tid] = r;
}

int main() {
  const long long in_bytes = 8192LL * 16 * 16 * 256, out_bytes = 8192LL * 16 * 256;  // 537 MB, 33.5 MB
  uint4 *in, *out, *flush;
  cudaMalloc(&in, in_bytes);
  cudaMalloc(&out, in_bytes / 2 + 64);
  cudaMalloc(&flush, 256 << 20);
  cudaMemset(in, 1, in_bytes);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto time = [&](const char* name, double bytes, auto launch) {
    std::vector<float> t;
    for (int r = 0; r < 23; ++r) {
      cudaMemsetAsync(flush, r, 256 << 20);  // cold L2
      cudaEventRecord(e0);
      launch();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (r >= 3) t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    const double us = t[t.size() / 2] * 1e3;
    std::printf("%-28s %8.1f us  %6.0f MB  %.2f TB/s  (min %.1f)\n", name, us, bytes / 1e6, bytes / us / 1e6,
                t[0] * 1e3);
  };
  for (int blocks_per_sm : {4, 8, 16}) {
    const int grid = sms * blocks_per_sm;
    char nm[64];
    std::snprintf(nm, sizeof nm, "copy 268+268 MB g%d", blocks_per_sm);
    time(nm, in_bytes, [&] { copy_k<<<grid, 256>>>(in, out, in_bytes / 2 / 16); });
    std::snprintf(nm, sizeof nm, "read 537 MB g%d", blocks_per_sm);
    time(nm, in_bytes, [&] { read_k<<<grid, 256>>>(in, out, in_bytes / 16); });
    std::snprintf(nm, sizeof nm, "r16w1 537+33.5 MB g%d", blocks_per_sm);
    time(nm, in_bytes + out_bytes, [&] { r16w1_k<<<grid, 256>>>(in, out, out_bytes / 16); });
  }
  std::printf("%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}

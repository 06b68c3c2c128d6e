// Throughput of single SASS ops per SM: F2FP (cvt.rn.f16x2.e4m3x2), PRMT, IMAD, FMNMX, LOP3.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
template <int OP>
__global__ void k(std::uint32_t* out, int iters, std::uint32_t seed) {
  std::uint32_t v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = seed * (threadIdx.x + 1) + i * 0x01020304u;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if constexpr (OP == 0) {  // F2FP
        std::uint32_t r;
        asm volatile("{\n .reg .b16 l;\n mov.b32 {l, _}, %1;\n cvt.rn.f16x2.e4m3x2 %0, l;\n}" : "=r"(r) : "r"(v[i]));
        v[i] = r;
      } else if constexpr (OP == 1) {  // PRMT
        std::uint32_t r;
        asm volatile("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(v[i]), "r"(v[(i + 1) & 7]), "r"(v[(i + 2) & 7]));
        v[i] = r;
      } else if constexpr (OP == 2) {  // IMAD
        std::uint32_t r;
        asm volatile("mad.lo.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(v[i]), "r"(v[(i + 1) & 7]), "r"(v[(i + 2) & 7]));
        v[i] = r;
      } else if constexpr (OP == 3) {  // FMNMX
        float r;
        asm volatile("max.f32 %0, %1, %2;" : "=f"(r) : "f"(__uint_as_float(v[i])), "f"(__uint_as_float(v[(i + 3) & 7])));
        v[i] = __float_as_uint(r);
      } else {  // LOP3
        std::uint32_t r;
        asm volatile("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r) : "r"(v[i]), "r"(v[(i + 1) & 7]), "r"(v[(i + 2) & 7]));
        v[i] = r;
      }
    }
  }
  std::uint32_t s = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) s ^= v[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
template <int OP>
void run(const char* name, std::uint32_t* d, int sms) {
  const int iters = 4096, threads = 1024, blocks = sms * 2;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  k<OP><<<blocks, threads>>>(d, 16, 1);
  cudaEventRecord(a);
  k<OP><<<blocks, threads>>>(d, iters, 1);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  int clk = 0;
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  const double ops = double(blocks) * threads * iters * 8;  // lane ops
  const double per_s = ops / (ms * 1e-3);
  std::printf("%-6s %.3f ms  %.1f Tlane-op/s  %.1f lane-op/clk/SM at the %d MHz max clock\n", name, ms, per_s / 1e12,
              per_s / (sms * clk * 1e3), clk / 1000);
}
int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  std::uint32_t* d;
  cudaMalloc(&d, sms * 2 * 1024 * 4);
  run<0>("F2FP", d, sms);
  run<1>("PRMT", d, sms);
  run<2>("IMAD", d, sms);
  run<3>("FMNMX", d, sms);
  run<4>("LOP3", d, sms);
  return 0;
}

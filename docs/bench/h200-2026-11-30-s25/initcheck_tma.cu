// Does compute-sanitizer initcheck track global memory written by TMA / bulk stores?
// (Session 25: initcheck flagged prefill_combine's reads of o_part, which only the
// attention kernel's cp.async.bulk.tensor stores write.) One mode per run:
//   plain  : the writer kernel stores the buffer with st.global (control: no report)
//   tensor : cp.async.bulk.tensor.2d global <- shared (as the prefill epilogue does)
//   bulk   : cp.async.bulk global <- shared (1D)
//   none   : nothing writes the buffer (control: initcheck must report)
// then a reader kernel loads every 16 bytes of the buffer. Build:
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a initcheck_tma.cu -o initcheck_tma
// Run: compute-sanitizer --tool initcheck ./initcheck_tma <mode>
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

constexpr int kRows = 64, kCols = 128;  // BF16 [64, 128]: 256-byte rows, two 128-byte panels
constexpr int kBytes = kRows * kCols * 2;

__global__ void writer(std::uint16_t* buf, const CUtensorMap* map, int mode) {
  __shared__ __align__(1024) std::uint16_t tile[kBytes / 2];
  for (int i = threadIdx.x; i < kBytes / 2; i += blockDim.x) tile[i] = static_cast<std::uint16_t>(i);
  __syncthreads();
  if (mode == 0) {  // plain
    for (int i = threadIdx.x; i < kBytes / 2; i += blockDim.x) buf[i] = tile[i];
    return;
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    const std::uint32_t s = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile));
    if (mode == 1) {  // two boxes of 64 columns x 64 rows, tile as [panel][row][64]
      for (int panel = 0; panel < 2; ++panel)
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(map),
                     "r"(s + panel * kRows * 128), "r"(64 * panel), "r"(0)
                     : "memory");
    } else {
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(buf), "r"(s), "r"(kBytes)
                   : "memory");
    }
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
  }
}

// Sum of the buffer's 16-bit values: 0 + 1 + ... + 8191 = 33,550,336 once written.
__global__ void reader(const uint4* buf, unsigned* out) {
  unsigned acc = 0;
  for (int i = threadIdx.x; i < kBytes / 16; i += blockDim.x) {
    const uint4 v = buf[i];
    acc += (v.x & 0xffffu) + (v.x >> 16) + (v.y & 0xffffu) + (v.y >> 16) + (v.z & 0xffffu) + (v.z >> 16) +
           (v.w & 0xffffu) + (v.w >> 16);
  }
  atomicAdd(out, acc);
}

using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

int main(int argc, char** argv) {
  const char* m = argc > 1 ? argv[1] : "tensor";
  const int mode = !std::strcmp(m, "plain") ? 0 : !std::strcmp(m, "tensor") ? 1 : !std::strcmp(m, "bulk") ? 2 : 3;
  std::uint16_t* buf = nullptr;
  unsigned* out = nullptr;
  CUtensorMap* dmap = nullptr;
  cudaMalloc(&buf, kBytes);
  // (fresh device memory: no writer leaves whatever the allocator hands out; nothing here initialises it)
  cudaMalloc(&out, 4);
  cudaMemset(out, 0, 4);
  cudaMalloc(&dmap, sizeof(CUtensorMap));
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
  CUtensorMap map;
  const cuuint64_t dims[2] = {kCols, kRows}, strides[1] = {kCols * 2};
  const cuuint32_t box[2] = {64, kRows}, elem[2] = {1, 1};
  const CUresult r = reinterpret_cast<EncodeFn>(fn)(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, buf, dims, strides, box,
                                                    elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  cudaMemcpy(dmap, &map, sizeof(map), cudaMemcpyHostToDevice);
  if (mode != 3) writer<<<1, 128>>>(buf, dmap, mode);
  reader<<<1, 128>>>(reinterpret_cast<const uint4*>(buf), out);
  unsigned h = 0;
  const cudaError_t e = cudaMemcpy(&h, out, 4, cudaMemcpyDeviceToHost);
  // Every writing mode writes a permutation of the tile's values: sum 33,550,336.
  std::printf("mode %s encode %d cuda %s sum %u (written: %s)\n", m, static_cast<int>(r), cudaGetErrorString(e), h,
              h == 33550336u ? "yes" : "no");
  return e == cudaSuccess ? 0 : 1;
}

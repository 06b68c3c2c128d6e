// SM90 kernels of the cache write path (see cache_kernels.h for the design). The
// conversions (bit-identical to src/common/numerics.cpp) live in quant_device.cuh,
// shared with the fused QK-norm + RoPE + insert kernel.
#include "cuda/sm90/cache_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/sm90/quant_device.cuh"

namespace flashmsa::cuda {
namespace {

constexpr int kThreads = 256;  // 16 rows of 16 threads per block
enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };

using namespace quant;

template <int FMT>
__global__ void __launch_bounds__(kThreads) cache_insert_kernel(const CacheInsertParams p) {
  const long long gid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long row = gid >> 4;
  const int j = static_cast<int>(gid & 15);
  const long long per_token = static_cast<long long>(p.num_sides) * p.num_heads;
  if (row >= p.num_tokens * per_token) return;  // whole 16-lane groups leave together
  const long long t = row / per_token;
  const int r2 = static_cast<int>(row - t * per_token);
  const int side = r2 / p.num_heads;
  const int h = r2 - side * p.num_heads;
  const long long slot = p.slots[t * p.slot_stride];
  if (slot < 0 || slot >= p.num_slots) return;  // skipped / out of range: never written
  const long long page = slot >> 7;
  const int tok = static_cast<int>(slot & 127);

  const std::uint16_t* src = (side ? p.src[1] : p.src[0]) +
                             t * (side ? p.src_stride[1][0] : p.src_stride[0][0]) +
                             h * (side ? p.src_stride[1][1] : p.src_stride[0][1]) + 8 * j;
  const uint4 in = __ldg(reinterpret_cast<const uint4*>(src));
  const CacheSideParams& s = side ? p.side[1] : p.side[0];
  unsigned char* dst = s.data + page * s.data_stride[0] + h * s.data_stride[1] +
                       tok * s.data_stride[2];

  if constexpr (FMT == kBf16) {
    *reinterpret_cast<uint4*>(dst + 16 * j) = in;
  } else if constexpr (FMT == kFp8) {
    float x[8];
    unpack8(in, x);
    *reinterpret_cast<uint2*>(dst + 8 * j) = e4m3x8_div(x, make_divisor(s.global_scale));
  } else {
    // nvfp4_quantize_block16: the 16-dim block g = j / 2 is held by lanes (2g, 2g+1).
    float x[8];
    unpack8(in, x);
    const unsigned lane = threadIdx.x & 31u;
    unsigned packed = 0u;
    const unsigned sbits = nvfp4_quantize_half_block(
        x, __fdiv_rn(1.0f, s.global_scale), lane < 16u ? 0x0000ffffu : 0xffff0000u, &packed);
    *reinterpret_cast<unsigned*>(dst + 4 * j) = packed;
    if ((j & 1) == 0)
      s.scale[page * s.scale_stride[0] + h * s.scale_stride[1] +
              nvfp4_scale_offset(tok, j >> 1, s.swizzled, s.scale_stride[2], s.scale_stride[3])] =
          static_cast<unsigned char>(sbits);
  }
}

__global__ void __launch_bounds__(kThreads) quantize_query_kernel(const QuantizeQueryParams p) {
  const long long gid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long row = gid >> 4;
  const int j = static_cast<int>(gid & 15);
  if (row >= p.num_tokens * p.num_heads) return;
  const long long t = row / p.num_heads;
  const int h = static_cast<int>(row - t * p.num_heads);
  const uint4 in = __ldg(reinterpret_cast<const uint4*>(p.q + t * p.q_stride[0] + h * p.q_stride[1] + 8 * j));
  float x[8];
  unpack8(in, x);
  *reinterpret_cast<uint2*>(p.out + t * p.out_stride[0] + h * p.out_stride[1] + 8 * j) =
      e4m3x8_div(x, make_divisor(p.q_scale));
}

__global__ void __launch_bounds__(kThreads) nvfp4_to_fp8_kernel(const Nvfp4ToFp8Params p) {
  const long long gid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long row = gid >> 4;
  const int j = static_cast<int>(gid & 15);
  if (row >= p.rows) return;
  const unsigned codes = __ldg(reinterpret_cast<const unsigned*>(p.packed + row * p.packed_stride + 4 * j));
  *reinterpret_cast<uint2*>(p.out + row * p.out_stride + 8 * j) =
      nvfp4x8_to_e4m3(codes, p.scale[row * p.scale_stride + (j >> 1)]);
}

// ---- selected-pages NVFP4 -> E4M3 ----

// Physical (page, head) index page * Hkv + h of top-k entry (r, h, k), or -1 when the
// entry is skipped (-1 / out of the block table / physical page out of the cache).
__device__ __forceinline__ long long selected_pair(const Nvfp4SelectedParams& p, long long r,
                                                   int h, int k) {
  const long long lp = p.topk[r * p.topk_stride[0] + h * p.topk_stride[1] + k * p.topk_stride[2]];
  if (lp < 0 || lp >= p.bt_width) return -1;
  const long long b = r / p.rows_per_request;
  const long long pp = p.block_table[b * p.bt_stride[0] + lp * p.bt_stride[1]];
  if (pp < 0 || pp >= p.num_pages) return -1;
  return pp * p.num_heads + h;
}

// mode 0: mark workspace[pair] = 1; mode 1: compact[r, h, k] = workspace[pair] (or -1).
__global__ void __launch_bounds__(kThreads) selected_entries_kernel(const Nvfp4SelectedParams p,
                                                                    int mode) {
  const long long gid = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  const long long per_row = static_cast<long long>(p.num_heads) * p.topk_k;
  if (gid >= p.rows * per_row) return;
  const long long r = gid / per_row;
  const int rem = static_cast<int>(gid - r * per_row);
  const int h = rem / p.topk_k, k = rem - h * p.topk_k;
  const long long pair = selected_pair(p, r, h, k);
  if (mode == 0) {
    if (pair >= 0) p.workspace[pair] = 1;
  } else {
    p.compact[r * p.compact_stride[0] + h * p.compact_stride[1] + k * p.compact_stride[2]] =
        pair >= 0 ? p.workspace[pair] : -1;
  }
}

constexpr int kScanThreads = 1024;

// One CTA: flags -> compact index (or -1) in place, pairs[] and num_pairs, in ascending
// page * Hkv + head order (= sorted by (physical page, head)).
__global__ void __launch_bounds__(kScanThreads) selected_scan_kernel(const Nvfp4SelectedParams p) {
  __shared__ int sums[kScanThreads];
  const long long n = p.num_pages * p.num_heads;
  const long long chunk = (n + kScanThreads - 1) / kScanThreads;
  const long long b = threadIdx.x * chunk;
  const long long e = b + chunk < n ? b + chunk : n;
  int count = 0;
  for (long long i = b; i < e; ++i) count += p.workspace[i] != 0;
  sums[threadIdx.x] = count;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o <<= 1) {  // inclusive Hillis-Steele scan
    const int v = threadIdx.x >= o ? sums[threadIdx.x - o] : 0;
    __syncthreads();
    sums[threadIdx.x] += v;
    __syncthreads();
  }
  int idx = sums[threadIdx.x] - count;
  for (long long i = b; i < e; ++i) {
    if (p.workspace[i] != 0) {
      p.pairs[idx * p.pairs_stride[0]] = static_cast<int>(i / p.num_heads);
      p.pairs[idx * p.pairs_stride[0] + p.pairs_stride[1]] = static_cast<int>(i % p.num_heads);
      p.workspace[i] = idx++;
    } else {
      p.workspace[i] = -1;
    }
  }
  if (threadIdx.x == kScanThreads - 1) *p.num_pairs = sums[kScanThreads - 1];
}

// Block (pair, side): 16 rows of 16 lanes, 8 passes over the 128 tokens.
__global__ void __launch_bounds__(kThreads) selected_convert_kernel(const Nvfp4SelectedParams p) {
  const long long pair = blockIdx.x;
  if (pair >= *p.num_pairs) return;
  const int side = blockIdx.y;
  const long long page = p.pairs[pair * p.pairs_stride[0]];
  const int h = p.pairs[pair * p.pairs_stride[0] + p.pairs_stride[1]];
  const CacheSideParams& s = p.side[side];
  const int j = threadIdx.x & 15;
  const unsigned char* data = s.data + page * s.data_stride[0] + h * s.data_stride[1];
  const unsigned char* plane = s.scale + page * s.scale_stride[0] + h * s.scale_stride[1];
  unsigned char* out = p.out[side] + pair * p.out_stride[side][0];
  for (int tok = threadIdx.x >> 4; tok < 128; tok += kThreads / 16) {
    const unsigned codes =
        __ldg(reinterpret_cast<const unsigned*>(data + tok * s.data_stride[2] + 4 * j));
    const unsigned sb = plane[nvfp4_scale_offset(tok, j >> 1, s.swizzled, s.scale_stride[2],
                                                 s.scale_stride[3])];
    *reinterpret_cast<uint2*>(out + tok * p.out_stride[side][1] + 8 * j) = nvfp4x8_to_e4m3(codes, sb);
  }
}

unsigned blocks_for_rows(long long rows) {
  return static_cast<unsigned>((rows * 16 + kThreads - 1) / kThreads);
}

}  // namespace

int launch_cache_insert(const CacheInsertParams& p, void* stream) {
  const long long rows = p.num_tokens * p.num_sides * p.num_heads;
  if (rows <= 0) return 0;
  if (p.format < kBf16 || p.format > kNvfp4) return static_cast<int>(cudaErrorInvalidValue);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const unsigned blocks = blocks_for_rows(rows);
  switch (p.format) {
    case kBf16: cache_insert_kernel<kBf16><<<blocks, kThreads, 0, s>>>(p); break;
    case kFp8: cache_insert_kernel<kFp8><<<blocks, kThreads, 0, s>>>(p); break;
    default: cache_insert_kernel<kNvfp4><<<blocks, kThreads, 0, s>>>(p); break;
  }
  return static_cast<int>(cudaGetLastError());
}

int launch_quantize_query_e4m3(const QuantizeQueryParams& p, void* stream) {
  const long long rows = p.num_tokens * p.num_heads;
  if (rows <= 0) return 0;
  quantize_query_kernel<<<blocks_for_rows(rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

int launch_nvfp4_to_fp8(const Nvfp4ToFp8Params& p, void* stream) {
  if (p.rows <= 0) return 0;
  nvfp4_to_fp8_kernel<<<blocks_for_rows(p.rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  return static_cast<int>(cudaGetLastError());
}

int launch_nvfp4_to_fp8_selected(const Nvfp4SelectedParams& p, void* stream) {
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const long long n = p.num_pages * p.num_heads;
  cudaError_t err = cudaMemsetAsync(p.workspace, 0, static_cast<size_t>(n) * sizeof(int), s);
  if (err != cudaSuccess) return static_cast<int>(err);
  const long long entries = p.rows * p.num_heads * p.topk_k;
  const unsigned eblocks = static_cast<unsigned>((entries + kThreads - 1) / kThreads);
  if (entries > 0) selected_entries_kernel<<<eblocks, kThreads, 0, s>>>(p, 0);
  selected_scan_kernel<<<1, kScanThreads, 0, s>>>(p);
  if (entries > 0) selected_entries_kernel<<<eblocks, kThreads, 0, s>>>(p, 1);
  if (p.capacity > 0)
    selected_convert_kernel<<<dim3(static_cast<unsigned>(p.capacity), 2), kThreads, 0, s>>>(p);
  return static_cast<int>(cudaGetLastError());
}

const char* cache_error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

}  // namespace flashmsa::cuda

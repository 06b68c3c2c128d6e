// SM90 indexer kernels: see indexer_kernels.h.
#include "cuda/sm90/indexer_kernels.h"

#include <cuda_runtime.h>

#include <cmath>

#include "cuda/sm90/quant_device.cuh"

namespace flashmsa::cuda {
namespace {

constexpr int kD = 128;
constexpr int kT = 128;
constexpr int kThreads = 128;
constexpr int kSelectThreads = 128;
constexpr std::size_t kScoreSmem = (kD * kT + kD + kT) * sizeof(float);

using namespace quant;  // E4M3 / E2M1 conversions shared with the cache kernels

// nvfp4 element: E4M3_sat(e2m1 * scale) as float (nvfp4_to_e4m3, then e4m3_to_float).
__device__ __forceinline__ float nvfp4_value(unsigned code, float scale) {
  return e4m3_to_f32(f32_to_e4m3_sat(__fmul_rn(e2m1_to_f32(code), scale)));
}

__device__ __forceinline__ float load_q(const IndexerParams& p, long long row, int h, int d) {
  const long long off = row * p.q_stride[0] + h * p.q_stride[1] + d;
  if (p.q_e4m3) return e4m3_to_f32(static_cast<const unsigned char*>(p.q)[off]);
  return __uint_as_float(static_cast<unsigned>(static_cast<const unsigned short*>(p.q)[off]) << 16);
}

// Request and position of query row `row` (D4). Returns false for rows outside every
// request (prefill) - they are left untouched.
__device__ __forceinline__ bool locate(const IndexerParams& p, long long row, int* req,
                                       long long* pos) {
  if (p.batch <= 0) return false;
  long long start, q_len;
  int r;
  if (p.cu_seqlens == nullptr) {
    r = static_cast<int>(row / p.queries_per_request);
    if (r >= p.batch) return false;
    start = static_cast<long long>(r) * p.queries_per_request;
    q_len = p.queries_per_request;
  } else {
    int lo = 0, hi = p.batch - 1;
    while (lo < hi) {  // last r with cu[r] <= row
      const int mid = (lo + hi + 1) / 2;
      if (p.cu_seqlens[mid * p.cu_stride] <= row) lo = mid;
      else hi = mid - 1;
    }
    r = lo;
    start = p.cu_seqlens[lo * p.cu_stride];
    const long long end = p.cu_seqlens[(lo + 1) * p.cu_stride];
    if (row < start || row >= end) return false;
    q_len = end - start;
  }
  const long long seq_len = p.seq_lens[r * p.seq_stride];
  *req = r;
  *pos = seq_len - q_len + (row - start);
  return true;
}

__device__ __forceinline__ long long local_page(long long pos) { return pos < 0 ? -1 : pos / kT; }

// Decodes logical page `phys` to kt[d * 128 + t] (thread t decodes token t).
__device__ __forceinline__ void decode_page(const IndexerParams& p, long long phys, float* kt) {
  const int t = threadIdx.x;
  const unsigned char* row = p.k_data + phys * p.k_stride[0] + t * p.k_stride[1];
  if (p.k_format == 0) {
    const unsigned short* src = reinterpret_cast<const unsigned short*>(row);
    for (int d = 0; d < kD; ++d) kt[d * kT + t] = __uint_as_float(static_cast<unsigned>(src[d]) << 16);
  } else if (p.k_format == 1) {
    for (int d = 0; d < kD; ++d) kt[d * kT + t] = e4m3_to_f32(row[d]);
  } else {
    const unsigned char* sc = p.k_scale + phys * p.ks_stride[0] + t * p.ks_stride[1];
    for (int g = 0; g < 8; ++g) {
      const float s = e4m3_to_f32(sc[g]);
      for (int i = 0; i < 8; ++i) {
        const unsigned byte = row[g * 8 + i];
        kt[(g * 16 + 2 * i) * kT + t] = nvfp4_value(byte & 0xfu, s);
        kt[(g * 16 + 2 * i + 1) * kT + t] = nvfp4_value(byte >> 4, s);
      }
    }
  }
}

// Pass 1: grid (page b, block of rows). ws[(row * H + h) * W + b] for b < min(L, W).
__global__ void __launch_bounds__(kThreads) page_score_kernel(IndexerParams p, float* ws,
                                                               int rows_per_cta) {
  extern __shared__ float smem[];
  float* kt = smem;
  float* qf = kt + kD * kT;
  float* dots = qf + kD;
  const long long b = blockIdx.x;
  const long long W = p.bt_width;
  const long long row0 = static_cast<long long>(blockIdx.y) * rows_per_cta;
  const int t = threadIdx.x;
  long long cur_phys = -1;
  for (long long row = row0; row < row0 + rows_per_cta && row < p.num_rows; ++row) {
    int r;
    long long pos;
    if (!locate(p, row, &r, &pos)) continue;
    if (b >= local_page(pos)) continue;  // not a history page of this row
    const long long phys = p.block_table[r * p.bt_stride[0] + b * p.bt_stride[1]];
    float* out = ws + row * p.heads * W + b;
    if (phys < 0 || phys >= p.num_pages) {
      if (t < p.heads) out[t * W] = __uint_as_float(0x7fc00000u);
      continue;
    }
    if (phys != cur_phys) {
      __syncthreads();  // previous users of kt are done
      decode_page(p, phys, kt);
      cur_phys = phys;
    }
    for (int h = 0; h < p.heads; ++h) {
      __syncthreads();  // kt complete; previous qf / dots consumed
      qf[t] = load_q(p, row, h, t);
      __syncthreads();
      float s = 0.0f;
      for (int d = 0; d < kD; ++d) s = __fadd_rn(s, __fmul_rn(qf[d], kt[d * kT + t]));
      dots[t] = s;
      __syncthreads();
      if (t == 0) {
        float m = -INFINITY;
        bool any = false;
        for (int i = 0; i < kT; ++i) {
          const float v = dots[i];
          m = v > m ? v : m;
          any = any || !isnan(v);
        }
        if (m == -INFINITY && !any) m = __uint_as_float(0x7fc00000u);
        if (p.k_format == 2 && !isnan(m)) m = __fmul_rn(m, p.k_global);  // keep NaN bits
        out[h * W] = m;
      }
    }
  }
}

// D2 rank order: NaN below everything.
__device__ __forceinline__ bool ranks_above(float a, float b) {
  if (isnan(a)) return false;
  if (isnan(b)) return true;
  return a > b;
}

// Pass 2: one thread per (row, head); select_topk_row of the CPU backend.
__global__ void __launch_bounds__(kSelectThreads) select_kernel(IndexerParams p, const float* ws) {
  const long long v = static_cast<long long>(blockIdx.x) * kSelectThreads + threadIdx.x;
  if (v >= p.num_rows * p.heads) return;
  const long long row = v / p.heads;
  const int h = static_cast<int>(v % p.heads);
  int r;
  long long pos;
  if (!locate(p, row, &r, &pos)) return;
  const long long L = local_page(pos);
  const long long W = p.bt_width;
  const float* s = ws + v * W;
  const float kNaN = __uint_as_float(0x7fc00000u);
  const int K = p.topk_k;
  int* out = p.topk + row * p.topk_stride[0] + h * p.topk_stride[1];
  const long long os = p.topk_stride[2];
  if (L < 0) {
    for (int j = 0; j < K; ++j) out[j * os] = -1;
  } else if (L + 1 <= K) {
    for (int j = 0; j < K; ++j) out[j * os] = j <= L ? j : -1;
  } else {
    const int keep = K - 1;
    float best_s[16];
    int best_id[16];
    int count = 0;
    for (long long b = 0; keep > 0 && b < L; ++b) {
      const float sc = b < W ? s[b] : kNaN;
      if (count == keep && !ranks_above(sc, best_s[keep - 1])) continue;
      int pos2 = count < keep ? count : keep - 1;
      while (pos2 > 0 && ranks_above(sc, best_s[pos2 - 1])) {
        best_s[pos2] = best_s[pos2 - 1];
        best_id[pos2] = best_id[pos2 - 1];
        --pos2;
      }
      best_s[pos2] = sc;
      best_id[pos2] = static_cast<int>(b);
      if (count < keep) ++count;
    }
    for (int j = 0; j < keep; ++j) out[j * os] = best_id[j];
    out[keep * os] = static_cast<int>(L);
  }
  if (p.page_scores != nullptr) {
    float* o = p.page_scores + row * p.ps_stride[0] + h * p.ps_stride[1];
    for (long long b = 0; b < p.ps_width; ++b)
      o[b * p.ps_stride[2]] = b < L ? (b < W ? s[b] : kNaN) : -INFINITY;
  }
}

}  // namespace

int launch_indexer(const IndexerParams& p, void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (p.num_rows <= 0 || p.heads <= 0) return 0;
  static const cudaError_t attr_err = cudaFuncSetAttribute(
      page_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kScoreSmem));
  if (attr_err != cudaSuccess) return static_cast<int>(attr_err);
  const long long W = p.bt_width;
  float* ws = nullptr;
  const long long floats = p.num_rows * p.heads * W;
  if (floats > 0) {
    cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&ws),
                                      static_cast<std::size_t>(floats) * sizeof(float), stream);
    if (err != cudaSuccess) return static_cast<int>(err);
    int rows_per_cta = 8;
    while ((p.num_rows + rows_per_cta - 1) / rows_per_cta > 65535) rows_per_cta *= 2;
    const dim3 grid(static_cast<unsigned>(W),
                    static_cast<unsigned>((p.num_rows + rows_per_cta - 1) / rows_per_cta));
    page_score_kernel<<<grid, kThreads, kScoreSmem, stream>>>(p, ws, rows_per_cta);
    err = cudaGetLastError();
    if (err != cudaSuccess) {
      cudaFreeAsync(ws, stream);
      return static_cast<int>(err);
    }
  }
  const long long vecs = p.num_rows * p.heads;
  select_kernel<<<static_cast<unsigned>((vecs + kSelectThreads - 1) / kSelectThreads),
                  kSelectThreads, 0, stream>>>(p, ws);
  cudaError_t err = cudaGetLastError();
  if (ws != nullptr) {
    const cudaError_t ferr = cudaFreeAsync(ws, stream);
    if (err == cudaSuccess) err = ferr;
  }
  return static_cast<int>(err);
}

const char* indexer_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

}  // namespace flashmsa::cuda

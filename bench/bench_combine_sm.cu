// Microbenchmark for issue 4's combine-overlap plan (docs/prefill-design.md, sessions 17
// and 18): how many bytes per second ONE 256-thread CTA on one SM can read and merge
// when it does prefill_combine's work (16 BF16 partial rows of 128 dims plus (m c, l) per
// (query, head), merged with the LSE weights). The plan would run such combine tasks in
// the attention kernel's own queue, one CTA per SM at a time, so the per-SM rate, not the
// whole GPU's, sets the SM time the tasks take.
//
// Layout: o_part bf16 [16 slots][rows][128], ml_part f32x2 [16][rows], out bf16
// [rows][128]; every slot valid. (The prefill workspace was slot-major like this until
// session 23; it is query-major now, [rows][16 slots][128].) Two ways to load:
//   regs: each thread keeps 16 x 16-byte loads in flight (prefill_combine's pattern),
//         16 threads per row, 16 rows per CTA step (64 KB in flight per CTA);
//   bulk: a 3-stage shared-memory ring filled by 1D bulk copies (TMA, mbarrier
//         completion): per stage 16 rows x 16 slots (64 KB + 2 KB), 198 KB in flight.
// Each CTA owns a grid-stride share of 16-row blocks. The launch pins one CTA per SM
// (dynamic shared memory over half the SM) and is timed with CUDA events (median of 7
// after 2 warm-ups; the 537 MB of partials at 131,072 rows are 10x the L2, so every read
// comes from HBM). Output: CSV "mode,ctas,rows,us,total_gb_s,per_sm_gb_s" (per_sm_gb_s =
// total / ctas: per SM while ctas <= the SM count). Both modes' outputs are compared
// byte for byte once (a mismatch is an error, exit 1).
//
//   build/bench_combine_sm [--rows 131072] [--ctas 132,66,33,16,8] [--csv out.csv]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

constexpr int kSlots = 16;
constexpr int kRowsPerStep = 16;  // 16 threads (8 dims each) per row, 256 threads
constexpr int kThreads = 256;
constexpr int kStages = 3;
constexpr int kStageO = kSlots * kRowsPerStep * 256;  // bytes of O per stage
constexpr int kStageMl = kSlots * kRowsPerStep * 8;
constexpr int kStageBytes = kStageO + kStageMl;

// This file's CUDA_OK ends the process (bench_util.h's returns false from a bool function).
#undef CUDA_OK
#define CUDA_OK(x)                                                                      \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// The merge of one row's 16 slots for this thread's 8 dims (prefill_combine's formula).
__device__ __forceinline__ uint4 merge(const float2 (&ml)[kSlots], const uint4 (&ov)[kSlots]) {
  float M = -INFINITY;
#pragma unroll
  for (int k = 0; k < kSlots; ++k)
    if (ml[k].y != 0.0f) M = fmaxf(M, ml[k].x);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, W = 0.0f;
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    const float wt = ml[k].y != 0.0f ? __expf(ml[k].x - M) : 0.0f;
    W = fmaf(wt, ml[k].y, W);
    const std::uint32_t v[4] = {ov[k].x, ov[k].y, ov[k].z, ov[k].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[2 * i] += wt * __uint_as_float(v[i] << 16);
      acc[2 * i + 1] += wt * __uint_as_float(v[i] & 0xffff0000u);
    }
  }
  const float s = W > 0.0f ? 1.0f / W : 0.0f;
  uint4 o;
  __nv_bfloat162 b[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = __floats2bfloat162_rn(acc[2 * i] * s, acc[2 * i + 1] * s);
  o.x = *reinterpret_cast<std::uint32_t*>(&b[0]);
  o.y = *reinterpret_cast<std::uint32_t*>(&b[1]);
  o.z = *reinterpret_cast<std::uint32_t*>(&b[2]);
  o.w = *reinterpret_cast<std::uint32_t*>(&b[3]);
  return o;
}

// One row, this thread's 8 dims: all 16 slots' loads in flight, then the merge.
__device__ __forceinline__ void combine_row(const std::uint8_t* o_part, const float2* ml_part, std::uint8_t* out,
                                            long long rows, long long row, int d0) {
  float2 ml[kSlots];
  uint4 ov[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {
    ml[k] = ml_part[k * rows + row];
    ov[k] = *reinterpret_cast<const uint4*>(o_part + ((k * rows + row) * 128 + d0) * 2);
  }
  *reinterpret_cast<uint4*>(out + (row * 128 + d0) * 2) = merge(ml, ov);
}

__global__ void __launch_bounds__(kThreads) combine_regs(const std::uint8_t* o_part, const float2* ml_part,
                                                         std::uint8_t* out, long long rows) {
  const int r = threadIdx.x >> 4, d0 = (threadIdx.x & 15) * 8;
  for (long long base = static_cast<long long>(blockIdx.x) * kRowsPerStep; base < rows;
       base += static_cast<long long>(gridDim.x) * kRowsPerStep) {
    const long long row = base + r;
    if (row < rows) combine_row(o_part, ml_part, out, rows, row, d0);
  }
}

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__global__ void __launch_bounds__(kThreads) combine_bulk(const std::uint8_t* o_part, const float2* ml_part,
                                                         std::uint8_t* out, long long rows) {
  extern __shared__ __align__(128) std::uint8_t smem[];
  __shared__ __align__(8) std::uint64_t full[kStages];
  const int tid = threadIdx.x, r = tid >> 4, d0 = (tid & 15) * 8;
  const long long step = static_cast<long long>(gridDim.x) * kRowsPerStep;
  const long long first = static_cast<long long>(blockIdx.x) * kRowsPerStep;
  const int nsteps = first < rows ? static_cast<int>((rows - first + step - 1) / step) : 0;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s)
      asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"(smem_u32(&full[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Thread 0 fills stage i % kStages with block i: 16 slots x 16 rows of O (4 KB each)
  // and of (m, l) (128 B each). rows is a multiple of 16 (host check).
  auto issue = [&](int i) {
    const int s = i % kStages;
    const long long base = first + i * step;
    std::uint8_t* st = smem + s * kStageBytes;
    const std::uint32_t bar = smem_u32(&full[s]);
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" ::"r"(bar), "r"(kStageBytes) : "memory");
    for (int k = 0; k < kSlots; ++k) {
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_u32(st + k * kRowsPerStep * 256)),
                   "l"(o_part + (k * rows + base) * 256), "r"(kRowsPerStep * 256), "r"(bar)
                   : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                       smem_u32(st + kStageO + k * kRowsPerStep * 8)),
                   "l"(ml_part + k * rows + base), "r"(kRowsPerStep * 8), "r"(bar)
                   : "memory");
    }
  };
  if (tid == 0)
    for (int i = 0; i < kStages && i < nsteps; ++i) issue(i);
  for (int i = 0; i < nsteps; ++i) {
    const int s = i % kStages;
    const std::uint32_t bar = smem_u32(&full[s]), parity = (i / kStages) & 1;
    std::uint32_t done = 0;
    while (!done)
      asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                   : "=r"(done)
                   : "r"(bar), "r"(parity)
                   : "memory");
    const std::uint8_t* st = smem + s * kStageBytes;
    float2 ml[kSlots];
    uint4 ov[kSlots];
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      ml[k] = *reinterpret_cast<const float2*>(st + kStageO + (k * kRowsPerStep + r) * 8);
      ov[k] = *reinterpret_cast<const uint4*>(st + (k * kRowsPerStep + r) * 256 + d0 * 2);
    }
    const long long row = first + i * step + r;
    *reinterpret_cast<uint4*>(out + (row * 128 + d0) * 2) = merge(ml, ov);
    __syncthreads();  // stage s is free again
    if (tid == 0 && i + kStages < nsteps) issue(i + kStages);
  }
}

// occ: prefill_combine's own shape (16 threads per row, R rows per CTA, every load in
// flight before the merge, one row per thread group, no grid stride), many CTAs per SM,
// confined to `free` SMs while a hog kernel holds the others (session 22: a combine that
// runs beside the attention kernel on a few SMs left to it).
template <int R>
__global__ void __launch_bounds__(16 * R) combine_occ(const std::uint8_t* o_part, const float2* ml_part,
                                                      std::uint8_t* out, long long rows) {
  const long long row = static_cast<long long>(blockIdx.x) * R + (threadIdx.x >> 4);
  const int d0 = (threadIdx.x & 15) * 8;
  if (row < rows) combine_row(o_part, ml_part, out, rows, row, d0);
}

// Holds one SM per CTA (224 KB of shared memory, so no combine CTA with any dynamic
// shared memory fits beside it) until *release is set; counts itself in *ready first.
// Both spins give up after about 2 s (a hog that never became resident, a combine that
// never ran) and set flags[2], which the host reports as an error.
__global__ void hog(volatile int* release, int* ready) {
  if (threadIdx.x == 0) {
    atomicAdd(ready, 1);
    const long long t0 = clock64();
    while (*release == 0) {
      __nanosleep(1000);
      if (clock64() - t0 > 4000000000LL) {
        atomicExch(ready + 1, 1);
        break;
      }
    }
  }
}
__global__ void wait_ready(volatile int* ready, int n) {
  const long long t0 = clock64();
  while (*ready < n) {
    __nanosleep(500);
    if (clock64() - t0 > 4000000000LL) {
      atomicExch(const_cast<int*>(ready) + 1, 2);
      break;
    }
  }
}
__global__ void set_flag(int* release) { *release = 1; }

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  size_t p = 0;
  while (p < s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    v.push_back(std::stoi(s.substr(p, q - p)));
    p = q + 1;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  long long rows = 131072;  // 8192 queries x 16 heads: the (16/1, 8192, 32768) case
  std::string ctas = "132,66,33,16,8", csv, free_sms = "132,33,16,12,8";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rows" && i + 1 < argc) rows = std::atoll(argv[++i]);
    else if (a == "--ctas" && i + 1 < argc) ctas = argv[++i];
    else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--free-sms" && i + 1 < argc) free_sms = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_combine_sm [--rows N (multiple of 16)] [--ctas a,b,..] [--free-sms a,b,..] [--csv file]\n");
      return 2;
    }
  }
  if (rows <= 0 || rows % kRowsPerStep != 0) {
    std::fprintf(stderr, "--rows: expected a positive multiple of 16, got %lld\n", rows);
    return 2;
  }
  if (!flashmsa::bench::require_cuda_device("bench_combine_sm")) return 2;  // after the usage checks
  std::uint8_t *o = nullptr, *out = nullptr;
  float2* ml = nullptr;
  const size_t o_bytes = static_cast<size_t>(kSlots) * rows * 256, ml_bytes = static_cast<size_t>(kSlots) * rows * 8;
  CUDA_OK(cudaMalloc(&o, o_bytes));
  CUDA_OK(cudaMalloc(&ml, ml_bytes));
  CUDA_OK(cudaMalloc(&out, static_cast<size_t>(rows) * 256));
  std::vector<std::uint16_t> oh(static_cast<size_t>(kSlots) * rows * 128);
  for (size_t i = 0; i < oh.size(); ++i) oh[i] = static_cast<std::uint16_t>(0x3f80u + (i * 2654435761u >> 25));  // BF16 1..2
  CUDA_OK(cudaMemcpy(o, oh.data(), o_bytes, cudaMemcpyHostToDevice));
  std::vector<float2> mlh(static_cast<size_t>(kSlots) * rows);
  for (size_t i = 0; i < mlh.size(); ++i) mlh[i] = make_float2(static_cast<float>(i % 7), 1.0f + (i % 3));
  CUDA_OK(cudaMemcpy(ml, mlh.data(), ml_bytes, cudaMemcpyHostToDevice));
  const int pin = 120 * 1024;  // over half an SM's shared memory: one CTA per SM
  const int bulk_smem = kStages * kStageBytes;
  CUDA_OK(cudaFuncSetAttribute(combine_regs, cudaFuncAttributeMaxDynamicSharedMemorySize, pin));
  CUDA_OK(cudaFuncSetAttribute(combine_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize, bulk_smem));
  FILE* f = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  const char* hdr = "mode,ctas,rows,us,total_gb_s,per_sm_gb_s\n";
  std::printf("%s", hdr);
  if (f) std::fputs(hdr, f);
  const double bytes = static_cast<double>(o_bytes + ml_bytes) + rows * 256.0;
  // One CSV line: the median of the timed repeats, total and per-SM (per CTA) GB/s.
  auto report = [&](const char* mode, int n, std::vector<float>& ms) {
    std::sort(ms.begin(), ms.end());
    const double us = ms[ms.size() / 2] * 1000.0;
    char line[256];
    std::snprintf(line, sizeof line, "%s,%d,%lld,%.1f,%.1f,%.2f\n", mode, n, rows, us, bytes / (us * 1e-6) / 1e9,
                  bytes / (us * 1e-6) / 1e9 / n);
    std::printf("%s", line);
    if (f) std::fputs(line, f);
  };
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  {  // the two modes compute the same bytes
    std::vector<std::uint8_t> a(static_cast<size_t>(rows) * 256), b(a.size());
    const int n = std::max(1, std::min(132, static_cast<int>(rows / kRowsPerStep)));
    CUDA_OK(cudaMemset(out, 0xff, a.size()));
    combine_regs<<<n, kThreads, pin>>>(o, ml, out, rows);
    CUDA_OK(cudaMemcpy(a.data(), out, a.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemset(out, 0xff, b.size()));
    combine_bulk<<<n, kThreads, bulk_smem>>>(o, ml, out, rows);
    CUDA_OK(cudaMemcpy(b.data(), out, b.size(), cudaMemcpyDeviceToHost));
    if (a != b) {
      std::fprintf(stderr, "regs and bulk outputs differ\n");
      return 1;
    }
    std::fprintf(stderr, "regs and bulk outputs match (%zu bytes)\n", a.size());
  }
  for (int mode = 0; mode < 2; ++mode)
    for (int n : parse_list(ctas)) {
      std::vector<float> ms;
      for (int rep = 0; rep < 9; ++rep) {
        CUDA_OK(cudaEventRecord(e0));
        if (mode == 0) combine_regs<<<n, kThreads, pin>>>(o, ml, out, rows);
        else combine_bulk<<<n, kThreads, bulk_smem>>>(o, ml, out, rows);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaEventRecord(e1));
        CUDA_OK(cudaEventSynchronize(e1));
        float t = 0;
        CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
        if (rep >= 2) ms.push_back(t);
      }
      report(mode == 0 ? "regs" : "bulk", n, ms);
    }
  {  // occ: combine_occ on `free` SMs, the others held by hog (on its own stream)
    int nsm = 0;
    CUDA_OK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    int* flags = nullptr;  // [0] release, [1] ready, [2] a spin gave up
    CUDA_OK(cudaMalloc(&flags, 12));
    const int hog_smem = 224 * 1024, occ_smem = 4096;
    CUDA_OK(cudaFuncSetAttribute(hog, cudaFuncAttributeMaxDynamicSharedMemorySize, hog_smem));
    // Load every kernel of the concurrent pair before the first launch: with lazy module
    // loading, loading wait_ready while hog runs waits for hog, which waits for it.
    cudaFuncAttributes fa;
    CUDA_OK(cudaFuncGetAttributes(&fa, hog));
    CUDA_OK(cudaFuncGetAttributes(&fa, wait_ready));
    CUDA_OK(cudaFuncGetAttributes(&fa, set_flag));
    CUDA_OK(cudaFuncGetAttributes(&fa, combine_occ<2>));
    CUDA_OK(cudaFuncGetAttributes(&fa, combine_occ<8>));
    cudaStream_t sa, sb;
    CUDA_OK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    for (int rpc : {2, 8})
      for (int free : parse_list(free_sms)) {
        const int held = std::max(0, nsm - free);
        std::vector<float> ms;
        for (int rep = 0; rep < 7; ++rep) {
          CUDA_OK(cudaMemset(flags, 0, 12));
          CUDA_OK(cudaDeviceSynchronize());
          if (held > 0) {
            hog<<<held, 32, hog_smem, sa>>>(flags, flags + 1);
            CUDA_OK(cudaGetLastError());
            wait_ready<<<1, 1, 0, sb>>>(flags + 1, held);
            CUDA_OK(cudaGetLastError());
          }
          CUDA_OK(cudaEventRecord(e0, sb));
          const unsigned grid = static_cast<unsigned>((rows + rpc - 1) / rpc);
          if (rpc == 2) combine_occ<2><<<grid, 32, occ_smem, sb>>>(o, ml, out, rows);
          else combine_occ<8><<<grid, 128, occ_smem, sb>>>(o, ml, out, rows);
          CUDA_OK(cudaGetLastError());
          CUDA_OK(cudaEventRecord(e1, sb));
          set_flag<<<1, 1, 0, sb>>>(flags);
          CUDA_OK(cudaDeviceSynchronize());
          int gave_up = 0;
          CUDA_OK(cudaMemcpy(&gave_up, flags + 2, 4, cudaMemcpyDeviceToHost));
          if (gave_up != 0) {
            std::fprintf(stderr, "occ: free %d: a spin gave up (%d)\n", free, gave_up);
            return 1;
          }
          float t = 0;
          CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
          if (rep >= 2) ms.push_back(t);
        }
        report(rpc == 2 ? "occ2" : "occ8", free, ms);
      }
    CUDA_OK(cudaFree(flags));
  }
  if (f) std::fclose(f);
  return 0;
}

// SM90 KV-outer sparse attention for prefill (see prefill_kvouter.h for the design): the
// combine (stage 3) and the launch of the three stages. The plan is in prefill_plan.cu, the
// attention kernel in prefill_attention.cu; what they share in prefill_kvouter_detail.cuh.
#include "cuda/sm90/prefill_kvouter.h"

#include <cmath>

#include "cuda/sm90/pdl.cuh"
#include "cuda/sm90/prefill_kvouter_detail.cuh"
#include "cuda/sm90/workspace_pool.h"

namespace flashmsa::cuda {
namespace prefill {
namespace {

// ---------------------------------------------------------------------------------------
// Combine: 16 threads (8 dims each) per (query, head), kCombineRows of them per CTA.
// Slot j holds the unnormalised O_j (BF16) with its log scale s_j = m_j c and normaliser
// l_j; with M = max s_j over the slots with l_j != 0 and w_j = exp(s_j - M):
//   out = BF16(v_global * sum w_j O_j / sum w_j l_j),  LSE = M + ln(sum w_j l_j) + lse_bias
// (lse_bias = -ln 448 on the FP8 paths, whose P and l carry the factor 448, spec 3.4).
// A row without a slot of nonzero weight writes 0 and -inf (D5).
// (Query, head) rows per combine CTA, 16 threads each: 2, one warp. H200, session 21
// (runs H, I, bench_prefill interleaved): against 8 rows per CTA, 2 rows took 2-4 us less
// at 16/1 and 10-20 us less at 64/4; 16 and 32 rows took 4-80 us more.
#ifndef FLASHMSA_COMBINE_ROWS
#define FLASHMSA_COMBINE_ROWS 2
#endif
constexpr int kCombineRows = FLASHMSA_COMBINE_ROWS;
static_assert(kCombineRows >= 1 && 16 * kCombineRows <= 1024, "combine CTA: 16 threads per row, <= 1024 threads");
// The partials are read once, so they bypass L1: the non-coherent path without L1
// allocation (the attention kernel that wrote them has completed before the combine's
// pdl_wait returns). H200, session 29 runs E-G (docs/bench/h200-2026-11-30-s29): the
// combine 2-3 us shorter at (16/1, 8192, 32768) and (16/1, 8192, 0) in every pass; the
// larger shapes within their pass-to-pass spread. Reading the (m c, l) pairs through the
// non-coherent path too, or storing the output with st.global.cs, gained nothing more.
__device__ __forceinline__ uint4 ldg_stream(const void* ptr) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(ptr));
  return v;
}
// The output's 16 bytes in one store. (A uint4 assignment compiled to four 32-bit
// stores, st.global.u32 in the PTX, each a quarter of every sector it touched.)
__device__ __forceinline__ void stg_v4(void* ptr, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__global__ void __launch_bounds__(16 * kCombineRows) prefill_combine(const PrefillParams p, const Workspace w, float lse_bias) {
#ifdef FLASHMSA_TIMELINE
  const std::uint64_t t_start = tl::now();
#endif
  sm90::pdl_wait();  // a programmatic dependent of the attention kernel: everything below reads its partials
#ifdef FLASHMSA_TIMELINE
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    tl::put(w.tl, tl::kCombineStart, t_start);
    tl::put(w.tl, tl::kCombineWait, tl::now());
  }
#endif
  const long long idx = static_cast<long long>(blockIdx.x) * kCombineRows + (threadIdx.x >> 4);
  if (idx >= static_cast<long long>(p.num_rows) * p.num_q_heads) return;
  const long long t = idx / p.num_q_heads;
  const int h = static_cast<int>(idx % p.num_q_heads);
  const int G = p.num_q_heads / p.num_kv_heads;
  const int d0 = (threadIdx.x & 15) * 8;
  const unsigned mask = w.vmask[t * p.num_kv_heads + (h >> (__ffs(G) - 1))];  // G divides 16
  const long long qbase = (t * p.topk_k) * p.num_q_heads + h;  // row of slot k: qbase + k Hq
  // All loads first (predicated, fully unrolled: up to 16 in flight per thread), then
  // the merge in ascending slot order (fixed order, D9).
  float2 ml[16];
  uint4 ov[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const bool on = (mask >> k) & 1u;
    const long long row = qbase + static_cast<long long>(k) * p.num_q_heads;
    ml[k] = on ? *reinterpret_cast<const float2*>(w.ml_part + 2 * row) : make_float2(-INFINITY, 0.0f);
    ov[k] = on ? ldg_stream(w.o_part + row * 128 + d0) : make_uint4(0, 0, 0, 0);
  }
  // A slot counts when its normaliser is not 0 (NaN counts, so NaN inputs propagate).
  bool any = false;
  float M = -INFINITY;
#pragma unroll
  for (int k = 0; k < 16; ++k)
    if (ml[k].y != 0.0f) {
      any = true;
      M = fmaxf(M, ml[k].x);
    }
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float W = 0.0f;
  if (any) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      if (ml[k].y == 0.0f) continue;
      const float wt = expf(ml[k].x - M);
      W = fmaf(wt, ml[k].y, W);
      const std::uint32_t vv[4] = {ov[k].x, ov[k].y, ov[k].z, ov[k].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[2 * i] += wt * __uint_as_float(vv[i] << 16);
        acc[2 * i + 1] += wt * __uint_as_float(vv[i] & 0xffff0000u);
      }
    }
  }
  const float scale = any ? p.v_global / W : 0.0f;
  uint4 o;
  o.x = gm::pack_bf16x2(acc[0] * scale, acc[1] * scale);
  o.y = gm::pack_bf16x2(acc[2] * scale, acc[3] * scale);
  o.z = gm::pack_bf16x2(acc[4] * scale, acc[5] * scale);
  o.w = gm::pack_bf16x2(acc[6] * scale, acc[7] * scale);
  stg_v4(p.out + t * p.out_row_stride + h * p.out_head_stride + d0, o);
  if (d0 == 0 && p.lse != nullptr)
    p.lse[t * p.lse_row_stride + h * p.lse_head_stride] = any ? M + logf(W) + lse_bias : -INFINITY;
}

}  // namespace
}  // namespace prefill

std::int64_t prefill_kvouter_workspace_bytes(const PrefillParams& p) { return prefill::carve(p, nullptr).bytes; }

int launch_prefill_kvouter(const PrefillParams& p, int kv_format, void* stream_ptr) {
  using namespace prefill;
  if (p.num_rows == 0) return 0;
  const int G = p.num_q_heads / p.num_kv_heads;
  if (p.num_kv_heads <= 0 || G <= 0 || G > 16 || 16 % G != 0 || p.topk_k < 1 || p.topk_k > 16 ||
      p.bt_width <= 0 || p.batch <= 0 || kv_format < 0 || kv_format > 2 ||
      p.num_kv_heads * kMaxTilesPerUnit > kOrderClasses ||
      static_cast<std::int64_t>(p.topk_k) * p.num_rows * p.num_q_heads > kMaxPartialRows ||
      p.num_rows >= kMaxQueryRows || p.q_e4m3 != (kv_format != at::kBf16))
    return cudaErrorInvalidValue;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const std::int64_t bytes = prefill_kvouter_workspace_bytes(p);
  void* base = nullptr;
  cudaError_t err = workspace_alloc(&base, static_cast<size_t>(bytes), stream);
  if (err != cudaSuccess) return err;
  Workspace w = carve(p, base);
  w.tl = tl::buffer();  // null unless FLASHMSA_TIMELINE
  err = launch_plan(p, w, stream);
  if (err == cudaSuccess && p.stop_after != 1) err = launch_attention(p, w, kv_format, stream);
  if (err == cudaSuccess && p.stop_after == 0) {
    const long long rows = static_cast<long long>(p.num_rows) * p.num_q_heads;
    const float lse_bias = kv_format == at::kBf16 ? 0.0f : -std::log(448.0f);
    err = sm90::launch_pdl(prefill_combine, static_cast<unsigned>((rows + kCombineRows - 1) / kCombineRows),
                           16 * kCombineRows, 0, stream, (prefill_pdl() & 2) != 0, p,
                           w, lse_bias);
  }
  const cudaError_t ferr = workspace_free(base, stream);
  return err != cudaSuccess ? err : ferr;
}

}  // namespace flashmsa::cuda

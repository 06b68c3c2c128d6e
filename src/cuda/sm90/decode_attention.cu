// SM90 sparse decode attention, v1 (see decode_attention.h for the design).
#include "cuda/sm90/decode_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>

namespace flashmsa::cuda {
namespace {

constexpr int kThreads = 128;                 // 4 warps
constexpr int kPad = 136;                     // bf16 per shared row (128 + 8: conflict-free)
constexpr int kTileBytes = 128 * kPad * 2;    // one BF16 K or V page tile
constexpr int kQBytes = 16 * kPad * 2;        // Q tile: 16 rows (G <= 16, zero padded)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLog2_448 = 8.80735492706298828125f;  // float(log2(448)), spec 3.4

enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };

template <int FMT>
struct Layout {
  // Raw bytes of one page side as it arrives from global memory.
  static constexpr int kRawBytes = FMT == kBf16 ? kTileBytes : (FMT == kFp8 ? 128 * 128 : 128 * 64);
  static constexpr int kStageBytes = 2 * kRawBytes;               // K + V
  static constexpr int kConvBytes = FMT == kBf16 ? 0 : 2 * kTileBytes;
  static constexpr int kMergeBytes = 4 * 16 * 128 * 4 + 2 * 4 * 16 * 4;
  static constexpr int kBodyBytes = 2 * kStageBytes + kConvBytes;
  static constexpr int kSmemBytes = kQBytes + (kBodyBytes > kMergeBytes ? kBodyBytes : kMergeBytes);
};

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::); }

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

__device__ __forceinline__ float e4m3_to_f32(unsigned char b) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3);
  return __half2float(__half(h));
}

__device__ __forceinline__ float e4m3_sat_round(float x) {  // E4M3_sat(x) as float
  return e4m3_to_f32(static_cast<unsigned char>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)));
}

__device__ __forceinline__ float e2m1_to_f32(unsigned code) {
  // E2M1: e = bits 2..1, m = bit 0; e == 0 -> m * 0.5, else (1 + m/2) * 2^(e-1).
  const unsigned e = (code >> 1) & 3u, m = code & 1u;
  const float v = e ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : 0.5f * static_cast<float>(m);
  return (code & 8u) ? -v : v;
}

// Issues the cp.async copies of one page's K and V (raw format) into `stage`.
template <int FMT>
__device__ __forceinline__ void load_page(const DecodeParams& p, unsigned char* stage, int phys,
                                          int g, int tid) {
  unsigned char* dk = stage;
  unsigned char* dv = stage + Layout<FMT>::kRawBytes;
  if constexpr (FMT == kBf16) {
    const __nv_bfloat16* k = static_cast<const __nv_bfloat16*>(p.k_data) + phys * p.k_stride[0] + g * p.k_stride[1];
    const __nv_bfloat16* v = static_cast<const __nv_bfloat16*>(p.v_data) + phys * p.v_stride[0] + g * p.v_stride[1];
    for (int c = tid; c < 128 * 16; c += kThreads) {
      const int t = c >> 4, ch = c & 15;
      cp_async16(dk + (t * kPad + ch * 8) * 2, k + t * p.k_stride[2] + ch * 8);
      cp_async16(dv + (t * kPad + ch * 8) * 2, v + t * p.v_stride[2] + ch * 8);
    }
  } else {
    constexpr int kRowBytes = FMT == kFp8 ? 128 : 64;
    constexpr int kChunks = kRowBytes / 16;
    const unsigned char* k = static_cast<const unsigned char*>(p.k_data) + phys * p.k_stride[0] + g * p.k_stride[1];
    const unsigned char* v = static_cast<const unsigned char*>(p.v_data) + phys * p.v_stride[0] + g * p.v_stride[1];
    for (int c = tid; c < 128 * kChunks; c += kThreads) {
      const int t = c / kChunks, ch = c % kChunks;
      cp_async16(dk + t * kRowBytes + ch * 16, k + t * p.k_stride[2] + ch * 16);
      cp_async16(dv + t * kRowBytes + ch * 16, v + t * p.v_stride[2] + ch * 16);
    }
  }
}

// Converts one raw FP8 / NVFP4 side into a padded BF16 tile (exact values).
template <int FMT>
__device__ __forceinline__ void convert_side(const unsigned char* raw, __nv_bfloat16* tile,
                                             const std::uint8_t* scale_plane,
                                             const std::int64_t* scale_stride, bool swizzled,
                                             int tid) {
  if constexpr (FMT == kFp8) {
    for (int c = tid; c < 128 * 8; c += kThreads) {
      const int t = c >> 3, ch = c & 7;
      const uint4 in = *reinterpret_cast<const uint4*>(raw + t * 128 + ch * 16);
      const unsigned char* b = reinterpret_cast<const unsigned char*>(&in);
      unsigned out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = pack_bf16(e4m3_to_f32(b[2 * i]), e4m3_to_f32(b[2 * i + 1]));
      uint4* dst = reinterpret_cast<uint4*>(tile + t * kPad + ch * 16);
      dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
      dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
  } else if constexpr (FMT == kNvfp4) {
    for (int c = tid; c < 128 * 8; c += kThreads) {
      const int t = c >> 3, grp = c & 7;
      const uint2 in = *reinterpret_cast<const uint2*>(raw + t * 64 + grp * 8);
      const unsigned char* b = reinterpret_cast<const unsigned char*>(&in);
      const std::int64_t so = swizzled ? 32 * (t / 4) + 4 * grp + (t % 4) : t * scale_stride[2] + grp;
      const float s = e4m3_to_f32(scale_plane[so]);
      unsigned out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        out[i] = pack_bf16(e4m3_sat_round(e2m1_to_f32(b[i] & 0xfu) * s),
                           e4m3_sat_round(e2m1_to_f32(b[i] >> 4) * s));
      uint4* dst = reinterpret_cast<uint4*>(tile + t * kPad + grp * 16);
      dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
      dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
  }
}

template <int FMT, bool FP8P>
__global__ void __launch_bounds__(kThreads, 1) sparse_decode_kernel(const DecodeParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);
  unsigned char* body = smem + kQBytes;
  __shared__ int s_logical[16];
  __shared__ int s_phys[16];
  __shared__ int s_count;

  const int row = blockIdx.x, g = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int G = p.num_q_heads / p.num_kv_heads;
  const int b = row / p.queries_per_request;
  const long long seq_len = p.seq_lens[b * p.seq_lens_stride];
  const long long pos = seq_len - p.queries_per_request + row % p.queries_per_request;

  // Valid selected pages (D1): sorted, unique, in range; never an out-of-bounds read.
  if (tid == 0) {
    int n = 0;
    if (pos >= 0) {
      const long long req_pages = (seq_len + 127) / 128;
      const long long local = pos / 128;
      for (int k = 0; k < p.topk_k; ++k) {
        const int e = p.topk[row * p.topk_stride[0] + g * p.topk_stride[1] + k * p.topk_stride[2]];
        if (e < 0 || e >= req_pages || e > local || e >= p.bt_width) continue;
        const int phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
        if (phys < 0 || phys >= p.num_pages) continue;
        int at = n;
        bool dup = false;
        while (at > 0 && s_logical[at - 1] >= e) {
          if (s_logical[at - 1] == e) { dup = true; break; }
          --at;
        }
        if (dup) continue;
        for (int i = n; i > at; --i) { s_logical[i] = s_logical[i - 1]; s_phys[i] = s_phys[i - 1]; }
        s_logical[at] = e;
        s_phys[at] = phys;
        ++n;
      }
    }
    s_count = n;
  }
  // Q tile: G rows of bf16 (e4m3 converted exactly), rows >= G zero.
  for (int c = tid; c < 16 * 16; c += kThreads) {
    const int r = c >> 4, ch = c & 15;
    unsigned w[4] = {0u, 0u, 0u, 0u};
    if (r < G) {
      const std::int64_t off = row * p.q_row_stride + (g * G + r) * p.q_head_stride + ch * 8;
      if (FP8P) {
        const uint2 in = *reinterpret_cast<const uint2*>(static_cast<const unsigned char*>(p.q) + off);
        const unsigned char* bq = reinterpret_cast<const unsigned char*>(&in);
#pragma unroll
        for (int i = 0; i < 4; ++i) w[i] = pack_bf16(e4m3_to_f32(bq[2 * i]), e4m3_to_f32(bq[2 * i + 1]));
      } else {
        const uint4 in = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.q) + off);
        w[0] = in.x; w[1] = in.y; w[2] = in.z; w[3] = in.w;
      }
    }
    *reinterpret_cast<uint4*>(sQ + r * kPad + ch * 8) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  __syncthreads();

  const int n = s_count;
  const int per = (n + p.num_splits - 1) / p.num_splits;
  const int begin = split * per;
  const int end = min(n, begin + per);
  const float c2 = p.c * kLog2e;
  const long long local = pos >= 0 ? pos / 128 : -1;
  const int local_last = pos >= 0 ? static_cast<int>(pos % 128) : -1;

  float m[2] = {-INFINITY, -INFINITY};  // running max of raw dots per thread row (r0, r0+8)
  float l[2] = {0.0f, 0.0f};            // thread-partial normalisers
  float o[16][4];
#pragma unroll
  for (int i = 0; i < 16; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

  if (begin < end) {
    unsigned qa[8][4];
    {
      const int r0 = lane >> 2, cq = (lane & 3) * 2;
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        qa[ks][0] = *reinterpret_cast<const unsigned*>(sQ + r0 * kPad + ks * 16 + cq);
        qa[ks][1] = *reinterpret_cast<const unsigned*>(sQ + (r0 + 8) * kPad + ks * 16 + cq);
        qa[ks][2] = *reinterpret_cast<const unsigned*>(sQ + r0 * kPad + ks * 16 + cq + 8);
        qa[ks][3] = *reinterpret_cast<const unsigned*>(sQ + (r0 + 8) * kPad + ks * 16 + cq + 8);
      }
    }
    load_page<FMT>(p, body, s_phys[begin], g, tid);
    cp_async_commit();
    for (int i = begin; i < end; ++i) {
      unsigned char* stage = body + ((i - begin) & 1) * Layout<FMT>::kStageBytes;
      if (i + 1 < end)
        load_page<FMT>(p, body + ((i + 1 - begin) & 1) * Layout<FMT>::kStageBytes, s_phys[i + 1], g, tid);
      cp_async_commit();
      cp_async_wait1();
      __syncthreads();
      const __nv_bfloat16* K;
      const __nv_bfloat16* V;
      if constexpr (FMT == kBf16) {
        K = reinterpret_cast<const __nv_bfloat16*>(stage);
        V = reinterpret_cast<const __nv_bfloat16*>(stage + Layout<FMT>::kRawBytes);
      } else {
        __nv_bfloat16* ck = reinterpret_cast<__nv_bfloat16*>(body + 2 * Layout<FMT>::kStageBytes);
        __nv_bfloat16* cv = ck + 128 * kPad;
        const int phys = s_phys[i];
        convert_side<FMT>(stage, ck, p.k_scale + phys * p.ks_stride[0] + g * p.ks_stride[1], p.ks_stride,
                          p.k_swizzled, tid);
        convert_side<FMT>(stage + Layout<FMT>::kRawBytes, cv,
                          p.v_scale + phys * p.vs_stride[0] + g * p.vs_stride[1], p.vs_stride,
                          p.v_swizzled, tid);
        __syncthreads();
        K = ck;
        V = cv;
      }

      // S = Q K^T for this warp's 32 tokens.
      float s[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int tok = warp * 32 + nt * 8 + (lane >> 2);
          const unsigned* kp = reinterpret_cast<const unsigned*>(K + tok * kPad + ks * 16 + (lane & 3) * 2);
          mma_bf16(s[nt], qa[ks], kp[0], kp[4]);
        }
      }
      // Causal mask inside the local page (t <= p).
      if (s_logical[i] == local) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int tk = warp * 32 + nt * 8 + (lane & 3) * 2 + (j & 1);
            if (tk > local_last) s[nt][j] = -INFINITY;
          }
      }
      // Online softmax (per warp; rows r0 = lane/4 -> j 0,1 and r0+8 -> j 2,3).
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
      }
      float bias[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float m_new = fmaxf(m[r], mx[r]);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = exp2f((m[r] - m_use) * c2);
        m[r] = m_new;
        l[r] *= alpha;
#pragma unroll
        for (int dt = 0; dt < 16; ++dt) {
          o[dt][2 * r] *= alpha;
          o[dt][2 * r + 1] *= alpha;
        }
        bias[r] = FP8P ? fmaf(-m_use, c2, kLog2_448) : -m_use * c2;
      }
      unsigned pa[2][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        float pv[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float e = exp2f(fmaf(s[nt][j], c2, bias[j >> 1]));  // masked: exp2(-inf) = 0
          l[j >> 1] += e;                                             // unrounded normaliser
          pv[j] = FP8P ? e4m3_sat_round(e) : e;                       // PV operand (D7)
        }
        pa[nt >> 1][(nt & 1) * 2 + 0] = pack_bf16(pv[0], pv[1]);
        pa[nt >> 1][(nt & 1) * 2 + 1] = pack_bf16(pv[2], pv[3]);
      }
      // O += P V over this warp's 32 tokens.
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        const int mi = lane >> 3, rr = lane & 7;
        const int tok = warp * 32 + kk * 16 + (mi & 1) * 8 + rr;
#pragma unroll
        for (int dp = 0; dp < 8; ++dp) {
          unsigned bv[4];
          ldmatrix_x4_trans(bv, V + tok * kPad + dp * 16 + (mi >> 1) * 8);
          mma_bf16(o[2 * dp], pa[kk], bv[0], bv[1]);
          mma_bf16(o[2 * dp + 1], pa[kk], bv[2], bv[3]);
        }
      }
      __syncthreads();  // the stage / conversion buffers are reused next iteration
    }
  }

  // Merge the 4 warps in shared memory (reuses the page buffers).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  float* sm_o = reinterpret_cast<float*>(body);        // [4][16][128]
  float* sm_m = sm_o + 4 * 16 * 128;                   // [4][16]
  float* sm_l = sm_m + 4 * 16;                         // [4][16]
  {
    const int r0 = lane >> 2, cq = (lane & 3) * 2;
    if ((lane & 3) == 0) {
      sm_m[warp * 16 + r0] = m[0];
      sm_m[warp * 16 + r0 + 8] = m[1];
      sm_l[warp * 16 + r0] = l[0];
      sm_l[warp * 16 + r0 + 8] = l[1];
    }
#pragma unroll
    for (int dt = 0; dt < 16; ++dt) {
      float* o0 = sm_o + (warp * 16 + r0) * 128 + dt * 8 + cq;
      float* o1 = sm_o + (warp * 16 + r0 + 8) * 128 + dt * 8 + cq;
      o0[0] = o[dt][0];
      o0[1] = o[dt][1];
      o1[0] = o[dt][2];
      o1[1] = o[dt][3];
    }
  }
  __syncthreads();
  for (int idx = tid; idx < G * 128; idx += kThreads) {
    const int r = idx >> 7, d = idx & 127;
    const int h = g * G + r;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < 4; ++w) M = fmaxf(M, sm_m[w * 16 + r]);
    float out_v = 0.0f, lse_v = -INFINITY;
    if (M != -INFINITY) {
      float L = 0.0f, acc = 0.0f;
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float sc = exp2f((sm_m[w * 16 + r] - M) * c2);
        L += sm_l[w * 16 + r] * sc;
        acc += sm_o[(w * 16 + r) * 128 + d] * sc;
      }
      out_v = acc / L;
      lse_v = M * p.c + logf(FP8P ? L / 448.0f : L);
    }
    if (p.num_splits == 1) {
      p.out[row * p.out_row_stride + h * p.out_head_stride + d] =
          __bfloat16_as_ushort(__float2bfloat16_rn(out_v * p.v_global));
      if (d == 0 && p.lse != nullptr) p.lse[row * p.lse_row_stride + h * p.lse_head_stride] = lse_v;
    } else {
      const std::int64_t slot = (static_cast<std::int64_t>(row) * p.num_q_heads + h) * p.num_splits + split;
      p.o_partial[slot * 128 + d] = out_v;
      if (d == 0) p.lse_partial[slot] = lse_v;
    }
  }
}

// Merges the per-split (O, LSE) pairs: one CTA of 128 threads (dims) per (row, head).
__global__ void __launch_bounds__(128) sparse_decode_combine(const DecodeParams p) {
  const int row = blockIdx.x / p.num_q_heads;
  const int h = blockIdx.x % p.num_q_heads;
  const int d = threadIdx.x;
  const std::int64_t base = (static_cast<std::int64_t>(row) * p.num_q_heads + h) * p.num_splits;
  float M = -INFINITY;
  for (int s = 0; s < p.num_splits; ++s) M = fmaxf(M, p.lse_partial[base + s]);
  float out_v = 0.0f, lse_v = -INFINITY;
  if (M != -INFINITY) {
    float W = 0.0f, acc = 0.0f;
    for (int s = 0; s < p.num_splits; ++s) {
      const float w = expf(p.lse_partial[base + s] - M);
      W += w;
      acc += w * p.o_partial[(base + s) * 128 + d];
    }
    out_v = acc / W;
    lse_v = M + logf(W);
  }
  p.out[row * p.out_row_stride + h * p.out_head_stride + d] =
      __bfloat16_as_ushort(__float2bfloat16_rn(out_v * p.v_global));
  if (d == 0 && p.lse != nullptr) p.lse[row * p.lse_row_stride + h * p.lse_head_stride] = lse_v;
}

template <int FMT, bool FP8P>
cudaError_t launch(const DecodeParams& p, cudaStream_t stream) {
  constexpr int smem = Layout<FMT>::kSmemBytes;
  static cudaError_t attr = cudaFuncSetAttribute(sparse_decode_kernel<FMT, FP8P>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attr != cudaSuccess) return attr;
  dim3 grid(p.num_rows, p.num_kv_heads, p.num_splits);
  sparse_decode_kernel<FMT, FP8P><<<grid, kThreads, smem, stream>>>(p);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || p.num_splits == 1) return err;
  sparse_decode_combine<<<p.num_rows * p.num_q_heads, 128, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

int launch_sparse_decode(const DecodeParams& p, int kv_format, bool q_is_e4m3, void* stream) {
  if (p.num_rows == 0) return 0;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (kv_format) {
    case kBf16: return q_is_e4m3 ? cudaErrorInvalidValue : launch<kBf16, false>(p, s);
    case kFp8: return q_is_e4m3 ? launch<kFp8, true>(p, s) : cudaErrorInvalidValue;
    case kNvfp4: return q_is_e4m3 ? launch<kNvfp4, true>(p, s) : cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

int choose_num_splits(int num_rows, int num_kv_heads, int num_sms) {
  const long long ctas = static_cast<long long>(num_rows) * num_kv_heads;
  if (ctas <= 0) return 1;
  long long splits = (2LL * num_sms + ctas - 1) / ctas;
  if (splits < 1) splits = 1;
  if (splits > 8) splits = 8;  // >= 2 pages per split for a full top-16 row
  return static_cast<int>(splits);
}

std::int64_t decode_workspace_floats(int num_rows, int num_q_heads, int num_splits) {
  if (num_splits <= 1) return 0;
  return static_cast<std::int64_t>(num_rows) * num_q_heads * num_splits * 129;
}

int device_malloc(void** ptr, std::int64_t bytes) {
  return cudaMalloc(ptr, static_cast<size_t>(bytes));
}
int device_free(void* ptr) { return ptr ? cudaFree(ptr) : 0; }
int device_sm_count(int* count) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  return cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, dev);
}
const char* error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

}  // namespace flashmsa::cuda

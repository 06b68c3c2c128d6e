// SM90 sparse attention for decode and prefill (see decode_attention.h for the design).
#include "cuda/sm90/decode_attention.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>

namespace flashmsa::cuda {
namespace {

constexpr int kPad = 136;                     // bf16 per shared row (128 + 8: conflict-free)
constexpr int kTileBytes = 128 * kPad * 2;    // one BF16 K or V page tile
// Query rows (draft x head) per CTA: 64 (4 warps) or 128 (8 warps), 16 rows per warp.
template <int ROWS>
struct Cta {
  static constexpr int kThreads = ROWS * 2;
  static constexpr int kQBytes = ROWS * kPad * 2;  // Q tile
};
constexpr int kMaxTopkEntries = 16;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLog2_448 = 8.80735492706298828125f;  // float(log2(448)), spec 3.4

enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };

template <int FMT, int ROWS>
struct Layout {
  // Raw bytes of one page side as it arrives from global memory.
  static constexpr int kRawBytes = FMT == kBf16 ? kTileBytes : (FMT == kFp8 ? 128 * 128 : 128 * 64);
  static constexpr int kStageBytes = 2 * kRawBytes;               // K + V
  static constexpr int kConvBytes = FMT == kBf16 ? 0 : 2 * kTileBytes;
  static constexpr int kSmemBytes = Cta<ROWS>::kQBytes + 2 * kStageBytes + kConvBytes;
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

__device__ __forceinline__ void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                        unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// FP8 paths run the MMAs in F16: every E4M3 value (Q, K, V, P) and every
// E4M3_sat(e2m1 x scale) is exact in F16, so the products equal the FP8 MMA's.
template <bool F16>
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (F16) mma_f16(d, a, b0, b1);
  else mma_bf16(d, a, b0, b1);
}

// Two E4M3 bytes (lo = element 0) -> f16x2, exact.
__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned short v) {
  unsigned r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
  return r;
}
// f16x2 -> E4M3_sat x2 -> f16x2 (round to nearest even, saturating).
__device__ __forceinline__ unsigned f16x2_e4m3_round(unsigned v) {
  unsigned short q;
  asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(q) : "r"(v));
  return e4m3x2_to_f16x2(q);
}
// (lo, hi) floats -> E4M3_sat x2 -> f16x2 (the P operand of the FP8 paths, spec 3.4).
__device__ __forceinline__ unsigned f32x2_e4m3_f16x2(float lo, float hi) {
  unsigned short q;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(q) : "f"(hi), "f"(lo));
  return e4m3x2_to_f16x2(q);
}
// E2M1 code (4 bits) -> f16 bits, exact.
__device__ __forceinline__ unsigned e2m1_to_f16_bits(unsigned code) {
  const unsigned e = (code >> 1) & 3u, m = code & 1u;
  const unsigned mag = e ? (((e + 14u) << 10) | (m << 9)) : (m ? 0x3800u : 0u);
  return mag | ((code & 8u) << 12);
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

// Issues the cp.async copies of one page's K and V (raw format) into `stage`.
template <int FMT, int kThreads>
__device__ __forceinline__ void load_page(const DecodeParams& p, unsigned char* stage, int phys,
                                          int g, int tid) {
  unsigned char* dk = stage;
  unsigned char* dv = stage + Layout<FMT, 64>::kRawBytes;
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
template <int FMT, int kThreads>
__device__ __forceinline__ void convert_side(const unsigned char* raw, std::uint16_t* tile,
                                             const std::uint8_t* scale_plane,
                                             const std::int64_t* scale_stride, bool swizzled,
                                             int tid) {
  if constexpr (FMT == kFp8) {
    for (int c = tid; c < 128 * 8; c += kThreads) {
      const int t = c >> 3, ch = c & 7;
      const uint4 in = *reinterpret_cast<const uint4*>(raw + t * 128 + ch * 16);
      const unsigned short* h = reinterpret_cast<const unsigned short*>(&in);
      unsigned out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] = e4m3x2_to_f16x2(h[i]);
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
      const unsigned s16 = e4m3x2_to_f16x2(static_cast<unsigned short>(scale_plane[so] * 0x101u));
      const __half2 s2 = *reinterpret_cast<const __half2*>(&s16);
      unsigned out[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const unsigned x = e2m1_to_f16_bits(b[i] & 0xfu) | (e2m1_to_f16_bits(b[i] >> 4) << 16);
        __half2 prod = __hmul2(*reinterpret_cast<const __half2*>(&x), s2);  // exact in f16
        out[i] = f16x2_e4m3_round(*reinterpret_cast<unsigned*>(&prod));      // E4M3_sat(e2m1 x s)
      }
      uint4* dst = reinterpret_cast<uint4*>(tile + t * kPad + grp * 16);
      dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
      dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
    }
  }
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

constexpr int kMaxCand = 32 * kMaxTopkEntries;  // drafts x top-k entries of one CTA

// Query row -> (request b, position p) (D4): decode rows are b*Q + j at
// p = seq_len - Q + j; prefill rows are found in cu_seqlens_q (last b with cu[b] <= row)
// at p = seq_len - q_len + (row - cu[b]). Never reads outside [0, batch).
__device__ __forceinline__ void locate_row(const DecodeParams& p, long long qrow, int* b,
                                           long long* pos) {
  long long seq_len, start, q_len;
  if (p.cu_seqlens == nullptr) {
    *b = static_cast<int>(qrow / p.queries_per_request);
    start = static_cast<long long>(*b) * p.queries_per_request;
    q_len = p.queries_per_request;
  } else {
    int lo = 0, hi = p.batch - 1;
    while (lo < hi) {  // last b with cu[b] <= qrow
      const int mid = (lo + hi + 1) / 2;
      if (p.cu_seqlens[mid * p.cu_stride] <= qrow) lo = mid;
      else hi = mid - 1;
    }
    *b = lo;
    start = p.cu_seqlens[lo * p.cu_stride];
    q_len = p.cu_seqlens[(lo + 1) * p.cu_stride] - start;
  }
  seq_len = p.seq_lens[static_cast<long long>(*b) * p.seq_lens_stride];
  *pos = seq_len - q_len + (qrow - start);
}

// One CTA = (block of R consecutive query rows of the flattened batch, KV head g, KV
// split). Tile rows: r -> query row q0 + r / G, head g*G + r % G (R*G <= ROWS, R <= 32).
// The CTA stages each page of the union of its rows' selections once (keyed by
// (request, logical page), sorted); warp w owns tile rows [16w, 16w+16) and every token
// of the page, so each warp runs its own online softmax with no cross-warp merge.
template <int FMT, bool FP8P, int ROWS>
__global__ void __launch_bounds__(Cta<ROWS>::kThreads, 1) sparse_attention_kernel(const DecodeParams p) {
  constexpr int kThreads = Cta<ROWS>::kThreads;
  constexpr int kQBytes = Cta<ROWS>::kQBytes;
  using L = Layout<FMT, ROWS>;
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem);  // [ROWS][kPad]
  unsigned char* body = smem + kQBytes;
  __shared__ long long s_cand[kMaxCand];     // (request << 32) | logical page, -1 invalid
  __shared__ int s_cand_phys[kMaxCand];
  __shared__ unsigned char s_first[kMaxCand];
  __shared__ long long s_key[kMaxCand];      // sorted union
  __shared__ int s_phys[kMaxCand];
  __shared__ unsigned s_mask[kMaxCand];      // bit j: query row q0 + j selected the page
  __shared__ int s_qb[32];
  __shared__ long long s_qpos[32];
  __shared__ int s_count;

  const int G = p.num_q_heads / p.num_kv_heads;
  const int R = p.queries_per_cta;
  const int nqb = (p.num_rows + R - 1) / R;
  const int qb = blockIdx.x % nqb;
  const int g = blockIdx.x / nqb;
  const int split = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const long long q0 = static_cast<long long>(qb) * R;
  const int nq = static_cast<int>(min(static_cast<long long>(R), p.num_rows - q0));
  const int nrows = nq * G;  // valid tile rows
  const int K = p.topk_k;

  if (tid < nq) {
    int b;
    long long pos;
    locate_row(p, q0 + tid, &b, &pos);
    s_qb[tid] = b;
    s_qpos[tid] = pos;
  }
  if (tid == 0) s_count = 0;
  __syncthreads();
  // 1. Candidates: every (query row, top-k entry) of the block, validated (D1).
  for (int c = tid; c < nq * K; c += kThreads) {
    const int j = c / K, k = c % K;
    const int b = s_qb[j];
    const long long pos = s_qpos[j];
    const long long seq_len = p.seq_lens[static_cast<long long>(b) * p.seq_lens_stride];
    const long long req_pages = (seq_len + 127) / 128;
    const long long e = p.topk[(q0 + j) * p.topk_stride[0] + g * p.topk_stride[1] + k * p.topk_stride[2]];
    long long key = -1;
    int phys = -1;
    if (pos >= 0 && e >= 0 && e < req_pages && e <= pos / 128 && e < p.bt_width) {
      phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
      if (phys >= 0 && phys < p.num_pages) key = (static_cast<long long>(b) << 32) | e;
    }
    s_cand[c] = key;
    s_cand_phys[c] = phys;
  }
  // Q tile: rows >= nrows zero; e4m3 converted exactly to f16.
  for (int c = tid; c < ROWS * 16; c += kThreads) {
    const int r = c >> 4, ch = c & 15;
    unsigned w[4] = {0u, 0u, 0u, 0u};
    if (r < nrows) {
      const long long qrow = q0 + r / G;
      const std::int64_t off = qrow * p.q_row_stride + (g * G + r % G) * p.q_head_stride + ch * 8;
      if (FP8P) {
        const uint2 in = *reinterpret_cast<const uint2*>(static_cast<const unsigned char*>(p.q) + off);
        const unsigned char* bq = reinterpret_cast<const unsigned char*>(&in);
#pragma unroll
        for (int i = 0; i < 4; ++i)
          w[i] = e4m3x2_to_f16x2(static_cast<unsigned short>(bq[2 * i] | (bq[2 * i + 1] << 8)));
      } else {
        const uint4 in = *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.q) + off);
        w[0] = in.x; w[1] = in.y; w[2] = in.z; w[3] = in.w;
      }
    }
    *reinterpret_cast<uint4*>(sQ + r * kPad + ch * 8) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  __syncthreads();
  // 2. First occurrence of each key.
  const int ncand = nq * K;
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = s_cand[c];
    bool first = e >= 0;
    for (int k = 0; k < c && first; ++k) first = s_cand[k] != e;
    s_first[c] = first;
  }
  __syncthreads();
  // 3. Sorted union: rank of a key = number of distinct smaller keys; row masks.
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = s_cand[c];
    if (e < 0) continue;
    int rank = 0;
    for (int k = 0; k < ncand; ++k) rank += (s_first[k] && s_cand[k] < e) ? 1 : 0;
    if (s_first[c]) {
      s_key[rank] = e;
      s_phys[rank] = s_cand_phys[c];
      s_mask[rank] = 0u;
      atomicAdd(&s_count, 1);
    }
  }
  __syncthreads();
  for (int c = tid; c < ncand; c += kThreads) {
    const long long e = s_cand[c];
    if (e < 0) continue;
    int rank = 0;
    for (int k = 0; k < ncand; ++k) rank += (s_first[k] && s_cand[k] < e) ? 1 : 0;
    atomicOr(&s_mask[rank], 1u << (c / K));
  }
  __syncthreads();

  const int n = s_count;
  const int per = (n + p.num_splits - 1) / p.num_splits;
  const int begin = split * per;
  const int end = min(n, begin + per);
  const float c2 = p.c * kLog2e;

  // This thread's two tile rows (r0 = lane/4, r1 = r0 + 8 of the warp's 16).
  int rj[2], rlast[2];
  long long rlocal[2];
  bool rvalid[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int gr = warp * 16 + (lane >> 2) + 8 * r;
    rvalid[r] = gr < nrows;
    rj[r] = rvalid[r] ? gr / G : 0;
    const long long pos = s_qpos[rj[r]];
    rlocal[r] = pos >= 0 ? ((static_cast<long long>(s_qb[rj[r]]) << 32) | (pos / 128)) : -2;
    rlast[r] = pos >= 0 ? static_cast<int>(pos % 128) : -1;
    if (pos < 0) rvalid[r] = false;
  }
  const bool warp_has_rows = warp * 16 < nrows;

  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  float o[16][4];
#pragma unroll
  for (int i = 0; i < 16; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

  if (begin < end) {
    load_page<FMT, kThreads>(p, body, s_phys[begin], g, tid);
    cp_async_commit();
    for (int i = begin; i < end; ++i) {
      unsigned char* stage = body + ((i - begin) & 1) * L::kStageBytes;
      if (i + 1 < end)
        load_page<FMT, kThreads>(p, body + ((i + 1 - begin) & 1) * L::kStageBytes, s_phys[i + 1], g, tid);
      cp_async_commit();
      cp_async_wait1();
      __syncthreads();
      const __nv_bfloat16* K_;
      const __nv_bfloat16* V_;
      if constexpr (FMT == kBf16) {
        K_ = reinterpret_cast<const __nv_bfloat16*>(stage);
        V_ = reinterpret_cast<const __nv_bfloat16*>(stage + L::kRawBytes);
      } else {
        std::uint16_t* ck = reinterpret_cast<std::uint16_t*>(body + 2 * L::kStageBytes);
        std::uint16_t* cv = ck + 128 * kPad;
        const int phys = s_phys[i];
        convert_side<FMT, kThreads>(stage, ck, p.k_scale + phys * p.ks_stride[0] + g * p.ks_stride[1], p.ks_stride,
                          p.k_swizzled, tid);
        convert_side<FMT, kThreads>(stage + L::kRawBytes, cv,
                          p.v_scale + phys * p.vs_stride[0] + g * p.vs_stride[1], p.vs_stride,
                          p.v_swizzled, tid);
        __syncthreads();
        K_ = reinterpret_cast<const __nv_bfloat16*>(ck);  // f16 bits; only addressed here
        V_ = reinterpret_cast<const __nv_bfloat16*>(cv);
      }
      // Visible tokens of this page for the thread's rows: t <= limit (-1: none).
      const long long key = s_key[i];
      const unsigned mask = s_mask[i];
      int limit[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const bool sees = rvalid[r] && ((mask >> rj[r]) & 1u);
        limit[r] = !sees ? -1 : (key == rlocal[r] ? rlast[r] : 127);
      }
      const bool warp_sees = __any_sync(0xffffffffu, limit[0] >= 0 || limit[1] >= 0);
      if (warp_has_rows && warp_sees) {
        // S = Q K^T: 16 rows x 128 tokens.
        float s[16][4];
#pragma unroll
        for (int nt = 0; nt < 16; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < 8; ++ks) {
          unsigned qa[4];
          ldmatrix_x4(qa, sQ + (warp * 16 + (lane & 15)) * kPad + ks * 16 + (lane >> 4) * 8);
          // B fragments of two 8-token tiles per ldmatrix.x4: matrices (tokens, dims)
          // (nt, lo), (nt, hi), (nt+1, lo), (nt+1, hi).
#pragma unroll
          for (int nt = 0; nt < 16; nt += 2) {
            unsigned kb[4];
            ldmatrix_x4(kb, K_ + (nt * 8 + ((lane >> 4) << 3) + (lane & 7)) * kPad + ks * 16 + ((lane >> 3) & 1) * 8);
            mma<FP8P>(s[nt], qa, kb[0], kb[1]);
            mma<FP8P>(s[nt + 1], qa, kb[2], kb[3]);
          }
        }
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < 16; ++nt)
#pragma unroll
          for (int jj = 0; jj < 4; ++jj) {
            const int tk = nt * 8 + (lane & 3) * 2 + (jj & 1);
            if (tk > limit[jj >> 1]) s[nt][jj] = -INFINITY;
            mx[jj >> 1] = fmaxf(mx[jj >> 1], s[nt][jj]);
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
        // O += P V, 16 tokens per step; P converted from the S fragments on the fly.
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
          unsigned pa[4];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int nt = 2 * kk + h;
            float pv[4];
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
              const float e = exp2f(fmaf(s[nt][jj], c2, bias[jj >> 1]));  // masked -> 0
              l[jj >> 1] += e;                                             // unrounded normaliser
              pv[jj] = e;
            }
            if constexpr (FP8P) {  // PV operand E4M3_sat(p448) (D7), as f16
              pa[2 * h + 0] = f32x2_e4m3_f16x2(pv[0], pv[1]);
              pa[2 * h + 1] = f32x2_e4m3_f16x2(pv[2], pv[3]);
            } else {               // PV operand bf16(p)
              pa[2 * h + 0] = pack_bf16(pv[0], pv[1]);
              pa[2 * h + 1] = pack_bf16(pv[2], pv[3]);
            }
          }
          const int mi = lane >> 3, rr = lane & 7;
          const int tok = kk * 16 + (mi & 1) * 8 + rr;
#pragma unroll
          for (int dp = 0; dp < 8; ++dp) {
            unsigned bv[4];
            ldmatrix_x4_trans(bv, V_ + tok * kPad + dp * 16 + (mi >> 1) * 8);
            mma<FP8P>(o[2 * dp], pa, bv[0], bv[1]);
            mma<FP8P>(o[2 * dp + 1], pa, bv[2], bv[3]);
          }
        }
      }
      __syncthreads();  // stage / conversion buffers are reused next iteration
    }
  }

  // Epilogue: each warp finalises its own rows.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  if (!warp_has_rows) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int gr = warp * 16 + (lane >> 2) + 8 * r;
    if (gr >= nrows) continue;
    const long long qrow = q0 + gr / G;
    const int h = g * G + gr % G;
    const bool empty = m[r] == -INFINITY;
    const float inv = empty ? 0.0f : 1.0f / l[r];
    const float lse_v = empty ? -INFINITY : m[r] * p.c + logf(FP8P ? l[r] / 448.0f : l[r]);
    if (p.num_splits == 1) {
      std::uint16_t* out = p.out + qrow * p.out_row_stride + h * p.out_head_stride;
#pragma unroll
      for (int dt = 0; dt < 16; ++dt) {
        const int d = dt * 8 + (lane & 3) * 2;
        const __nv_bfloat162 v2 = __floats2bfloat162_rn(o[dt][2 * r] * inv * p.v_global,
                                                        o[dt][2 * r + 1] * inv * p.v_global);
        *reinterpret_cast<__nv_bfloat162*>(out + d) = v2;
      }
      if ((lane & 3) == 0 && p.lse != nullptr) p.lse[qrow * p.lse_row_stride + h * p.lse_head_stride] = lse_v;
    } else {
      const std::int64_t slot = (qrow * p.num_q_heads + h) * p.num_splits + split;
      float* op = p.o_partial + slot * 128;
#pragma unroll
      for (int dt = 0; dt < 16; ++dt) {
        const int d = dt * 8 + (lane & 3) * 2;
        *reinterpret_cast<float2*>(op + d) = make_float2(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv);
      }
      if ((lane & 3) == 0) p.lse_partial[slot] = lse_v;
    }
  }
}

// Merges the per-split (O, LSE) pairs: one CTA of 128 threads (dims) per (row, head).
__global__ void __launch_bounds__(128) sparse_attention_combine(const DecodeParams p) {
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

template <int FMT, bool FP8P, int ROWS>
cudaError_t launch_rows(const DecodeParams& p, cudaStream_t stream) {
  constexpr int smem = Layout<FMT, ROWS>::kSmemBytes;
  // The shared-memory opt-in is per device: set it once per device ordinal (retried
  // after a failure).
  static bool configured[64] = {};
  int dev = 0;
  cudaError_t err0 = cudaGetDevice(&dev);
  if (err0 != cudaSuccess) return err0;
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    err0 = cudaFuncSetAttribute(sparse_attention_kernel<FMT, FP8P, ROWS>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err0 != cudaSuccess) return err0;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  const long long nqb = (static_cast<long long>(p.num_rows) + p.queries_per_cta - 1) / p.queries_per_cta;
  dim3 grid(static_cast<unsigned>(nqb * p.num_kv_heads), p.num_splits);
  sparse_attention_kernel<FMT, FP8P, ROWS><<<grid, Cta<ROWS>::kThreads, smem, stream>>>(p);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || p.num_splits == 1) return err;
  sparse_attention_combine<<<p.num_rows * p.num_q_heads, 128, 0, stream>>>(p);
  return cudaGetLastError();
}

template <int FMT, bool FP8P>
cudaError_t launch(const DecodeParams& p, cudaStream_t stream) {
  const int G = p.num_q_heads / p.num_kv_heads;
  return p.queries_per_cta * G > 64 ? launch_rows<FMT, FP8P, 128>(p, stream)
                                    : launch_rows<FMT, FP8P, 64>(p, stream);
}

}  // namespace

int queries_per_cta(bool prefill, int queries_per_request, int group) {
  const int fit = 128 / group;  // query rows whose G heads fill a 128-row tile
  if (!prefill && queries_per_request <= fit) return queries_per_request;  // one request per CTA
  return fit < 32 ? fit : 32;
}

int launch_sparse_attention(const DecodeParams& p, int kv_format, bool q_is_e4m3, void* stream) {
  if (p.num_rows == 0) return 0;
  const int G = p.num_q_heads / p.num_kv_heads;
  if (p.queries_per_cta < 1 || p.queries_per_cta > 32 || p.queries_per_cta * G > 128)
    return cudaErrorInvalidValue;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (kv_format) {
    case kBf16: return q_is_e4m3 ? cudaErrorInvalidValue : launch<kBf16, false>(p, s);
    case kFp8: return q_is_e4m3 ? launch<kFp8, true>(p, s) : cudaErrorInvalidValue;
    case kNvfp4: return q_is_e4m3 ? launch<kNvfp4, true>(p, s) : cudaErrorInvalidValue;
    default: return cudaErrorInvalidValue;
  }
}

int choose_num_splits(long long num_rows, int queries_per_cta, int num_kv_heads, int num_sms) {
  const long long ctas = (num_rows + queries_per_cta - 1) / queries_per_cta * num_kv_heads;
  if (ctas <= 0) return 1;
  long long splits = (num_sms + ctas - 1) / ctas;  // one CTA per SM: fill one wave
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
int device_ordinal(int* ordinal) { return cudaGetDevice(ordinal); }
int device_sm_count(int* count) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  return cudaDeviceGetAttribute(count, cudaDevAttrMultiProcessorCount, dev);
}
const char* error_string(int err) { return cudaGetErrorString(static_cast<cudaError_t>(err)); }

}  // namespace flashmsa::cuda

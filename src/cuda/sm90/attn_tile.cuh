// Page tiles and warpgroup math shared by the SM90 sparse attention kernels (decode
// query-outer and prefill KV-outer). Built on gmma.cuh (SW128 tiles, wgmma wrappers).
//
// One page (128 tokens) of one KV head lives in shared memory as
//   K: SW128 K-major [128 tokens][128 dims], BF16 (32 KB) or E4M3 (16 KB; NVFP4 pages are
//      dequantised to E4M3_sat(e2m1 x block scale), spec D7 / 5.2);
//   V: SW128 MN-major [128 tokens][128 dims] as BF16 (BF16 path) or F16 (FP8 paths: every
//      E4M3 value and every E4M3_sat(e2m1 x scale) is exact in F16), 32 KB.
// Tokens at or beyond `valid` are zero in both tiles, so garbage in a partial page can
// never reach the output (0 x NaN) even though those keys are masked.
//
// A warpgroup (128 threads) owns 64 query rows (rows = query x head) and computes
//   S(64 x 128) = Q K^T   with BF16 HGMMA or E4M3 QGMMA (Q in SW128 K-major, shared),
//   O(64 x 128) += P V    with BF16 or F16 HGMMA, P from registers.
// Accumulator layout: gmma.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/sm90/gmma.cuh"

namespace flashmsa::cuda::sm90::attn {

namespace gm = ::flashmsa::cuda::sm90::gmma;

enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };

/// Shared bytes of one staged page of format FMT (all multiples of 1024).
template <int FMT>
struct PageBytes {
  static constexpr int kK = FMT == kBf16 ? 32768 : 16384;  // K tile
  static constexpr int kV = 32768;                          // V tile
  static constexpr int kRawK = FMT == kNvfp4 ? 8192 : 0;     // NVFP4 codes of K before dequant
  static constexpr int kRawV = FMT == kBf16 ? 0 : (FMT == kFp8 ? 16384 : 8192);
  static constexpr int kTotal = kK + kV + kRawK + kRawV;
  static constexpr int kQRow = FMT == kBf16 ? 256 : 128;    // bytes of one query row
};

/// Where one (physical page, KV head) lives in global memory. Byte pointers and strides.
struct PageSrc {
  const std::uint8_t* k = nullptr;   // token 0: 128 x bf16 / 128 x e4m3 / 64 x u8 (NVFP4)
  const std::uint8_t* v = nullptr;
  std::int64_t k_tok = 0, v_tok = 0;  // bytes between tokens
  const std::uint8_t* ks = nullptr;  // NVFP4 block scales of this page/head (8 per token)
  const std::uint8_t* vs = nullptr;
  std::int64_t ks_tok = 0, vs_tok = 0;
  bool k_swz = false, v_swz = false;  // vLLM 4x4 swizzled scale plane (spec 4.3)
};

__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(gm::smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
/// Makes generic-proxy shared writes (st.shared, completed cp.async) visible to wgmma.
__device__ __forceinline__ void fence_view_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Stage 1 of a page load (all `nthr` threads, index `tid`): the cp.async copies. BF16
/// and FP8 K and BF16 V go straight to their tiles; FP8 V and NVFP4 K/V go to raw
/// buffers for `convert_page`. Tokens >= valid are zero-filled.
template <int FMT>
__device__ __forceinline__ void issue_page_copy(const PageSrc& s, std::uint8_t* tile, int valid, int tid,
                                                int nthr) {
  using B = PageBytes<FMT>;
  std::uint8_t* tk = tile;
  std::uint8_t* tv = tile + B::kK;
  std::uint8_t* rk = tv + B::kV;
  std::uint8_t* rv = rk + B::kRawK;
  if constexpr (FMT == kBf16) {
    for (int c = tid; c < 128 * 16; c += nthr) {
      const int t = c >> 4, b = (c & 15) * 16;
      const bool ok = t < valid;
      const int ts = ok ? t : 0;
      cp_async16_zfill(tk + gm::sw128_offset(t, b, 128), s.k + ts * s.k_tok + b, ok);
      cp_async16_zfill(tv + gm::sw128_offset(t, b, 128), s.v + ts * s.v_tok + b, ok);
    }
  } else if constexpr (FMT == kFp8) {
    for (int c = tid; c < 128 * 8; c += nthr) {
      const int t = c >> 3, b = (c & 7) * 16;
      const bool ok = t < valid;
      const int ts = ok ? t : 0;
      cp_async16_zfill(tk + gm::sw128_offset(t, b, 128), s.k + ts * s.k_tok + b, ok);
      cp_async16_zfill(rv + t * 128 + b, s.v + ts * s.v_tok + b, ok);
    }
  } else {
    for (int c = tid; c < 128 * 4; c += nthr) {
      const int t = c >> 2, b = (c & 3) * 16;
      const bool ok = t < valid;
      const int ts = ok ? t : 0;
      cp_async16_zfill(rk + t * 64 + b, s.k + ts * s.k_tok + b, ok);
      cp_async16_zfill(rv + t * 64 + b, s.v + ts * s.v_tok + b, ok);
    }
  }
}

// E2M1 code (4 bits) -> f16 bits, exact.
__device__ __forceinline__ unsigned e2m1_to_f16_bits(unsigned code) {
  const unsigned e = (code >> 1) & 3u, m = code & 1u;
  const unsigned mag = e ? (((e + 14u) << 10) | (m << 9)) : (m ? 0x3800u : 0u);
  return mag | ((code & 8u) << 12);
}

// 16 NVFP4 values (8 code bytes) x block scale -> E4M3_sat bytes as 8 x e4m3x2 (u16).
__device__ __forceinline__ void nvfp4_group_to_e4m3(const std::uint8_t* codes, std::uint8_t scale,
                                                    std::uint16_t (&out)[8]) {
  const std::uint32_t s16 = gm::e4m3x2_to_f16x2(static_cast<std::uint16_t>(scale * 0x101u));
  const __half2 s2 = *reinterpret_cast<const __half2*>(&s16);
  const uint2 in = *reinterpret_cast<const uint2*>(codes);
  const std::uint8_t* b = reinterpret_cast<const std::uint8_t*>(&in);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const unsigned x = e2m1_to_f16_bits(b[i] & 0xfu) | (e2m1_to_f16_bits(b[i] >> 4) << 16);
    __half2 prod = __hmul2(*reinterpret_cast<const __half2*>(&x), s2);  // exact in f16
    std::uint16_t q;
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(q) : "r"(*reinterpret_cast<unsigned*>(&prod)));
    out[i] = q;
  }
}

__device__ __forceinline__ std::uint8_t nvfp4_scale(const std::uint8_t* plane, std::int64_t tok_stride, bool swz,
                                                    int t, int grp) {
  const std::int64_t so = swz ? 32 * (t / 4) + 4 * grp + (t % 4) : t * tok_stride + grp;
  return plane[so];
}

/// Stage 2 of a page load, after the copies completed and a barrier: FP8 V -> F16 V
/// tile; NVFP4 K -> E4M3 K tile and NVFP4 V -> F16 V tile. No-op for BF16. Ends with the
/// proxy fence; the caller still needs a barrier before the warpgroups read the tiles.
template <int FMT>
__device__ __forceinline__ void convert_page(const PageSrc& s, std::uint8_t* tile, int valid, int tid, int nthr) {
  using B = PageBytes<FMT>;
  std::uint8_t* tk = tile;
  std::uint8_t* tv = tile + B::kK;
  const std::uint8_t* rk = tv + B::kV;
  const std::uint8_t* rv = rk + B::kRawK;
  if constexpr (FMT == kFp8) {
    for (int c = tid; c < 128 * 16; c += nthr) {  // 8 dims per item
      const int t = c >> 4, d0 = (c & 15) * 8;
      const uint2 in = *reinterpret_cast<const uint2*>(rv + t * 128 + d0);
      const std::uint16_t* h = reinterpret_cast<const std::uint16_t*>(&in);
      *reinterpret_cast<uint4*>(tv + gm::sw128_offset(t, 2 * d0, 128)) =
          make_uint4(gm::e4m3x2_to_f16x2(h[0]), gm::e4m3x2_to_f16x2(h[1]), gm::e4m3x2_to_f16x2(h[2]),
                     gm::e4m3x2_to_f16x2(h[3]));
    }
  } else if constexpr (FMT == kNvfp4) {
    for (int c = tid; c < 128 * 8 * 2; c += nthr) {  // (side, token, group of 16 dims)
      const int side = c >> 10, t = (c >> 3) & 127, grp = c & 7;
      const bool ok = t < valid;
      std::uint16_t q[8];
      const std::uint8_t sc = ok ? (side == 0 ? nvfp4_scale(s.ks, s.ks_tok, s.k_swz, t, grp)
                                              : nvfp4_scale(s.vs, s.vs_tok, s.v_swz, t, grp))
                                 : 0;
      nvfp4_group_to_e4m3((side == 0 ? rk : rv) + t * 64 + grp * 8, sc, q);
      if (side == 0) {
        *reinterpret_cast<uint4*>(tk + gm::sw128_offset(t, 16 * grp, 128)) =
            make_uint4(q[0] | (q[1] << 16), q[2] | (q[3] << 16), q[4] | (q[5] << 16), q[6] | (q[7] << 16));
      } else {
        std::uint32_t w[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) w[i] = gm::e4m3x2_to_f16x2(q[i]);
        *reinterpret_cast<uint4*>(tv + gm::sw128_offset(t, 32 * grp, 128)) = make_uint4(w[0], w[1], w[2], w[3]);
        *reinterpret_cast<uint4*>(tv + gm::sw128_offset(t, 32 * grp + 16, 128)) = make_uint4(w[4], w[5], w[6], w[7]);
      }
    }
  }
  (void)s;
  (void)valid;
  (void)tk;
  fence_view_async_shared();
}

/// cp.async of 16 bytes (chunk `chunk`) of one query row (BF16: 16 chunks, E4M3: 8) into
/// row r of a SW128 Q tile of `tile_rows` rows. `ok == false` zero-fills (src must still
/// be a valid global address; nothing is read).
__device__ __forceinline__ void copy_q_chunk(std::uint8_t* q_tile, int tile_rows, int r, int chunk,
                                             const std::uint8_t* src_row, bool ok) {
  const int b = chunk * 16;
  cp_async16_zfill(q_tile + gm::sw128_offset(r, b, tile_rows), src_row + (ok ? b : 0), ok);
}

/// S = Q K^T for this warpgroup's 64 rows. `q_addr` = shared address of the Q tile's
/// first panel plus 128 x (first row of this warpgroup); `q_panel` = bytes between Q
/// panels (tile_rows x 128). Issues and commits; the caller waits (gm::wait<0>()).
template <int FMT>
__device__ __forceinline__ void wg_qk(std::uint32_t q_addr, std::uint32_t q_panel, std::uint32_t k_addr,
                                      float (&s)[64]) {
  gm::fence_operands(s);
  gm::fence();
  if constexpr (FMT == kBf16) {
#pragma unroll
    for (int st = 0; st < 8; ++st) {
      const std::uint32_t off = (st & 3) * 32;
      gm::bf16_ss(gm::desc_k_sw128(q_addr + (st >> 2) * q_panel + off),
                  gm::desc_k_sw128(k_addr + (st >> 2) * 16384 + off), s, st > 0);
    }
  } else {
#pragma unroll
    for (int st = 0; st < 4; ++st)
      gm::e4m3_ss(gm::desc_k_sw128(q_addr + st * 32), gm::desc_k_sw128(k_addr + st * 32), s, st > 0);
  }
  gm::commit();
}

/// O (+)= P V for this warpgroup's 64 rows; `pa[s]` = A fragment of tokens 16s..16s+15
/// (BF16 for the BF16 path, F16 otherwise). Issues and commits; the caller waits.
template <int FMT>
__device__ __forceinline__ void wg_pv(const std::uint32_t (&pa)[8][4], std::uint32_t v_addr, float (&o)[64],
                                      bool accumulate) {
  gm::fence_operands(o);
  gm::fence();
#pragma unroll
  for (int st = 0; st < 8; ++st) {
    const std::uint64_t db = gm::desc_mn_sw128(v_addr + st * 16 * 128, 16384);
    if constexpr (FMT == kBf16) gm::bf16_rs_bmn(pa[st], db, o, accumulate || st > 0);
    else gm::f16_rs_bmn(pa[st], db, o, accumulate || st > 0);
  }
  gm::commit();
}

}  // namespace flashmsa::cuda::sm90::attn

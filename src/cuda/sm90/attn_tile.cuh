// Page tiles and warpgroup math shared by the SM90 sparse attention kernels (decode
// query-outer and prefill KV-outer). Built on gmma.cuh (SW128 tiles, wgmma wrappers).
//
// One page (128 tokens) of one KV head lives in shared memory as
//   K: SW128 K-major [128 tokens][128 dims], BF16 (32 KB) or E4M3 (16 KB; NVFP4 pages are
//      dequantised to E4M3_sat(e2m1 x block scale), spec D7 / 5.2), or, with QK16, the
//      E4M3 values held exactly in F16 (32 KB; the prefill kernel's Q8RS stores them
//      K-permuted inside each 16-dim group, e4m3x16_to_f16_perm);
//   V: SW128 MN-major [128 tokens][128 dims] as BF16 (BF16 path) or F16 (FP8 paths: every
//      E4M3 value and every E4M3_sat(e2m1 x scale) is exact in F16), 32 KB.
// Tokens at or beyond `valid` are zero in both tiles, so garbage in a partial page can
// never reach the output (0 x NaN) even though those keys are masked.
//
// A warpgroup (128 threads) owns 64 query rows (rows = query x head) and computes
//   S(64 x 128) = Q K^T   with BF16 HGMMA, E4M3 QGMMA, or (QK16) F16 HGMMA on the exact
//                         F16 images of the E4M3 Q and K (Q in SW128 K-major, shared;
//                         prefill Q8RS: Q widened into registers, A from registers),
//   O(64 x 128) += P V    with BF16 or F16 HGMMA, P from registers.
// Accumulator layout: gmma.cuh.
//
// QK16: Hopper's E4M3 wgmma adds its products with a reduced-precision aligner (errors
// near 2^-14 of the magnitude sum were measured on the H200, tests/cuda/test_cuda_gmma),
// which is not the FP32 accumulation spec D7 asks for and flips E4M3(P*448) roundings
// against the CPU reference in short rows. QK16 = true runs S = Q K^T on the F16 images
// instead: every product is exact and the sum is FP32, at half the E4M3 MMA rate.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/sm90/gmma.cuh"

namespace flashmsa::cuda::sm90::attn {

namespace gm = ::flashmsa::cuda::sm90::gmma;

enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };

// Softmax in base 2 (spec 3.4): p = 2^(c2 (s - m)) with c2 = c * log2(e); the FP8 paths
// fold log2(448) into the bias so that p448 = 448 * 2^(c2 (s - m)).
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLog2_448 = 8.80735492706298828125f;  // float(log2(448)), spec 3.4

__device__ __forceinline__ float ex2_approx(float x) {  // spec 3.4: ex2.approx.ftz
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// One online-softmax step for a thread's two accumulator rows (r = 0, 1; the four lanes
/// of a quad hold the same rows): mx[r] is the thread's maximum of the new raw scores,
/// reduced here over the quad. Updates the running max m[r], rescales the running sum
/// l[r], and returns the factor alpha[r] the caller applies to its O accumulators and
/// the exponent bias[r] of the new probabilities, p = ex2(s * c2 + bias) (p448 for FP8).
template <bool kFp8P>
__device__ __forceinline__ void online_softmax_step(float (&mx)[2], float (&m)[2], float (&l)[2], float c2,
                                                    float (&alpha)[2], float (&bias)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float m_new = fmaxf(m[r], mx[r]);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    alpha[r] = ex2_approx((m[r] - m_use) * c2);
    m[r] = m_new;
    l[r] *= alpha[r];
    bias[r] = kFp8P ? fmaf(-m_use, c2, kLog2_448) : -m_use * c2;
  }
}

/// Shared bytes of one page of format FMT, in two regions (all multiples of 1024):
///   stage: what cp.async writes (double-buffered by the kernels): the BF16 K and V tiles,
///          the E4M3 K tile (QGMMA), or the raw E4M3 / NVFP4 bytes awaiting conversion,
///          and for NVFP4 the K and V block scales of the page (1 KB each);
///   conv:  the tiles `convert_page` writes (one buffer): F16 V, and F16 / E4M3 K.
template <int FMT, bool QK16 = false>
struct PageBytes {
  static constexpr bool kWide = FMT == kBf16 || QK16;    // 16-bit K and Q tiles
  static constexpr int kK = kWide ? 32768 : 16384;       // K tile
  static constexpr int kV = 32768;                        // V tile
  static constexpr bool kKInStage = FMT == kBf16 || (FMT == kFp8 && !QK16);
  static constexpr int kRawK = FMT == kNvfp4 ? 8192 : (FMT == kFp8 && QK16 ? 16384 : 0);
  static constexpr int kRawV = FMT == kBf16 ? 0 : (FMT == kFp8 ? 16384 : 8192);
  static constexpr int kScales = FMT == kNvfp4 ? 2048 : 0;  // K then V scales, 128 x 8 bytes each
  static constexpr int kStage = (kKInStage ? kK : kRawK) + (FMT == kBf16 ? kV : kRawV) + kScales;
  static constexpr int kConv = (kKInStage ? 0 : kK) + (FMT == kBf16 ? 0 : kV);
  static constexpr int kQRow = kWide ? 256 : 128;        // bytes of one query row in the Q tile
  // Tile addresses inside the regions.
  __device__ static std::uint8_t* k_tile(std::uint8_t* stage, std::uint8_t* conv) {
    return kKInStage ? stage : conv;
  }
  __device__ static std::uint8_t* v_tile(std::uint8_t* stage, std::uint8_t* conv) {
    return FMT == kBf16 ? stage + kK : conv + (kKInStage ? 0 : kK);
  }
  __device__ static std::uint8_t* raw_k(std::uint8_t* stage) { return stage; }
  __device__ static std::uint8_t* raw_v(std::uint8_t* stage) { return stage + (kKInStage ? kK : kRawK); }
  // NVFP4: side's block scales, in the global plane's layout (linear: token t at 8 t;
  // swizzled: the 4x4 layout of spec 4.3, which is contiguous per page and head).
  __device__ static std::uint8_t* scales(std::uint8_t* stage, int side) {
    return stage + (kKInStage ? kK : kRawK) + kRawV + 1024 * side;
  }
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
// The same with a shared-space destination address (gm::smem_addr).
__device__ __forceinline__ void cp_async16_zfill_s(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
// Shared loads and stores by shared-space address: the page conversions index their
// tiles from a generic base the compiler cannot prove shared (it emitted generic LD/ST).
__device__ __forceinline__ uint4 lds128(std::uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ uint2 lds64(std::uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
__device__ __forceinline__ void sts128(std::uint32_t a, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
/// Makes generic-proxy shared writes (st.shared, completed cp.async) visible to wgmma.
__device__ __forceinline__ void fence_view_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

enum : int { kSideK = 0, kSideV = 1 };

/// Stage 1 of a page load for one side (all NTHR threads, index `tid`): the cp.async
/// copies into the stage region. BF16 K/V and the QGMMA E4M3 K go straight to their
/// tiles; the rest goes to raw buffers for `convert_side`. Tokens >= valid are zero-filled.
/// Thread tid copies chunk tid % C (C 16-byte chunks per token) of tokens tid / C + S i
/// (S = NTHR / C tokens per pass, a multiple of 8): its SW128 swizzle is the same in every
/// pass, so the addresses advance by constants (the per-chunk division, swizzle and 64-bit
/// product chain measured 30 % of the decode tile kernel's instructions, ncu, session 14).
template <int FMT, bool QK16, int SIDE, int NTHR>
__device__ __forceinline__ void issue_side_copy(const PageSrc& s, std::uint8_t* stage, int valid, int tid) {
  using B = PageBytes<FMT, QK16>;
  const std::uint8_t* src = SIDE == kSideK ? s.k : s.v;
  const std::int64_t tok = SIDE == kSideK ? s.k_tok : s.v_tok;
  constexpr int kRow = FMT == kBf16 ? 256 : (FMT == kFp8 ? 128 : 64);  // global bytes per token
  constexpr int kC = kRow / 16;
  constexpr int kS = NTHR / kC;
  static_assert(NTHR % kC == 0 && kS % 8 == 0 && 128 % kS == 0, "thread count");
  constexpr bool kTile = FMT == kBf16 || (SIDE == kSideK && B::kKInStage);  // straight into the SW128 tile
  std::uint8_t* dst = SIDE == kSideK ? (kTile ? B::k_tile(stage, nullptr) : B::raw_k(stage))
                                     : (kTile ? B::v_tile(stage, nullptr) : B::raw_v(stage));
  const int t0 = static_cast<int>(static_cast<unsigned>(tid) / kC);
  const int b = static_cast<int>(static_cast<unsigned>(tid) % kC) * 16;
  const std::uint32_t d0 =
      gm::smem_addr(dst) + (kTile ? gm::sw128_offset(t0, b, 128) : static_cast<std::uint32_t>(t0 * kRow + b));
  const std::uint8_t* g0 = src + b;             // token 0 (the zero-fill source)
  const std::uint8_t* g = g0 + t0 * tok;        // token t0 + kS i
  const std::int64_t step = static_cast<std::int64_t>(kS) * tok;
#pragma unroll
  for (int i = 0; i < 128 / kS; ++i) {
    const bool ok = t0 + kS * i < valid;
    cp_async16_zfill_s(d0 + static_cast<std::uint32_t>(kS * i * (kTile ? 128 : kRow)), ok ? g : g0, ok);
    g += step;
  }
}

/// NVFP4: the page's block scales of one side into PageBytes::scales, so the conversion
/// reads them from shared memory instead of waiting on global loads after the page
/// landed (H200, session 14). cp.async where the plane is aligned for it (8-byte token
/// rows, or the 16-byte aligned swizzled block), else plain loads and shared stores.
/// Tokens >= valid may copy garbage: convert_side ignores their scales.
template <int NTHR>
__device__ __forceinline__ void issue_scale_copy(const std::uint8_t* plane, std::int64_t tok, bool swz,
                                                 std::uint8_t* dst, int tid) {
  const std::uint32_t d = gm::smem_addr(dst);
  if (swz) {  // 1024 contiguous bytes
    if ((reinterpret_cast<std::uintptr_t>(plane) & 15u) == 0) {
      for (int c = tid; c < 64; c += NTHR)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;\n" ::"r"(d + 16 * c), "l"(plane + 16 * c));
    } else {
      for (int c = tid; c < 1024; c += NTHR) dst[c] = plane[c];
    }
  } else if (((reinterpret_cast<std::uintptr_t>(plane) | static_cast<std::uintptr_t>(tok)) & 7u) == 0) {
    for (int t = tid; t < 128; t += NTHR)
      asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d + 8 * t), "l"(plane + t * tok));
  } else {
    for (int c = tid; c < 1024; c += NTHR) dst[c] = plane[(c >> 3) * tok + (c & 7)];
  }
}

/// Both sides of `issue_side_copy` (and of `issue_scale_copy` for NVFP4).
template <int FMT, bool QK16, int NTHR>
__device__ __forceinline__ void issue_page_copy(const PageSrc& s, std::uint8_t* stage, int valid, int tid) {
  issue_side_copy<FMT, QK16, kSideK, NTHR>(s, stage, valid, tid);
  issue_side_copy<FMT, QK16, kSideV, NTHR>(s, stage, valid, tid);
  if constexpr (FMT == kNvfp4) {
    using B = PageBytes<FMT, QK16>;
    issue_scale_copy<NTHR>(s.ks, s.ks_tok, s.k_swz, B::scales(stage, kSideK), tid);
    issue_scale_copy<NTHR>(s.vs, s.vs_tok, s.v_swz, B::scales(stage, kSideV), tid);
  }
}

// 16 NVFP4 values (8 code bytes, even element in the low nibble) x block scale ->
// E4M3_sat(e2m1 x scale) (spec D7, 5.2), returned as 4 words of 4 E4M3 bytes.
__device__ __forceinline__ uint4 nvfp4_group_to_e4m3(uint2 in, std::uint8_t scale) {
  return gm::nvfp4x16_lookup(in, gm::nvfp4_lut(scale));
}

__device__ __forceinline__ std::uint8_t nvfp4_scale(const std::uint8_t* plane, std::int64_t tok_stride, bool swz,
                                                    int t, int grp) {
  const std::int64_t so = swz ? 32 * (t / 4) + 4 * grp + (t % 4) : t * tok_stride + grp;
  return plane[so];
}

// 8 E4M3 bytes -> 8 F16 values (16 bytes, exact).
__device__ __forceinline__ uint4 e4m3x8_to_f16x8(uint2 in) {
  uint4 r;
  gm::f16x2_pair(in.x, r.x, r.y);
  gm::f16x2_pair(in.y, r.z, r.w);
  return r;
}
// ... stored at `dst`.
__device__ __forceinline__ void store_e4m3x8_as_f16(std::uint8_t* dst, uint2 in) {
  *reinterpret_cast<uint4*>(dst) = e4m3x8_to_f16x8(in);
}

/// K-permuted tiles (the prefill kernel's Q8RS form, prefill_attention.cu): inside every
/// 16-dim group the F16 values are stored in the order dims 0, 1, 4, 5, 8, 9, 12, 13, then
/// 2, 3, 6, 7, 10, 11, 14, 15, so that k-step s of a wgmma reads, in the A fragment
/// positions 2q, 2q + 1, 8 + 2q, 9 + 2q of lane q = lane % 4, the four consecutive dims
/// 16 s + 4 q .. + 3: one 4-byte E4M3 word per row (ldmatrix of the E4M3 query rows).
/// The group's 16 E4M3 bytes `in` -> its two 16-byte F16 chunks (lo: the even pairs, hi:
/// the odd pairs).
__device__ __forceinline__ void e4m3x16_to_f16_perm(uint4 in, uint4& lo, uint4& hi) {
  gm::f16x2_pair(in.x, lo.x, hi.x);
  gm::f16x2_pair(in.y, lo.y, hi.y);
  gm::f16x2_pair(in.z, lo.z, hi.z);
  gm::f16x2_pair(in.w, lo.w, hi.w);
}

/// The (token, 16-dim group) a thread converts where 8 threads share a token (FP8 K
/// permuted, NVFP4). Threads 16 i .. 16 i + 15 take tokens 2 i, 2 i + 1: in each quarter
/// warp (one phase of a 16-byte shared access) four take groups 0-3 of one token and
/// four groups 4-7 of the other, so the raw reads hit 8 distinct 16-byte bank groups, and
/// so do the F16 tile writes: groups g and g + 4 of one token land in the same banks of
/// the two SW128 panels, while the two tokens' swizzles differ in bit 0 (one token per
/// phase, its 8 groups in order, made both F16 stores 2-way conflicted). A half warp (a
/// phase of an 8-byte access) still covers two whole tokens. H200, session 25 run A
/// (docs/bench/h200-2026-11-30-s25): this mapping, together with one fewer bulk wait in
/// the prefill tile loop, took 2-4 us off the FP8 and NVFP4 prefill calls at (16/1, 8192,
/// 32768); NVFP4 decode (64/4, full suite) ran 1-4 % faster than in session 19 (not an
/// interleaved comparison).
__device__ __forceinline__ void token_group_of(unsigned tid, int& t0, int& grp) {
  const unsigned q = tid & 7u, odd = q >> 2, h = (tid >> 3) & 1u;
  t0 = static_cast<int>(((tid >> 4) << 1) | odd);
  grp = static_cast<int>((q & 3u) | ((odd ^ h) << 2));
}

// Shared loads a thread issues before converting any of them (16-byte ones, and NVFP4's
// 8-byte ones; twice as many of FP8 V's 8-byte ones). The lds/sts wrappers are volatile asm, which the compiler keeps in
// program order, so a loop of load-convert-store serialised every load behind the stores
// before it. H200, session 25 run C: the NVFP4 prefill attention kernel 2-3 us faster at
// (16/1, 8192, 32768); FP8 unchanged.
constexpr int kConvBatch = 4;

/// Stage 2 of a page load for one side, after its copies completed and a barrier: raw
/// bytes of the stage region -> the tile in the conv region: FP8 V -> F16; FP8 K -> F16
/// (QK16); NVFP4 K -> E4M3 (F16 with QK16); NVFP4 V -> F16. A no-op where the side went
/// straight to its tile. Ends with the proxy fence; the caller still needs a barrier
/// before the warpgroups read the tile. As in issue_side_copy, a thread keeps one
/// (chunk, swizzle) and steps over tokens, with shared-space loads and stores.
/// kPermK (QK16 only): the F16 K tile in the K-permuted order (e4m3x16_to_f16_perm).
/// TOK, tok0 (NVFP4 only): convert tokens [tok0, tok0 + TOK) of the page (TOK a multiple
/// of NTHR / 8), so that several thread groups can share one side. kLut, lut (NVFP4 only):
/// read each group's table from the 256 block-scale tables at the shared address lut
/// (gm::fill_nvfp4_luts) instead of computing it.
template <int FMT, bool QK16, int SIDE, int NTHR, bool kPermK = false, int TOK = 128, bool kLut = false>
__device__ __forceinline__ void convert_side(const PageSrc& s, std::uint8_t* stage, std::uint8_t* conv, int valid,
                                             int tid, int tok0 = 0, std::uint32_t lut = 0) {
  static_assert(TOK == 128 || FMT == kNvfp4, "token ranges: NVFP4 only");
  static_assert(!kPermK || QK16, "the permuted K tile is an F16 tile");
  using B = PageBytes<FMT, QK16>;
  const std::uint32_t tile = gm::smem_addr(SIDE == kSideK ? B::k_tile(stage, conv) : B::v_tile(stage, conv));
  const std::uint32_t raw = gm::smem_addr(SIDE == kSideK ? B::raw_k(stage) : B::raw_v(stage));
  const unsigned ut = static_cast<unsigned>(tid);
  if constexpr (FMT == kFp8 && SIDE == kSideK && kPermK) {
    constexpr int kS = NTHR / 8;  // (token, group of 16 dims): 8 per token
    static_assert(NTHR % 8 == 0 && kS % 8 == 0 && 128 % kS == 0, "thread count");
    int t0, grp;
    token_group_of(ut, t0, grp);
    const std::uint32_t r0 = raw + t0 * 128 + grp * 16, w0 = tile + gm::sw128_offset(t0, 32 * grp, 128),
                        w1 = tile + gm::sw128_offset(t0, 32 * grp + 16, 128);
    constexpr int kN = 128 / kS, kB = kN < kConvBatch ? kN : kConvBatch;
#pragma unroll
    for (int i0 = 0; i0 < kN; i0 += kB) {
      uint4 in[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) in[b] = lds128(r0 + kS * 128 * (i0 + b));
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        uint4 lo, hi;
        e4m3x16_to_f16_perm(in[b], lo, hi);
        sts128(w0 + kS * 128 * (i0 + b), lo);
        sts128(w1 + kS * 128 * (i0 + b), hi);
      }
    }
  } else if constexpr (FMT == kFp8 && (SIDE == kSideV || QK16)) {
    constexpr int kS = NTHR / 16;  // (token, 8 dims): 16 per token
    static_assert(NTHR % 16 == 0 && kS % 8 == 0 && 128 % kS == 0, "thread count");
    const int t0 = static_cast<int>(ut >> 4), d0 = static_cast<int>(ut & 15u) * 8;
    const std::uint32_t r0 = raw + t0 * 128 + d0, w0 = tile + gm::sw128_offset(t0, 2 * d0, 128);
    constexpr int kN = 128 / kS, kB = kN < 2 * kConvBatch ? kN : 2 * kConvBatch;  // 8-byte loads: twice as many
#pragma unroll
    for (int i0 = 0; i0 < kN; i0 += kB) {
      uint2 in[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) in[b] = lds64(r0 + kS * 128 * (i0 + b));
#pragma unroll
      for (int b = 0; b < kB; ++b) sts128(w0 + kS * 128 * (i0 + b), e4m3x8_to_f16x8(in[b]));
    }
  } else if constexpr (FMT == kNvfp4) {
    constexpr int kS = NTHR / 8;  // (token, group of 16 dims): 8 per token
    static_assert(NTHR % 8 == 0 && kS % 8 == 0 && TOK % kS == 0, "thread count");
    const std::uint8_t* plane = B::scales(stage, SIDE);  // the page's scales (issue_scale_copy)
    // The only field of s this branch reads (the decode kernel's consumers pass a PageSrc
    // with v_swz alone).
    const bool swz = SIDE == kSideK ? s.k_swz : s.v_swz;
    int t0, grp;
    token_group_of(ut, t0, grp);
    t0 += tok0;
    const std::uint32_t r0 = raw + t0 * 64 + grp * 8;
    constexpr int kN = TOK / kS, kB = kN < kConvBatch ? kN : kConvBatch;
#pragma unroll
    for (int i0 = 0; i0 < kN; i0 += kB) {
      uint2 in[kB];
      std::uint8_t sc[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int t = t0 + kS * (i0 + b);
        in[b] = lds64(r0 + kS * 64 * (i0 + b));
        sc[b] = t < valid ? nvfp4_scale(plane, 8, swz, t, grp) : 0;
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int t = t0 + kS * (i0 + b);
        const gm::Nvfp4Lut lt = kLut ? gm::nvfp4_lut_entry(lds128(lut + 16u * sc[b])) : gm::nvfp4_lut(sc[b]);
        const uint4 e = gm::nvfp4x16_lookup(in[b], lt);
        if (SIDE == kSideK && !QK16) {
          sts128(tile + gm::sw128_offset(t, 16 * grp, 128), e);
        } else if (SIDE == kSideK && kPermK) {
          uint4 lo, hi;
          e4m3x16_to_f16_perm(e, lo, hi);
          sts128(tile + gm::sw128_offset(t, 32 * grp, 128), lo);
          sts128(tile + gm::sw128_offset(t, 32 * grp + 16, 128), hi);
        } else {
          sts128(tile + gm::sw128_offset(t, 32 * grp, 128), e4m3x8_to_f16x8(make_uint2(e.x, e.y)));
          sts128(tile + gm::sw128_offset(t, 32 * grp + 16, 128), e4m3x8_to_f16x8(make_uint2(e.z, e.w)));
        }
      }
    }
  }
  (void)s;
  (void)valid;
  (void)tok0;
  (void)lut;
  (void)tile;
  (void)raw;
  (void)ut;
  fence_view_async_shared();
}

/// Both sides of `convert_side`.
template <int FMT, bool QK16, int NTHR, bool kPermK = false>
__device__ __forceinline__ void convert_page(const PageSrc& s, std::uint8_t* stage, std::uint8_t* conv, int valid,
                                             int tid) {
  convert_side<FMT, QK16, kSideK, NTHR, kPermK>(s, stage, conv, valid, tid);
  convert_side<FMT, QK16, kSideV, NTHR>(s, stage, conv, valid, tid);
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
template <int FMT, bool QK16 = false>
__device__ __forceinline__ void wg_qk(std::uint32_t q_addr, std::uint32_t q_panel, std::uint32_t k_addr,
                                      float (&s)[64]) {
  gm::fence_operands(s);
  gm::fence();
  const std::uint64_t da0 = gm::desc_k_sw128(q_addr), db0 = gm::desc_k_sw128(k_addr);
  if constexpr (FMT == kBf16 || QK16) {
#pragma unroll
    for (int st = 0; st < 8; ++st) {
      const std::uint32_t off = (st & 3) * 32;
      const std::uint64_t da = gm::desc_add(da0, (st >> 2) * q_panel + off);
      const std::uint64_t db = gm::desc_add(db0, (st >> 2) * 16384 + off);
      if constexpr (FMT == kBf16) gm::bf16_ss(da, db, s, st > 0);
      else gm::f16_ss(da, db, s, st > 0);
    }
  } else {
#pragma unroll
    for (int st = 0; st < 4; ++st) gm::e4m3_ss(gm::desc_add(da0, st * 32), gm::desc_add(db0, st * 32), s, st > 0);
  }
  gm::commit();
}

/// O (+)= P V for this warpgroup's 64 rows; `pa[s]` = A fragment of tokens 16s..16s+15
/// (BF16 for the BF16 path, F16 otherwise). Issues and commits; the caller waits.
template <int FMT>
__device__ __forceinline__ void wg_pv(const std::uint32_t (&pa)[8][4], std::uint32_t v_addr, float (&o)[64],
                                      bool accumulate) {
  const std::uint64_t db0 = gm::desc_mn_sw128(v_addr, 16384);
  gm::fence_operands(o);
  gm::fence();
#pragma unroll
  for (int st = 0; st < 8; ++st) {
    const std::uint64_t db = gm::desc_add(db0, st * 16 * 128);
    if constexpr (FMT == kBf16) gm::bf16_rs_bmn(pa[st], db, o, accumulate || st > 0);
    else gm::f16_rs_bmn(pa[st], db, o, accumulate || st > 0);
  }
  gm::commit();
}

}  // namespace flashmsa::cuda::sm90::attn

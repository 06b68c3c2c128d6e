// Hopper warpgroup MMA (wgmma) building blocks shared by the SM90 kernels.
//
// The instructions themselves come from CUTLASS/CuTe (cute/arch/mma_sm90_gmma.hpp, pinned
// nvidia-cutlass 4.2.0.0, see cmake/FlashMSACutlass.cmake); this header adds what a
// kernel that keeps raw shared-memory tiles needs around them:
//   - the 128-byte-swizzled shared-memory tile format both operands use,
//   - shared-memory matrix descriptors for K-major and MN-major tiles,
//   - array-taking wrappers for the m64n128 instructions FlashMSA uses.
//
// Tile format ("SW128 panel"): a tile of `rows` rows, each `row_bytes` bytes (a multiple
// of 128) is stored as row_bytes/128 panels of rows x 128 bytes; panel p holds bytes
// [128p, 128p+128) of every row. Inside a panel, the 16-byte chunk c of row r lives at
// r*128 + ((c ^ (r % 8)) * 16): CuTe's Swizzle<3,4,3>. Panels must start 1024-byte aligned.
//
// Operand conventions (one warpgroup = 128 threads computes a 64 x 128 FP32 tile):
//   - A (M = 64 rows) K-major: rows are the M index, bytes along K.
//   - B K-major: rows are the N index (128 rows), bytes along K.
//   - B MN-major (16-bit types only): rows are the K index, bytes along N (two panels
//     of 64 N-elements for N = 128).
//   - Register A (RS forms): the fragment of the m64nNk16 / k32 instruction, which for
//     16-bit types equals the accumulator layout converted pairwise (see pack helpers).
//
// Accumulator layout of a 64 x 128 FP32 tile in thread t of the warpgroup (warp w = t/32,
// lane l = t%32): d[4j + 0] = (row 16w + l/4,     col 8j + 2(l%4)),
//                 d[4j + 1] = (row 16w + l/4,     col 8j + 2(l%4) + 1),
//                 d[4j + 2] = (row 16w + l/4 + 8, col 8j + 2(l%4)),
//                 d[4j + 3] = (row 16w + l/4 + 8, col 8j + 2(l%4) + 1),   j = 0..15.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <utility>

#include <cute/arch/mma_sm90_desc.hpp>
#include <cute/arch/mma_sm90_gmma.hpp>

namespace flashmsa::cuda::sm90::gmma {

namespace G = cute::SM90::GMMA;

/// Byte offset of byte `b` of row `r` inside an SW128 tile of `rows` rows.
__device__ __forceinline__ std::uint32_t sw128_offset(int r, int b, int rows) {
  const int panel = b >> 7;
  const int chunk = (b >> 4) & 7;
  return static_cast<std::uint32_t>(panel * rows * 128 + r * 128 + ((chunk ^ (r & 7)) << 4) + (b & 15));
}

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Descriptor of a K-major SW128 operand starting at shared address `addr` (the panel base
/// plus the byte offset of the current K step inside the 128-byte row).
__device__ __forceinline__ std::uint64_t desc_k_sw128(std::uint32_t addr) {
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = static_cast<std::uint16_t>((addr & 0x3FFFF) >> 4);
  d.bitfield.leading_byte_offset_ = 1;           // unused by swizzled K-major layouts
  d.bitfield.stride_byte_offset_ = 1024 >> 4;    // 8 rows x 128 bytes
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = static_cast<std::uint8_t>(G::LayoutType::B128);
  return d.desc_;
}

/// `d` advanced by `bytes` (a multiple of 16) inside the same tile: the start address
/// field (bits 0-13, in 16-byte units) of a shared address below 256 KB plus an in-tile
/// offset never carries out, so only the low word changes (one uniform add per wgmma
/// instead of rebuilding the descriptor from the address).
__device__ __forceinline__ std::uint64_t desc_add(std::uint64_t d, std::uint32_t bytes) {
  const std::uint32_t lo = static_cast<std::uint32_t>(d) + (bytes >> 4);
  return (d & 0xFFFFFFFF00000000ull) | lo;
}

/// Descriptor of an MN-major SW128 operand (16-bit types): rows are K, 128-byte panels
/// along MN, `panel_bytes` apart. `addr` = tile base + k_row * 128.
__device__ __forceinline__ std::uint64_t desc_mn_sw128(std::uint32_t addr, std::uint32_t panel_bytes) {
  cute::GmmaDescriptor d;
  d.bitfield.start_address_ = static_cast<std::uint16_t>((addr & 0x3FFFF) >> 4);
  d.bitfield.leading_byte_offset_ = static_cast<std::uint16_t>(panel_bytes >> 4);
  d.bitfield.stride_byte_offset_ = 1024 >> 4;    // 8 K rows x 128 bytes
  d.bitfield.base_offset_ = 0;
  d.bitfield.layout_type_ = static_cast<std::uint8_t>(G::LayoutType::B128);
  return d.desc_;
}

__device__ __forceinline__ void fence() { cute::warpgroup_arrive(); }
__device__ __forceinline__ void commit() { cute::warpgroup_commit_batch(); }
template <int N>
__device__ __forceinline__ void wait() { cute::warpgroup_wait<N>(); }

template <int N>
__device__ __forceinline__ void fence_operands(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) cute::warpgroup_fence_operand(d[i]);
}

namespace detail {
template <class Atom, std::size_t... I>
__device__ __forceinline__ void ss(std::uint64_t a, std::uint64_t b, float (&d)[64], G::ScaleOut s,
                                   std::index_sequence<I...>) {
  Atom::fma(a, b, d[I]..., s);
}
template <class Atom, int ND, std::size_t... I>
__device__ __forceinline__ void rs(const std::uint32_t (&a)[4], std::uint64_t b, float (&d)[ND], G::ScaleOut s,
                                   std::index_sequence<I...>) {
  Atom::fma(a[0], a[1], a[2], a[3], b, d[I]..., s);
}
template <int N>
struct F16RsKK;  // m64 N k16, F16 in, FP32 out, A in registers, B K-major
template <>
struct F16RsKK<8> {
  using type = cute::SM90::GMMA::MMA_64x8x16_F32F16F16_RS<G::Major::K, G::Major::K>;
};
template <>
struct F16RsKK<16> {
  using type = cute::SM90::GMMA::MMA_64x16x16_F32F16F16_RS<G::Major::K, G::Major::K>;
};
template <>
struct F16RsKK<32> {
  using type = cute::SM90::GMMA::MMA_64x32x16_F32F16F16_RS<G::Major::K, G::Major::K>;
};
template <>
struct F16RsKK<64> {
  using type = cute::SM90::GMMA::MMA_64x64x16_F32F16F16_RS<G::Major::K, G::Major::K>;
};
template <>
struct F16RsKK<128> {
  using type = cute::SM90::GMMA::MMA_64x128x16_F32F16F16_RS<G::Major::K, G::Major::K>;
};
template <int N>
struct E4m3RsKK;  // m64 N k32, E4M3 in, FP32 out, A in registers, B K-major
template <>
struct E4m3RsKK<8> {
  using type = cute::SM90::GMMA::MMA_64x8x32_F32E4M3E4M3_RS_TN<>;
};
template <>
struct E4m3RsKK<16> {
  using type = cute::SM90::GMMA::MMA_64x16x32_F32E4M3E4M3_RS_TN<>;
};
template <>
struct E4m3RsKK<32> {
  using type = cute::SM90::GMMA::MMA_64x32x32_F32E4M3E4M3_RS_TN<>;
};
template <>
struct E4m3RsKK<64> {
  using type = cute::SM90::GMMA::MMA_64x64x32_F32E4M3E4M3_RS_TN<>;
};
}  // namespace detail

/// D(64xN) (+)= A(64x32, registers) * B(32xN, smem K-major SW128), E4M3 in, FP32 out
/// (QGMMA: its accumulation is not full FP32, see CudaIndexer.Fp8QkPrecision), for N = 8,
/// 16, 32, 64; A's register layout as `e4m3_rs`. Used only by the opt-in FP8 decode
/// scorer (FLASHMSA_FP8_QK=e4m3, NVFP4 index K).
template <int N>
__device__ __forceinline__ void e4m3_rs_bk(const std::uint32_t (&a)[4], std::uint64_t b, float (&d)[N / 2],
                                           bool accumulate) {
  detail::rs<typename detail::E4m3RsKK<N>::type>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<N / 2>{});
}

/// D(64xN) (+)= A(64x16, registers) * B(16xN, smem K-major SW128), F16 in, FP32 out, for
/// N = 8, 16, 32, 64, 128. d holds N/2 floats per thread: d[4j + e] as in the 64 x 128
/// layout above with j < N/8. Used by the decode scoring kernel (index-K in A, index q in
/// B) and, N = 128, by the prefill kernel's Q K^T on E4M3 query rows (Q8RS).
template <int N>
__device__ __forceinline__ void f16_rs_bk(const std::uint32_t (&a)[4], std::uint64_t b, float (&d)[N / 2],
                                          bool accumulate) {
  detail::rs<typename detail::F16RsKK<N>::type>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<N / 2>{});
}

/// D(64x128) (+)= A(64x16, smem K-major) * B(16x128, smem K-major), BF16 in, FP32 out.
__device__ __forceinline__ void bf16_ss(std::uint64_t a, std::uint64_t b, float (&d)[64], bool accumulate) {
  detail::ss<cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_SS<G::Major::K, G::Major::K>>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<64>{});
}

/// D(64x128) (+)= A(64x16, smem K-major) * B(16x128, smem K-major), F16 in, FP32 out.
__device__ __forceinline__ void f16_ss(std::uint64_t a, std::uint64_t b, float (&d)[64], bool accumulate) {
  detail::ss<cute::SM90::GMMA::MMA_64x128x16_F32F16F16_SS<G::Major::K, G::Major::K>>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<64>{});
}

/// D(64x128) (+)= A(64x16, registers) * B(16x128, smem MN-major), BF16 in, FP32 out.
__device__ __forceinline__ void bf16_rs_bmn(const std::uint32_t (&a)[4], std::uint64_t b, float (&d)[64],
                                            bool accumulate) {
  detail::rs<cute::SM90::GMMA::MMA_64x128x16_F32BF16BF16_RS<G::Major::K, G::Major::MN>>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<64>{});
}

/// D(64x128) (+)= A(64x16, registers) * B(16x128, smem MN-major), F16 in, FP32 out. The
/// FP8 attention paths use it for P V: E4M3 probabilities and E4M3 (or NVFP4-dequantised)
/// V values are exact in F16, so the products equal an E4M3 MMA's.
__device__ __forceinline__ void f16_rs_bmn(const std::uint32_t (&a)[4], std::uint64_t b, float (&d)[64],
                                           bool accumulate) {
  detail::rs<cute::SM90::GMMA::MMA_64x128x16_F32F16F16_RS<G::Major::K, G::Major::MN>>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<64>{});
}

/// D(64x128) (+)= A(64x32, smem K-major) * B(32x128, smem K-major), E4M3 in, FP32 out.
__device__ __forceinline__ void e4m3_ss(std::uint64_t a, std::uint64_t b, float (&d)[64], bool accumulate) {
  detail::ss<cute::SM90::GMMA::MMA_64x128x32_F32E4M3E4M3_SS_TN<>>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<64>{});
}

/// D(64x128) (+)= A(64x32, registers) * B(32x128, smem K-major), E4M3 in, FP32 out.
/// Register A of k-step s holds, in thread lane l, logical K = 4(l%4)+i (a[0], a[1] for
/// rows r, r+8) and 16+4(l%4)+i (a[2], a[3]). Use `e4m3_rs_k_perm` to place the K
/// (token) index of B so that A can be built straight from an accumulator tile.
__device__ __forceinline__ void e4m3_rs(const std::uint32_t (&a)[4], std::uint64_t b, float (&d)[64],
                                        bool accumulate) {
  detail::rs<cute::SM90::GMMA::MMA_64x128x32_F32E4M3E4M3_RS_TN<>>(
      a, b, d, accumulate ? G::ScaleOut::One : G::ScaleOut::Zero, std::make_index_sequence<64>{});
}

/// Packs two floats into a bf16x2 register (low half = first).
__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}

/// Packs two floats into an f16x2 register (low half = first).
__device__ __forceinline__ std::uint32_t pack_f16x2(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %2, %1;" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}

/// Two E4M3 bytes (low byte = first) to an f16x2 register; exact.
__device__ __forceinline__ std::uint32_t e4m3x2_to_f16x2(std::uint16_t v) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
  return r;
}

/// E4M3 bytes of E4M3_sat(m x s) for the e2m1 magnitudes m = 0, .5, 1, 1.5 (x) and
/// 2, 3, 4, 6 (y); scale = the E4M3 block-scale byte s (0..255). The f16 products are
/// exact and rounded once, as in the CPU backend (spec 5.2, D7). One table serves the 16
/// codes of a block (the per-code F16 multiply and rounding it replaces cost about 4x more).
__device__ __forceinline__ uint2 nvfp4_mag_table(std::uint32_t scale) {
  const std::uint32_t s2 = e4m3x2_to_f16x2(static_cast<std::uint16_t>(scale * 0x101u));  // f16x2 splat
  constexpr std::uint32_t kM[4] = {0x38000000u, 0x3E003C00u, 0x42004000u, 0x46004400u};  // f16 pairs, low first
  std::uint32_t q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 prod = __hmul2(*reinterpret_cast<const __half2*>(&kM[i]), *reinterpret_cast<const __half2*>(&s2));
    std::uint16_t b;
    asm("cvt.rn.satfinite.e4m3x2.f16x2 %0, %1;" : "=h"(b) : "r"(*reinterpret_cast<const unsigned*>(&prod)));
    q[i] = b;
  }
  return make_uint2(q[0] | (q[1] << 16), q[2] | (q[3] << 16));
}

/// prmt.b32 in its default mode (selector nibbles in the low 16 bits; a nibble's bit 3
/// replicates the sign of the selected byte): __byte_perm masks its selector with 0x7777
/// first, which costs an ALU operation where the selector is already clean.
__device__ __forceinline__ std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  std::uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

/// mad.lo.u32: a * b + c (mod 2^32) on the FMA pipe (IMAD); a shift-and-add written in
/// C++ may be lowered to ALU instructions instead.
__device__ __forceinline__ std::uint32_t mad_lo(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  std::uint32_t r;
  asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

/// One block scale's dequantisation table in the form nvfp4x8_lookup reads.
///   t: the 8 E4M3 bytes of nvfp4_mag_table(scale) with bit 7 flipped (byte j = code j's
///      magnitude; all 8 bytes share bit 7: the scale's sign, or 0x7F for a NaN scale);
///   d: 0xFFFFFF80 (-128) where t's bytes have bit 7 set, else 0x80 (+128).
/// Adding d to a byte of t toggles its bit 7 without a carry or borrow into the next byte.
struct Nvfp4Lut {
  uint2 t;
  std::uint32_t d;
};

__device__ __forceinline__ Nvfp4Lut nvfp4_lut(std::uint32_t scale) {
  const uint2 tab = nvfp4_mag_table(scale);
  Nvfp4Lut l;
  l.t = make_uint2(tab.x ^ 0x80808080u, tab.y ^ 0x80808080u);
  l.d = (l.t.x & 0x80u) ? 0xFFFFFF80u : 0x80u;
  return l;
}

/// The tables of all 256 block-scale bytes (nvfp4_lut) as 16-byte entries {t.x, t.y, d, 0}
/// at `tab` (4 KB, shared memory), filled by threads tid of kThreads; the caller syncs
/// before the reads (nvfp4_lut_entry).
template <int kThreads>
__device__ __forceinline__ void fill_nvfp4_luts(uint4* tab, int tid) {
  for (int i = tid; i < 256; i += kThreads) {
    const Nvfp4Lut l = nvfp4_lut(static_cast<std::uint32_t>(i));
    tab[i] = make_uint4(l.t.x, l.t.y, l.d, 0u);
  }
}
/// One entry of fill_nvfp4_luts' tables as the table nvfp4x8_lookup reads.
__device__ __forceinline__ Nvfp4Lut nvfp4_lut_entry(uint4 e) { return Nvfp4Lut{make_uint2(e.x, e.y), e.z}; }

/// Eight e2m1 codes (code j in bits 4j..4j+3 of w) -> eight E4M3 bytes, byte j of lo =
/// code j, byte j of hi = code 4 + j, each E4M3_sat(e2m1 x scale) = table byte with bit 7
/// flipped by the code's sign (saturating RNE is symmetric; a negative scale is already in
/// the table). Per 4 codes:
///   - the magnitude: a byte permute of l.t by the 3-bit indices;
///   - s: a byte permute of 0x01010101 by the raw nibbles; a nibble's bit 3 (the code's
///     sign) makes prmt replicate bit 7 of the selected byte (0), so byte j of s is
///     1 - sign(code j);
///   - mag + s * d (IMAD on the FMA pipe) toggles bit 7 of the bytes whose code is
///     positive, which undoes the flip in l.t: bit 7 = table sign XOR code sign.
/// 7 ALU operations and 2 IMADs for 8 codes (the XOR form of the sign took 11 ALU
/// operations; moving the shifts to the FMA pipe as mul.hi was slower on the H200).
__device__ __forceinline__ void nvfp4x8_lookup(std::uint32_t w, const Nvfp4Lut& l, std::uint32_t& lo,
                                               std::uint32_t& hi) {
  const std::uint32_t m = w & 0x77777777u;  // magnitude indices (selector bit 3 clear)
  const std::uint32_t ones = 0x01010101u;
  lo = mad_lo(prmt(ones, ones, w), l.d, prmt(l.t.x, l.t.y, m));
  hi = mad_lo(prmt(ones, ones, w >> 16), l.d, prmt(l.t.x, l.t.y, m >> 16));
}

/// Sixteen e2m1 codes of one block (w.x = codes 0-7, w.y = codes 8-15) -> sixteen E4M3
/// bytes in code order (two nvfp4x8_lookup).
__device__ __forceinline__ uint4 nvfp4x16_lookup(uint2 w, const Nvfp4Lut& l) {
  uint4 e;
  nvfp4x8_lookup(w.x, l, e.x, e.y);
  nvfp4x8_lookup(w.y, l, e.z, e.w);
  return e;
}

/// Four E4M3 bytes of w -> two f16x2 (exact): lo = bytes 0-1, hi = bytes 2-3 (low byte
/// first). Unpacked and converted in one asm block, so ptxas reads the high half in place
/// (F2FP ... R.H1); converting w >> 16 on its own costs an ALU shift first.
__device__ __forceinline__ void f16x2_pair(std::uint32_t w, std::uint32_t& lo, std::uint32_t& hi) {
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}

/// Packs four floats into four E4M3 bytes (saturating, RNE), byte 0 = x0.
__device__ __forceinline__ std::uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  std::uint16_t lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(lo) : "f"(x0), "f"(x1));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %2, %1;" : "=h"(hi) : "f"(x2), "f"(x3));
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

/// A fragment (BF16) of k-step s (K = 16s..16s+15) from a 64 x 128 FP32 accumulator tile.
__device__ __forceinline__ void bf16_a_from_acc(const float (&p)[64], int s, std::uint32_t (&a)[4]) {
  a[0] = pack_bf16x2(p[8 * s + 0], p[8 * s + 1]);
  a[1] = pack_bf16x2(p[8 * s + 2], p[8 * s + 3]);
  a[2] = pack_bf16x2(p[8 * s + 4], p[8 * s + 5]);
  a[3] = pack_bf16x2(p[8 * s + 6], p[8 * s + 7]);
}

/// A fragment (F16) of k-step s from a 64 x 128 FP32 accumulator tile.
__device__ __forceinline__ void f16_a_from_acc(const float (&p)[64], int s, std::uint32_t (&a)[4]) {
  a[0] = pack_f16x2(p[8 * s + 0], p[8 * s + 1]);
  a[1] = pack_f16x2(p[8 * s + 2], p[8 * s + 3]);
  a[2] = pack_f16x2(p[8 * s + 4], p[8 * s + 5]);
  a[3] = pack_f16x2(p[8 * s + 6], p[8 * s + 7]);
}

/// A fragment (E4M3) of k-step s (accumulator columns 32s..32s+31) from a 64 x 128 FP32
/// tile, each value multiplied by `scale` before rounding. The logical K order this
/// produces is the one `e4m3_rs_k_perm` describes.
__device__ __forceinline__ void e4m3_a_from_acc(const float (&p)[64], int s, float scale, std::uint32_t (&a)[4]) {
  const float* q = p + 16 * s;  // n8 blocks j = 4s .. 4s+3
  a[0] = pack_e4m3x4(q[0] * scale, q[1] * scale, q[4] * scale, q[5] * scale);
  a[1] = pack_e4m3x4(q[2] * scale, q[3] * scale, q[6] * scale, q[7] * scale);
  a[2] = pack_e4m3x4(q[8] * scale, q[9] * scale, q[12] * scale, q[13] * scale);
  a[3] = pack_e4m3x4(q[10] * scale, q[11] * scale, q[14] * scale, q[15] * scale);
}

/// For the E4M3 RS form fed by `e4m3_a_from_acc`: the logical K position (0..31 inside a
/// k32 step) at which accumulator column `c` (0..31 inside the step) must be placed in B.
/// Column c = 8j' + 2q + e (j' = 0..3, q = lane%4, e = 0..1) goes to 16(j'/2) + 4q + 2(j'%2) + e.
__host__ __device__ __forceinline__ int e4m3_rs_k_perm(int c) {
  const int jp = c >> 3, q = (c >> 1) & 3, e = c & 1;
  return 16 * (jp >> 1) + 4 * q + 2 * (jp & 1) + e;
}

}  // namespace flashmsa::cuda::sm90::gmma

// FlashMSA — scalar number formats: BF16, FP8 E4M3, E2M1 and NVFP4 blocks.
//
// These are the bit-exact conversions every backend uses (spec section 5, D7).
// All conversions to narrow formats are round-to-nearest-even; conversions to E4M3
// saturate to +-448 (no infinities in E4M3; NaN maps to 0x7F).
#pragma once

#include <cstdint>

namespace flashmsa {

/// BF16 bits -> float (exact). BF16 is the model dtype of q/k/v (spec 1.1, D7).
float bf16_to_float(std::uint16_t bits);
/// float -> BF16 bits, round-to-nearest-even; NaN stays a quiet NaN.
std::uint16_t float_to_bf16(float x);

/// E4M3 (OCP "fn": bias 7, max 448, NaN = S.1111.111, no inf) bits -> float (exact).
float e4m3_to_float(std::uint8_t bits);
/// float -> E4M3, round-to-nearest-even, saturating to +-448 (spec 5.1, the
/// `__NV_SATFINITE` behaviour). NaN -> 0x7F. -0.0 -> 0x80.
std::uint8_t float_to_e4m3_sat(float x);

/// E2M1 4-bit code (bit 3 = sign) -> float, table of spec 5.2:
/// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
float e2m1_to_float(std::uint8_t code);
/// float -> E2M1 code, round-to-nearest-even (ties 0.25->0, 0.75->1, 1.25->1,
/// 1.75->2, 2.5->2, 3.5->4, 5->4), saturating to +-6. Values that round to zero give
/// code 0 (no negative zero is produced). NaN -> code 0.
std::uint8_t float_to_e2m1(float x);

/// NVFP4 dequantisation to FP8 as MSA does it (spec 5.2, 5.3):
/// E4M3_sat(e2m1(code) * e4m3(scale)), computed exactly then rounded once.
std::uint8_t nvfp4_to_e4m3(std::uint8_t code, std::uint8_t scale_bits);

/// Quantises one block of 16 consecutive values to NVFP4 (spec 5.2, vLLM recipe):
///   gs     = 1 / global_scale
///   scale  = E4M3_sat(gs * amax(|x|) / 6)
///   code_i = E2M1(clamp(x_i * gs / float(scale), -6, 6))   (all codes 0 if scale == 0)
/// Writes 8 packed bytes (element 2i in the low nibble of byte i) and the scale bits.
/// Decoding: x_i ~= e2m1(code_i) * float(scale) * global_scale.
/// `x` points at 16 floats, `packed8` at 8 bytes, `scale_bits` at 1 byte; global_scale
/// must be finite and > 0 (callers validate it; otherwise the codes are unspecified).
void nvfp4_quantize_block16(const float* x, float global_scale, std::uint8_t* packed8,
                            std::uint8_t* scale_bits);

/// Byte offset, inside one (page, head) 128 x 8 NVFP4 scale plane, of the scale of
/// token `t` (0..127) and 16-dim group `g` (0..7) (spec 4.3):
///   linear:   t*8 + g
///   swizzled: 32*(t/4) + 4*g + (t%4)   (vLLM 4x4 swizzle)
/// Arguments outside those ranges give an offset outside 0..1023 (not checked).
int nvfp4_scale_offset(int t, int g, bool swizzled);
/// Inverse of nvfp4_scale_offset for the swizzled plane: offset (0..1023) -> (t, g).
/// `t` and `g` must be valid pointers; offsets outside 0..1023 give t outside 0..127.
void nvfp4_swizzled_offset_inverse(int offset, int* t, int* g);

}  // namespace flashmsa

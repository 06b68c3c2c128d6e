// Bit-exact scalar conversions (spec 5.1-5.2). Written for clarity; the hot paths
// of the CPU backend use the lookup tables built from these functions.
#include "flashmsa/numerics.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace flashmsa {

float bf16_to_float(std::uint16_t bits) {
  std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t float_to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // qNaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

float e4m3_to_float(std::uint8_t bits) {
  const int sign = bits >> 7;
  const int e = (bits >> 3) & 0xf;
  const int m = bits & 0x7;
  float v;
  if (e == 0xf && m == 0x7) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -9);  // subnormal: m * 2^-9
  } else {
    v = std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  }
  return sign ? -v : v;
}

std::uint8_t float_to_e4m3_sat(float x) {
  if (std::isnan(x)) return 0x7f;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (also covers +-inf)
  if (a < 0.015625f) {                  // below the smallest normal 2^-6: subnormal grid 2^-9
    const float m = std::nearbyint(a * 512.0f);  // exact scaling, ties to even
    return sign | static_cast<std::uint8_t>(m);  // m == 8 encodes 2^-6 (exp 1, mant 0)
  }
  int e;
  const float fr = std::frexp(a, &e);           // a = fr * 2^e, fr in [0.5, 1)
  float m = std::nearbyint((fr * 2.0f - 1.0f) * 8.0f);  // mantissa in eighths
  int exp = e - 1;
  if (m >= 8.0f) {
    m = 0.0f;
    ++exp;
  }
  const int biased = exp + 7;  // 1..15; a < 448 guarantees no overflow past 0x7e
  return sign | static_cast<std::uint8_t>((biased << 3) | static_cast<int>(m));
}

namespace {
constexpr float kE2m1Values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
}

float e2m1_to_float(std::uint8_t code) {
  const float v = kE2m1Values[code & 0x7];
  return (code & 0x8) ? -v : v;
}

std::uint8_t float_to_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const float a = std::fabs(x);
  std::uint8_t c;
  if (a <= 0.25f) c = 0;
  else if (a < 0.75f) c = 1;
  else if (a <= 1.25f) c = 2;
  else if (a < 1.75f) c = 3;
  else if (a <= 2.5f) c = 4;
  else if (a < 3.5f) c = 5;
  else if (a <= 5.0f) c = 6;
  else c = 7;
  if (c == 0) return 0;
  return static_cast<std::uint8_t>(std::signbit(x) ? (c | 0x8) : c);
}

std::uint8_t nvfp4_to_e4m3(std::uint8_t code, std::uint8_t scale_bits) {
  // e2m1 (3 significant bits) x e4m3 (4 significant bits) is exact in float.
  return float_to_e4m3_sat(e2m1_to_float(code) * e4m3_to_float(scale_bits));
}

void nvfp4_quantize_block16(const float* x, float global_scale, std::uint8_t* packed8,
                            std::uint8_t* scale_bits) {
  const float gs = 1.0f / global_scale;
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) {
    const float a = std::fabs(x[i]);
    if (a > amax) amax = a;  // NaN never wins a '>' comparison
  }
  const std::uint8_t s = float_to_e4m3_sat(gs * amax / 6.0f);
  const float sf = e4m3_to_float(s);
  *scale_bits = s;
  for (int i = 0; i < 8; ++i) {
    std::uint8_t lo = 0, hi = 0;
    if (sf > 0.0f) {
      lo = float_to_e2m1(std::fmin(std::fmax(x[2 * i] * gs / sf, -6.0f), 6.0f));
      hi = float_to_e2m1(std::fmin(std::fmax(x[2 * i + 1] * gs / sf, -6.0f), 6.0f));
    }
    packed8[i] = static_cast<std::uint8_t>(lo | (hi << 4));
  }
}

int nvfp4_scale_offset(int t, int g, bool swizzled) {
  return swizzled ? 32 * (t / 4) + 4 * g + (t % 4) : t * 8 + g;
}

void nvfp4_swizzled_offset_inverse(int offset, int* t, int* g) {
  *t = (offset / 32) * 4 + offset % 4;
  *g = (offset % 32) / 4;
}

}  // namespace flashmsa

// Bit-exact scalar numerics (spec 5.1-5.3, D7): BF16, FP8 E4M3, E2M1, NVFP4 blocks,
// the 4x4 scale swizzle and NVFP4 -> E4M3 conversion.
//
// The references in this file are deliberately written differently from the library:
// decoding is done from the bit fields in double precision, and rounding is done by
// brute force (nearest representable value over the whole code table, ties to the even
// code), so an error in the library's bit tricks cannot hide in the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"

namespace {

using namespace flashmsa;

// ---------------------------------------------------------------------------
// Independent references

// E4M3 "fn" from the bit fields: S.EEEE.MMM, bias 7, subnormal m * 2^-9, NaN = S.1111.111.
double ref_e4m3_decode(int code) {
  const int s = (code >> 7) & 1, e = (code >> 3) & 0xf, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? m * std::ldexp(1.0, -9) : (8 + m) * std::ldexp(1.0, e - 10);
  return s ? -mag : mag;
}

// Brute-force round-to-nearest-even onto the E4M3 grid, saturating to +-448.
// Consecutive codes 0..0x7e are increasing in value, so "even mantissa" == "even code".
std::uint8_t ref_e4m3_encode(double x) {
  if (std::isnan(x)) return 0x7f;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  if (a >= 448.0) return sign | 0x7e;
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c <= 0x7e; ++c) {
    const double err = std::fabs(a - ref_e4m3_decode(c));
    if (err < best_err || (err == best_err && (c % 2) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | static_cast<std::uint8_t>(best);
}

constexpr double kE2m1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

double ref_e2m1_decode(int code) { return (code & 8) ? -kE2m1[code & 7] : kE2m1[code & 7]; }

// Brute-force RNE onto the E2M1 grid, saturating to +-6, zero without sign, NaN -> 0.
std::uint8_t ref_e2m1_encode(double x) {
  if (std::isnan(x)) return 0;
  const double a = std::fabs(x);
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 8; ++c) {
    const double err = std::fabs(a - kE2m1[c]);
    if (err < best_err || (err == best_err && (c % 2) == 0)) {
      best = c;
      best_err = err;
    }
  }
  if (best == 0) return 0;
  return static_cast<std::uint8_t>(std::signbit(x) ? (best | 8) : best);
}

// NVFP4 block quantisation, vLLM recipe (spec 5.2), written out with the reference
// encoders. The float expressions mirror the spec's formula term by term.
void ref_quantize_block16(const float* x, float global_scale, std::uint8_t codes[16],
                          std::uint8_t* scale) {
  const float gs = 1.0f / global_scale;
  float amax = 0.0f;
  for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[i]));
  *scale = ref_e4m3_encode(gs * amax / 6.0f);
  const float sf = static_cast<float>(ref_e4m3_decode(*scale));
  for (int i = 0; i < 16; ++i) {
    if (sf == 0.0f) {
      codes[i] = 0;
      continue;
    }
    float y = x[i] * gs / sf;
    y = std::min(std::max(y, -6.0f), 6.0f);
    codes[i] = ref_e2m1_encode(y);
  }
}

std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---------------------------------------------------------------------------
// E4M3

TEST(E4m3, DecodeAll256Codes) {
  for (int c = 0; c < 256; ++c) {
    const double want = ref_e4m3_decode(c);
    const float got = e4m3_to_float(static_cast<std::uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "code " << c;
    }
  }
  // Hand-worked values: 0x38 = 0.0111.000 -> 2^(7-7) = 1; 0x7e = 0.1111.110 ->
  // 2^8 * (1 + 6/8) = 448; 0x01 -> 1 * 2^-9; 0x08 = 0.0001.000 -> 2^-6;
  // 0x07 -> 7 * 2^-9 (largest subnormal); 0xc4 = 1.1000.100 -> -(2^1 * 1.5) = -3.
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0.001953125f);
  EXPECT_EQ(e4m3_to_float(0x08), 0.015625f);
  EXPECT_EQ(e4m3_to_float(0x07), 7.0f / 512.0f);
  EXPECT_EQ(e4m3_to_float(0xc4), -3.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
}

TEST(E4m3, RoundTripEveryFiniteCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(float_to_e4m3_sat(e4m3_to_float(static_cast<std::uint8_t>(c))), c) << "code " << c;
  }
  EXPECT_EQ(float_to_e4m3_sat(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3_sat(-0.0f), 0x80);
}

TEST(E4m3, SaturationInfNan) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {448.0f, 448.5f, 463.9f, 464.0f, 480.0f, 1e6f, 3.0e38f, inf}) {
    EXPECT_EQ(float_to_e4m3_sat(v), 0x7e) << v;
    EXPECT_EQ(float_to_e4m3_sat(-v), 0xfe) << -v;
  }
  EXPECT_EQ(float_to_e4m3_sat(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(float_to_e4m3_sat(-std::numeric_limits<float>::quiet_NaN()), 0x7f);
  // Just below 448 stays in range: 440 is between 416 (0x7d) and 448 (0x7e), the
  // midpoint 432 rounds to even 0x7e (mantissa 110), 431 goes down to 0x7d.
  EXPECT_EQ(float_to_e4m3_sat(432.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3_sat(431.0f), 0x7d);
}

TEST(E4m3, TiesToEvenAtEveryMidpoint) {
  // Every pair of neighbouring non-negative finite codes (0x00..0x7e), including the
  // subnormal range and the subnormal/normal boundary (0x07 -> 0x08).
  for (int c = 0; c < 0x7e; ++c) {
    const double lo = ref_e4m3_decode(c), hi = ref_e4m3_decode(c + 1);
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(float_to_e4m3_sat(mid), even) << "midpoint of codes " << c << "/" << c + 1;
    EXPECT_EQ(float_to_e4m3_sat(-mid), 0x80 | even);
    EXPECT_EQ(float_to_e4m3_sat(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(float_to_e4m3_sat(std::nextafter(mid, 1000.0f)), c + 1);
  }
  // Hand-worked: 2^-10 is halfway between 0 and 2^-9 -> 0 (even); 1.0625 halfway
  // between 1 (0x38) and 1.125 (0x39) -> 0x38; 1.1875 between 0x39 and 0x3a -> 0x3a.
  EXPECT_EQ(float_to_e4m3_sat(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(float_to_e4m3_sat(1.0625f), 0x38);
  EXPECT_EQ(float_to_e4m3_sat(1.1875f), 0x3a);
  // Far below the smallest subnormal: flush to (signed) zero.
  EXPECT_EQ(float_to_e4m3_sat(1e-10f), 0x00);
  EXPECT_EQ(float_to_e4m3_sat(-1e-10f), 0x80);
}

TEST(E4m3, RandomValuesMatchBruteForce) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-14, 10);
  for (int i = 0; i < 40000; ++i) {
    const float x = std::ldexp(mant(rng), expo(rng));
    ASSERT_EQ(float_to_e4m3_sat(x), ref_e4m3_encode(x)) << x;
  }
}

// ---------------------------------------------------------------------------
// E2M1

TEST(E2m1, DecodeAll16Codes) {
  const float want[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(e2m1_to_float(static_cast<std::uint8_t>(c)), want[c]) << c;
    EXPECT_EQ(std::signbit(e2m1_to_float(static_cast<std::uint8_t>(c))), c >= 8) << c;
  }
}

TEST(E2m1, RoundTripAndNoNegativeZero) {
  for (int c = 0; c < 16; ++c) {
    const std::uint8_t got = float_to_e2m1(e2m1_to_float(static_cast<std::uint8_t>(c)));
    EXPECT_EQ(got, c == 8 ? 0 : c) << c;  // -0 encodes as +0
  }
  EXPECT_EQ(float_to_e2m1(-0.1f), 0);
  EXPECT_EQ(float_to_e2m1(-0.25f), 0);
}

TEST(E2m1, TieThresholds) {
  struct Case { float x; float want; };
  // Each tie goes to the neighbour with the even code: 0.25 -> 0 (code 0), 0.75 -> 1
  // (code 2), 1.25 -> 1 (code 2), 1.75 -> 2 (code 4), 2.5 -> 2 (code 4), 3.5 -> 4
  // (code 6), 5 -> 4 (code 6).
  const Case ties[] = {{0.25f, 0}, {0.75f, 1}, {1.25f, 1}, {1.75f, 2},
                       {2.5f, 2}, {3.5f, 4}, {5.0f, 4}};
  for (const Case& c : ties) {
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(c.x)), c.want) << c.x;
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(-c.x)), c.want == 0 ? 0.0f : -c.want) << -c.x;
    // Just off the tie goes to the nearer neighbour.
    const float up = std::nextafter(c.x, 100.0f), down = std::nextafter(c.x, 0.0f);
    EXPECT_EQ(float_to_e2m1(up), ref_e2m1_encode(up)) << up;
    EXPECT_EQ(float_to_e2m1(down), ref_e2m1_encode(down)) << down;
    EXPECT_NE(float_to_e2m1(up), float_to_e2m1(down)) << c.x;
  }
  // Saturation and NaN.
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {6.0f, 6.5f, 7.0f, 100.0f, inf}) {
    EXPECT_EQ(float_to_e2m1(v), 7) << v;
    EXPECT_EQ(float_to_e2m1(-v), 15) << -v;
  }
  EXPECT_EQ(float_to_e2m1(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST(E2m1, DenseSweepMatchesBruteForce) {
  for (int i = -8000; i <= 8000; ++i) {
    const float x = static_cast<float>(i) / 1024.0f;  // step 2^-10 over [-7.8, 7.8]
    ASSERT_EQ(float_to_e2m1(x), ref_e2m1_encode(x)) << x;
  }
}

// ---------------------------------------------------------------------------
// BF16

TEST(Bf16, RoundToNearestEven) {
  // 1.0 = 0x3f80; bf16 spacing at 1 is 2^-7. 1 + 2^-8 is halfway between 0x3f80 and
  // 0x3f81 -> even 0x3f80; 1 + 3*2^-8 halfway between 0x3f81 and 0x3f82 -> 0x3f82;
  // a hair above the first tie goes up.
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-1.0f), 0xbf80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f80ffffu)), 0x3f81);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f807fffu)), 0x3f80);
  // Overflow rounds to infinity, infinities and NaN are kept.
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  const std::uint16_t nan = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(std::isnan(bf16_to_float(nan)));
  // A signalling-style NaN whose payload sits only in the low 16 bits stays NaN.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_float(0x7f800001u)))));
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
}

TEST(Bf16, RoundTripAllCodesAndDecodeExact) {
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const float f = bf16_to_float(static_cast<std::uint16_t>(c));
    EXPECT_EQ(float_bits(f), c << 16);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), c) << c;
  }
}

TEST(Bf16, RandomMatchesNearestNeighbour) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint32_t> dist(0, 0x7f7fffffu);
  for (int i = 0; i < 100000; ++i) {
    const std::uint32_t u = dist(rng);
    const float x = bits_float(u);
    const std::uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    const double dlo = std::fabs(static_cast<double>(x) - bits_float(lo));
    // bf16 0x7f80 is infinity; for rounding it acts as the next grid point 2^128.
    const double hv = hi == 0x7f800000u ? std::ldexp(1.0, 128) : static_cast<double>(bits_float(hi));
    const double dhi = std::fabs(hv - x);
    std::uint16_t want = static_cast<std::uint16_t>(lo >> 16);
    if (dhi < dlo || (dhi == dlo && ((lo >> 16) & 1))) want = static_cast<std::uint16_t>(hi >> 16);
    ASSERT_EQ(float_to_bf16(x), want) << std::hex << u;
  }
}

// ---------------------------------------------------------------------------
// NVFP4 blocks

TEST(Nvfp4, HandWorkedBlock) {
  // amax = 6, global scale 1: scale = E4M3(6/6) = 1.0 (0x38); codes are the values
  // themselves. 0.25 -> 0 (tie to even), 0.75 -> 1.0 (code 2), 5 -> 4 (code 6),
  // -6 -> code 15, 2.9 -> 3 (code 5).
  const float x[16] = {6, -6, 0.25f, 0.75f, 5, 2.9f, 0, -0.5f, 1, 1.5f, 2, 3, 4, -1, -2, -4};
  std::uint8_t packed[8], s;
  nvfp4_quantize_block16(x, 1.0f, packed, &s);
  EXPECT_EQ(s, 0x38);
  const std::uint8_t want_codes[16] = {7, 15, 0, 2, 6, 5, 0, 9, 2, 3, 4, 5, 6, 10, 12, 14};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(packed[i], want_codes[2 * i] | (want_codes[2 * i + 1] << 4)) << i;
  // Global scale 2 halves everything before quantising: scale = E4M3(0.5) = 0x30,
  // and the codes are unchanged (x * 0.5 / 0.5 = x).
  std::uint8_t packed2[8], s2;
  nvfp4_quantize_block16(x, 2.0f, packed2, &s2);
  EXPECT_EQ(s2, 0x30);
  EXPECT_EQ(std::memcmp(packed, packed2, 8), 0);
  // All-zero block: scale 0 and all codes 0.
  const float z[16] = {};
  nvfp4_quantize_block16(z, 1.0f, packed, &s);
  EXPECT_EQ(s, 0);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(packed[i], 0);
}

TEST(Nvfp4, QuantizeMatchesReferenceAndBoundsError) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-4, 8);
  const float globals[] = {1.0f, 0.01f, 0.37f, 3.0f};
  for (int it = 0; it < 4000; ++it) {
    const float mag = std::ldexp(1.0f, e(rng));
    const float g = globals[it % 4];
    float x[16];
    for (float& v : x) v = nd(rng) * mag;
    if (it % 7 == 0) x[it % 16] = 0.0f;
    std::uint8_t packed[8], s, codes[16], rs;
    nvfp4_quantize_block16(x, g, packed, &s);
    ref_quantize_block16(x, g, codes, &rs);
    ASSERT_EQ(s, rs) << "iteration " << it;
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const double sf = ref_e4m3_decode(s);
    for (int i = 0; i < 16; ++i) {
      const int code = (packed[i / 2] >> (4 * (i % 2))) & 0xf;
      ASSERT_EQ(code, codes[i]) << "iteration " << it << " element " << i;
      // Dequantised value x^ = e2m1 * scale * global. Error bound relative to the
      // block amax: the E2M1 grid's widest gap is 2 (between 4 and 6), i.e. an error of
      // at most 1 scale unit, and the scale is at most (1 + 2^-4) * amax / (6 g) when
      // it is a normal E4M3 value (amax / (6 g) >= 2^-6).
      const double xhat = ref_e2m1_decode(code) * sf * g;
      if (amax / (6.0 * g) >= 0.015625 && amax / (6.0 * g) < 448.0) {
        ASSERT_LE(std::fabs(xhat - x[i]), (1.0 + 1.0 / 16) / 6.0 * amax + 1e-6 * amax)
            << "iteration " << it;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Swizzle

TEST(Swizzle, LinearAndSwizzledFormula) {
  // Linear: t*8 + g. Swizzled: 32*(t/4) + 4*g + t%4.
  EXPECT_EQ(nvfp4_scale_offset(5, 2, false), 42);
  EXPECT_EQ(nvfp4_scale_offset(0, 0, true), 0);
  EXPECT_EQ(nvfp4_scale_offset(1, 0, true), 1);
  EXPECT_EQ(nvfp4_scale_offset(0, 1, true), 4);
  EXPECT_EQ(nvfp4_scale_offset(3, 7, true), 31);   // 0 + 28 + 3
  EXPECT_EQ(nvfp4_scale_offset(4, 0, true), 32);   // next 4-token group
  EXPECT_EQ(nvfp4_scale_offset(5, 2, true), 41);   // 32 + 8 + 1
  EXPECT_EQ(nvfp4_scale_offset(127, 7, true), 1023);  // 32*31 + 28 + 3
}

TEST(Swizzle, BijectionAndInverse) {
  std::set<int> seen_swz, seen_lin;
  for (int t = 0; t < 128; ++t) {
    for (int g = 0; g < 8; ++g) {
      const int o = nvfp4_scale_offset(t, g, true);
      ASSERT_GE(o, 0);
      ASSERT_LT(o, 1024);
      seen_swz.insert(o);
      seen_lin.insert(nvfp4_scale_offset(t, g, false));
      int t2 = -1, g2 = -1;
      nvfp4_swizzled_offset_inverse(o, &t2, &g2);
      EXPECT_EQ(t2, t);
      EXPECT_EQ(g2, g);
    }
  }
  EXPECT_EQ(seen_swz.size(), 1024u);
  EXPECT_EQ(seen_lin.size(), 1024u);
  for (int o = 0; o < 1024; ++o) {
    int t = -1, g = -1;
    nvfp4_swizzled_offset_inverse(o, &t, &g);
    ASSERT_TRUE(t >= 0 && t < 128 && g >= 0 && g < 8) << o;
    EXPECT_EQ(nvfp4_scale_offset(t, g, true), o);
  }
}

// ---------------------------------------------------------------------------
// NVFP4 -> E4M3

TEST(Nvfp4ToE4m3, AllCodeScalePairs) {
  // Hand-worked: code 7 (6.0) x scale 0x38 (1.0) = 6 -> 0x4c (2^2 * 1.5);
  // code 7 x 0x7e (448) = 2688 -> saturates to 448 (0x7e); code 1 (0.5) x 0x01 (2^-9)
  // = 2^-10 -> tie between 0 and 2^-9 -> 0; code 3 (1.5) x 0x01 = 1.5*2^-9 -> tie
  // between 0x01 and 0x02 -> 0x02 (even).
  EXPECT_EQ(nvfp4_to_e4m3(7, 0x38), 0x4c);
  EXPECT_EQ(nvfp4_to_e4m3(7, 0x7e), 0x7e);
  EXPECT_EQ(nvfp4_to_e4m3(15, 0x7e), 0xfe);
  EXPECT_EQ(nvfp4_to_e4m3(1, 0x01), 0x00);
  EXPECT_EQ(nvfp4_to_e4m3(3, 0x01), 0x02);
  for (int c = 0; c < 16; ++c) {
    for (int s = 0; s < 256; ++s) {
      // Exact product in double (3 x 4 significant bits), then one RNE-sat rounding.
      const double prod = ref_e2m1_decode(c) * ref_e4m3_decode(s);
      const std::uint8_t want = ref_e4m3_encode(prod);
      ASSERT_EQ(nvfp4_to_e4m3(static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(s)), want)
          << "code " << c << " scale " << s;
    }
  }
}

TEST(Nvfp4ToFp8Op, All16x127PairsBitwise) {
  // Row r, group g uses scale (r + 17 g) % 127; each 16-dim group holds every code
  // 0..15 once (element 2i = low nibble). 127 rows x 8 groups cover all 127 scales.
  const int rows = 127;
  HostTensor packed(DType::u8, {rows, 64}), scale(DType::e4m3, {rows, 8}),
      out(DType::e4m3, {rows, 128});
  auto* p = packed.data<std::uint8_t>();
  auto* s = scale.data<std::uint8_t>();
  for (int r = 0; r < rows; ++r) {
    for (int g = 0; g < 8; ++g) {
      s[r * 8 + g] = static_cast<std::uint8_t>((r + 17 * g) % 127);
      for (int i = 0; i < 8; ++i) {
        const int lo = (2 * i + g) % 16, hi = (2 * i + 1 + g) % 16;
        p[r * 64 + g * 8 + i] = static_cast<std::uint8_t>(lo | (hi << 4));
      }
    }
  }
  out.fill_bytes(0xaa);
  const Status st = nvfp4_to_fp8(packed.view(), scale.view(), out.view());
  ASSERT_TRUE(st.ok()) << st.message();
  std::set<std::pair<int, int>> covered;
  const auto* o = out.data<std::uint8_t>();
  for (int r = 0; r < rows; ++r) {
    for (int d = 0; d < 128; ++d) {
      const int byte = p[r * 64 + d / 2];
      const int code = d % 2 ? byte >> 4 : byte & 0xf;
      const int sc = s[r * 8 + d / 16];
      covered.insert({code, sc});
      const std::uint8_t want = ref_e4m3_encode(ref_e2m1_decode(code) * ref_e4m3_decode(sc));
      ASSERT_EQ(o[r * 128 + d], want) << "row " << r << " dim " << d;
    }
  }
  EXPECT_EQ(covered.size(), 16u * 127u);
}

}  // namespace

// Host check of the SM90 device quantisation (src/cuda/sm90/quant_device.cuh) against the
// CPU numerics (src/common/numerics.cpp), without a GPU: the header is compiled with IEEE
// host operations in place of the __fmul_rn / __fmaf_rn / __frcp_rn / __fdiv_rn
// intrinsics (the same correctly rounded operations) and a one-value shuffle. Pins the
// division-free quotient (quotient_rn) used by the cache and fused kernels: E4M3_sat(x / d)
// and the NVFP4 block quantisation must equal the CPU's IEEE division byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "flashmsa/numerics.h"

namespace quant_host {
struct uint2 {
  unsigned x, y;
};
inline uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
struct uint4 {
  unsigned x, y, z, w;
};
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fdiv_rn(float a, float b) {
  volatile float r = a / b;
  return r;
}
inline float __frcp_rn(float a) { return __fdiv_rn(1.0f, a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float g_shfl_value = 0.0f;  // what the partner lane of nvfp4_quantize_half_block holds
inline float __shfl_xor_sync(unsigned, float, int) { return g_shfl_value; }
using std::fabs;
using std::isnan;
}  // namespace quant_host

#define FLASHMSA_QUANT_DEVICE_HOST_TEST 1
#define __device__
#define __forceinline__ inline
#define __noinline__
namespace flashmsa::cuda {
using namespace quant_host;
}
#include "cuda/sm90/quant_device.cuh"
#undef __device__
#undef __forceinline__
#undef __noinline__

namespace {

using namespace flashmsa::cuda::quant;
using quant_host::__uint_as_float;

std::vector<float> divisors() {
  std::vector<float> d = {0.03f, 0.7f, 0.05f, 1.0f, 0.25f, 6.0f, 448.0f, 1e-3f, 3.7f,
                          std::ldexp(1.0f, -32), std::ldexp(1.9f, 31),
                          1e-12f, 1e20f};  // the last two: out of quotient_rn's range
  for (int b = 1; b < 0x7f; ++b) d.push_back(flashmsa::e4m3_to_float(static_cast<std::uint8_t>(b)));
  return d;
}

TEST(QuantDeviceHost, E4m3QuotientMatchesIeeeDivisionForEveryBf16) {
  long bad = 0;
  for (float d : divisors()) {
    const Divisor dv = make_divisor(d, 1.0f / d);
    for (unsigned b = 0; b < 65536; b += 8) {
      float x[8];
      for (int i = 0; i < 8; ++i) x[i] = __uint_as_float((b + i) << 16);
      const quant_host::uint2 r = e4m3x8_div(x, dv);
      for (int i = 0; i < 8; ++i) {
        volatile float q = x[i] / d;
        const unsigned want = flashmsa::float_to_e4m3_sat(q);
        const unsigned got = ((i < 4 ? r.x : r.y) >> (8 * (i & 3))) & 0xffu;
        if (want != got && ++bad < 5)
          ADD_FAILURE() << "x " << x[i] << " d " << d << ": " << want << " vs " << got;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantDeviceHost, RandomFp8AndNvfp4BlocksMatchCpu) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<unsigned> ui;
  const std::vector<float> ds = divisors();
  long bad = 0;
  for (int it = 0; it < 400000; ++it) {
    float x[16];
    const float mag = std::ldexp(1.0f, static_cast<int>(ui(rng) % 40) - 20);
    for (int i = 0; i < 16; ++i) {
      switch (it % 4) {
        case 0: x[i] = nd(rng) * mag; break;
        case 1: x[i] = flashmsa::bf16_to_float(flashmsa::float_to_bf16(nd(rng) * mag)); break;
        case 2: x[i] = __uint_as_float(static_cast<unsigned>(ui(rng))); break;  // inf, NaN too
        default: x[i] = i == 3 ? -0.0f : nd(rng) * 0.01f;
      }
    }
    const float gs = ds[static_cast<std::size_t>(it) % ds.size()];
    float x8[8];
    std::memcpy(x8, x, sizeof x8);
    const quant_host::uint2 r = e4m3x8_div(x8, make_divisor(gs, 1.0f / gs));
    for (int i = 0; i < 8; ++i) {
      volatile float q = x[i] / gs;
      const unsigned got = ((i < 4 ? r.x : r.y) >> (8 * (i & 3))) & 0xffu;
      if (flashmsa::float_to_e4m3_sat(q) != got && ++bad < 5)
        ADD_FAILURE() << "fp8 x " << x[i] << " / " << gs;
    }
    std::uint8_t packed8[8], sbits = 0;
    flashmsa::nvfp4_quantize_block16(x, gs, packed8, &sbits);
    for (int h = 0; h < 2; ++h) {  // the two lanes of the block
      float mine[8];
      float other = 0.0f;
      for (int i = 0; i < 8; ++i) {
        mine[i] = x[8 * h + i];
        const float a = std::fabs(x[8 * (1 - h) + i]);
        if (a > other) other = a;
      }
      quant_host::g_shfl_value = other;
      unsigned packed = 0;
      const unsigned s = nvfp4_quantize_half_block(mine, 1.0f / gs, 0xffffu, &packed);
      unsigned want = 0;
      for (int k = 0; k < 4; ++k) want |= static_cast<unsigned>(packed8[4 * h + k]) << (8 * k);
      if ((s != sbits || packed != want) && ++bad < 5)
        ADD_FAILURE() << "nvfp4 iteration " << it << " lane " << h << " global scale " << gs;
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantDeviceHost, E2m1OfClampedMatchesCpuOnMinus6To6) {
  long bad = 0;
  auto check = [&](float v) {
    if (e2m1_of_clamped(v) != flashmsa::float_to_e2m1(v) && ++bad < 5)
      ADD_FAILURE() << "e2m1 of " << v;
  };
  const float thresholds[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,
                              2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f};
  for (float t : thresholds) {
    float lo = t, hi = t;
    for (int k = 0; k < 6; ++k) {
      for (float v : {lo, hi})
        if (v <= 6.0f) {
          check(v);
          check(-v);
        }
      lo = std::nextafter(lo, 0.0f);
      hi = std::nextafter(hi, 7.0f);
    }
  }
  const unsigned top = quant_host::__float_as_uint(6.0f);
  for (unsigned u = 0; u <= top; u += 61) {  // a dense sweep of [0, 6], both signs
    const float v = __uint_as_float(u);
    check(v);
    check(-v);
  }
  EXPECT_EQ(bad, 0);
}

}  // namespace

// Shared helpers for the test suite: seeded random data and poisoning.
#pragma once

#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"

namespace flashmsa::testing {

using Rng = std::mt19937_64;

/// Fills a bf16 tensor with N(0, stddev^2) values rounded to bf16.
inline void fill_bf16_normal(HostTensor& t, Rng& rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  auto* p = t.data<std::uint16_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = float_to_bf16(dist(rng));
}

/// Fills every byte with random values (for e4m3 data: never the NaN codes 0x7f/0xff).
inline void fill_random_e4m3(HostTensor& t, Rng& rng) {
  std::uniform_int_distribution<int> dist(0, 255);
  auto* p = static_cast<std::uint8_t*>(t.view().data);
  for (std::size_t i = 0; i < t.bytes(); ++i) {
    int b = dist(rng);
    if ((b & 0x7f) == 0x7f) b ^= 0x01;
    p[i] = static_cast<std::uint8_t>(b);
  }
}

/// Random permutation of [0, n) as int32.
inline std::vector<std::int32_t> random_permutation(std::int32_t n, Rng& rng) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

/// Poisons a tensor's bytes (0xFF: NaN for bf16/f32/e4m3, -1 for i32).
inline void poison(HostTensor& t) { t.fill_bytes(0xff); }

}  // namespace flashmsa::testing

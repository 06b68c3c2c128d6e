// FlashMSA tools — counter-based (hash) random numbers for the CLI's synthetic inputs.
//
// Every random value is a pure function of (seed, case id, stream, indices): there is
// no sequential generator state, so inputs can be generated in parallel, in any order,
// with any thread count, and the same key always gives the same vector.
//
//   key   = derive(derive(derive(case_key(seed, case_id), stream), a), b)
//   draw  = mix64(key + (i + 1) * golden)     i-th 64-bit word of a key
//   normal: each 64-bit word gives four 16-bit indices into a 65,536-entry table of
//           the standard normal quantiles Phi^-1((i + 0.5) / 65536) (|z| <= 4.17);
//           128-dim vectors are then rescaled to RMS 1 (like Gemma RMSNorm output).
#pragma once

#include <cstdint>
#include <string>

namespace flashmsa::tools {

/// SplitMix64 finaliser: a bijective 64-bit mixer with good avalanche.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// Combines a key with one more coordinate.
inline std::uint64_t derive(std::uint64_t key, std::uint64_t v) {
  return mix64(key ^ mix64(v + 0x9e3779b97f4a7c15ULL));
}

/// i-th 64-bit random word of `key`.
inline std::uint64_t draw64(std::uint64_t key, std::uint64_t i) {
  return mix64(key + (i + 1) * 0x9e3779b97f4a7c15ULL);
}

/// FNV-1a 64 of a string (case ids).
std::uint64_t fnv1a64(const std::string& s);

/// Key of one case: depends on the user seed and the case id only.
std::uint64_t case_key(std::uint64_t seed, const std::string& case_id);

/// Streams of random data of a case.
enum class Stream : std::uint64_t { q = 1, k = 2, v = 3, index_q = 4, index_k = 5, pages = 6 };

/// Standard normal quantile table (65,536 float entries).
const float* normal_table();

/// 128 N(0,1) draws of `key`, rescaled to RMS 1 (sum x^2 = 128 in float), rounded to BF16.
void normal_rms1_bf16(std::uint64_t key, std::uint16_t* out128);

/// Uniform integer in [0, n) from a 64-bit word (multiply-shift, n <= 2^32).
inline std::uint64_t uniform_below(std::uint64_t word, std::uint64_t n) {
  return ((word >> 32) * n) >> 32;
}

}  // namespace flashmsa::tools

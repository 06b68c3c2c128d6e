// FlashMSA tools — counter-based random numbers (see hash_rng.h).
#include "hash_rng.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "flashmsa/numerics.h"

namespace flashmsa::tools {

namespace {

/// Inverse standard normal CDF (P. J. Acklam's rational approximation, relative
/// error < 1.2e-9), refined by one Halley step with erfc. p in (0, 1).
double inverse_normal_cdf(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double plow = 0.02425, phigh = 1 - plow;
  double x;
  if (p < plow) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= phigh) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

std::vector<float> build_table() {
  std::vector<float> t(65536);
  for (int i = 0; i < 32768; ++i) {
    const float z = static_cast<float>(inverse_normal_cdf((i + 0.5) / 65536.0));
    t[static_cast<std::size_t>(i)] = z;            // negative half
    t[static_cast<std::size_t>(65535 - i)] = -z;   // exact symmetry
  }
  return t;
}

}  // namespace

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint64_t case_key(std::uint64_t seed, const std::string& case_id) {
  return derive(mix64(seed ^ 0x666c6173686d7361ULL), fnv1a64(case_id));
}

const float* normal_table() {
  static const std::vector<float> table = build_table();
  return table.data();
}

void normal_rms1_bf16(std::uint64_t key, std::uint16_t* out128) {
  const float* tab = normal_table();
  float x[128];
  for (int w = 0; w < 32; ++w) {
    const std::uint64_t r = draw64(key, static_cast<std::uint64_t>(w));
    x[4 * w + 0] = tab[r & 0xffff];
    x[4 * w + 1] = tab[(r >> 16) & 0xffff];
    x[4 * w + 2] = tab[(r >> 32) & 0xffff];
    x[4 * w + 3] = tab[r >> 48];
  }
  // Sum of squares in a fixed order (8 partial sums) so the result is the same everywhere.
  float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 128; i += 8)
    for (int l = 0; l < 8; ++l) part[l] += x[i + l] * x[i + l];
  const float ss = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  const float inv = ss > 0.0f ? 1.0f / std::sqrt(ss / 128.0f) : 0.0f;
  // Round to BF16, nearest-even (values are finite: same result as float_to_bf16).
  for (int i = 0; i < 128; ++i) {
    const float y = x[i] * inv;
    std::uint32_t b;
    std::memcpy(&b, &y, 4);
    out128[i] = static_cast<std::uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  }
}

}  // namespace flashmsa::tools

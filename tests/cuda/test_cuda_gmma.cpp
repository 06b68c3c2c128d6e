// The wgmma building blocks (src/cuda/sm90/gmma.cuh) against a CPU product: the four
// operand forms the attention and indexer kernels use (K-major and MN-major shared
// tiles, BF16 and E4M3, shared-memory and register A with the E4M3 K permutation).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/sm90/gmma_selftest.h"
#include "cuda_test_util.h"
#include "flashmsa/numerics.h"

namespace {

using flashmsa::cuda::GmmaSelftest;

struct Buf {
  void* p = nullptr;
  explicit Buf(size_t n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~Buf() { cudaFree(p); }
};

// Runs one variant on fresh random data and compares with a double-precision product
// of the values the device actually multiplies.
void run_variant(GmmaSelftest v, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  const bool e4m3 = v == GmmaSelftest::e4m3_ss || v == GmmaSelftest::e4m3_rs || v == GmmaSelftest::f16_rs_bmn;
  const bool a_regs = v != GmmaSelftest::bf16_ss && v != GmmaSelftest::e4m3_ss;
  const bool b_nk = v == GmmaSelftest::bf16_ss || v == GmmaSelftest::e4m3_ss;  // b stored [N][K]
  std::vector<double> av(64 * 128), bv(128 * 128);  // logical A[m][k], B[k][n]
  std::vector<float> a_f32(64 * 128);
  std::vector<std::uint16_t> a_bf(64 * 128), b_bf(128 * 128);
  std::vector<std::uint8_t> a_e(64 * 128), b_e(128 * 128);
  for (int i = 0; i < 64 * 128; ++i) {
    if (e4m3) {
      a_e[i] = flashmsa::float_to_e4m3_sat(u(rng) * 8.f);
      a_f32[i] = flashmsa::e4m3_to_float(a_e[i]);
    } else {
      a_bf[i] = flashmsa::float_to_bf16(u(rng));
      a_f32[i] = flashmsa::bf16_to_float(a_bf[i]);
    }
    av[i] = a_f32[i];
  }
  for (int i = 0; i < 128 * 128; ++i) {
    float x;
    if (e4m3) {
      b_e[i] = flashmsa::float_to_e4m3_sat(u(rng) * 8.f);
      x = flashmsa::e4m3_to_float(b_e[i]);
    } else {
      b_bf[i] = flashmsa::float_to_bf16(u(rng));
      x = flashmsa::bf16_to_float(b_bf[i]);
    }
    const int r = i / 128, c = i % 128;  // stored row r, column c
    if (b_nk) bv[c * 128 + r] = x; else bv[r * 128 + c] = x;
  }
  Buf da(64 * 128 * 4), db(128 * 128 * 2), dd(64 * 128 * 4);
  const void* a_src = a_regs ? static_cast<const void*>(a_f32.data())
                             : e4m3 ? static_cast<const void*>(a_e.data()) : static_cast<const void*>(a_bf.data());
  const size_t a_bytes = a_regs ? 64 * 128 * 4 : e4m3 ? 64 * 128 : 64 * 128 * 2;
  ASSERT_EQ(cudaMemcpy(da.p, a_src, a_bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db.p, e4m3 ? static_cast<const void*>(b_e.data()) : b_bf.data(), e4m3 ? 128 * 128 : 128 * 128 * 2,
                       cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dd.p, 0xff, 64 * 128 * 4), cudaSuccess);  // NaN poison
  ASSERT_EQ(flashmsa::cuda::gmma_selftest(v, da.p, db.p, static_cast<float*>(dd.p), nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> d(64 * 128);
  ASSERT_EQ(cudaMemcpy(d.data(), dd.p, d.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  // E4M3 wgmma adds products with a reduced-precision aligner on Hopper (about 2^-14 of
  // the magnitude sum was measured on the H200); every other form accumulates in FP32.
  const bool e4m3_mma = v == GmmaSelftest::e4m3_ss || v == GmmaSelftest::e4m3_rs;
  const double rel = e4m3_mma ? 1.0 / 4096 : 1e-5;
  int bad = 0;
  double worst = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 128; ++n) {
      double ref = 0, mag = 0;
      for (int k = 0; k < 128; ++k) {
        ref += av[m * 128 + k] * bv[k * 128 + n];
        mag += std::fabs(av[m * 128 + k] * bv[k * 128 + n]);
      }
      const double got = d[m * 128 + n];
      if (mag > 0) worst = std::max(worst, std::fabs(got - ref) / mag);
      if (!(std::fabs(got - ref) <= rel * mag + 1e-6)) {
        if (bad++ < 5) ADD_FAILURE() << "m=" << m << " n=" << n << " got " << got << " want " << ref;
      }
    }
  EXPECT_EQ(bad, 0) << "mismatches of 8192";
  std::printf("variant %d: worst |error| / sum|products| = %.3g\n", static_cast<int>(v), worst);
}

TEST(CudaGmma, Bf16SharedShared) { REQUIRE_GPU(); run_variant(GmmaSelftest::bf16_ss, 1); }
TEST(CudaGmma, Bf16RegisterAMnMajorB) { REQUIRE_GPU(); run_variant(GmmaSelftest::bf16_rs_bmn, 2); }
TEST(CudaGmma, E4m3SharedShared) { REQUIRE_GPU(); run_variant(GmmaSelftest::e4m3_ss, 3); }
TEST(CudaGmma, E4m3RegisterAPermutedB) { REQUIRE_GPU(); run_variant(GmmaSelftest::e4m3_rs, 4); }
TEST(CudaGmma, F16RegisterAWidenedE4m3B) { REQUIRE_GPU(); run_variant(GmmaSelftest::f16_rs_bmn, 5); }

// The NVFP4 -> E4M3 dequantisation all SM90 kernels share, exhaustively: every block-scale
// byte (negative and NaN scales included) x every code in every nibble position, byte for
// byte against the CPU backend's nvfp4_to_e4m3 (an E4M3 NaN may differ in its sign bit).
TEST(CudaGmma, Nvfp4LookupMatchesCpuForEveryScaleAndCode) {
  REQUIRE_GPU();
  const size_t n = 256 * 16 * 8;
  Buf d(n);
  ASSERT_EQ(cudaMemset(d.p, 0x5a, n), cudaSuccess);  // poison
  ASSERT_EQ(flashmsa::cuda::nvfp4_lookup_selftest(static_cast<std::uint8_t*>(d.p), nullptr), 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::uint8_t> got(n);
  ASSERT_EQ(cudaMemcpy(got.data(), d.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  int bad = 0;
  for (int s = 0; s < 256; ++s)
    for (int j = 0; j < 16; ++j)
      for (int i = 0; i < 8; ++i) {
        const auto code = static_cast<std::uint8_t>((i + j) & 15);
        const std::uint8_t want = flashmsa::nvfp4_to_e4m3(code, static_cast<std::uint8_t>(s));
        const std::uint8_t g = got[(s * 16 + j) * 8 + i];
        const bool both_nan = (want & 0x7f) == 0x7f && (g & 0x7f) == 0x7f;
        if (g != want && !both_nan && bad++ < 8)
          ADD_FAILURE() << "scale 0x" << std::hex << s << " code 0x" << int(code) << ": got 0x" << int(g)
                        << " want 0x" << int(want);
      }
  EXPECT_EQ(bad, 0) << "mismatches of " << n;
}

}  // namespace

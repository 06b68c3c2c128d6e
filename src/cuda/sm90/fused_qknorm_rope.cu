// SM90 fused QK-norm + partial RoPE + cache insert (design in fused_qknorm_rope.h,
// semantics in flashmsa/fused.h).
#include "cuda/sm90/fused_qknorm_rope.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "cuda/sm90/quant_device.cuh"

namespace flashmsa::cuda {
namespace {

using namespace quant;

constexpr int kWarpsPerBlock = 8;
constexpr int kVecPerHalf = 4;                  // head vectors per half-warp
constexpr int kVecPerWarp = 2 * kVecPerHalf;    // loads issued together
enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };

__device__ __forceinline__ unsigned bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // RNE, lo in the low half
  return *reinterpret_cast<const unsigned*>(&v);
}
__device__ __forceinline__ uint4 pack_bf16x8(const float (&y)[8]) {
  return make_uint4(bf16x2_bits(y[0], y[1]), bf16x2_bits(y[2], y[3]), bf16x2_bits(y[4], y[5]),
                    bf16x2_bits(y[6], y[7]));
}
// Hardware saturating RNE E4M3 (NaN -> 0x7f, as float_to_e4m3_sat) of two floats.
__device__ __forceinline__ unsigned e4m3x2(float lo, float hi) {
  return static_cast<unsigned>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}
// 8 values -> 8 E4M3 bytes: E4M3_sat(y / d) (exact-division rounding) or E4M3_sat(y).
__device__ __forceinline__ uint2 e4m3x8(const float (&y)[8], const Divisor* d) {
  float q[8];
  if (d) {
    e4m3_safe_quotient8(y, *d, q);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = y[i];
  }
  return make_uint2(e4m3x2(q[0], q[1]) | (e4m3x2(q[2], q[3]) << 16),
                    e4m3x2(q[4], q[5]) | (e4m3x2(q[6], q[7]) << 16));
}

// Writes this lane's 8 values (bf16 bits in `b`, floats in `x`) of a row into a cache
// side at slot s, as cache_insert does. Half-uniform (shuffles for nvfp4).
__device__ __forceinline__ void insert_row(const CacheSideParams& c, float rcp, int format,
                                           long long s, long long num_pages, int h, int j,
                                           unsigned half_mask, const uint4& b, const float (&x)[8]) {
  if (s < 0 || s >= num_pages * 128) return;  // skipped / out of range: never written
  const long long page = s >> 7;
  const int tok = static_cast<int>(s & 127);
  unsigned char* dst = c.data + page * c.data_stride[0] + h * c.data_stride[1] + tok * c.data_stride[2];
  if (format == kBf16) {
    *reinterpret_cast<uint4*>(dst + 16 * j) = b;
  } else if (format == kFp8) {
    const Divisor d = make_divisor(c.global_scale, rcp);
    *reinterpret_cast<uint2*>(dst + 8 * j) = e4m3x8(x, &d);
  } else {
    unsigned packed = 0u;
    const unsigned sbits =
        nvfp4_quantize_half_block(x, rcp, half_mask, &packed);  // rcp = RN(1 / gs)
    *reinterpret_cast<unsigned*>(dst + 4 * j) = packed;
    if ((j & 1) == 0)
      c.scale[page * c.scale_stride[0] + h * c.scale_stride[1] +
              nvfp4_scale_offset(tok, j >> 1, c.swizzled, c.scale_stride[2], c.scale_stride[3])] =
          static_cast<unsigned char>(sbits);
  }
}

// One head vector (token tok at position pos, vector vec of the packed row) whose 8 bf16
// values of this lane were already loaded into `raw`, with its cache slot (K / V: the
// slot mapping, index key: the index slot mapping, loaded with the row). Control flow is
// uniform over the half-warp. Loads use the read-only path (__ldg).
__device__ __forceinline__ void process_vector(const FusedQkvParams& p, long long tok, int vec,
                                               long long pos, long long slot, int j,
                                               unsigned half_mask, const uint4& raw) {
  const int k_begin = p.nq, v_begin = p.nq + p.nkv, iq_begin = p.nq + 2 * p.nkv;
  const int ik_vec = iq_begin + p.nidx;
  float x[8];
  unpack8(raw, x);

  if (vec >= v_begin && vec < iq_begin) {  // V: raw insert
    insert_row(p.v, p.v_rcp, p.kv_format, slot, p.kv_num_pages, vec - v_begin, j, half_mask,
               raw, x);
    return;
  }
  const std::uint16_t* w = vec < k_begin ? p.q_w
                           : vec < v_begin ? p.k_w
                           : vec < ik_vec  ? p.iq_w
                                           : p.ik_w;
  // Issue the weight and cos/sin loads before the norm math (their latency overlaps it).
  const uint4 wraw = __ldg(reinterpret_cast<const uint4*>(w + 8 * j));
  const bool rotate = j < 8 && pos >= 0 && pos < p.max_pos;
  uint4 craw = make_uint4(0u, 0u, 0u, 0u), sraw = craw;
  if (rotate) {
    const std::uint16_t* cs = p.cos_sin + pos * p.cos_sin_row_stride + 8 * (j & 3);
    craw = __ldg(reinterpret_cast<const uint4*>(cs));
    sraw = __ldg(reinterpret_cast<const uint4*>(cs + 32));
  }
  float wf[8];
  unpack8(wraw, wf);

  // Gemma RMSNorm, FP32, fixed order (flashmsa/fused.h): this lane holds the partial sums
  // ps_{2j} (dims 8j..8j+3) and ps_{2j+1}; butterfly o = 16, 8, 4, 2 is lane xor 8, 4, 2, 1
  // and o = 1 is the final a + b.
  float a = 0.0f, b = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    a = __fadd_rn(a, __fmul_rn(x[i], x[i]));
    b = __fadd_rn(b, __fmul_rn(x[4 + i], x[4 + i]));
  }
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) {
    a = __fadd_rn(a, __shfl_xor_sync(half_mask, a, o));
    b = __fadd_rn(b, __shfl_xor_sync(half_mask, b, o));
  }
  const float ss = __fadd_rn(a, b);
  // ss / 128 == ss * 2^-7 exactly (one rounding of the same value).
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fmul_rn(ss, 0.0078125f), p.eps)));
  float y[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) y[i] = __fmul_rn(__fmul_rn(x[i], r), __fadd_rn(1.0f, wf[i]));

  // Partial NeoX RoPE: lanes 0..3 hold dims [0, 32), lanes 4..7 dims [32, 64).
  float partner[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) partner[i] = __shfl_xor_sync(half_mask, y[i], 4);
  if (rotate) {
    float c[8], s[8];
    unpack8(craw, c);
    unpack8(sraw, s);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float u = __fmul_rn(y[i], c[i]);
      const float t = __fmul_rn(partner[i], s[i]);
      y[i] = j < 4 ? __fsub_rn(u, t) : __fadd_rn(u, t);
    }
  }

  if (vec < k_begin) {  // Q
    if (p.q_e4m3) {
      const Divisor d = make_divisor(p.q_scale, p.q_rcp);
      *reinterpret_cast<uint2*>(static_cast<unsigned char*>(p.q_out) + tok * p.q_stride[0] +
                                vec * p.q_stride[1] + 8 * j) = e4m3x8(y, &d);
    } else {
      *reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(p.q_out) + tok * p.q_stride[0] +
                                vec * p.q_stride[1] + 8 * j) = pack_bf16x8(y);
    }
    return;
  }
  if (vec >= iq_begin && vec < ik_vec) {  // index q (no scale)
    const long long h = vec - iq_begin;
    if (p.iq_e4m3) {
      *reinterpret_cast<uint2*>(static_cast<unsigned char*>(p.iq_out) + tok * p.iq_stride[0] +
                                h * p.iq_stride[1] + 8 * j) = e4m3x8(y, nullptr);
    } else {
      *reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(p.iq_out) + tok * p.iq_stride[0] +
                                h * p.iq_stride[1] + 8 * j) = pack_bf16x8(y);
    }
    return;
  }
  // K or index key: round to BF16 once, then written as cache_insert writes a bf16 row.
  const uint4 kb = pack_bf16x8(y);
  float kf[8];
  unpack8(kb, kf);
  if (vec < v_begin)
    insert_row(p.k, p.k_rcp, p.kv_format, slot, p.kv_num_pages, vec - k_begin, j, half_mask, kb,
               kf);
  else
    insert_row(p.ik, p.ik_rcp, p.index_format, slot, p.index_num_pages, 0, j, half_mask, kb, kf);
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    fused_qknorm_rope_kernel(const FusedQkvParams p, unsigned total_vectors) {
  const int lane = threadIdx.x & 31;
  const int half = lane >> 4, j = lane & 15;
  const unsigned half_mask = half ? 0xffff0000u : 0x0000ffffu;
  // The launcher guarantees total_vectors + kVecPerWarp * kWarpsPerBlock < 2^32.
  const unsigned warp = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  const unsigned per_token = static_cast<unsigned>(p.nq + 2 * p.nkv + p.nidx + 1);
  const unsigned g0 = warp * kVecPerWarp + half;  // this half's vectors: g0 + 2k
  uint4 raw[kVecPerHalf];
  unsigned tok[kVecPerHalf];
  int pos[kVecPerHalf], slot[kVecPerHalf];
  const unsigned k_begin = static_cast<unsigned>(p.nq), iq_begin = static_cast<unsigned>(p.nq + 2 * p.nkv);
#pragma unroll
  for (int k = 0; k < kVecPerHalf; ++k) {
    const unsigned g = g0 + 2 * k;
    tok[k] = g / per_token;
    const unsigned vec = g - tok[k] * per_token;
    raw[k] = make_uint4(0u, 0u, 0u, 0u);
    pos[k] = 0;
    slot[k] = -1;
    if (g < total_vectors) {
      const long long t = tok[k];
      raw[k] = __ldg(reinterpret_cast<const uint4*>(p.qkv + t * p.qkv_row_stride +
                                                    static_cast<long long>(vec) * 128 + 8 * j));
      pos[k] = __ldg(p.positions + t * p.positions_stride);
      if (vec - k_begin < iq_begin - k_begin) slot[k] = __ldg(p.slots + t * p.slots_stride);
      else if (vec + 1 == per_token) slot[k] = __ldg(p.index_slots + t * p.index_slots_stride);
    }
  }
  // Not unrolled: one copy of process_vector (its fp8 / nvfp4 paths are large; four
  // inlined copies overflowed the instruction cache). The loaded words shift down one
  // slot per iteration so that every array index stays static (registers, no stack).
#pragma unroll 1
  for (int k = 0; k < kVecPerHalf; ++k) {
    const unsigned g = g0 + 2 * k;
    if (g < total_vectors)  // uniform over the half-warp
      process_vector(p, tok[0], static_cast<int>(g - tok[0] * per_token), pos[0], slot[0], j,
                     half_mask, raw[0]);
#pragma unroll
    for (int m = 0; m + 1 < kVecPerHalf; ++m) {
      raw[m] = raw[m + 1];
      tok[m] = tok[m + 1];
      pos[m] = pos[m + 1];
      slot[m] = slot[m + 1];
    }
  }
}

}  // namespace

int launch_fused_qknorm_rope_insert(const FusedQkvParams& p, void* stream) {
  if (p.num_tokens <= 0) return 0;
  const long long per_token = p.nq + 2 * p.nkv + p.nidx + 1;
  const long long vectors = static_cast<long long>(p.num_tokens) * per_token;
  const long long per_block = static_cast<long long>(kWarpsPerBlock) * kVecPerWarp;
  const long long blocks = (vectors + per_block - 1) / per_block;
  if (blocks * per_block > 0xffffffffLL) return static_cast<int>(cudaErrorInvalidConfiguration);
  FusedQkvParams q = p;  // host IEEE float division: the correctly rounded reciprocals
  q.q_rcp = 1.0f / p.q_scale;
  q.k_rcp = 1.0f / p.k.global_scale;
  q.v_rcp = 1.0f / p.v.global_scale;
  q.ik_rcp = 1.0f / p.ik.global_scale;
  fused_qknorm_rope_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0,
                             static_cast<cudaStream_t>(stream)>>>(q, static_cast<unsigned>(vectors));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace flashmsa::cuda

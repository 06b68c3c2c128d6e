// SM90 fused QK-norm + partial RoPE + cache insert (design in fused_qknorm_rope.h,
// semantics in flashmsa/fused.h).
#include "cuda/sm90/fused_qknorm_rope.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "cuda/sm90/quant_device.cuh"

namespace flashmsa::cuda {
namespace {

using namespace quant;

constexpr int kWarpsPerBlock = 4;
// Work-unit sizing for choose_chunks, tuned on the H200 (bench_fused, 2026-11-29): at
// most kChunk head vectors per token in a unit (32 rather than 16: 16/1 nvfp4 at 8192
// tokens 54 % instead of 50 % of 4.2 TB/s, the other cases equal or better), and the
// per-unit setup (metadata and cos/sin loads, first-load latency) counted as
// kUnitSetupVectors vectors (0.5 measured 4 points worse at 16/1 nvfp4).
constexpr int kChunk = 32;
constexpr double kUnitSetupVectors = 3.0;
enum : int { kBf16 = 0, kFp8 = 1, kNvfp4 = 2 };
enum : int { kQ = 0, kK = 1, kV = 2, kIq = 3, kIk = 4 };

__device__ __forceinline__ unsigned bf16x2_bits(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // RNE, lo in the low half
  return *reinterpret_cast<const unsigned*>(&v);
}
__device__ __forceinline__ uint4 pack_bf16x8(const float* y) {
  return make_uint4(bf16x2_bits(y[0], y[1]), bf16x2_bits(y[2], y[3]), bf16x2_bits(y[4], y[5]),
                    bf16x2_bits(y[6], y[7]));
}
// Hardware saturating RNE E4M3 (NaN -> 0x7f, as float_to_e4m3_sat) of two floats.
__device__ __forceinline__ unsigned e4m3x2(float lo, float hi) {
  return static_cast<unsigned>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}
// 8 values -> 8 E4M3 bytes: E4M3_sat(y / d) (exact-division rounding) or E4M3_sat(y).
__device__ __forceinline__ uint2 e4m3x8(const float* y, const Divisor* d) {
  float q[8];
  if (d) {
    const float (&y8)[8] = *reinterpret_cast<const float (*)[8]>(y);
    e4m3_safe_quotient8(y8, *d, q);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) q[i] = y[i];
  }
  return make_uint2(e4m3x2(q[0], q[1]) | (e4m3x2(q[2], q[3]) << 16),
                    e4m3x2(q[4], q[5]) | (e4m3x2(q[6], q[7]) << 16));
}

// Lane layout of one 128-wide head vector over an 8-lane group (lane j = 0..7): the lane
// owns dims [a, a + 8) and [a + 32, a + 40) with a = 8j for j < 4 and 8j + 32 for j >= 4,
// so lanes 0..3 hold both halves of every rotary pair (dims d and d + 32, d < 32) and the
// RoPE needs no shuffle. Element i < 8 of a lane's 16 values is dim a + i, element 8 + i
// is dim a + 32 + i.
__device__ __forceinline__ int lane_dim0(int j) { return 8 * j + (j >= 4 ? 32 : 0); }

// Writes this lane's 16 values (bf16 bits b0 / b1 of its two 8-dim halves, floats x) of a
// row into a cache side at slot s, as cache_insert does. Group-uniform (shuffles for nvfp4).
__device__ __forceinline__ void insert_row(const CacheSideParams& c, float rcp, int format,
                                           long long s, long long num_pages, int h, int a,
                                           unsigned gmask, const uint4& b0, const uint4& b1,
                                           const float* x) {
  if (s < 0 || s >= num_pages * 128) return;  // skipped / out of range: never written
  const long long page = s >> 7;
  const int tok = static_cast<int>(s & 127);
  unsigned char* dst = c.data + page * c.data_stride[0] + h * c.data_stride[1] + tok * c.data_stride[2];
  if (format == kBf16) {
    *reinterpret_cast<uint4*>(dst + 2 * a) = b0;
    *reinterpret_cast<uint4*>(dst + 2 * a + 64) = b1;
  } else if (format == kFp8) {
    const Divisor d = make_divisor(c.global_scale, rcp);
    *reinterpret_cast<uint2*>(dst + a) = e4m3x8(x, &d);
    *reinterpret_cast<uint2*>(dst + a + 32) = e4m3x8(x + 8, &d);
  } else {
    unsigned char* sp = c.scale + page * c.scale_stride[0] + h * c.scale_stride[1];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float (&x8)[8] = *reinterpret_cast<const float (*)[8]>(x + 8 * half);
      const int dim0 = a + 32 * half;  // 8 dims: half of the 16-dim block dim0 / 16
      unsigned packed = 0u;
      const unsigned sbits = nvfp4_quantize_half_block(x8, rcp, gmask, &packed);  // rcp = RN(1 / gs)
      *reinterpret_cast<unsigned*>(dst + dim0 / 2) = packed;
      if ((dim0 & 8) == 0)
        sp[nvfp4_scale_offset(tok, dim0 >> 4, c.swizzled, c.scale_stride[2], c.scale_stride[3])] =
            static_cast<unsigned char>(sbits);
    }
  }
}

// Per-unit state: the token's row and metadata, and the (1 + w) weights of the last kind.
struct Unit {
  long long tok;
  long long slot, index_slot;
  bool rotate;
  uint4 cos_raw, sin_raw;  // lanes j < 4: cos / sin of dims [8j, 8j + 8) (bf16)
  int w_kind;              // kind whose weights are in w1 (-1: none yet)
  float w1[16];            // 1 + w of this lane's 16 dims, rounded (flashmsa/fused.h)
};

__device__ __forceinline__ int vector_kind(const FusedQkvParams& p, int vec, int* head) {
  if (vec < p.nq) { *head = vec; return kQ; }
  vec -= p.nq;
  if (vec < p.nkv) { *head = vec; return kK; }
  vec -= p.nkv;
  if (vec < p.nkv) { *head = vec; return kV; }
  vec -= p.nkv;
  if (vec < p.nidx) { *head = vec; return kIq; }
  *head = 0;
  return kIk;
}

// One head vector `vec` of the unit's token, this lane's 16 bf16 values already loaded
// into raw0 (dims a..a+7) and raw1 (dims a+32..a+39). Control flow is uniform over the group.
template <int kKvFormat>
__device__ __forceinline__ void process_vector(const FusedQkvParams& p, Unit& u, int vec, int j,
                                               int a, unsigned gmask, const uint4& raw0,
                                               const uint4& raw1) {
  int h = 0;
  const int kind = vector_kind(p, vec, &h);
  float x[16];
  unpack8(raw0, *reinterpret_cast<float (*)[8]>(x));
  unpack8(raw1, *reinterpret_cast<float (*)[8]>(x + 8));
  if (kind == kV) {  // V: raw insert
    insert_row(p.v, p.v_rcp, kKvFormat, u.slot, p.kv_num_pages, h, a, gmask, raw0, raw1, x);
    return;
  }
  if (kind != u.w_kind) {
    const std::uint16_t* w = kind == kQ ? p.q_w : kind == kK ? p.k_w : kind == kIq ? p.iq_w : p.ik_w;
    float wf[16];
    unpack8(__ldg(reinterpret_cast<const uint4*>(w + a)), *reinterpret_cast<float (*)[8]>(wf));
    unpack8(__ldg(reinterpret_cast<const uint4*>(w + a + 32)), *reinterpret_cast<float (*)[8]>(wf + 8));
#pragma unroll
    for (int i = 0; i < 16; ++i) u.w1[i] = __fadd_rn(1.0f, wf[i]);
    u.w_kind = kind;
  }

  // Gemma RMSNorm, FP32, fixed order (flashmsa/fused.h). This lane's partial sums are
  // ps_{a/4}, ps_{a/4+1} (first half) and ps_{a/4+8}, ps_{a/4+9} (second half); the
  // butterfly levels o = 16 (lane xor 4), 8 (in lane), 4 (lane xor 2), 2 (lane xor 1) and
  // 1 (in lane) add exactly the pairs (l, l + o) of the reference order.
  float s[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float acc = __fmul_rn(x[4 * k], x[4 * k]);
#pragma unroll
    for (int i = 1; i < 4; ++i) acc = __fadd_rn(acc, __fmul_rn(x[4 * k + i], x[4 * k + i]));
    s[k] = acc;  // s[0], s[1]: ps_{a/4}, ps_{a/4+1}; s[2], s[3]: ps_{a/4+8}, ps_{a/4+9}
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) s[k] = __fadd_rn(s[k], __shfl_xor_sync(gmask, s[k], 4));
  float e0 = __fadd_rn(s[0], s[2]), e1 = __fadd_rn(s[1], s[3]);
  e0 = __fadd_rn(e0, __shfl_xor_sync(gmask, e0, 2));
  e1 = __fadd_rn(e1, __shfl_xor_sync(gmask, e1, 2));
  e0 = __fadd_rn(e0, __shfl_xor_sync(gmask, e0, 1));
  e1 = __fadd_rn(e1, __shfl_xor_sync(gmask, e1, 1));
  const float ss = __fadd_rn(e0, e1);
  // ss / 128 == ss * 2^-7 exactly (one rounding of the same value).
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fmul_rn(ss, 0.0078125f), p.eps)));
  float y[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) y[i] = __fmul_rn(__fmul_rn(x[i], r), u.w1[i]);

  // Partial NeoX RoPE on dims [0, 64): lanes 0..3 hold dims d (element i) and d + 32
  // (element 8 + i) of each rotary pair, d = 8j + i.
  if (u.rotate && j < 4) {
    float c[8], sn[8];
    unpack8(u.cos_raw, c);
    unpack8(u.sin_raw, sn);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float lo = y[i], hi = y[8 + i];
      y[i] = __fsub_rn(__fmul_rn(lo, c[i]), __fmul_rn(hi, sn[i]));
      y[8 + i] = __fadd_rn(__fmul_rn(hi, c[i]), __fmul_rn(lo, sn[i]));
    }
  }

  if (kind == kQ || kind == kIq) {
    const bool e4m3 = kind == kQ ? p.q_e4m3 : p.iq_e4m3;
    void* out = kind == kQ ? p.q_out : p.iq_out;
    const std::int64_t* st = kind == kQ ? p.q_stride : p.iq_stride;
    const long long row = u.tok * st[0] + h * st[1];
    if (e4m3) {
      unsigned char* dst = static_cast<unsigned char*>(out) + row + a;
      if (kind == kQ) {
        const Divisor d = make_divisor(p.q_scale, p.q_rcp);
        *reinterpret_cast<uint2*>(dst) = e4m3x8(y, &d);
        *reinterpret_cast<uint2*>(dst + 32) = e4m3x8(y + 8, &d);
      } else {  // index q: no scale
        *reinterpret_cast<uint2*>(dst) = e4m3x8(y, nullptr);
        *reinterpret_cast<uint2*>(dst + 32) = e4m3x8(y + 8, nullptr);
      }
    } else {
      std::uint16_t* dst = static_cast<std::uint16_t*>(out) + row + a;
      *reinterpret_cast<uint4*>(dst) = pack_bf16x8(y);
      *reinterpret_cast<uint4*>(dst + 32) = pack_bf16x8(y + 8);
    }
    return;
  }
  // K or index key: round to BF16 once, then written as cache_insert writes a bf16 row.
  const uint4 kb0 = pack_bf16x8(y), kb1 = pack_bf16x8(y + 8);
  float kf[16];
  unpack8(kb0, *reinterpret_cast<float (*)[8]>(kf));
  unpack8(kb1, *reinterpret_cast<float (*)[8]>(kf + 8));
  if (kind == kK)
    insert_row(p.k, p.k_rcp, kKvFormat, u.slot, p.kv_num_pages, h, a, gmask, kb0, kb1, kf);
  else
    insert_row(p.ik, p.ik_rcp, p.index_format, u.index_slot, p.index_num_pages, 0, a, gmask, kb0,
               kb1, kf);
}

// One warp per work unit (4 consecutive tokens, one chunk of their head vectors): 8-lane
// group g takes token 4 * quad + g, and every group walks the same vectors of its token
// in the same order, so the four groups always process the same kind of vector (no
// divergence between the Q / K / V / index paths). The next vector's loads are issued
// before the current one is processed.
// Compiled per K/V cache format (the NVFP4 quantisation needs more registers: 5 blocks of
// 4 warps per SM instead of 6).
template <int kKvFormat>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, kKvFormat == kNvfp4 ? 5 : 6)
    fused_qknorm_rope_kernel(const FusedQkvParams p, int units, int chunks_per_token) {
  // 32-bit unit arithmetic (the launcher guarantees units < 2^31).
  const int unit = static_cast<int>(blockIdx.x) * kWarpsPerBlock + static_cast<int>(threadIdx.x >> 5);
  if (unit >= units) return;  // warp-uniform
  const int lane = threadIdx.x & 31;
  const int g = lane >> 3, j = lane & 7;
  const unsigned gmask = 0xffu << (8 * g);
  const int a = lane_dim0(j);
  const int per_token = p.nq + 2 * p.nkv + p.nidx + 1;

  Unit u;
  const int quad = unit / chunks_per_token;
  const int chunk = unit - quad * chunks_per_token;
  const int tok = 4 * quad + g;
  if (tok >= p.num_tokens) return;  // group-uniform
  u.tok = tok;
  // Chunk c takes vectors c, c + C, c + 2C, ... (C = chunks_per_token): the costly K / V /
  // index-K vectors at the end of the token's list spread over the chunks.
  const int first = chunk, step = chunks_per_token, end = per_token;

  const std::uint16_t* row = p.qkv + u.tok * p.qkv_row_stride + a;
  uint4 n0 = __ldg(reinterpret_cast<const uint4*>(row + first * 128));
  uint4 n1 = __ldg(reinterpret_cast<const uint4*>(row + first * 128 + 32));
  const long long pos = __ldg(p.positions + u.tok * p.positions_stride);
  u.slot = __ldg(p.slots + u.tok * p.slots_stride);
  u.index_slot = __ldg(p.index_slots + u.tok * p.index_slots_stride);
  u.rotate = pos >= 0 && pos < p.max_pos;
  u.cos_raw = u.sin_raw = make_uint4(0u, 0u, 0u, 0u);
  if (u.rotate && j < 4) {
    const std::uint16_t* cs = p.cos_sin + pos * p.cos_sin_row_stride + 8 * j;
    u.cos_raw = __ldg(reinterpret_cast<const uint4*>(cs));
    u.sin_raw = __ldg(reinterpret_cast<const uint4*>(cs + 32));
  }
  u.w_kind = -1;
#pragma unroll 1
  for (int vec = first; vec < end; vec += step) {
    const uint4 r0 = n0, r1 = n1;
    if (vec + step < end) {
      n0 = __ldg(reinterpret_cast<const uint4*>(row + (vec + step) * 128));
      n1 = __ldg(reinterpret_cast<const uint4*>(row + (vec + step) * 128 + 32));
    }
    process_vector<kKvFormat>(p, u, vec, j, a, gmask, r0, r1);
  }
}

}  // namespace

namespace {

// Warps of the kernel (for this K/V format) resident on the whole current device at once,
// queried once per device and format. Never 0: a failed query answers 1 (no chunking
// beyond the minimum; correct, just not tuned), is not cached, and its error is cleared
// so that the launch status stays the kernel's own.
int resident_warps(int kv_format) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cache;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 1;
  }
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(dev, kv_format);
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int sms = 0, per_sm = 0;
  const void* fn = kv_format == kBf16  ? reinterpret_cast<const void*>(fused_qknorm_rope_kernel<kBf16>)
                   : kv_format == kFp8 ? reinterpret_cast<const void*>(fused_qknorm_rope_kernel<kFp8>)
                                       : reinterpret_cast<const void*>(fused_qknorm_rope_kernel<kNvfp4>);
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kWarpsPerBlock * 32, 0) != cudaSuccess ||
      sms <= 0 || per_sm <= 0) {
    (void)cudaGetLastError();
    return 1;
  }
  const int warps = sms * per_sm * kWarpsPerBlock;
  cache.emplace(key, warps);
  return warps;
}

// Chunks per token (each a work unit of ~per_token / chunks vectors for 4 tokens): the
// count, from ceil(per_token / kChunk) up to per_token, that minimises
// waves x (vectors per unit + kUnitSetupVectors), waves =
// ceil(units / resident warps). Uniform units run in near-synchronous waves, so a last
// wave that is mostly empty costs as much as a full one (e.g. 16/1 at 8192 tokens: 2
// chunks give 4096 units = 1.3 waves of 3168 warps, 3 chunks 6144 units = 1.9 waves).
int choose_chunks(long long quads, int per_token, int resident) {
  if (resident < 1) resident = 1;
  int best = (per_token + kChunk - 1) / kChunk;
  double best_cost = 0.0;
  for (int c = best; c <= per_token; ++c) {
    const long long units = quads * c;
    if (units >= (1LL << 31) - kWarpsPerBlock) break;
    const double waves = static_cast<double>((units + resident - 1) / resident);
    const double cost = waves * (static_cast<double>(per_token) / c + kUnitSetupVectors);
    if (c == (per_token + kChunk - 1) / kChunk || cost < best_cost) {
      best = c;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace

int launch_fused_qknorm_rope_insert(const FusedQkvParams& p, void* stream) {
  if (p.num_tokens <= 0) return 0;
  const int per_token = p.nq + 2 * p.nkv + p.nidx + 1;
  const long long quads = (p.num_tokens + 3) / 4;
  const int chunks_per_token = choose_chunks(quads, per_token, resident_warps(p.kv_format));
  const long long units = quads * chunks_per_token;
  if (units >= (1LL << 31) - kWarpsPerBlock) return static_cast<int>(cudaErrorInvalidConfiguration);
  const long long blocks = (units + kWarpsPerBlock - 1) / kWarpsPerBlock;
  FusedQkvParams q = p;  // host IEEE float division: the correctly rounded reciprocals
  q.q_rcp = 1.0f / p.q_scale;
  q.k_rcp = 1.0f / p.k.global_scale;
  q.v_rcp = 1.0f / p.v.global_scale;
  q.ik_rcp = 1.0f / p.ik.global_scale;
  const dim3 grid(static_cast<unsigned>(blocks)), block(kWarpsPerBlock * 32);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (p.kv_format == kBf16)
    fused_qknorm_rope_kernel<kBf16><<<grid, block, 0, st>>>(q, static_cast<int>(units), chunks_per_token);
  else if (p.kv_format == kFp8)
    fused_qknorm_rope_kernel<kFp8><<<grid, block, 0, st>>>(q, static_cast<int>(units), chunks_per_token);
  else
    fused_qknorm_rope_kernel<kNvfp4><<<grid, block, 0, st>>>(q, static_cast<int>(units), chunks_per_token);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace flashmsa::cuda

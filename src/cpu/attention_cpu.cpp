// CPU block-sparse attention core (spec 3.1-3.4, D1, D4-D7).
//
// Work item = (query row, KV head g). Per item:
//   1. S = valid top-k entries (>= 0, < ceil(seq_len/128), <= p//128), sorted, unique.
//   2. Pass 1: for every visible key t (pages of S ascending, tokens ascending, t <= p)
//      decode K[g, t] once and compute the raw FP32 dot s = q_h . k_t for the G heads.
//   3. Per head: row max, probabilities and the FP32 normaliser (unrounded values).
//        BF16 path: z = c*s, m = max z, p = exp(z - m), PV operand = bf16(p).
//        FP8 paths: m = max s, p448 = 2^(fma(s, c2, fma(-m, c2, log2 448))),
//                   PV operand = E4M3_sat(p448) (spec 3.4).
//   4. Pass 2: decode V[g, t] once and accumulate acc_h += operand_h,t * v_t (FP32).
//   5. out = bf16(acc / sum * v_global_scale); lse = ln sum exp(z) (natural log, D6).
// The row max is taken over ALL visible keys of the row (not a running max), so the
// result does not depend on the order of the top-k entries.
#include "cpu/attention_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/parallel.h"
#include "cpu/kv_access.h"
#include "flashmsa/numerics.h"

namespace flashmsa::cpu {

namespace {

constexpr int kMaxKeys = kMaxTopk * kPageSize;  // 2048 visible keys at most
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLog2_448 = 8.80735492706298828125f;  // float(log2(448)), spec 3.4

inline std::int32_t read_i32(const TensorView& t, std::int64_t i) {
  return t.ptr<const std::int32_t>()[i * t.stride[0]];
}
inline std::int32_t read_i32(const TensorView& t, std::int64_t i, std::int64_t j) {
  return t.ptr<const std::int32_t>()[i * t.stride[0] + j * t.stride[1]];
}
inline std::int32_t read_i32(const TensorView& t, std::int64_t i, std::int64_t j,
                             std::int64_t k) {
  return t.ptr<const std::int32_t>()[i * t.stride[0] + j * t.stride[1] + k * t.stride[2]];
}

// float -> bf16 -> float, round-to-nearest-even (inline copy of float_to_bf16 for the
// hot loop; NaN stays NaN).
inline float round_bf16(float x) {
  if (x != x) return x;
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, sizeof(r));
  return r;
}

// 128-dim FP32 dot product with 8 independent partial sums in a fixed order:
// vectorizable without -ffast-math and bitwise reproducible.
inline float dot128(const float* __restrict a, const float* __restrict b) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < kHeadDim; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// acc[d] += w[t] * v[t][d] for t = 0..ntok-1 in order (v: ntok rows of 128 floats).
// Blocked over 32 dims so the partial accumulators stay in registers; every acc[d] still
// sees its terms in ascending t, i.e. exactly the sequential FP32 sum.
inline void pv_accumulate(const float* __restrict w, const float* __restrict v, int ntok,
                          float* __restrict acc) {
  constexpr int kChunk = 32;
  for (int c = 0; c < kHeadDim; c += kChunk) {
    float a[kChunk];
    for (int j = 0; j < kChunk; ++j) a[j] = acc[c + j];
    for (int t = 0; t < ntok; ++t) {
      const float wt = w[t];
      const float* vt = v + t * kHeadDim + c;
      for (int j = 0; j < kChunk; ++j) a[j] += wt * vt[j];
    }
    for (int j = 0; j < kChunk; ++j) acc[c + j] = a[j];
  }
}

// One K or V row as FP32. The bf16 and fp8 cases are decoded inline (exact, identical to
// cpu::load_cache_row_f32); nvfp4 goes through load_cache_row_f32.
inline void load_kv_row(const PagedCacheSide& side, KvFormat fmt, std::int64_t page,
                        std::int64_t head, int token, const float* e4m3_tab, float* __restrict out) {
  const TensorView& d = side.data;
  const std::int64_t off = page * d.stride[0] + head * d.stride[1] + token * d.stride[2];
  if (fmt == KvFormat::bf16) {
    const std::uint16_t* __restrict src = d.ptr<const std::uint16_t>() + off;
    for (int i = 0; i < kHeadDim; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(src[i]) << 16;
      std::memcpy(out + i, &bits, sizeof(float));
    }
  } else if (fmt == KvFormat::fp8) {
    const std::uint8_t* __restrict src = d.ptr<const std::uint8_t>() + off;
    for (int i = 0; i < kHeadDim; ++i) out[i] = e4m3_tab[src[i]];
  } else {
    load_cache_row_f32(side, fmt, page, head, token, out);
  }
}

struct ItemContext {
  const AttentionJob* job;
  std::int64_t group;  // G = Hq / Hkv
  bool fp8;            // FP8 probability contract (q e4m3)
  float c;             // softmax_scale * q_scale * k_global_scale
  float v_scale;       // v_global_scale
};

void write_empty(const AttentionJob& job, std::int64_t row, std::int64_t g, std::int64_t group) {
  for (std::int64_t i = 0; i < group; ++i) {
    const std::int64_t h = g * group + i;
    std::uint16_t* o = job.out.ptr<std::uint16_t>() + row * job.out.stride[0] + h * job.out.stride[1];
    std::memset(o, 0, kHeadDim * sizeof(std::uint16_t));
    if (job.lse.defined())
      job.lse.ptr<float>()[row * job.lse.stride[0] + h * job.lse.stride[1]] =
          -std::numeric_limits<float>::infinity();
  }
}

void run_item(const ItemContext& ctx, std::int64_t item, float* scratch) {
  const AttentionJob& job = *ctx.job;
  const std::int64_t hkv = job.num_kv_heads;
  const std::int64_t row = item / hkv;
  const std::int64_t g = item % hkv;
  const std::int64_t group = ctx.group;

  // Row -> request and position (D4).
  std::int64_t b, p;
  if (job.row_request != nullptr) {
    b = job.row_request[row];
    p = job.row_position[row];
  } else {
    b = row / job.queries_per_request;
    p = static_cast<std::int64_t>(read_i32(job.seq_lens, b)) - job.queries_per_request +
        row % job.queries_per_request;
  }
  if (p < 0) {
    write_empty(job, row, g, group);
    return;
  }
  const std::int64_t seq_len = read_i32(job.seq_lens, b);
  const std::int64_t req_pages = (seq_len + kPageSize - 1) / kPageSize;
  const std::int64_t local = p / kPageSize;

  // 1. Valid pages, sorted ascending, duplicates once (D1).
  std::int32_t pages[kMaxTopk];
  int n_pages = 0;
  for (std::int64_t k = 0; k < job.topk_k; ++k) {
    const std::int32_t e = read_i32(job.topk, row, g, k);
    if (e < 0 || e >= req_pages || e > local) continue;
    int pos = n_pages;
    bool dup = false;
    while (pos > 0 && pages[pos - 1] >= e) {
      if (pages[pos - 1] == e) {
        dup = true;
        break;
      }
      --pos;
    }
    if (dup) continue;
    for (int i = n_pages; i > pos; --i) pages[i] = pages[i - 1];
    pages[pos] = e;
    ++n_pages;
  }
  if (n_pages == 0) {
    write_empty(job, row, g, group);
    return;
  }

  // Scratch layout.
  float* qf = scratch;                       // [G][128]
  float* logits = qf + group * kHeadDim;     // [G][2048]
  float* acc = logits + group * kMaxKeys;    // [G][128]
  float* pagebuf = acc + group * kHeadDim;   // [128][128]: one page of K or V rows

  const TensorView& q = job.q;
  const std::size_t q_es = dtype_size(q.dtype);
  for (std::int64_t i = 0; i < group; ++i) {
    const std::int64_t h = g * group + i;
    const auto* qrow = static_cast<const std::uint8_t*>(q.data) +
                       (row * q.stride[0] + h * q.stride[1]) * q_es;
    load_row_f32(qrow, q.dtype, qf + i * kHeadDim);
  }

  // 2. Pass 1: raw dot products s[h][key].
  const KvFormat fmt = job.kv.format;
  const float* e4m3_tab = e4m3_table();
  int n_keys = 0;
  for (int i = 0; i < n_pages; ++i) {
    const std::int64_t logical = pages[i];
    const std::int64_t phys = read_i32(job.block_table, b, logical);
    const int ntok = logical == local ? static_cast<int>(p % kPageSize) + 1 : kPageSize;
    for (int t = 0; t < ntok; ++t)
      load_kv_row(job.kv.k, fmt, phys, g, t, e4m3_tab, pagebuf + t * kHeadDim);
    for (std::int64_t h = 0; h < group; ++h) {
      const float* qh = qf + h * kHeadDim;
      float* sh = logits + h * kMaxKeys + n_keys;
      for (int t = 0; t < ntok; ++t) sh[t] = dot128(qh, pagebuf + t * kHeadDim);
    }
    n_keys += ntok;
  }

  // 3. Probabilities (in place of the logits), normaliser and LSE per head.
  float sums[kMaxTopk];   // group <= 16
  float lses[kMaxTopk];
  for (std::int64_t h = 0; h < group; ++h) {
    float* s = logits + h * kMaxKeys;
    float sum = 0.0f;
    if (!ctx.fp8) {
      float m = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n_keys; ++j) {
        s[j] = ctx.c * s[j];
        m = std::max(m, s[j]);
      }
      for (int j = 0; j < n_keys; ++j) {
        const float pr = std::exp(s[j] - m);
        sum += pr;                                   // normaliser: unrounded P
        s[j] = round_bf16(pr);                       // PV operand: bf16(P)
      }
      lses[h] = m + std::log(sum);
    } else {
      float ms = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < n_keys; ++j) ms = std::max(ms, s[j]);
      const float c2 = ctx.c * kLog2e;
      const float bias = std::fma(-ms, c2, kLog2_448);
      for (int j = 0; j < n_keys; ++j) {
        const float p448 = std::exp2(std::fma(s[j], c2, bias));
        sum += p448;                                         // unrounded normaliser
        s[j] = e4m3_to_float(float_to_e4m3_sat(p448));       // PV operand: E4M3_sat(p448)
      }
      lses[h] = ctx.c * ms + std::log(sum / 448.0f);
    }
    sums[h] = sum;
  }

  // 4. Pass 2: acc_h += P_h,t * v_t.
  std::fill(acc, acc + group * kHeadDim, 0.0f);
  int key = 0;
  for (int i = 0; i < n_pages; ++i) {
    const std::int64_t logical = pages[i];
    const std::int64_t phys = read_i32(job.block_table, b, logical);
    const int ntok = logical == local ? static_cast<int>(p % kPageSize) + 1 : kPageSize;
    for (int t = 0; t < ntok; ++t)
      load_kv_row(job.kv.v, fmt, phys, g, t, e4m3_tab, pagebuf + t * kHeadDim);
    // No skipping of zero weights: 0 * inf / NaN propagates exactly as in a GEMM.
    for (std::int64_t h = 0; h < group; ++h)
      pv_accumulate(logits + h * kMaxKeys + key, pagebuf, ntok, acc + h * kHeadDim);
    key += ntok;
  }

  // 5. Outputs.
  for (std::int64_t i = 0; i < group; ++i) {
    const std::int64_t h = g * group + i;
    std::uint16_t* o = job.out.ptr<std::uint16_t>() + row * job.out.stride[0] + h * job.out.stride[1];
    const float* a = acc + i * kHeadDim;
    const float sum = sums[i];
    if (ctx.fp8) {
      for (int d = 0; d < kHeadDim; ++d) o[d] = float_to_bf16(a[d] / sum * ctx.v_scale);
    } else {
      for (int d = 0; d < kHeadDim; ++d) o[d] = float_to_bf16(a[d] / sum);
    }
    if (job.lse.defined())
      job.lse.ptr<float>()[row * job.lse.stride[0] + h * job.lse.stride[1]] = lses[i];
  }
}

}  // namespace

std::size_t attention_scratch_floats(std::int64_t group_size) {
  return static_cast<std::size_t>(group_size) * (2 * kHeadDim + kMaxKeys) +
         static_cast<std::size_t>(kPageSize) * kHeadDim;
}

void run_sparse_attention(const AttentionJob& job, int num_threads, float* scratch) {
  ItemContext ctx;
  ctx.job = &job;
  ctx.group = job.num_q_heads / job.num_kv_heads;
  ctx.fp8 = job.q.dtype == DType::e4m3;
  ctx.c = job.softmax_scale * job.q_scale * job.kv.k.global_scale;
  ctx.v_scale = job.kv.v.global_scale;
  const std::size_t per_thread = attention_scratch_floats(ctx.group);
  detail::parallel_for(job.num_rows * job.num_kv_heads, num_threads,
                       [&](std::int64_t item, int tid) {
                         run_item(ctx, item, scratch + static_cast<std::size_t>(tid) * per_thread);
                       });
}

}  // namespace flashmsa::cpu

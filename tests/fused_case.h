// Shared builder of fused_qknorm_rope_insert inputs for the CPU and GPU tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/fused.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"

namespace flashmsa::testing {

/// cos/sin table of MiniMax-M3 (theta 5e6, rotary dim 64), BF16-rounded, vLLM layout:
/// row p = cos(p * inv_freq_j) for j < 32, then sin(p * inv_freq_j).
inline void fill_cos_sin(HostTensor& t) {
  auto* p = t.data<std::uint16_t>();
  const std::int64_t max_pos = t.view().shape[0];
  for (std::int64_t pos = 0; pos < max_pos; ++pos)
    for (int j = 0; j < 32; ++j) {
      const double inv_freq = std::pow(5.0e6, -2.0 * j / 64.0);
      const double a = static_cast<double>(pos) * inv_freq;
      p[pos * 64 + j] = float_to_bf16(static_cast<float>(std::cos(a)));
      p[pos * 64 + 32 + j] = float_to_bf16(static_cast<float>(std::sin(a)));
    }
}

/// One fused-op problem: inputs, caches (poisoned with 0xAB) and outputs, all on the CPU.
struct FusedCase {
  int hq = 16, hkv = 1, t = 37, max_pos = 4096, pages = 3, index_pages = 3;
  KvFormat kv_fmt = KvFormat::bf16, idx_fmt = KvFormat::bf16;
  DType q_dtype = DType::bf16, iq_dtype = DType::bf16;
  float q_scale = 1.0f, k_scale = 1.0f, v_scale = 1.0f;
  bool nhd = false;  // packed cache allocated token-major [pages, 128, Hkv, 256]
  // nvfp4 only: vLLM head-slot page u8 [pages, 2*Hkv, 128, 72] in kv_buf (instead of the
  // four linear tensors k_data4 .. v_scale4), with optionally swizzled scale planes.
  bool head_slot = false, k_swizzled = false, v_swizzled = false;
  std::uint64_t seed = 1;

  HostTensor qkv, wq, wk, wiq, wik, cos_sin, positions, slots, islots;
  HostTensor kv_buf, k_data4, v_data4, k_scale4, v_scale4;  // packed bf16/fp8 or nvfp4 sides
  HostTensor index_buf, index_scale;
  HostTensor q_out, iq_out;
  PagedKvCache kv;
  IndexKCache ik;

  std::int64_t row() const { return (hq + 2 * hkv + hkv) * 128 + 128; }

  void build() {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    qkv.reset(DType::bf16, {t, row()});
    auto* x = qkv.data<std::uint16_t>();
    const std::int64_t vecs = row() / 128;
    for (std::int64_t i = 0; i < t; ++i)
      for (std::int64_t v = 0; v < vecs; ++v) {
        const float scale = std::ldexp(1.0f, static_cast<int>((i + 3 * v) % 9) - 4);  // 2^-4..2^4
        for (int d = 0; d < 128; ++d) x[(i * vecs + v) * 128 + d] = float_to_bf16(nd(rng) * scale);
      }
    for (HostTensor* w : {&wq, &wk, &wiq, &wik}) {
      w->reset(DType::bf16, {128});
      for (int d = 0; d < 128; ++d) w->data<std::uint16_t>()[d] = float_to_bf16(0.3f * nd(rng));
    }
    cos_sin.reset(DType::bf16, {max_pos, 64});
    fill_cos_sin(cos_sin);
    positions.reset(DType::i32, {t});
    std::uniform_int_distribution<int> pd(0, max_pos - 1);
    for (int i = 0; i < t; ++i) positions.data<std::int32_t>()[i] = i % 5 == 0 ? i : pd(rng);
    auto make_slots = [&](HostTensor& s, int npages) {
      std::vector<std::int32_t> perm(static_cast<std::size_t>(npages) * 128);
      for (std::size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<std::int32_t>(k);
      std::shuffle(perm.begin(), perm.end(), rng);
      s.reset(DType::i32, {t});
      for (int i = 0; i < t; ++i)
        s.data<std::int32_t>()[i] = i % 7 == 3 ? -1 : perm[static_cast<std::size_t>(i) % perm.size()];
    };
    make_slots(slots, pages);
    make_slots(islots, index_pages);

    if (kv_fmt == KvFormat::nvfp4 && head_slot) {
      kv_buf.reset(DType::u8, {pages, 2 * hkv, 128, 72});
      kv_buf.fill_bytes(0xAB);
      (void)nvfp4_head_slot_views(kv_buf.view(), k_swizzled, v_swizzled, k_scale, v_scale, &kv);
    } else if (kv_fmt == KvFormat::nvfp4) {
      for (HostTensor* d : {&k_data4, &v_data4}) {
        d->reset(DType::u8, {pages, hkv, 128, 64});
        d->fill_bytes(0xAB);
      }
      for (HostTensor* s : {&k_scale4, &v_scale4}) {
        s->reset(DType::e4m3, {pages, hkv, 128, 8});
        s->fill_bytes(0xAB);
      }
      kv.format = KvFormat::nvfp4;
      kv.k.data = k_data4.view();
      kv.v.data = v_data4.view();
      kv.k.block_scale = k_scale4.view();
      kv.v.block_scale = v_scale4.view();
      kv.k.global_scale = k_scale;
      kv.v.global_scale = v_scale;
    } else {
      const DType dt = kv_fmt == KvFormat::bf16 ? DType::bf16 : DType::e4m3;
      TensorView packed;
      if (nhd) {
        kv_buf.reset(dt, {pages, 128, hkv, 256});
        packed = make_strided_view(kv_buf.view().data, dt, {pages, hkv, 128, 256},
                                   {128LL * hkv * 256, 256, hkv * 256LL, 1});
      } else {
        kv_buf.reset(dt, {pages, hkv, 128, 256});
        packed = kv_buf.view();
      }
      kv_buf.fill_bytes(0xAB);
      const float ks = kv_fmt == KvFormat::bf16 ? 1.0f : k_scale;
      const float vs = kv_fmt == KvFormat::bf16 ? 1.0f : v_scale;
      (void)packed_kv_views(packed, kv_fmt, ks, vs, &kv);
    }
    ik = IndexKCache{};
    ik.format = idx_fmt;
    if (idx_fmt == KvFormat::nvfp4) {
      index_buf.reset(DType::u8, {index_pages, 128, 64});
      index_scale.reset(DType::e4m3, {index_pages, 128, 8});
      index_scale.fill_bytes(0xAB);
      ik.block_scale = index_scale.view();
    } else {
      index_buf.reset(idx_fmt == KvFormat::bf16 ? DType::bf16 : DType::e4m3, {index_pages, 128, 128});
    }
    index_buf.fill_bytes(0xAB);
    ik.data = index_buf.view();
    q_out.reset(q_dtype, {t, hq, 128});
    q_out.fill_bytes(0xAB);
    iq_out.reset(iq_dtype, {t, hkv, 128});
    iq_out.fill_bytes(0xAB);
  }

  FusedQkvInsertArgs args() const {
    FusedQkvInsertArgs a;
    a.qkv = qkv.view();
    a.q_norm_weight = wq.view();
    a.k_norm_weight = wk.view();
    a.index_q_norm_weight = wiq.view();
    a.index_k_norm_weight = wik.view();
    a.cos_sin_cache = cos_sin.view();
    a.positions = positions.view();
    a.num_q_heads = hq;
    a.num_kv_heads = hkv;
    a.num_index_heads = hkv;
    a.slot_mapping = slots.view();
    a.kv = kv;
    a.index_slot_mapping = islots.view();
    a.index_k = ik;
    a.q_out = q_out.view();
    a.q_scale = q_dtype == DType::e4m3 ? q_scale : 1.0f;
    a.index_q_out = iq_out.view();
    return a;
  }
};

/// One entry of the fused-kernel test matrices (CPU and GPU tests): geometry, formats
/// and layout; `configure` sets them on a FusedCase with the matrices' fixed scales.
struct FusedCombo {
  int hq, hkv, t;
  KvFormat kv, idx;
  DType q, iq;
  bool nhd;
  bool head_slot = false, k_swz = false, v_swz = false;  // nvfp4 K/V layout

  void configure(FusedCase& c, std::uint64_t seed) const {
    c.hq = hq;
    c.hkv = hkv;
    c.t = t;
    c.kv_fmt = kv;
    c.idx_fmt = idx;
    c.q_dtype = q;
    c.iq_dtype = iq;
    c.nhd = nhd;
    c.head_slot = head_slot;
    c.k_swizzled = k_swz;
    c.v_swizzled = v_swz;
    c.q_scale = 0.05f;
    c.k_scale = 0.03f;
    c.v_scale = 0.7f;
    c.seed = seed;
  }
};

}  // namespace flashmsa::testing

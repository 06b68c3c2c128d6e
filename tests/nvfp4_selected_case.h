// Shared builder of nvfp4_to_fp8_selected problems for the CPU and GPU tests: a random
// NVFP4 cache (every code x scale byte pattern appears), a top-k tensor with -1,
// out-of-range and duplicate entries, a block table with invalid physical pages, and
// poisoned capacity-sized outputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/host_tensor.h"

namespace flashmsa::testing {

struct SelectedCase {
  int hkv = 2, k = 16, requests = 3, rows_per_request = 2, width = 10, pages = 12;
  bool head_slot = false, k_swizzled = false, v_swizzled = false;
  bool head_major_topk = false;  // topk allocated [Hkv, R, K] and viewed as [R, Hkv, K]
  std::uint64_t seed = 1;

  HostTensor kv_buf, k_data, v_data, k_scale, v_scale;  // head-slot page or linear planes
  HostTensor topk, block_table, k_out, v_out, pairs, compact, num_pairs, workspace;
  PagedKvCache kv;

  // Presets shared by the CPU and GPU tests (set before build()).
  /// vLLM head-slot page with swizzled K scales, 4 heads, K = 7, head-major top-k.
  void preset_head_slot_head_major() {
    head_slot = true;
    k_swizzled = true;
    hkv = 4;
    k = 7;
    requests = 5;
    rows_per_request = 1;
    head_major_topk = true;
  }
  /// 8 heads, 300 pages, 4 requests x 8 rows, swizzled V scales.
  void preset_many_heads() {
    head_slot = true;
    v_swizzled = true;
    hkv = 8;
    requests = 4;
    rows_per_request = 8;
    width = 64;
    pages = 300;
  }
  /// 1 head, 3 pages: capacity = num_pages * Hkv < R * Hkv * K.
  void preset_capacity_bound_by_pages() {
    hkv = 1;
    pages = 3;
    width = 4;
  }

  std::int64_t rows() const { return static_cast<std::int64_t>(requests) * rows_per_request; }
  std::int64_t capacity() const {
    return std::min<std::int64_t>(rows() * hkv * k, static_cast<std::int64_t>(pages) * hkv);
  }

  void build() {
    std::mt19937_64 rng(seed);
    auto fill = [&](HostTensor& t) {
      auto* p = t.data<std::uint8_t>();
      for (std::size_t i = 0; i < t.bytes(); ++i) p[i] = static_cast<std::uint8_t>(rng());
    };
    if (head_slot) {
      kv_buf.reset(DType::u8, {pages, 2 * hkv, 128, 72});
      fill(kv_buf);
      (void)nvfp4_head_slot_views(kv_buf.view(), k_swizzled, v_swizzled, 1.0f, 1.0f, &kv);
    } else {
      for (HostTensor* d : {&k_data, &v_data}) {
        d->reset(DType::u8, {pages, hkv, 128, 64});
        fill(*d);
      }
      for (HostTensor* s : {&k_scale, &v_scale}) {
        s->reset(DType::e4m3, {pages, hkv, 128, 8});
        fill(*s);
      }
      kv = PagedKvCache{};
      kv.format = KvFormat::nvfp4;
      kv.k.data = k_data.view();
      kv.v.data = v_data.view();
      kv.k.block_scale = k_scale.view();
      kv.v.block_scale = v_scale.view();
    }
    // Block table: a permutation of the pages, one entry per request row invalid (-1 or
    // beyond the cache) so that those logical pages are skipped.
    block_table.reset(DType::i32, {requests, width});
    std::uniform_int_distribution<int> pd(0, pages - 1);
    for (int b = 0; b < requests; ++b)
      for (int l = 0; l < width; ++l)
        block_table.data<std::int32_t>()[b * width + l] =
            l == 3 ? (b % 2 ? -1 : pages + b) : pd(rng);
    const std::int64_t r = rows();
    if (head_major_topk) {
      topk.reset(DType::i32, {hkv, r, k});
    } else {
      topk.reset(DType::i32, {r, hkv, k});
    }
    std::uniform_int_distribution<int> ld(-2, width + 1);  // -1/-2 and >= width appear
    auto* tp = topk.data<std::int32_t>();
    for (std::int64_t i = 0; i < topk.numel(); ++i) tp[i] = i % 5 == 4 ? -1 : ld(rng);
    compact.reset(DType::i32, {r, hkv, k});
    compact.fill_bytes(0xCD);
    const std::int64_t cap = capacity();
    for (HostTensor* o : {&k_out, &v_out}) {
      o->reset(DType::e4m3, {cap, 128, 128});
      o->fill_bytes(0xAB);
    }
    pairs.reset(DType::i32, {cap, 2});
    pairs.fill_bytes(0xEE);
    num_pairs.reset(DType::i32, {1});
    num_pairs.fill_bytes(0xEE);
    workspace.reset(DType::i32, {static_cast<std::int64_t>(pages) * hkv});
  }

  TensorView topk_view() const {
    if (!head_major_topk) return topk.view();
    const std::int64_t r = rows();
    return make_strided_view(topk.view().data, DType::i32, {r, hkv, k}, {k, r * k, 1});
  }

  Nvfp4ToFp8SelectedArgs args() const {
    Nvfp4ToFp8SelectedArgs a;
    a.kv = kv;
    a.topk = topk_view();
    a.block_table = block_table.view();
    a.rows_per_request = rows_per_request;
    a.k_out = k_out.view();
    a.v_out = v_out.view();
    a.pairs = pairs.view();
    a.compact_topk = compact.view();
    a.num_pairs = num_pairs.view();
    a.workspace = workspace.view();
    return a;
  }
};

}  // namespace flashmsa::testing

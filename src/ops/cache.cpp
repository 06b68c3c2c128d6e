// FlashMSA — cache views and the CPU write path (spec 4.1-4.4, 5.1-5.3, D3, D7).
//
// Every function validates its arguments completely before touching memory; a failed
// call leaves every output byte untouched. With every tensor on Device::cuda the same
// shape/dtype/stride/alignment checks run, host reads of tensor contents are skipped
// (slot_mapping stays on the device) and the SM90 kernels of
// src/cuda/sm90/cache_kernels.cu are launched on `stream` (bytes identical to the CPU).
// CPU inserts are parallelised over tokens with detail::parallel_for; duplicate slots
// are resolved deterministically (the LAST token with a given slot wins, exactly as a
// sequential loop would), so the result is bitwise identical for any thread count (D9).
#include "flashmsa/cache.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "common/parallel.h"
#include "common/validate.h"
#include "flashmsa/numerics.h"

#ifdef FLASHMSA_WITH_CUDA
#include "cuda/sm90/cache_kernels.h"
#include "ops/cache_cuda_params.h"
#endif

namespace flashmsa {

namespace {

using detail::to_string;

// Tokens below this count are written on the calling thread (thread start-up would
// cost more than the copy).
constexpr std::int64_t kParallelMinTokens = 64;

// Bytes of one side of one head-slot page region (spec 4.3): 128 tokens x 72 bytes.
constexpr std::int64_t kHeadSlotBytesPerHead = 128 * 72;   // 9216
constexpr std::int64_t kHeadSlotDataBytesPerHead = 128 * 64;  // 8192
constexpr std::int64_t kHeadSlotScaleBytesPerHead = 128 * 8;  // 1024

using detail::resolve_device;  // device rule (common/validate.h)

#ifdef FLASHMSA_WITH_CUDA
Status cuda_status(const char* op, int err) {
  if (err == 0) return Status::Ok();
  return Status::Internal(op, std::string("kernel launch failed: ") + cuda::cache_error_string(err));
}

using detail::side_params;
#else
Status cuda_unsupported(const char* op) {
  return Status::Unsupported(op, "device cuda",
                             "this build of FlashMSA has no CUDA kernels (configure with nvcc)");
}
#endif

// slot_mapping: defined, i32, rank 1, shape [T], non-negative stride.
Status check_slot_mapping_tensor(const char* op, const TensorView& slots, std::int64_t t) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "slot_mapping", slots, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "slot_mapping", slots, {t}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "slot_mapping", slots));
  return Status::Ok();
}

inline std::int32_t slot_at(const TensorView& slots, std::int64_t i) {
  return slots.ptr<const std::int32_t>()[i * slots.stride[0]];
}

// Every slot must be < num_pages * 128 (negative = skip). Also marks, in *write, the
// tokens that actually have to be written: skipped tokens and tokens whose slot is
// written again by a later token are cleared (last writer wins, sequential semantics).
Status resolve_slots(const char* op, const TensorView& slots, std::int64_t num_pages,
                     std::vector<std::int64_t>* slot_of, std::vector<char>* write) {
  const std::int64_t t = slots.shape[0];
  const std::int64_t limit = num_pages * kPageSize;
  slot_of->assign(static_cast<std::size_t>(t), -1);
  write->assign(static_cast<std::size_t>(t), 0);
  std::vector<std::pair<std::int64_t, std::int64_t>> order;  // (slot, token)
  order.reserve(static_cast<std::size_t>(t));
  for (std::int64_t i = 0; i < t; ++i) {
    const std::int64_t s = slot_at(slots, i);
    if (s < 0) continue;
    if (s >= limit)
      return Status::InvalidArgument(
          op, "slot_mapping[" + to_string(i) + "]",
          "a slot in [0, num_pages*128 = " + to_string(limit) + ") or < 0 to skip",
          to_string(s));
    (*slot_of)[static_cast<std::size_t>(i)] = s;
    order.emplace_back(s, i);
  }
  std::sort(order.begin(), order.end());
  for (std::size_t j = 0; j < order.size(); ++j) {
    const bool last_of_slot = j + 1 == order.size() || order[j + 1].first != order[j].first;
    if (last_of_slot) (*write)[static_cast<std::size_t>(order[j].second)] = 1;
  }
  return Status::Ok();
}

template <class Fn>
void for_each_token(std::int64_t t, const Fn& fn) {
  const int threads = t >= kParallelMinTokens ? 0 : 1;
  detail::parallel_for(t, threads, [&](std::int64_t i, int) { fn(i); });
}

// Row of 128 bf16 values -> float.
inline void load_bf16_row(const std::uint16_t* src, float* out) {
  for (int d = 0; d < kHeadDim; ++d) out[d] = bf16_to_float(src[d]);
}

// Writes one 128-dim row x (bf16 bits at `src`) into a cache row at `dst`:
//   bf16:  dst bf16[128], bit copy
//   fp8:   dst e4m3[128], E4M3_sat(x / global_scale) (float division, spec 4.1 / 5.1)
//   nvfp4: dst u8[64] packed E2M1 codes; block g's E4M3 scale goes to
//          scale_plane[scale_offset(g)] (spec 5.2, nvfp4_quantize_block16)
struct RowWriter {
  KvFormat format;
  float global_scale;

  template <class ScaleOffsetFn>
  void write(const std::uint16_t* src, void* dst, std::uint8_t* scale_plane,
             const ScaleOffsetFn& scale_offset) const {
    switch (format) {
      case KvFormat::bf16:
        std::memcpy(dst, src, kHeadDim * sizeof(std::uint16_t));
        break;
      case KvFormat::fp8: {
        auto* out = static_cast<std::uint8_t*>(dst);
        for (int d = 0; d < kHeadDim; ++d)
          out[d] = float_to_e4m3_sat(bf16_to_float(src[d]) / global_scale);
        break;
      }
      case KvFormat::nvfp4: {
        float xf[kHeadDim];
        load_bf16_row(src, xf);
        auto* out = static_cast<std::uint8_t*>(dst);
        for (int g = 0; g < kHeadDim / 16; ++g) {
          std::uint8_t s = 0;
          nvfp4_quantize_block16(xf + 16 * g, global_scale, out + 8 * g, &s);
          scale_plane[scale_offset(g)] = s;
        }
        break;
      }
    }
  }
};

// Writes the K (or V) rows of token i into one cache side.
void insert_side_row(const TensorView& src, std::int64_t i, std::int64_t num_kv_heads,
                     const PagedCacheSide& side, KvFormat format, std::int64_t page, int tok) {
  const RowWriter writer{format, side.global_scale};
  const TensorView& d = side.data;
  const std::size_t es = dtype_size(d.dtype);
  for (std::int64_t h = 0; h < num_kv_heads; ++h) {
    const std::uint16_t* row =
        src.ptr<const std::uint16_t>() + i * src.stride[0] + h * src.stride[1];
    void* dst = static_cast<std::uint8_t*>(d.data) +
                (page * d.stride[0] + h * d.stride[1] + tok * d.stride[2]) * es;
    std::uint8_t* plane = nullptr;
    std::int64_t tok_stride = 0, g_stride = 1;
    if (format == KvFormat::nvfp4) {
      const TensorView& s = side.block_scale;
      plane = s.ptr<std::uint8_t>() + page * s.stride[0] + h * s.stride[1];
      tok_stride = s.stride[2];
      g_stride = s.stride[3];
    }
    const bool swz = side.scale_swizzled;
    writer.write(row, dst, plane, [&](int g) -> std::int64_t {
      return swz ? nvfp4_scale_offset(tok, g, true) : tok * tok_stride + g * g_stride;
    });
  }
}

// One NVFP4 row (64 packed bytes, 8 block scales from scale_of(g)) -> 128 E4M3 bytes,
// bitwise nvfp4_to_e4m3 (spec 5.3), through a 16 x 256 table.
template <class ScaleOf>
void nvfp4_row_to_e4m3(const std::uint8_t* packed, const ScaleOf& scale_of, std::uint8_t* out) {
  // 16 x 256 table of nvfp4_to_e4m3(code, scale): exact product, one saturating RNE.
  static const std::vector<std::uint8_t> table = [] {
    std::vector<std::uint8_t> tab(16 * 256);
    for (int c = 0; c < 16; ++c)
      for (int s = 0; s < 256; ++s)
        tab[c * 256 + s] =
            nvfp4_to_e4m3(static_cast<std::uint8_t>(c), static_cast<std::uint8_t>(s));
    return tab;
  }();
  for (int g = 0; g < kHeadDim / 16; ++g) {
    const std::uint8_t* tab = table.data() + scale_of(g);
    for (int i = 0; i < 8; ++i) {
      const std::uint8_t b = packed[8 * g + i];
      out[16 * g + 2 * i] = tab[(b & 0xf) * 256];
      out[16 * g + 2 * i + 1] = tab[(b >> 4) * 256];
    }
  }
}

}  // namespace

const char* kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::bf16: return "bf16";
    case KvFormat::fp8: return "fp8";
    case KvFormat::nvfp4: return "nvfp4";
  }
  return "?";
}

// ---------------------------------------------------------------------------
// Views

Status packed_kv_views(const TensorView& kv, KvFormat format, float k_scale, float v_scale,
                       PagedKvCache* out) {
  const char* op = "packed_kv_views";
  if (out == nullptr) return Status::InvalidArgument(op, "out", "a non-null PagedKvCache*", "nullptr");
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "kv", kv));
  DType want = DType::bf16;
  switch (format) {
    case KvFormat::bf16: want = DType::bf16; break;
    case KvFormat::fp8: want = DType::e4m3; break;
    case KvFormat::nvfp4:
      return Status::InvalidArgument(op, "format", "bf16 or fp8 (use nvfp4_head_slot_views for nvfp4)",
                                     "nvfp4");
  }
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "kv", kv, {want}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "kv", kv, {-1, -1, kPageSize, 2 * kHeadDim}));
  if (kv.shape[1] < 1 || kv.shape[1] > kMaxKvHeads)
    return Status::InvalidArgument(op, "kv", "num_kv_heads (dim 1) in 1..8", kv.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "kv", kv));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "kv", kv));
  if (format == KvFormat::bf16) {
    if (k_scale != 1.0f)
      return Status::InvalidArgument(op, "k_scale", "1 for a bf16 cache", std::to_string(k_scale));
    if (v_scale != 1.0f)
      return Status::InvalidArgument(op, "v_scale", "1 for a bf16 cache", std::to_string(v_scale));
  } else {
    FLASHMSA_RETURN_IF_ERROR(detail::check_positive_finite(op, "k_scale", k_scale));
    FLASHMSA_RETURN_IF_ERROR(detail::check_positive_finite(op, "v_scale", v_scale));
  }
  PagedKvCache c;
  c.format = format;
  c.k.data = kv;
  c.k.data.shape[3] = kHeadDim;
  c.v.data = c.k.data;
  c.v.data.data = static_cast<std::uint8_t*>(kv.data) + kHeadDim * dtype_size(kv.dtype);
  c.k.global_scale = k_scale;
  c.v.global_scale = v_scale;
  *out = c;
  return Status::Ok();
}

Status nvfp4_head_slot_views(const TensorView& kv, bool k_swizzled, bool v_swizzled,
                             float k_scale, float v_scale, PagedKvCache* out) {
  const char* op = "nvfp4_head_slot_views";
  if (out == nullptr) return Status::InvalidArgument(op, "out", "a non-null PagedKvCache*", "nullptr");
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "kv", kv));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "kv", kv, {DType::u8}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "kv", kv, {-1, -1, kPageSize, 72}));
  const std::int64_t slots = kv.shape[1];
  if (slots % 2 != 0 || slots < 2 || slots > 2 * kMaxKvHeads)
    return Status::InvalidArgument(op, "kv", "dim 1 = 2*num_kv_heads with num_kv_heads in 1..8",
                                   kv.describe());
  if (!kv.is_contiguous())
    return Status::InvalidArgument(op, "kv", "a contiguous [pages, 2*Hkv, 128, 72] tensor",
                                   kv.describe());
  // Only the base address must be 16-byte aligned: the 72-byte token stride is part of
  // the format, and the derived data / scale regions start at multiples of 1024 bytes.
  TensorView base_only = kv;
  base_only.rank = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "kv", base_only));
  FLASHMSA_RETURN_IF_ERROR(detail::check_positive_finite(op, "k_scale", k_scale));
  FLASHMSA_RETURN_IF_ERROR(detail::check_positive_finite(op, "v_scale", v_scale));
  const std::int64_t hkv = slots / 2;
  const std::int64_t page_bytes = 2 * hkv * kHeadSlotBytesPerHead;
  auto* base = static_cast<std::uint8_t*>(kv.data);
  PagedKvCache c;
  c.format = KvFormat::nvfp4;
  for (int side = 0; side < 2; ++side) {
    std::uint8_t* side_base = base + side * hkv * kHeadSlotBytesPerHead;
    PagedCacheSide& s = side == 0 ? c.k : c.v;
    s.data = make_strided_view(side_base, DType::u8, {kv.shape[0], hkv, kPageSize, 64},
                               {page_bytes, kHeadSlotDataBytesPerHead, 64, 1}, kv.device);
    s.block_scale = make_strided_view(side_base + hkv * kHeadSlotDataBytesPerHead, DType::e4m3,
                                      {kv.shape[0], hkv, kPageSize, 8},
                                      {page_bytes, kHeadSlotScaleBytesPerHead, 8, 1}, kv.device);
    s.scale_swizzled = side == 0 ? k_swizzled : v_swizzled;
    s.global_scale = side == 0 ? k_scale : v_scale;
  }
  *out = c;
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Inserts

Status cache_insert(const TensorView& k, const TensorView& v, const TensorView& slot_mapping,
                    const PagedKvCache& cache, void* stream) {
  const char* op = "cache_insert";
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "k", k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "v", v));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "slot_mapping", slot_mapping));
  const bool nvfp4 = cache.format == KvFormat::nvfp4;
  const TensorView none;
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_device(
      op,
      {{"k", &k}, {"v", &v}, {"slot_mapping", &slot_mapping}, {"kv.k.data", &cache.k.data},
       {"kv.k.block_scale", nvfp4 ? &cache.k.block_scale : &none},
       {"kv.v.data", &cache.v.data}, {"kv.v.block_scale", nvfp4 ? &cache.v.block_scale : &none}},
      &on_cuda));

  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "k", k, {DType::bf16}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "k", k, {-1, -1, kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "k", k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "k", k));
  const std::int64_t t = k.shape[0];
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "v", v, {DType::bf16}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "v", v, {t, k.shape[1], kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "v", v));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "v", v));
  FLASHMSA_RETURN_IF_ERROR(check_slot_mapping_tensor(op, slot_mapping, t));

  std::int64_t num_pages = 0, hkv = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_kv_cache(op, cache, &num_pages, &hkv));
  if (k.shape[1] != hkv)
    return Status::InvalidArgument(op, "k",
                                   "num_kv_heads (dim 1) = " + to_string(hkv) + " as the cache",
                                   k.describe());

  if (on_cuda) {
    // slot_mapping contents stay on the device: the kernel skips slots outside
    // [0, num_pages*128) instead of rejecting them (cache.h).
#ifdef FLASHMSA_WITH_CUDA
    cuda::CacheInsertParams p;
    const TensorView* src[2] = {&k, &v};
    const PagedCacheSide* sides[2] = {&cache.k, &cache.v};
    for (int i = 0; i < 2; ++i) {
      p.src[i] = src[i]->ptr<const std::uint16_t>();
      p.src_stride[i][0] = src[i]->stride[0];
      p.src_stride[i][1] = src[i]->stride[1];
      p.side[i] = side_params(sides[i]->data, nvfp4 ? sides[i]->block_scale : none,
                              nvfp4 && sides[i]->scale_swizzled, sides[i]->global_scale, true);
    }
    p.slots = slot_mapping.ptr<const std::int32_t>();
    p.slot_stride = slot_mapping.stride[0];
    p.num_tokens = t;
    p.num_heads = static_cast<int>(hkv);
    p.num_sides = 2;
    p.num_slots = num_pages * kPageSize;
    p.format = static_cast<int>(cache.format);
    return cuda_status(op, cuda::launch_cache_insert(p, stream));
#else
    (void)stream;
    return cuda_unsupported(op);
#endif
  }

  std::vector<std::int64_t> slot_of;
  std::vector<char> write;
  FLASHMSA_RETURN_IF_ERROR(resolve_slots(op, slot_mapping, num_pages, &slot_of, &write));

  for_each_token(t, [&](std::int64_t i) {
    if (!write[static_cast<std::size_t>(i)]) return;
    const std::int64_t s = slot_of[static_cast<std::size_t>(i)];
    const std::int64_t page = s / kPageSize;
    const int tok = static_cast<int>(s % kPageSize);
    insert_side_row(k, i, hkv, cache.k, cache.format, page, tok);
    insert_side_row(v, i, hkv, cache.v, cache.format, page, tok);
  });
  return Status::Ok();
}

Status index_cache_insert(const TensorView& index_k, const TensorView& slot_mapping,
                          const IndexKCache& cache, void* stream) {
  const char* op = "index_cache_insert";
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "index_k", index_k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "slot_mapping", slot_mapping));
  const bool nvfp4 = cache.format == KvFormat::nvfp4;
  const TensorView none;
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_device(
      op,
      {{"index_k", &index_k}, {"slot_mapping", &slot_mapping}, {"index_k.data", &cache.data},
       {"index_k.block_scale", nvfp4 ? &cache.block_scale : &none}},
      &on_cuda));

  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "index_k", index_k, {DType::bf16}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "index_k", index_k, {-1, kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "index_k", index_k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "index_k", index_k));
  const std::int64_t t = index_k.shape[0];
  FLASHMSA_RETURN_IF_ERROR(check_slot_mapping_tensor(op, slot_mapping, t));

  std::int64_t num_pages = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_index_k_cache(op, cache, &num_pages));
  // Index-K fp8 has no scale (spec 2.1 item 4): E4M3_sat(x), i.e. RowWriter with scale 1.
  const float gs = cache.format == KvFormat::nvfp4 ? cache.global_scale : 1.0f;

  if (on_cuda) {  // slots outside [0, num_pages*128) are skipped by the kernel (cache.h)
#ifdef FLASHMSA_WITH_CUDA
    cuda::CacheInsertParams p;
    p.src[0] = index_k.ptr<const std::uint16_t>();
    p.src_stride[0][0] = index_k.stride[0];
    p.side[0] = side_params(cache.data, nvfp4 ? cache.block_scale : none, false, gs, false);
    p.slots = slot_mapping.ptr<const std::int32_t>();
    p.slot_stride = slot_mapping.stride[0];
    p.num_tokens = t;
    p.num_heads = 1;
    p.num_sides = 1;
    p.num_slots = num_pages * kPageSize;
    p.format = static_cast<int>(cache.format);
    return cuda_status(op, cuda::launch_cache_insert(p, stream));
#else
    (void)stream;
    return cuda_unsupported(op);
#endif
  }

  std::vector<std::int64_t> slot_of;
  std::vector<char> write;
  FLASHMSA_RETURN_IF_ERROR(resolve_slots(op, slot_mapping, num_pages, &slot_of, &write));

  const RowWriter writer{cache.format, gs};
  const TensorView& d = cache.data;
  const std::size_t es = dtype_size(d.dtype);
  for_each_token(t, [&](std::int64_t i) {
    if (!write[static_cast<std::size_t>(i)]) return;
    const std::int64_t s = slot_of[static_cast<std::size_t>(i)];
    const std::int64_t page = s / kPageSize;
    const std::int64_t tok = s % kPageSize;
    const std::uint16_t* row = index_k.ptr<const std::uint16_t>() + i * index_k.stride[0];
    void* dst = static_cast<std::uint8_t*>(d.data) + (page * d.stride[0] + tok * d.stride[1]) * es;
    std::uint8_t* plane = nullptr;
    std::int64_t tok_stride = 0, g_stride = 1;
    if (cache.format == KvFormat::nvfp4) {
      const TensorView& sc = cache.block_scale;
      plane = sc.ptr<std::uint8_t>() + page * sc.stride[0];
      tok_stride = sc.stride[1];
      g_stride = sc.stride[2];
    }
    writer.write(row, dst, plane,
                 [&](int g) -> std::int64_t { return tok * tok_stride + g * g_stride; });
  });
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Conversions

Status quantize_query_e4m3(const TensorView& q, float q_scale, const TensorView& out,
                          void* stream) {
  const char* op = "quantize_query_e4m3";
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "q", q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "out", out));
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_device(op, {{"q", &q}, {"out", &out}}, &on_cuda));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "q", q, {DType::bf16}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "q", q, {-1, -1, kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "q", q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "q", q));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "out", out, {DType::e4m3}));
  FLASHMSA_RETURN_IF_ERROR(
      detail::check_shape(op, "out", out, {q.shape[0], q.shape[1], kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "out", out));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "out", out));
  FLASHMSA_RETURN_IF_ERROR(detail::check_positive_finite(op, "q_scale", q_scale));

  if (on_cuda) {
#ifdef FLASHMSA_WITH_CUDA
    cuda::QuantizeQueryParams p;
    p.q = q.ptr<const std::uint16_t>();
    p.q_stride[0] = q.stride[0];
    p.q_stride[1] = q.stride[1];
    p.out = out.ptr<unsigned char>();
    p.out_stride[0] = out.stride[0];
    p.out_stride[1] = out.stride[1];
    p.num_tokens = q.shape[0];
    p.num_heads = static_cast<int>(q.shape[1]);
    p.q_scale = q_scale;
    return cuda_status(op, cuda::launch_quantize_query_e4m3(p, stream));
#else
    (void)stream;
    return cuda_unsupported(op);
#endif
  }

  const std::int64_t heads = q.shape[1];
  const std::int64_t rows = q.shape[0] * heads;
  const int threads = rows >= 4 * kParallelMinTokens ? 0 : 1;
  detail::parallel_for(rows, threads, [&](std::int64_t r, int) {
    const std::int64_t i = r / heads, h = r % heads;
    const std::uint16_t* src = q.ptr<const std::uint16_t>() + i * q.stride[0] + h * q.stride[1];
    std::uint8_t* dst = out.ptr<std::uint8_t>() + i * out.stride[0] + h * out.stride[1];
    for (int d = 0; d < kHeadDim; ++d) dst[d] = float_to_e4m3_sat(bf16_to_float(src[d]) / q_scale);
  });
  return Status::Ok();
}

Status nvfp4_to_fp8(const TensorView& packed, const TensorView& scale, const TensorView& out,
                    void* stream) {
  const char* op = "nvfp4_to_fp8";
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "packed", packed));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "scale", scale));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "out", out));
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_device(
      op, {{"packed", &packed}, {"scale", &scale}, {"out", &out}}, &on_cuda));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "packed", packed, {DType::u8}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "packed", packed, {-1, kHeadDim / 2}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "packed", packed));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "packed", packed));
  const std::int64_t r = packed.shape[0];
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "scale", scale, {DType::e4m3, DType::u8}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "scale", scale, {r, kHeadDim / 16}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "scale", scale));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "out", out, {DType::e4m3}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "out", out, {r, kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "out", out));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, "out", out));

  if (on_cuda) {
#ifdef FLASHMSA_WITH_CUDA
    cuda::Nvfp4ToFp8Params p;
    p.packed = packed.ptr<const unsigned char>();
    p.packed_stride = packed.stride[0];
    p.scale = scale.ptr<const unsigned char>();
    p.scale_stride = scale.stride[0];
    p.out = out.ptr<unsigned char>();
    p.out_stride = out.stride[0];
    p.rows = r;
    return cuda_status(op, cuda::launch_nvfp4_to_fp8(p, stream));
#else
    (void)stream;
    return cuda_unsupported(op);
#endif
  }

  const int threads = r >= 4 * kParallelMinTokens ? 0 : 1;
  detail::parallel_for(r, threads, [&](std::int64_t row, int) {
    const std::uint8_t* sc = scale.ptr<const std::uint8_t>() + row * scale.stride[0];
    nvfp4_row_to_e4m3(packed.ptr<const std::uint8_t>() + row * packed.stride[0],
                      [&](int g) { return sc[g]; }, out.ptr<std::uint8_t>() + row * out.stride[0]);
  });
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Selected-pages NVFP4 -> E4M3 (spec 5.3)

namespace {

// i32 [R, Hkv, K]-shaped tensor with non-negative strides.
Status check_topk_like(const char* op, const char* arg, const TensorView& t, std::int64_t r,
                       std::int64_t hkv, std::int64_t k) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, arg, t, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, arg, t, {r, hkv, k}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, arg, t));
  return Status::Ok();
}

Status check_selected_out(const char* op, const char* arg, const TensorView& t,
                          std::int64_t capacity) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, arg, t, {DType::e4m3}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, arg, t, {capacity, kPageSize, kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, arg, t));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(op, arg, t));
  return Status::Ok();
}

inline std::int32_t at3(const TensorView& t, std::int64_t a, std::int64_t b, std::int64_t c) {
  return t.ptr<const std::int32_t>()[a * t.stride[0] + b * t.stride[1] + c * t.stride[2]];
}

}  // namespace

Status nvfp4_to_fp8_selected(const Nvfp4ToFp8SelectedArgs& a) {
  const char* op = "nvfp4_to_fp8_selected";
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "topk", a.topk));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "block_table", a.block_table));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "k_out", a.k_out));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "v_out", a.v_out));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "pairs", a.pairs));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "compact_topk", a.compact_topk));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "num_pairs", a.num_pairs));
  bool on_cuda = false;
  FLASHMSA_RETURN_IF_ERROR(resolve_device(
      op,
      {{"kv.k.data", &a.kv.k.data}, {"kv.k.block_scale", &a.kv.k.block_scale},
       {"kv.v.data", &a.kv.v.data}, {"kv.v.block_scale", &a.kv.v.block_scale},
       {"topk", &a.topk}, {"block_table", &a.block_table}, {"k_out", &a.k_out},
       {"v_out", &a.v_out}, {"pairs", &a.pairs}, {"compact_topk", &a.compact_topk},
       {"num_pairs", &a.num_pairs}, {"workspace", &a.workspace}},
      &on_cuda));
  if (a.kv.format != KvFormat::nvfp4)
    return Status::InvalidArgument(op, "kv.format", "nvfp4", kv_format_name(a.kv.format));
  std::int64_t num_pages = 0, hkv = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_kv_cache(op, a.kv, &num_pages, &hkv));

  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "topk", a.topk, 3));
  const std::int64_t r = a.topk.shape[0], k = a.topk.shape[2];
  if (k < 1 || k > kMaxTopk)
    return Status::InvalidArgument(op, "topk", "K (dim 2) in 1..16", a.topk.describe());
  FLASHMSA_RETURN_IF_ERROR(check_topk_like(op, "topk", a.topk, r, hkv, k));
  if (a.rows_per_request < 1)
    return Status::InvalidArgument(op, "rows_per_request", ">= 1", to_string(a.rows_per_request));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "block_table", a.block_table, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "block_table", a.block_table, 2));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "block_table", a.block_table));
  if (a.block_table.shape[0] * a.rows_per_request != r)
    return Status::InvalidArgument(
        op, "block_table",
        "dim 0 = R / rows_per_request = " + to_string(r) + " / " + to_string(a.rows_per_request) +
            " (topk rows per request)",
        a.block_table.describe());

  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "k_out", a.k_out, 3));
  const std::int64_t capacity = a.k_out.shape[0];
  const std::int64_t bound = std::min(r * hkv * k, num_pages * hkv);
  if (capacity < bound)
    return Status::InvalidArgument(
        op, "k_out",
        "capacity (dim 0) >= min(R*Hkv*K, num_pages*Hkv) = " + to_string(bound) +
            " (the most unique (page, head) pairs)",
        a.k_out.describe());
  FLASHMSA_RETURN_IF_ERROR(check_selected_out(op, "k_out", a.k_out, capacity));
  FLASHMSA_RETURN_IF_ERROR(check_selected_out(op, "v_out", a.v_out, capacity));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "pairs", a.pairs, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "pairs", a.pairs, {capacity, 2}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "pairs", a.pairs));
  FLASHMSA_RETURN_IF_ERROR(check_topk_like(op, "compact_topk", a.compact_topk, r, hkv, k));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "num_pairs", a.num_pairs, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(op, "num_pairs", a.num_pairs, {1}));
  if (on_cuda || a.workspace.defined()) {
    FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "workspace", a.workspace));
    FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "workspace", a.workspace, {DType::i32}));
    FLASHMSA_RETURN_IF_ERROR(
        detail::check_shape(op, "workspace", a.workspace, {num_pages * hkv}));
    FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(op, "workspace", a.workspace));
  }

  if (on_cuda) {
#ifdef FLASHMSA_WITH_CUDA
    cuda::Nvfp4SelectedParams p;
    const PagedCacheSide* sides[2] = {&a.kv.k, &a.kv.v};
    const TensorView* outs[2] = {&a.k_out, &a.v_out};
    for (int i = 0; i < 2; ++i) {
      p.side[i] = side_params(sides[i]->data, sides[i]->block_scale, sides[i]->scale_swizzled,
                              sides[i]->global_scale, true);
      p.out[i] = outs[i]->ptr<unsigned char>();
      p.out_stride[i][0] = outs[i]->stride[0];
      p.out_stride[i][1] = outs[i]->stride[1];
    }
    p.num_heads = static_cast<int>(hkv);
    p.num_pages = num_pages;
    p.topk = a.topk.ptr<const std::int32_t>();
    p.rows = r;
    p.topk_k = static_cast<int>(k);
    p.block_table = a.block_table.ptr<const std::int32_t>();
    p.bt_width = a.block_table.shape[1];
    p.rows_per_request = a.rows_per_request;
    p.pairs = a.pairs.ptr<std::int32_t>();
    p.compact = a.compact_topk.ptr<std::int32_t>();
    for (int d = 0; d < 3; ++d) {
      p.topk_stride[d] = a.topk.stride[d];
      p.compact_stride[d] = a.compact_topk.stride[d];
    }
    for (int d = 0; d < 2; ++d) {
      p.bt_stride[d] = a.block_table.stride[d];
      p.pairs_stride[d] = a.pairs.stride[d];
    }
    p.num_pairs = a.num_pairs.ptr<std::int32_t>();
    p.workspace = a.workspace.ptr<std::int32_t>();
    p.capacity = capacity;
    return cuda_status(op, cuda::launch_nvfp4_to_fp8_selected(p, a.stream));
#else
    return cuda_unsupported(op);
#endif
  }

  // CPU: flag the pairs, number them in (page, head) order, then convert.
  const std::int64_t width = a.block_table.shape[1];
  std::vector<std::int32_t> index(static_cast<std::size_t>(num_pages * hkv), 0);
  auto pair_of = [&](std::int64_t row, std::int64_t h, std::int64_t j) -> std::int64_t {
    const std::int64_t lp = at3(a.topk, row, h, j);
    if (lp < 0 || lp >= width) return -1;
    const std::int64_t b = row / a.rows_per_request;
    const std::int64_t pp = a.block_table.ptr<const std::int32_t>()[b * a.block_table.stride[0] +
                                                                    lp * a.block_table.stride[1]];
    if (pp < 0 || pp >= num_pages) return -1;
    return pp * hkv + h;
  };
  for (std::int64_t row = 0; row < r; ++row)
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t pr = pair_of(row, h, j);
        if (pr >= 0) index[static_cast<std::size_t>(pr)] = 1;
      }
  std::vector<std::int64_t> order;
  for (std::int64_t i = 0; i < num_pages * hkv; ++i) {
    if (index[static_cast<std::size_t>(i)] != 0) {
      index[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(order.size());
      order.push_back(i);
    } else {
      index[static_cast<std::size_t>(i)] = -1;
    }
  }
  const std::int64_t n = static_cast<std::int64_t>(order.size());
  auto* pairs = a.pairs.ptr<std::int32_t>();
  for (std::int64_t c = 0; c < n; ++c) {
    pairs[c * a.pairs.stride[0]] = static_cast<std::int32_t>(order[static_cast<std::size_t>(c)] / hkv);
    pairs[c * a.pairs.stride[0] + a.pairs.stride[1]] =
        static_cast<std::int32_t>(order[static_cast<std::size_t>(c)] % hkv);
  }
  for (std::int64_t row = 0; row < r; ++row)
    for (std::int64_t h = 0; h < hkv; ++h)
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t pr = pair_of(row, h, j);
        a.compact_topk.ptr<std::int32_t>()[row * a.compact_topk.stride[0] +
                                           h * a.compact_topk.stride[1] +
                                           j * a.compact_topk.stride[2]] =
            pr >= 0 ? index[static_cast<std::size_t>(pr)] : -1;
      }
  *a.num_pairs.ptr<std::int32_t>() = static_cast<std::int32_t>(n);

  const int threads = n * 2 * kPageSize >= 4 * kParallelMinTokens ? 0 : 1;
  detail::parallel_for(n * 2 * kPageSize, threads, [&](std::int64_t item, int) {
    const std::int64_t c = item / (2 * kPageSize);
    const int side = static_cast<int>(item / kPageSize % 2);
    const int tok = static_cast<int>(item % kPageSize);
    const std::int64_t page = order[static_cast<std::size_t>(c)] / hkv;
    const std::int64_t h = order[static_cast<std::size_t>(c)] % hkv;
    const PagedCacheSide& s = side == 0 ? a.kv.k : a.kv.v;
    const TensorView& o = side == 0 ? a.k_out : a.v_out;
    const std::uint8_t* data = s.data.ptr<const std::uint8_t>() + page * s.data.stride[0] +
                               h * s.data.stride[1] + tok * s.data.stride[2];
    const std::uint8_t* plane =
        s.block_scale.ptr<const std::uint8_t>() + page * s.block_scale.stride[0] +
        h * s.block_scale.stride[1];
    nvfp4_row_to_e4m3(
        data,
        [&](int g) {
          return plane[s.scale_swizzled
                           ? nvfp4_scale_offset(tok, g, true)
                           : tok * s.block_scale.stride[2] + g * s.block_scale.stride[3]];
        },
        o.ptr<std::uint8_t>() + c * o.stride[0] + tok * o.stride[1]);
  });
  return Status::Ok();
}

}  // namespace flashmsa

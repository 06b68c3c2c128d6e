#include "common/validate.h"

#include <cmath>
#include <cstdio>

namespace flashmsa::detail {

std::string float_string(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string to_string(std::int64_t v) { return std::to_string(v); }

namespace {
std::string dtype_list(std::initializer_list<DType> allowed) {
  std::string s;
  std::size_t i = 0;
  for (DType d : allowed) {
    if (i) s += (i + 1 == allowed.size()) ? " or " : ", ";
    s += dtype_name(d);
    ++i;
  }
  return s;
}

std::string shape_string(std::initializer_list<std::int64_t> expected) {
  std::string s = "[";
  std::size_t i = 0;
  for (std::int64_t e : expected) {
    if (i++) s += ", ";
    s += e < 0 ? std::string("*") : std::to_string(e);
  }
  return s + "]";
}

std::string join(const char* a, const char* b) { return std::string(a) + "." + b; }
}  // namespace

Status check_defined(const char* op, const char* arg, const TensorView& t) {
  if (!t.defined()) return Status::InvalidArgument(op, arg, "a tensor", "a null data pointer");
  return Status::Ok();
}

Status check_dtype(const char* op, const char* arg, const TensorView& t,
                   std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype == d) return Status::Ok();
  return Status::InvalidArgument(op, arg, "dtype " + dtype_list(allowed),
                                 std::string("dtype ") + dtype_name(t.dtype));
}

Status check_rank(const char* op, const char* arg, const TensorView& t, int rank) {
  if (t.rank != rank)
    return Status::InvalidArgument(op, arg, "rank " + std::to_string(rank),
                                   "rank " + std::to_string(t.rank) + " (" + t.describe() + ")");
  return Status::Ok();
}

Status check_shape(const char* op, const char* arg, const TensorView& t,
                   std::initializer_list<std::int64_t> expected) {
  bool ok = t.rank == static_cast<int>(expected.size());
  int d = 0;
  for (std::int64_t e : expected) {
    if (ok && e >= 0 && t.shape[d] != e) ok = false;
    if (ok && t.shape[d] < 0) ok = false;
    ++d;
  }
  if (!ok)
    return Status::InvalidArgument(op, arg, "shape " + shape_string(expected), t.describe());
  return Status::Ok();
}

Status check_strides_nonnegative(const char* op, const char* arg, const TensorView& t) {
  for (int d = 0; d < t.rank; ++d)
    if (t.stride[d] < 0)
      return Status::InvalidArgument(op, arg, "non-negative strides", t.describe());
  return Status::Ok();
}

Status check_inner_contiguous(const char* op, const char* arg, const TensorView& t) {
  FLASHMSA_RETURN_IF_ERROR(check_strides_nonnegative(op, arg, t));
  if (t.rank > 0 && t.stride[t.rank - 1] != 1 && t.shape[t.rank - 1] > 1)
    return Status::InvalidArgument(op, arg, "innermost stride 1", t.describe());
  return Status::Ok();
}

Status check_aligned16(const char* op, const char* arg, const TensorView& t) {
  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  if (addr % 16 != 0) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "data address 0x%llx", static_cast<unsigned long long>(addr));
    return Status::InvalidArgument(op, arg, "a 16-byte aligned data address", buf);
  }
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(t.dtype));
  for (int d = 0; d + 1 < t.rank; ++d) {
    if (t.shape[d] > 1 && (t.stride[d] * es) % 16 != 0)
      return Status::InvalidArgument(
          op, arg, "strides of every outer dimension to be multiples of 16 bytes",
          "stride[" + std::to_string(d) + "] = " + std::to_string(t.stride[d] * es) +
              " bytes (" + t.describe() + ")");
  }
  return Status::Ok();
}

Status check_device(const char* op, const char* arg, const TensorView& t, Device device) {
  if (t.device != device)
    return Status::InvalidArgument(op, arg, std::string("memory on ") + device_name(device),
                                   std::string("memory on ") + device_name(t.device));
  return Status::Ok();
}

Status resolve_device(const char* op, std::initializer_list<NamedView> views, bool* on_cuda) {
  const TensorView* first = nullptr;
  for (const auto& nv : views) {
    if (!nv.second->defined()) continue;
    if (first == nullptr) first = nv.second;
    FLASHMSA_RETURN_IF_ERROR(check_device(op, nv.first, *nv.second, first->device));
  }
  *on_cuda = first != nullptr && first->device == Device::cuda;
  return Status::Ok();
}

Status check_positive_finite(const char* op, const char* arg, float value) {
  if (!(value > 0.0f) || !std::isfinite(value)) {
    return Status::InvalidArgument(op, arg, "a finite value > 0", float_string(value));
  }
  return Status::Ok();
}

Status check_cache_side(const char* op, const char* arg, const PagedCacheSide& side,
                        KvFormat format, std::int64_t num_kv_heads) {
  const std::string data_arg = join(arg, "data");
  const std::string scale_arg = join(arg, "block_scale");
  const std::string gs_arg = join(arg, "global_scale");
  FLASHMSA_RETURN_IF_ERROR(check_defined(op, data_arg.c_str(), side.data));
  const std::int64_t h = num_kv_heads;
  switch (format) {
    case KvFormat::bf16:
      FLASHMSA_RETURN_IF_ERROR(check_dtype(op, data_arg.c_str(), side.data, {DType::bf16}));
      FLASHMSA_RETURN_IF_ERROR(check_shape(op, data_arg.c_str(), side.data, {-1, h, 128, 128}));
      if (side.global_scale != 1.0f)
        return Status::InvalidArgument(op, gs_arg, "1 for a bf16 cache",
                                       std::to_string(side.global_scale));
      break;
    case KvFormat::fp8:
      FLASHMSA_RETURN_IF_ERROR(check_dtype(op, data_arg.c_str(), side.data, {DType::e4m3}));
      FLASHMSA_RETURN_IF_ERROR(check_shape(op, data_arg.c_str(), side.data, {-1, h, 128, 128}));
      FLASHMSA_RETURN_IF_ERROR(check_positive_finite(op, gs_arg.c_str(), side.global_scale));
      break;
    case KvFormat::nvfp4: {
      FLASHMSA_RETURN_IF_ERROR(check_dtype(op, data_arg.c_str(), side.data, {DType::u8}));
      FLASHMSA_RETURN_IF_ERROR(check_shape(op, data_arg.c_str(), side.data, {-1, h, 128, 64}));
      FLASHMSA_RETURN_IF_ERROR(check_positive_finite(op, gs_arg.c_str(), side.global_scale));
      FLASHMSA_RETURN_IF_ERROR(check_defined(op, scale_arg.c_str(), side.block_scale));
      FLASHMSA_RETURN_IF_ERROR(
          check_dtype(op, scale_arg.c_str(), side.block_scale, {DType::e4m3, DType::u8}));
      FLASHMSA_RETURN_IF_ERROR(check_shape(op, scale_arg.c_str(), side.block_scale,
                                           {side.data.shape[0], side.data.shape[1], 128, 8}));
      FLASHMSA_RETURN_IF_ERROR(check_inner_contiguous(op, scale_arg.c_str(), side.block_scale));
      if (side.scale_swizzled && side.block_scale.stride[2] != 8)
        return Status::InvalidArgument(op, scale_arg,
                                       "a contiguous 128 x 8 plane (strides [*, *, 8, 1]) "
                                       "for a swizzled scale plane",
                                       side.block_scale.describe());
      break;
    }
  }
  FLASHMSA_RETURN_IF_ERROR(check_inner_contiguous(op, data_arg.c_str(), side.data));
  FLASHMSA_RETURN_IF_ERROR(check_aligned16(op, data_arg.c_str(), side.data));
  return Status::Ok();
}

Status check_kv_cache(const char* op, const PagedKvCache& kv, std::int64_t* num_pages,
                      std::int64_t* num_kv_heads) {
  FLASHMSA_RETURN_IF_ERROR(check_defined(op, "kv.k.data", kv.k.data));
  FLASHMSA_RETURN_IF_ERROR(check_rank(op, "kv.k.data", kv.k.data, 4));
  const std::int64_t h = kv.k.data.shape[1];
  if (h < 1 || h > kMaxKvHeads)
    return Status::InvalidArgument(op, "kv.k.data", "num_kv_heads (dim 1) in 1..8",
                                   kv.k.data.describe());
  FLASHMSA_RETURN_IF_ERROR(check_cache_side(op, "kv.k", kv.k, kv.format, h));
  FLASHMSA_RETURN_IF_ERROR(check_cache_side(op, "kv.v", kv.v, kv.format, h));
  if (kv.v.data.shape[0] != kv.k.data.shape[0])
    return Status::InvalidArgument(op, "kv.v.data",
                                   "num_pages " + to_string(kv.k.data.shape[0]) + " as kv.k",
                                   kv.v.data.describe());
  *num_pages = kv.k.data.shape[0];
  *num_kv_heads = h;
  return Status::Ok();
}

Status check_index_k_cache(const char* op, const IndexKCache& c, std::int64_t* num_pages) {
  FLASHMSA_RETURN_IF_ERROR(check_defined(op, "index_k.data", c.data));
  switch (c.format) {
    case KvFormat::bf16:
    case KvFormat::fp8:
      FLASHMSA_RETURN_IF_ERROR(check_dtype(op, "index_k.data", c.data,
                                           {c.format == KvFormat::bf16 ? DType::bf16 : DType::e4m3}));
      FLASHMSA_RETURN_IF_ERROR(check_shape(op, "index_k.data", c.data, {-1, 128, 128}));
      break;
    case KvFormat::nvfp4:
      FLASHMSA_RETURN_IF_ERROR(check_dtype(op, "index_k.data", c.data, {DType::u8}));
      FLASHMSA_RETURN_IF_ERROR(check_shape(op, "index_k.data", c.data, {-1, 128, 64}));
      FLASHMSA_RETURN_IF_ERROR(check_defined(op, "index_k.block_scale", c.block_scale));
      FLASHMSA_RETURN_IF_ERROR(
          check_dtype(op, "index_k.block_scale", c.block_scale, {DType::e4m3, DType::u8}));
      FLASHMSA_RETURN_IF_ERROR(
          check_shape(op, "index_k.block_scale", c.block_scale, {c.data.shape[0], 128, 8}));
      FLASHMSA_RETURN_IF_ERROR(check_inner_contiguous(op, "index_k.block_scale", c.block_scale));
      FLASHMSA_RETURN_IF_ERROR(
          check_positive_finite(op, "index_k.global_scale", c.global_scale));
      break;
  }
  FLASHMSA_RETURN_IF_ERROR(check_inner_contiguous(op, "index_k.data", c.data));
  FLASHMSA_RETURN_IF_ERROR(check_aligned16(op, "index_k.data", c.data));
  *num_pages = c.data.shape[0];
  return Status::Ok();
}

namespace {
inline std::int32_t at_i32(const TensorView& t, std::int64_t i) {
  return t.ptr<const std::int32_t>()[i * t.stride[0]];
}
inline std::int32_t at_i32(const TensorView& t, std::int64_t i, std::int64_t j) {
  return t.ptr<const std::int32_t>()[i * t.stride[0] + j * t.stride[1]];
}

Status check_block_table(const char* op, const TensorView& seq_lens, const TensorView& block_table,
                         std::int64_t num_pages) {
  const std::int64_t b = seq_lens.shape[0];
  FLASHMSA_RETURN_IF_ERROR(check_defined(op, "block_table", block_table));
  FLASHMSA_RETURN_IF_ERROR(check_dtype(op, "block_table", block_table, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(check_shape(op, "block_table", block_table, {b, -1}));
  FLASHMSA_RETURN_IF_ERROR(check_strides_nonnegative(op, "block_table", block_table));
  const std::int64_t width = block_table.shape[1];
  for (std::int64_t r = 0; r < b; ++r) {
    const std::int64_t pages = (static_cast<std::int64_t>(at_i32(seq_lens, r)) + kPageSize - 1) / kPageSize;
    if (pages > width)
      return Status::InvalidArgument(
          op, "block_table",
          "at least " + to_string(pages) + " pages per row for seq_lens[" + to_string(r) + "] = " +
              to_string(at_i32(seq_lens, r)),
          block_table.describe());
    for (std::int64_t j = 0; j < pages; ++j) {
      const std::int32_t phys = at_i32(block_table, r, j);
      if (phys < 0 || phys >= num_pages)
        return Status::InvalidArgument(
            op, "block_table[" + to_string(r) + ", " + to_string(j) + "]",
            "a physical page id in [0, " + to_string(num_pages) + ")", to_string(phys));
    }
  }
  return Status::Ok();
}

Status check_seq_lens_tensor(const char* op, const TensorView& seq_lens) {
  FLASHMSA_RETURN_IF_ERROR(check_defined(op, "seq_lens", seq_lens));
  FLASHMSA_RETURN_IF_ERROR(check_dtype(op, "seq_lens", seq_lens, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(check_rank(op, "seq_lens", seq_lens, 1));
  FLASHMSA_RETURN_IF_ERROR(check_strides_nonnegative(op, "seq_lens", seq_lens));
  for (std::int64_t r = 0; r < seq_lens.shape[0]; ++r) {
    const std::int32_t s = at_i32(seq_lens, r);
    if (s < 0 || s > kMaxContext)
      return Status::InvalidArgument(op, "seq_lens[" + to_string(r) + "]",
                                     "a length in [0, " + to_string(kMaxContext) + "]",
                                     to_string(s));
  }
  return Status::Ok();
}
}  // namespace

Status check_varlen_metadata(const char* op, const TensorView& cu_seqlens_q,
                             const TensorView& seq_lens, const TensorView& block_table,
                             std::int64_t total_q, std::int64_t num_pages) {
  FLASHMSA_RETURN_IF_ERROR(check_seq_lens_tensor(op, seq_lens));
  const std::int64_t b = seq_lens.shape[0];
  FLASHMSA_RETURN_IF_ERROR(check_defined(op, "cu_seqlens_q", cu_seqlens_q));
  FLASHMSA_RETURN_IF_ERROR(check_dtype(op, "cu_seqlens_q", cu_seqlens_q, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(check_shape(op, "cu_seqlens_q", cu_seqlens_q, {b + 1}));
  FLASHMSA_RETURN_IF_ERROR(check_strides_nonnegative(op, "cu_seqlens_q", cu_seqlens_q));
  if (at_i32(cu_seqlens_q, 0) != 0)
    return Status::InvalidArgument(op, "cu_seqlens_q[0]", "0", to_string(at_i32(cu_seqlens_q, 0)));
  for (std::int64_t r = 0; r < b; ++r) {
    const std::int64_t q_len = static_cast<std::int64_t>(at_i32(cu_seqlens_q, r + 1)) - at_i32(cu_seqlens_q, r);
    if (q_len < 0)
      return Status::InvalidArgument(op, "cu_seqlens_q", "a non-decreasing sequence",
                                     "cu_seqlens_q[" + to_string(r + 1) + "] = " +
                                         to_string(at_i32(cu_seqlens_q, r + 1)) + " < cu_seqlens_q[" +
                                         to_string(r) + "] = " + to_string(at_i32(cu_seqlens_q, r)));
    if (q_len > at_i32(seq_lens, r))
      return Status::InvalidArgument(
          op, "seq_lens[" + to_string(r) + "]",
          "a length >= the request's query length " + to_string(q_len),
          to_string(at_i32(seq_lens, r)));
  }
  if (at_i32(cu_seqlens_q, b) != total_q)
    return Status::InvalidArgument(op, "cu_seqlens_q[B]",
                                   "the number of query rows T = " + to_string(total_q),
                                   to_string(at_i32(cu_seqlens_q, b)));
  return check_block_table(op, seq_lens, block_table, num_pages);
}

Status check_decode_metadata(const char* op, const TensorView& seq_lens,
                             const TensorView& block_table, std::int64_t num_pages) {
  FLASHMSA_RETURN_IF_ERROR(check_seq_lens_tensor(op, seq_lens));
  return check_block_table(op, seq_lens, block_table, num_pages);
}

Status check_gqa(const char* op, std::int64_t num_q_heads, std::int64_t num_kv_heads) {
  if (num_kv_heads < 1 || num_kv_heads > kMaxKvHeads)
    return Status::InvalidArgument(op, "num_kv_heads", "1..8 (D10)", to_string(num_kv_heads));
  if (num_q_heads < 1 || num_q_heads % num_kv_heads != 0)
    return Status::InvalidArgument(op, "num_q_heads",
                                   "a multiple of num_kv_heads = " + to_string(num_kv_heads),
                                   to_string(num_q_heads));
  const std::int64_t g = num_q_heads / num_kv_heads;
  if (g != 1 && g != 2 && g != 4 && g != 8 && g != 16)
    return Status::InvalidArgument(op, "num_q_heads / num_kv_heads", "1, 2, 4, 8 or 16 (D10)",
                                   to_string(g));
  return Status::Ok();
}

}  // namespace flashmsa::detail

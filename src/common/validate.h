// Internal argument-validation helpers shared by every operation.
// Each returns a Status whose message names op, argument, expectation and value
// (see flashmsa/status.h). Use with FLASHMSA_RETURN_IF_ERROR.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "flashmsa/cache.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa::detail {

/// Argument must be present (non-null data).
Status check_defined(const char* op, const char* arg, const TensorView& t);
/// dtype must be one of `allowed`.
Status check_dtype(const char* op, const char* arg, const TensorView& t,
                   std::initializer_list<DType> allowed);
/// rank must equal `rank`.
Status check_rank(const char* op, const char* arg, const TensorView& t, int rank);
/// shape must match `expected`; -1 entries match anything. Checks rank too.
Status check_shape(const char* op, const char* arg, const TensorView& t,
                   std::initializer_list<std::int64_t> expected);
/// Innermost stride must be 1 and every stride non-negative.
Status check_inner_contiguous(const char* op, const char* arg, const TensorView& t);
/// Every stride must be non-negative (arbitrary layouts otherwise allowed).
Status check_strides_nonnegative(const char* op, const char* arg, const TensorView& t);
/// Data address and every non-innermost stride (in bytes) must be multiples of 16.
Status check_aligned16(const char* op, const char* arg, const TensorView& t);
/// Memory must be on `device`.
Status check_device(const char* op, const char* arg, const TensorView& t, Device device);
/// Device rule shared by the ops: the first defined tensor of `views` (argument name,
/// view) decides the device; a defined tensor on the other device is an InvalidArgument
/// naming it. *on_cuda tells which path runs (false when no tensor is defined).
using NamedView = std::pair<const char*, const TensorView*>;
Status resolve_device(const char* op, std::initializer_list<NamedView> views, bool* on_cuda);
/// Scalar must be finite and > 0.
Status check_positive_finite(const char* op, const char* arg, float value);

/// Full check of one cache side for `format` with `num_kv_heads` heads (-1 = any):
/// dtypes, rank 4, [pages, Hkv, 128, 128|64] (+ scales [pages, Hkv, 128, 8] for nvfp4),
/// innermost stride 1, 16-byte alignment, scale-plane contiguity when swizzled, and
/// global_scale (must be 1 for bf16). `arg` is e.g. "kv.k".
Status check_cache_side(const char* op, const char* arg, const PagedCacheSide& side,
                        KvFormat format, std::int64_t num_kv_heads);
/// Both sides of a K/V cache: same format rules, same num_pages and Hkv on both sides.
/// On success *num_pages and *num_kv_heads are set.
Status check_kv_cache(const char* op, const PagedKvCache& kv, std::int64_t* num_pages,
                      std::int64_t* num_kv_heads);
/// Index-K cache: [pages, 128, 128] bf16|e4m3 or u8 [pages, 128, 64] + e4m3 [pages, 128, 8].
Status check_index_k_cache(const char* op, const IndexKCache& cache, std::int64_t* num_pages);

/// Varlen metadata (prefill): cu_seqlens_q i32 [B+1] monotone from 0 to T, seq_lens i32 [B]
/// with q_len <= seq_len <= kMaxContext, block_table i32 [B, W] with
/// W >= ceil(seq_len / 128) for every request and every used entry in [0, num_pages).
Status check_varlen_metadata(const char* op, const TensorView& cu_seqlens_q,
                             const TensorView& seq_lens, const TensorView& block_table,
                             std::int64_t total_q, std::int64_t num_pages);
/// Decode metadata: seq_lens i32 [B] in [0, kMaxContext], block_table i32 [B, W] with
/// enough pages for each seq_len and used entries in [0, num_pages).
Status check_decode_metadata(const char* op, const TensorView& seq_lens,
                             const TensorView& block_table, std::int64_t num_pages);

/// GQA geometry of D10: head_dim 128, 1 <= Hkv <= 8, Hq % Hkv == 0, Hq/Hkv in {1,2,4,8,16}.
Status check_gqa(const char* op, std::int64_t num_q_heads, std::int64_t num_kv_heads);

std::string to_string(std::int64_t v);

/// printf("%g") of a float for error messages. The library formats its messages without
/// iostreams: inside the PyTorch extension built on the H200 image, std::ostream number
/// formatting crashed (libstdc++ headers newer than the runtime the python process loads).
std::string float_string(double v);

}  // namespace flashmsa::detail

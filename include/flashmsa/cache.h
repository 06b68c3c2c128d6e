// FlashMSA — paged KV / index-K caches: descriptors, views and the write path.
//
// Geometry (spec D10): page_size = 128 tokens, head_dim = 128, num_kv_heads 1..8.
// A "slot" is physical_page * 128 + offset_in_page; slot < 0 means "skip this token".
//
// Devices: every write-path op runs on the CPU when its tensors are on Device::cpu and
// on the GPU (SM90 kernels, asynchronous on `stream`, nullptr = default stream) when
// they are ALL on Device::cuda; the first tensor decides and a tensor on the other
// device is an InvalidArgument naming it. A build without CUDA kernels returns
// Unsupported for all-cuda arguments (after the same argument checks). The GPU writes
// bytes identical to the CPU backend, with two documented differences that come from
// not reading tensor contents on the host:
//   * slot_mapping is not range-checked: a slot >= num_pages*128 is SKIPPED (like a
//     negative slot) instead of being an InvalidArgument, and never written;
//   * duplicate slots (two tokens with the same slot >= 0): the CPU writes the last
//     token; on the GPU the bytes of that cache row (data and block scales) are
//     UNSPECIFIED (possibly a mix of the tokens). Rows of unique slots are unaffected.
//     vLLM's slot mappings never repeat a slot within a call.
#pragma once

#include <cstdint>

#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa {

inline constexpr int kPageSize = 128;   ///< tokens per KV page (spec 1.1)
inline constexpr int kHeadDim = 128;    ///< main and index head dimension (spec 1.1)
inline constexpr int kMaxTopk = 16;     ///< top-k blocks (spec 1.1)
inline constexpr int kMaxKvHeads = 8;   ///< D10
inline constexpr int kMaxContext = 1 << 20;  ///< 1,048,576 tokens = 8,192 pages (D10)

/// Storage format of a paged K/V cache (spec 4, D3).
enum class KvFormat {
  bf16,    ///< BF16 values
  fp8,     ///< FP8 E4M3 values, value = e4m3 * global_scale (k_scale / v_scale)
  nvfp4,   ///< E2M1 codes + E4M3 block scale per 16 dims + FP32 global scale
};
/// "bf16", "fp8" or "nvfp4" (used in messages and reports).
const char* kv_format_name(KvFormat f);

/// One side (K or V) of a paged cache, as strided views (D3). No copies are made:
/// vLLM's packed `[pages, Hkv, 128, 256]` cache is two views of it (packed_kv_views).
struct PagedCacheSide {
  /// bf16: bf16 [num_pages, Hkv, 128, 128]; fp8: e4m3 [num_pages, Hkv, 128, 128];
  /// nvfp4: u8 [num_pages, Hkv, 128, 64] (dim 2i in the low nibble of byte i).
  /// Innermost (dim) stride must be 1.
  TensorView data;
  /// nvfp4 only: e4m3 [num_pages, Hkv, 128, 8], one scale per 16 dims.
  /// When `scale_swizzled`, the per-(page, head) 128 x 8 plane must be contiguous
  /// (strides [.., .., 8, 1]) and scale (t, g) sits at nvfp4_scale_offset(t, g, true).
  /// All 128 token rows of every page must be addressable (the CUDA kernels copy a
  /// page's whole scale plane with the page; rows past seq_len are read, then ignored).
  /// Token rows 8-byte aligned (linear) or a 16-byte aligned plane (swizzled) take the
  /// asynchronous copy; other layouts work through slower plain loads.
  TensorView block_scale;
  bool scale_swizzled = false;
  /// fp8 and nvfp4: FP32 per-tensor scale (k_scale / v_scale), > 0, default 1.
  /// bf16: must be 1.
  float global_scale = 1.0f;
};

/// A layer's paged K/V cache: format + K side + V side.
struct PagedKvCache {
  KvFormat format = KvFormat::bf16;
  PagedCacheSide k;
  PagedCacheSide v;
};

/// Index-K cache (spec 4.4, D3): one shared index key per token.
struct IndexKCache {
  KvFormat format = KvFormat::bf16;
  /// bf16 / fp8: [num_pages, 128, 128] bf16 / e4m3 (fp8 has no scale, spec 2.1);
  /// nvfp4: u8 [num_pages, 128, 64]. Innermost stride 1.
  TensorView data;
  /// nvfp4 only: e4m3 [num_pages, 128, 8] linear block scales.
  TensorView block_scale;
  /// nvfp4 only: FP32 global scale (default 1). Index K value =
  /// E4M3_sat(e2m1 * block_scale) * global_scale (spec 2.1 item 4).
  float global_scale = 1.0f;
};

/// Views K = columns [0,128) and V = columns [128,256) of vLLM's packed
/// `[num_pages, Hkv, 128, 256]` BF16 or E4M3 cache (spec 4.1; HND or NHD strides
/// both work). `kv` must be rank 4 with last dim 256, innermost stride 1, 16-byte
/// aligned; bf16 for KvFormat::bf16 (k_scale = v_scale = 1), e4m3 for fp8 (scales
/// finite > 0). Errors: InvalidArgument naming 'kv', 'format' (nvfp4 has its own
/// layout: use nvfp4_head_slot_views), 'k_scale' / 'v_scale', or 'out' (null).
Status packed_kv_views(const TensorView& kv, KvFormat format, float k_scale, float v_scale,
                       PagedKvCache* out);

/// Views of vLLM's NVFP4 "head-slot" page `u8 [num_pages, 2*Hkv, 128, 72]`, contiguous
/// (spec 4.3): per page, K side then V side; per side a data region
/// `[Hkv, 128, 64]` followed by a scale region `[Hkv, 128, 8]`.
/// `k_swizzled` / `v_swizzled` select the 4x4 swizzled scale plane per side.
/// `kv` must be u8 rank 4 `[pages, 2*Hkv, 128, 72]`, contiguous, base 16-byte aligned.
/// Errors: InvalidArgument naming 'kv', 'k_scale' / 'v_scale' (finite > 0) or 'out'.
Status nvfp4_head_slot_views(const TensorView& kv, bool k_swizzled, bool v_swizzled,
                             float k_scale, float v_scale, PagedKvCache* out);

/// Writes new K/V rows into a paged cache (spec 4, D3, D7).
///   k, v          bf16 [T, Hkv, 128] (innermost stride 1)
///   slot_mapping  i32 [T]; slot = physical_page * 128 + offset; slot < 0 skips the token
///   cache         any KvFormat; fp8 stores E4M3_sat(x / global_scale); nvfp4 quantises
///                 each 16-dim block with nvfp4_quantize_block16(x, global_scale)
/// Alignment: k, v and the cache data 16-byte aligned (address and outer strides).
/// All checks run before any byte is written; duplicate slots: the last token wins
/// (CPU; unspecified row on the GPU, see the top of this file).
/// Errors: InvalidArgument naming the argument for dtype/rank/shape/stride/alignment
/// mismatches, mixed devices, Hkv of k/v vs cache, 'slot_mapping[i]' >= num_pages*128
/// (CPU only: the GPU skips such slots); Unsupported for cuda tensors in a build
/// without CUDA kernels.
Status cache_insert(const TensorView& k, const TensorView& v, const TensorView& slot_mapping,
                    const PagedKvCache& cache, void* stream = nullptr);

/// Writes index keys into an index-K cache (spec 2.1 items 4-5).
///   index_k       bf16 [T, 128]
///   slot_mapping  i32 [T] (index cache slot mapping; slot < 0 skips)
///   cache         bf16: copy; fp8: E4M3_sat(x) (no scale); nvfp4: block quantisation
/// index_k and the cache data 16-byte aligned. Errors: InvalidArgument naming the
/// argument ('index_k', 'slot_mapping[i]' (CPU only), 'index_k.data', ...);
/// Unsupported for cuda tensors in a build without CUDA kernels. GPU: as cache_insert.
Status index_cache_insert(const TensorView& index_k, const TensorView& slot_mapping,
                          const IndexKCache& cache, void* stream = nullptr);

/// FP8 query quantisation (D7, spec 5.1): q8 = E4M3_sat(q / q_scale).
///   q      bf16 [T, H, 128];  out  e4m3 [T, H, 128];  q_scale > 0 and finite.
/// Innermost strides 1, 16-byte aligned. Errors: InvalidArgument naming 'q', 'out' or
/// 'q_scale'; Unsupported for cuda tensors in a build without CUDA kernels.
Status quantize_query_e4m3(const TensorView& q, float q_scale, const TensorView& out,
                          void* stream = nullptr);

/// Dense NVFP4 -> E4M3 conversion, bitwise per spec 5.3:
///   out[r, d] = nvfp4_to_e4m3(code(packed[r, d/2], d%2), scale[r, d/16])
///   packed u8 [R, 64]; scale e4m3 (or u8) [R, 8]; out e4m3 [R, 128]; innermost strides 1;
///   packed and out 16-byte aligned (scale rows are 8 bytes apart: not required).
/// Errors: InvalidArgument naming 'packed', 'scale' or 'out'; Unsupported for cuda
/// tensors in a build without CUDA kernels.
Status nvfp4_to_fp8(const TensorView& packed, const TensorView& scale, const TensorView& out,
                    void* stream = nullptr);

/// Arguments of nvfp4_to_fp8_selected (spec 5.3, sparse variant of MSA's
/// SparsePagedNvfp4ToFp8Wrapper). All tensors on one device (all cpu or all cuda); i32
/// tensors need non-negative strides, e4m3 outputs innermost stride 1 and 16-byte
/// alignment.
struct Nvfp4ToFp8SelectedArgs {
  /// NVFP4 K/V cache (linear or swizzled scale planes, e.g. nvfp4_head_slot_views), Hkv
  /// heads, num_pages physical pages.
  PagedKvCache kv;
  /// i32 [R, Hkv, K], K in 1..16: logical page ids selected per row (query) and KV head
  /// (strided: token-major or head-major views both work, D3). An entry < 0 or
  /// >= W (block_table width) is skipped, as is one whose physical page is < 0 or
  /// >= num_pages. Duplicates count once.
  TensorView topk;
  /// i32 [B, W]: physical page of logical page l of request b. Row r of topk belongs to
  /// request r / rows_per_request (R = B * rows_per_request).
  TensorView block_table;
  int rows_per_request = 1;  ///< queries per request (MSA's q_len_per_req), >= 1
  /// e4m3 [capacity, 128, 128] each: compact pair c holds E4M3 K (V) of all 128 tokens of
  /// physical page pairs[c, 0], KV head pairs[c, 1], converted as nvfp4_to_fp8 does
  /// (bitwise nvfp4_to_e4m3; global scales are not applied, D7). Pair slots >= num_pairs
  /// are not written.
  TensorView k_out, v_out;
  /// i32 [capacity, 2]: (physical page, KV head) of each compact pair, sorted ascending by
  /// (page, head); rows >= num_pairs are not written.
  TensorView pairs;
  /// i32 [R, Hkv, K]: compact pair index of each top-k entry (so k_out[compact[r, h, k]]
  /// is the page that entry names), or -1 for a skipped entry.
  TensorView compact_topk;
  /// i32 [1]: number of unique pairs written (<= capacity), a device scalar on cuda.
  TensorView num_pairs;
  /// i32 [num_pages * Hkv], contiguous scratch; required on cuda (overwritten), may be
  /// left undefined on cpu.
  TensorView workspace;
  void* stream = nullptr;  ///< cudaStream_t for cuda tensors (nullptr = default stream)
};

/// Selected-pages NVFP4 -> E4M3 conversion (spec 5.3): deduplicates the (physical page,
/// KV head) pairs named by `topk` (mapped through `block_table`), converts each unique
/// pair's K and V page once into a compact E4M3 cache and writes the tables to address
/// it (pairs, compact_topk, num_pairs). The outputs are capacity-sized so that the call
/// never depends on tensor contents on the host (CUDA-graph safe): capacity = dim 0 of
/// k_out must be >= min(R * Hkv * K, num_pages * Hkv), which bounds the unique pairs.
/// Deterministic: pairs are numbered in ascending (page, head) order on both devices,
/// and the CPU and GPU write identical bytes. CUDA: asynchronous on `stream`, no host
/// synchronisation or allocation (memset + 4 small kernels; the numbering is a one-CTA
/// scan over num_pages * Hkv flags).
/// Errors: InvalidArgument naming the argument ('kv.format' (must be nvfp4), 'kv.k.data', ...,
/// 'topk', 'block_table', 'rows_per_request', 'k_out', 'v_out' (capacity too small),
/// 'pairs', 'compact_topk', 'num_pairs', 'workspace'), including mixed devices;
/// Unsupported for cuda tensors in a build without CUDA kernels.
Status nvfp4_to_fp8_selected(const Nvfp4ToFp8SelectedArgs& args);

}  // namespace flashmsa

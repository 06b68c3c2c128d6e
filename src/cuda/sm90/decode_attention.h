// Internal: SM90 sparse attention for decode and prefill (spec 3.1-3.4, 3.6, D1, D4-D7).
// Host-side interface, includable from plain C++ (no CUDA types).
//
// Design: one CTA of one or two warpgroups per (block of R consecutive query rows, KV
// head, KV split); tile rows are the R query rows x the G query heads of the KV head
// (decode: R = the request's Q drafts when they fit a 128-row tile). The CTA builds the
// sorted union of its rows' valid top-k pages, keyed by (request, logical page) (D1
// skipping rules, one bit per query row), and stages each union page once in shared
// memory (attn_tile.cuh: BF16 as is; FP8 / NVFP4 widened on chip to exact F16 images).
// Warpgroup w owns tile rows [64w, 64w+64) and all 128 tokens of a page: S = Q K^T and
// O = P V with wgmma, online softmax per row, a row masked where its query did not
// select the page or beyond its causal limit. With several splits every CTA writes its
// (O, LSE) partial to the workspace and the combine kernel merges them (session 34: the
// former merge by the last CTA of each tile was slower in every measured shape).
// By default a warp-specialised form runs (sparse_attention_ws_kernel): a producer
// warpgroup copies the pages (and widens E4M3 / NVFP4 into F16 tiles) behind mbarriers,
// and each consumer warpgroup issues page j's Q K^T before page j-1's P V. The serial
// form (sparse_attention_kernel: pages double buffered with cp.async, CTA barriers
// between copy wait, Q K^T, softmax and P V) runs the FP8 QGMMA opt-in and
// DecodeParams::serial_tile. The page union, the softmax step and the epilogue are shared
// (decode_tile.cuh). Prefill uses prefill_kvouter.h by default.
#pragma once

#include <cstdint>

namespace flashmsa::cuda {

/// Everything a decode launch needs; strides in elements of the pointed-to type.
struct DecodeParams {
  // Query: bf16 or e4m3 [rows, Hq, 128].
  const void* q = nullptr;
  std::int64_t q_row_stride = 0, q_head_stride = 0;
  // K/V sides: data (bf16 / e4m3 [pages, Hkv, 128, 128] or u8 [pages, Hkv, 128, 64]).
  const void* k_data = nullptr;
  const void* v_data = nullptr;
  std::int64_t k_stride[3] = {0, 0, 0};  // page, head, token
  std::int64_t v_stride[3] = {0, 0, 0};
  // NVFP4 block scales (u8/e4m3 [pages, Hkv, 128, 8]) and swizzle flags.
  const std::uint8_t* k_scale = nullptr;
  const std::uint8_t* v_scale = nullptr;
  std::int64_t ks_stride[3] = {0, 0, 0};
  std::int64_t vs_stride[3] = {0, 0, 0};
  bool k_swizzled = false, v_swizzled = false;
  // Metadata.
  const std::int32_t* topk = nullptr;  // [rows, Hkv, K]
  std::int64_t topk_stride[3] = {0, 0, 0};
  const std::int32_t* block_table = nullptr;  // [B, W]
  std::int64_t bt_stride[2] = {0, 0};
  std::int64_t bt_width = 0;
  const std::int32_t* seq_lens = nullptr;  // [B]
  std::int64_t seq_lens_stride = 1;
  // Prefill: cu_seqlens_q [B+1] (row r of request b at p = seq_len - q_len + r - cu[b]);
  // nullptr for decode (row b*Q + j at p = seq_len - Q + j).
  const std::int32_t* cu_seqlens = nullptr;
  std::int64_t cu_stride = 1;
  int batch = 0;               // B
  int num_rows = 0;            // T (prefill) or B * Q (decode)
  int queries_per_request = 1; // Q (decode)
  int queries_per_cta = 1;     // R query rows per CTA (queries_per_cta(), R * G <= 128)
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int topk_k = 16;
  std::int64_t num_pages = 0;
  // Scalars: c = softmax_scale * q_scale * k_global_scale; v_global multiplies the output.
  float c = 0.0f;
  float v_global = 1.0f;
  // Outputs: bf16 [rows, Hq, 128], optional f32 lse [rows, Hq].
  std::uint16_t* out = nullptr;
  std::int64_t out_row_stride = 0, out_head_stride = 0;
  float* lse = nullptr;
  std::int64_t lse_row_stride = 0, lse_head_stride = 0;
  // Split-KV workspace (num_splits > 1), one allocation of decode_workspace_floats()
  // 4-byte words, in this order:
  //   o_partial      f32 [rows, Hq, splits, 128]  per-split O, normalised by its own sum
  //   lse_partial    f32 [rows, Hq, splits]       per-split LSE (-inf: split saw nothing)
  // Every split CTA writes all of its slots in every launch (no zeroing needed) and the
  // combine kernel reads them. Launches that share a workspace must not overlap (one plan
  // per stream).
  int num_splits = 1;
  // Warp-MMA kernel only: merge the splits inside a thread-block cluster of the split
  // CTAs (distributed shared memory) instead of o_partial / lse_partial and the combine
  // kernel; the plan sets it when warp_mma_cluster_capacity() holds every cluster at once.
  bool cluster_merge = false;
  // Warp-MMA kernel: P V split by head dims across the warps (no O merge across warps,
  // two CTA barriers per page; warp_dsplit_decode_kernel) instead of by tokens.
  bool dims_split = false;
  // Tile kernel: the serial form (CTA barriers between the steps of every page) instead
  // of the warp-specialised one (FLASHMSA_DECODE_KERNEL=tile_serial; the FP8 formats'
  // QGMMA Q K^T, FLASHMSA_FP8_QK=e4m3, always runs the serial form).
  bool serial_tile = false;
  float* o_partial = nullptr;
  float* lse_partial = nullptr;
};

/// Query rows per CTA: decode keeps a request's Q drafts together when their Q*G rows
/// fit a 128-row tile; otherwise (and for prefill) min(32, 128 / G) consecutive rows.
int queries_per_cta(bool prefill, int queries_per_request, int group);

/// Prefill and decode share the kernel. kv_format: 0 = bf16, 1 = fp8, 2 = nvfp4
/// (flashmsa::KvFormat values); q_is_e4m3 selects the FP8 probability contract.
/// Returns a cudaError_t value (0 = success).
int launch_sparse_attention(const DecodeParams& p, int kv_format, bool q_is_e4m3, void* stream);

/// FP8 paths: true when FLASHMSA_FP8_QK=e4m3 asks for Q K^T on E4M3 wgmma (faster,
/// reduced-precision accumulation); by default it runs on exact F16 images (spec D7).
bool fp8_qk_on_e4m3_mma();

/// Split count heuristic of the tile kernel (ctas = query blocks x KV heads, one CTA per
/// SM): 16 splits (one page each for a full top-16 row) when ctas * 16 <= num_sms;
/// otherwise the most splits whose CTAs fit one wave, floor(num_sms / ctas), capped at 8
/// so that every split keeps >= 2 pages of a top-16 row; 1 when ctas > num_sms / 2.
/// Splitting never pushes a grid into a second wave: each CTA pays a fixed cost (page
/// union, Q tile, pipeline fill and drain) of several microseconds, and a second wave
/// pays it again.
/// H200, session 34 (runs D and E, FP8, Q 8, 24-512 CTAs of 64 and 128 tile rows, splits
/// 1-8 forced): this rule was the fastest or within 3 % of it in all 41 shapes; the
/// previous rule, ceil(num_sms / ctas), ran b32 Q8 at 64/4 heads (128 CTAs) with 2 splits
/// in 2 waves, 1.15-2.0x slower than 1 split.
int choose_num_splits(long long num_rows, int queries_per_cta, int num_kv_heads, int num_sms);

/// Which decode kernel a plan runs, with its tiling (choose_decode_schedule).
struct DecodeSchedule {
  bool warp_mma = false;    // launch_sparse_attention_warp_mma, else launch_sparse_attention
  bool dims_split = false;  // warp_mma with DecodeParams::dims_split (see below)
  bool kernel_forced = false;  // FLASHMSA_DECODE_KERNEL chose warp_mma / dims_split / tile / tile_serial
  bool serial_tile = false;    // tile kernel: DecodeParams::serial_tile
  int queries_per_cta = 1;  // DecodeParams::queries_per_cta (1 for the warp-MMA kernel)
  int num_splits = 1;       // DecodeParams::num_splits
};

/// Decode schedule for batch x Q query rows on a GPU with num_sms SMs. The warp-MMA
/// kernel (one CTA per (query row, KV head, split)) when rows x KV heads <= SMs (small
/// batches, where the wgmma tile kernel would leave most of the GPU idle), and at any
/// batch for Q 1, where the tile kernel's M tile would use at most 16 of its 128 rows
/// (measured with 16 heads per KV head in decode_attention.cu, session 15); its split
/// count is the largest <= 16 that fits one wave, then lowered to ceil(16 / pages per
/// split) so that no split of a 16-page row is left without pages (the plan then lowers
/// 16 or 8 splits whose clusters do not all fit, SparseDecodePlan::plan). The warp-MMA kernel
/// splits P V by head dims across its warps (dims_split) when each split CTA holds at
/// most one page of a full row (16 splits), or two pages (8 splits) of a BF16 cache;
/// with more pages per CTA its two CTA barriers per page cost more than the token split's
/// single merge (H200, session 14: b1 Q1 4K 64/4 BF16 7.5 us against 9.1; b1 Q8 4K 64/4
/// FP8, 4 pages per CTA, 18.6 against 12.5; docs/decode-design.md). Otherwise the tile
/// kernel with queries_per_cta() and choose_num_splits(). FLASHMSA_DECODE_KERNEL=
/// warp_mma|warp_mma_dsplit|tile|tile_serial forces a kernel (benchmark and test hook,
/// logged once; tile_serial: the tile kernel's serial form, DecodeParams::serial_tile).
/// bf16: the cache format is BF16 (KvFormat::bf16).
DecodeSchedule choose_decode_schedule(int batch, int queries_per_request, int num_q_heads, int num_kv_heads,
                                      int num_sms, bool bf16);

/// The automatic dims-split rule of choose_decode_schedule for num_splits warp-MMA splits.
bool warp_mma_dims_split(int num_splits, bool bf16);

/// The warp-MMA decode kernel (decode_warp_mma.cu): decode only (cu_seqlens == nullptr),
/// queries_per_cta ignored (one query row per CTA), group size <= 16, top-k <= 16. The
/// split merge runs in a thread-block cluster (p.cluster_merge; no workspace needed) or
/// in the combine kernel (o_partial / lse_partial as for launch_sparse_attention; the
/// split counters are not used). Same formats and numerics as launch_sparse_attention;
/// the two merges order their float operations differently, so their bits differ (each
/// is deterministic, D9). Returns a cudaError_t value.
int launch_sparse_attention_warp_mma(const DecodeParams& p, int kv_format, bool q_is_e4m3, void* stream);

/// Clusters of `num_splits` warp-MMA CTAs the current GPU holds at once (0: none). The
/// warp-MMA kernel merges its splits inside such a cluster (distributed shared memory)
/// when all rows x KV heads clusters fit at once, else through the combine kernel. The
/// plan lowers 16 splits whose clusters do not fit to 8 when those fit
/// (SparseDecodePlan::plan_cuda).
int warp_mma_cluster_capacity(int kv_format, int num_splits, bool dims_split = false);

/// The split-merge kernel alone (after a launch that wrote o_partial / lse_partial),
/// as a programmatic dependent launch. Returns a cudaError_t value.
int launch_split_combine(const DecodeParams& p, void* stream);

/// Workspace 4-byte words for the given shape and split count (0 when splits == 1):
/// o_partial and lse_partial (layout at DecodeParams::o_partial).
std::int64_t decode_workspace_floats(int num_rows, int num_q_heads, int num_splits);

/// Device helpers used by the plan (return cudaError_t values).
int device_malloc(void** ptr, std::int64_t bytes);
int device_free(void* ptr);
int device_sm_count(int* count);
int device_ordinal(int* ordinal);
const char* error_string(int err);
/// True when `err` (a cudaError_t value) is cudaErrorMemoryAllocation.
bool is_out_of_memory(int err);

}  // namespace flashmsa::cuda

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
// select the page or beyond its causal limit. With several splits the per-split
// (O, LSE) are merged by a combine kernel. Pages are
// double buffered with cp.async. Prefill uses prefill_kvouter.h by default.
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
  // Split-KV workspace: o_partial f32 [rows, Hq, splits, 128], lse_partial f32 [rows, Hq, splits].
  int num_splits = 1;
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

/// Split count heuristic: enough CTAs (one per SM) to fill one wave, at most 8 splits.
int choose_num_splits(long long num_rows, int queries_per_cta, int num_kv_heads, int num_sms);

/// Workspace floats needed for the given shape and split count (0 when splits == 1).
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

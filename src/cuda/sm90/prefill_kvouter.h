// Internal: SM90 KV-outer sparse attention for prefill (the MSA design, spec 3.5; D1,
// D4-D9). Host-side interface, includable from plain C++ (no CUDA types). Sources:
// prefill_plan.cu (stage 1), prefill_attention.cu (2), prefill_kvouter.cu (3 and the
// launch), prefill_kvouter_detail.cuh (what they share).
//
// Three stages on one stream, no host synchronisation, graph-capturable (the workspace
// is a stream-ordered allocation from FlashMSA's private pool, workspace_pool.h):
//   1. plan: per KV head, a CSR from every (request, logical page) "row" to the
//      (query, top-k slot) entries that selected it (D1 validation, duplicates once):
//      a counting pass, one thread per top-k slot, with warp-aggregated atomics on 8
//      sub-counters per row (32 on hot rows, 1 for huge plans) that also rank each slot,
//      exclusive scans of entries and work units per row (reduce-then-scan; small plans
//      do it inside the next pass), a pass writing each row's sub-range starts and
//      work-unit descriptors (ranked for the dispatch order), a fill pass (which first
//      sorts the units into that order) placing each slot at its start plus its rank. The order inside a
//      row is not fixed, and does not need to be: every
//      entry's partial depends only on its own query row and page, never on its tile
//      neighbours.
//   2. attention: persistent CTAs (2 consumer warpgroups, M = 128 gathered (query, head)
//      rows) take work units = (row, up to 28 or 32 M-tiles, by shape) from a dynamic
//      schedule (ticket counter over the plan's order: KV head, then largest units
//      first; outputs do not depend on it). The page is loaded
//      once per unit (double-buffered across units), the Q tiles are gathered by TMA
//      two tiles ahead and each warpgroup issues tile n+1's QK wgmma before
//      tile n's epilogue; S = Q K^T and O = P V on wgmma (attn_tile.cuh), one
//      single-page softmax per (query, head); the unnormalised partial O (BF16)
//      (stored by TMA, one box per query) and its (log scale m c, normaliser l) pair
//      (FP32) go to [T, K, Hq, 128] / [T, K, Hq, 2] at the entry's slot (query-major).
//   3. combine: per (query, head), the valid slots in ascending order, w_j = exp(s_j - M):
//      O = BF16(v_global * sum w_j O_j / sum w_j l_j), LSE = M + ln sum w_j l_j (- ln 448
//      on the FP8 paths); empty rows give 0 and -inf (D5).
#pragma once

#include <cstdint>

namespace flashmsa::cuda {

/// Everything a KV-outer prefill launch needs; strides in elements of the pointed-to type.
struct PrefillParams {
  const void* q = nullptr;  // bf16 | e4m3 [T, Hq, 128]
  std::int64_t q_row_stride = 0, q_head_stride = 0;
  const void* k_data = nullptr;
  const void* v_data = nullptr;
  std::int64_t k_stride[3] = {0, 0, 0};  // page, head, token
  std::int64_t v_stride[3] = {0, 0, 0};
  const std::uint8_t* k_scale = nullptr;  // NVFP4 block scales
  const std::uint8_t* v_scale = nullptr;
  std::int64_t ks_stride[3] = {0, 0, 0};
  std::int64_t vs_stride[3] = {0, 0, 0};
  bool k_swizzled = false, v_swizzled = false;
  const std::int32_t* topk = nullptr;  // [T, Hkv, K]
  std::int64_t topk_stride[3] = {0, 0, 0};
  int topk_k = 16;
  const std::int32_t* block_table = nullptr;  // [B, W]
  std::int64_t bt_stride[2] = {0, 0};
  std::int64_t bt_width = 0;
  const std::int32_t* seq_lens = nullptr;  // [B]
  std::int64_t seq_lens_stride = 1;
  const std::int32_t* cu_seqlens = nullptr;  // [B+1]
  std::int64_t cu_stride = 1;
  int batch = 0;
  int num_rows = 0;  // T
  int num_q_heads = 0;
  int num_kv_heads = 0;
  std::int64_t num_pages = 0;
  bool q_e4m3 = false;    // q is E4M3 (the FP8 / NVFP4 formats); must match kv_format != 0
  float c = 0.0f;         // softmax_scale * q_scale * k_global_scale
  float v_global = 1.0f;  // multiplies the output
  std::uint16_t* out = nullptr;  // bf16 [T, Hq, 128]
  std::int64_t out_row_stride = 0, out_head_stride = 0;
  float* lse = nullptr;  // optional f32 [T, Hq]
  std::int64_t lse_row_stride = 0, lse_head_stride = 0;
  /// Benchmark hook (FLASHMSA_PREFILL_STOP_AFTER): 0 = run everything, 1 = stop after
  /// the plan, 2 = stop after the attention kernel (the output is then not written).
  int stop_after = 0;
};

/// Most partial rows (top-k x T x Hq) one launch takes: the kernels index them with 32-bit
/// ints (the partials alone would be 512 GiB). Larger launches return cudaErrorInvalidValue.
constexpr std::int64_t kMaxPartialRows = 0x7fffffff;
/// Most query rows T one launch takes (the kernels hold query rows in ints; the partial
/// rows' bound above is the tighter one whenever K Hq >= 16). Larger launches return
/// cudaErrorInvalidValue.
constexpr std::int64_t kMaxQueryRows = std::int64_t{1} << 27;

/// Device workspace bytes of one launch (host-known capacities only: T, Hq, Hkv, K, B, W,
/// and the tiles per work unit, which also depend on the current device's SM count and
/// FLASHMSA_PREFILL_TILES_PER_UNIT; the launch on the same device computes the same).
std::int64_t prefill_kvouter_workspace_bytes(const PrefillParams& p);

/// Plan + attention + combine on `stream` (cudaStream_t). kv_format: 0 = bf16 (q bf16),
/// 1 = fp8, 2 = nvfp4 (q e4m3). Returns a cudaError_t value (0 = success).
int launch_prefill_kvouter(const PrefillParams& p, int kv_format, void* stream);

}  // namespace flashmsa::cuda

// Internal: SM90 kernels of the MSA lightning indexer (spec 2.2-2.8, D1, D2, D4, D5).
// Host-side interface, includable from plain C++ (no CUDA types).
//
// Tensor-core version (issue 5). Three kernels on the stream, no host reads:
//  1. (prefill only) tile map: query rows cut into tiles of up to 128 / H rows that never
//     span two requests (one CTA scans cu_seqlens; workspace sized from T and B).
//  2. page scores: grid (tile, page chunk); a CTA holds the tile's index q as a 128-row
//     SW128 A tile (score row = query row x head; decode: the Q drafts of one request)
//     and streams the chunk's pages through a cp.async pipeline: cache bytes straight
//     into SW128 B stages (4 x 16 KB E4M3 for QGMMA, 2 x 32 KB BF16), or, when K must be
//     converted, raw pages into a ring (3 x 16 KB E4M3, 4 x 9 KB NVFP4) converted smem ->
//     smem into one B tile per page; each page is one N = 128 wgmma tile per warpgroup
//     (HGMMA BF16 by default, E4M3 and NVFP4 K widened or dequantised on chip: exact;
//     QGMMA E4M3 only when selected, see Fp8Qk), FP32 accumulation; the epilogue takes each
//     row's max over the page's 128 tokens (fmaxf: NaN tokens ignored, NaN only when all
//     are NaN, as the CPU backend), times the NVFP4 global scale, for the rows whose
//     local page is beyond it. Sums are tensor-core FP32 sums: not bit-identical to the
//     CPU's sequential sums (policy D8: 2e-4 relative), deterministic run to run.
//     Decode with an E4M3 index q over an E4M3 / NVFP4 index-K cache, scored exactly,
//     with at most 64 score rows per request (and 16-byte aligned views, batch <= 4096)
//     uses decode_score_kernel instead: the page as the M side of mma.sync m16n8k16
//     (F16 operands, exact), one page per warp streamed through a per-warp cp.async
//     ring with the A fragments converted in registers, one wave of CTAs balanced by
//     pages across requests (see the kernel's comment and docs/architecture.md).
//  3. top-k: one CTA per (row, head) (one warp per 1,024 pages, up to 8 warps), 32
//     candidates per thread in four groups of eight, exact D1/D2 selection by a
//     tournament on the order-preserving score key (K-1 rounds whatever the scores:
//     cost independent of ties), and page_scores output.
// The workspace (f32 [T, H, round_up(W, 8)] + the tile map) is allocated with
// a stream-ordered allocation (workspace_pool.h) from the shapes (T, H, block-table width
// W, B), never from lengths.
//
// Metadata contents are never read on the host: rows outside every request are left
// untouched, block-table entries outside [0, num_pages) and history pages beyond the
// block-table width score NaN (rank last), page_scores entries beyond its width are not
// written. No out-of-range memory access happens for any metadata contents.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashmsa::cuda {

/// How E4M3 index q x E4M3 / NVFP4 index K is scored (BF16 q or K always uses HGMMA).
///  kExact: E4M3 values widened to BF16 (exact) and summed by HGMMA in FP32 (default).
///  kE4m3: QGMMA, one chain of four k32 wgmmas per page. Hopper's E4M3 wgmma sums with a
///    reduced-precision aligner: measured on the H200 up to ~2e-3 of the row max on
///    adversarial data (D8 allows 2e-4). Opt-in only. Decode over an NVFP4 index K (at
///    most 64 score rows per request) runs it in the warpgroup decode scorer on the
///    dequantised E4M3 bytes (session 31: 2.4-2.8 TB/s of index-K bytes, against 2.1-2.4
///    for the exact per-warp kernel); prefill over an E4M3 index K on the 256-row wide
///    tiles (session 31: 839 TF/s at (2048, 1M, 4 heads), against 536 exact); otherwise
///    in the 128-row tile kernel.
///  kE4m3Split: QGMMA, each k32 wgmma into a fresh zero accumulator, the four partials
///    summed in FP32 on the CUDA cores (promotion every 32 products). Its accuracy on
///    adversarial data is measured by test_cuda_indexer (Fp8QkPrecision).
/// kDefault resolves to indexer_fp8_qk_default(): FLASHMSA_FP8_QK = e4m3 | e4m3_split |
/// exact, read once and logged once (anything else: exact), unless overridden by
/// set_indexer_fp8_qk_default.
enum class Fp8Qk : int { kDefault = -1, kExact = 0, kE4m3 = 1, kE4m3Split = 2 };

/// The mode kDefault stands for (see Fp8Qk).
Fp8Qk indexer_fp8_qk_default();
/// Overrides the process default (tests, benchmarks); kDefault restores the env value.
void set_indexer_fp8_qk_default(Fp8Qk mode);
/// "exact" | "e4m3" | "e4m3_split".
const char* fp8_qk_name(Fp8Qk mode);

/// The page-scoring kernel of the process's last launch_indexer call that scored pages
/// (for tests: which path ran). kTile: score_kernel on 128-row tiles; kWide: on 256-row
/// tiles; kDecodeWarp: decode_score_kernel (NVFP4, exact); kDecodeWg:
/// decode_score_wg_kernel (E4M3, exact); kDecodeWgQ8: decode_score_wg_kernel on QGMMA
/// (NVFP4, Fp8Qk::kE4m3).
enum class IndexerScoreKernel : int { kNone = 0, kTile, kWide, kDecodeWarp, kDecodeWg, kDecodeWgQ8 };
IndexerScoreKernel indexer_last_score_kernel();

struct IndexerParams {
  Fp8Qk fp8_qk = Fp8Qk::kDefault; // E4M3 x E4M3 / NVFP4 scoring path
  const void* q = nullptr;        // bf16 | e4m3 [T, H, 128]; strides in elements
  bool q_e4m3 = false;
  std::int64_t q_stride[2] = {0, 0};  // row, head
  int k_format = 0;               // 0 bf16, 1 fp8 (e4m3), 2 nvfp4 (KvFormat values)
  const unsigned char* k_data = nullptr;
  std::int64_t k_stride[2] = {0, 0};   // bytes: page, token
  const unsigned char* k_scale = nullptr;  // nvfp4: e4m3 [pages, 128, 8]
  std::int64_t ks_stride[2] = {0, 0};  // bytes: page, token
  float k_global = 1.0f;
  std::int64_t num_pages = 0;
  const std::int32_t* block_table = nullptr;
  std::int64_t bt_stride[2] = {0, 0};
  std::int64_t bt_width = 0;
  const std::int32_t* seq_lens = nullptr;
  std::int64_t seq_stride = 0;
  const std::int32_t* cu_seqlens = nullptr;  // prefill; nullptr = decode
  std::int64_t cu_stride = 0;
  int batch = 0;
  int queries_per_request = 1;    // decode
  std::int64_t num_rows = 0;
  int heads = 0;
  std::int32_t* topk = nullptr;
  std::int64_t topk_stride[3] = {0, 0, 0};
  int topk_k = 1;
  float* page_scores = nullptr;   // optional
  std::int64_t ps_stride[3] = {0, 0, 0};
  std::int64_t ps_width = 0;
};

/// Runs the kernels on `stream` (a cudaStream_t, nullptr = default stream). With
/// `workspace` == nullptr the workspace is taken on the stream from FlashMSA's private
/// memory pool (workspace_pool.h);
/// otherwise `workspace` (device, `workspace_bytes` >= indexer_workspace_bytes(p)) is
/// used and nothing is allocated. Returns 0 or a cudaError_t value.
int launch_indexer(const IndexerParams& p, void* stream, void* workspace = nullptr,
                   std::size_t workspace_bytes = 0);

/// Workspace bytes launch_indexer needs for rows x heads x block-table width (decode:
/// batch = rows / Q requests; prefill adds the tile map).
std::size_t indexer_workspace_bytes(std::int64_t rows, int heads, std::int64_t width, int batch,
                                    bool prefill);

/// cudaMalloc / cudaFree on the current device (0 or a cudaError_t value).
int indexer_device_malloc(void** ptr, std::size_t bytes);
int indexer_device_free(void* ptr);

/// topk_select on device tensors: scores f32 [rows, width] (strides in elements),
/// local_page i32 [rows], topk i32 [rows, k]. Columns >= width rank as NaN.
struct TopkSelectParams {
  const float* scores = nullptr;
  std::int64_t s_stride[2] = {0, 0};
  std::int64_t width = 0;
  const std::int32_t* local_page = nullptr;
  std::int64_t lp_stride = 0;
  std::int32_t* topk = nullptr;
  std::int64_t topk_stride[2] = {0, 0};
  int k = 1;
  std::int64_t rows = 0;
};

/// Runs topk_select on `stream`. Returns 0 or a cudaError_t value.
int launch_topk_select(const TopkSelectParams& p, void* stream);

/// cudaGetErrorString of a value returned above.
const char* indexer_error_string(int err);

}  // namespace flashmsa::cuda

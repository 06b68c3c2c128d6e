// Internal: SM90 kernels of the MSA lightning indexer (spec 2.2-2.8, D1, D2, D4, D5).
// Host-side interface, includable from plain C++ (no CUDA types).
//
// First version, exactness before speed. Pass 1 (one CTA of 128 threads per (page,
// block of rows)): the index-K page is decoded to FP32 in shared memory (transposed,
// [dim][token]); thread t computes the dot product of token t with each (row, head)
// query vector as the sequential FP32 sum over d = 0..127 with __fmul_rn / __fadd_rn
// (no FMA), the same operation sequence as the CPU backend, then the page max over the
// 128 tokens in token order ('>' comparisons, NaN ignored, NaN only when all 128 dot
// products are NaN), times the nvfp4 global scale: page scores are bitwise equal to
// src/cpu/indexer_cpu.cpp. Scores go to a device workspace f32 [rows, H, W] (W = block
// table width) allocated with cudaMallocAsync on the stream. Pass 2 (one thread per
// (row, head)): the D1/D2 selection of select_topk_row, and page_scores if requested.
//
// Metadata contents are never read on the host: rows outside every request are left
// untouched, block-table entries outside [0, num_pages) and history pages beyond the
// block-table width score NaN (rank last), page_scores entries beyond its width are not
// written. No out-of-range memory access happens for any metadata contents.
#pragma once

#include <cstdint>

namespace flashmsa::cuda {

struct IndexerParams {
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

/// Runs both passes on `stream` (a cudaStream_t, nullptr = default stream). Returns 0 or
/// a cudaError_t value.
int launch_indexer(const IndexerParams& p, void* stream);

/// cudaGetErrorString of a value returned above.
const char* indexer_error_string(int err);

}  // namespace flashmsa::cuda

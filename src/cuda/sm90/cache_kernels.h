// Internal: SM90 kernels of the cache write path (spec 4.1-4.4, 5.1-5.3, D3, D7).
// Host-side interface, includable from plain C++ (no CUDA types).
//
// Every kernel maps 16 threads to one 128-dim row; thread j owns dims [8j, 8j+8): one
// 16-byte bf16 load, then a 16-byte (bf16), 8-byte (E4M3) or 4-byte (NVFP4 codes) store;
// the even thread of each pair writes the 16-dim block's E4M3 scale byte. Conversions
// are bit-identical to src/common/numerics.cpp (software E4M3 RNE-saturating rounding,
// the comparison-based E2M1 rounding, the nvfp4_quantize_block16 operation order with
// IEEE __fmul_rn / __fdiv_rn). Slots < 0 or >= num_slots are skipped (the host does not
// read slot_mapping contents on the GPU path). Duplicate slots: undefined (see cache.h).
#pragma once

#include <cstdint>

namespace flashmsa::cuda {

/// One destination side (K, V or the index-K cache). Strides in BYTES.
struct CacheSideParams {
  unsigned char* data = nullptr;          // row of (page, head, token) at page*s0 + head*s1 + tok*s2
  std::int64_t data_stride[3] = {0, 0, 0};
  unsigned char* scale = nullptr;         // nvfp4 only: scale plane of (page, head)
  std::int64_t scale_stride[4] = {0, 0, 0, 0};  // page, head, token, group (linear planes)
  bool swizzled = false;                  // 4x4 swizzled 128 x 8 plane (contiguous)
  float global_scale = 1.0f;              // fp8: divisor; nvfp4: global scale
};

/// cache_insert (num_sides = 2: K then V) and index_cache_insert (num_sides = 1, heads 1).
struct CacheInsertParams {
  const std::uint16_t* src[2] = {nullptr, nullptr};  // bf16 [T, H, 128]; strides in elements
  std::int64_t src_stride[2][2] = {{0, 0}, {0, 0}};   // token, head
  const std::int32_t* slots = nullptr;
  std::int64_t slot_stride = 1;
  std::int64_t num_tokens = 0;
  int num_heads = 1;
  int num_sides = 2;
  std::int64_t num_slots = 0;  // num_pages * 128
  int format = 0;              // 0 bf16, 1 fp8, 2 nvfp4 (KvFormat values)
  CacheSideParams side[2];
};

int launch_cache_insert(const CacheInsertParams& p, void* stream);

/// q8 = E4M3_sat(q / q_scale): q bf16 [T, H, 128], out e4m3 [T, H, 128] (strides in elements).
struct QuantizeQueryParams {
  const std::uint16_t* q = nullptr;
  std::int64_t q_stride[2] = {0, 0};
  unsigned char* out = nullptr;
  std::int64_t out_stride[2] = {0, 0};
  std::int64_t num_tokens = 0;
  int num_heads = 0;
  float q_scale = 1.0f;
};

int launch_quantize_query_e4m3(const QuantizeQueryParams& p, void* stream);

/// Dense NVFP4 -> E4M3: packed u8 [R, 64], scale [R, 8], out e4m3 [R, 128] (row strides).
struct Nvfp4ToFp8Params {
  const unsigned char* packed = nullptr;
  std::int64_t packed_stride = 0;
  const unsigned char* scale = nullptr;
  std::int64_t scale_stride = 0;
  unsigned char* out = nullptr;
  std::int64_t out_stride = 0;
  std::int64_t rows = 0;
};

int launch_nvfp4_to_fp8(const Nvfp4ToFp8Params& p, void* stream);

/// Selected-pages NVFP4 -> E4M3 (flashmsa::nvfp4_to_fp8_selected, spec 5.3). Element
/// strides for the i32 tensors, byte strides for the caches and outputs.
struct Nvfp4SelectedParams {
  CacheSideParams side[2];                   // nvfp4 K and V (data + scale planes)
  int num_heads = 1;                         // Hkv
  std::int64_t num_pages = 0;                // physical pages of the cache
  const std::int32_t* topk = nullptr;        // [R, Hkv, K] logical page ids
  std::int64_t topk_stride[3] = {0, 0, 0};
  std::int64_t rows = 0;                     // R
  int topk_k = 0;                            // K
  const std::int32_t* block_table = nullptr;  // [B, W]
  std::int64_t bt_stride[2] = {0, 0};
  std::int64_t bt_width = 0;                 // W
  std::int64_t rows_per_request = 1;
  unsigned char* out[2] = {nullptr, nullptr};  // e4m3 [capacity, 128, 128] K, V
  std::int64_t out_stride[2][2] = {{0, 0}, {0, 0}};  // pair, token (bytes)
  std::int32_t* pairs = nullptr;             // [capacity, 2]
  std::int64_t pairs_stride[2] = {0, 0};
  std::int32_t* compact = nullptr;           // [R, Hkv, K]
  std::int64_t compact_stride[3] = {0, 0, 0};
  std::int32_t* num_pairs = nullptr;         // [1]
  std::int32_t* workspace = nullptr;         // [num_pages * Hkv], contiguous
  std::int64_t capacity = 0;
};

/// Marks the selected (page, head) pairs in the workspace, numbers them in (page, head)
/// order (one-CTA scan), writes pairs / num_pairs / compact ids, then converts the first
/// num_pairs (read on the device) of `capacity` pair slots. No host synchronisation.
int launch_nvfp4_to_fp8_selected(const Nvfp4SelectedParams& p, void* stream);

/// cudaGetErrorString of a value returned above.
const char* cache_error_string(int err);

}  // namespace flashmsa::cuda

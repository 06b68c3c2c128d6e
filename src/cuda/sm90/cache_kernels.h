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

/// cudaGetErrorString of a value returned above.
const char* cache_error_string(int err);

}  // namespace flashmsa::cuda

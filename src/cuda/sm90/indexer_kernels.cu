// SM90 indexer kernels: see indexer_kernels.h.
#include "cuda/sm90/indexer_kernels.h"
#include "cuda/sm90/workspace_pool.h"

#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda/sm90/decode_attention.h"
#include "cuda/sm90/gmma.cuh"

#include <cute/arch/mma_sm80.hpp>

namespace flashmsa::cuda {
namespace {

namespace g = sm90::gmma;

constexpr int kPage = 128;         // tokens per page = N of one wgmma tile
constexpr int kThreads = 256;      // two warpgroups, 64 (wide tiles: 128) score rows each
constexpr int kTileRows = 128;     // score rows (query row x head) per CTA
// Prefill over a BF16 or E4M3 index-K (BF16 images: pre-converted, or widened in shared
// memory): 256 score rows per CTA (each warpgroup two 64-row wgmma blocks on the same
// page), one CTA per SM. Each page byte brought into shared memory feeds twice the FLOPs
// of a 128-row tile.
constexpr int kWideRows = 256;
constexpr int kMapThreads = 1024;  // tile-map kernel
constexpr int kMaxCandidates = 8192;  // D10: at most 8,192 history pages per row

// How a page tile reaches shared memory.
enum Loader : int {
  kCopy = 0,          // cp.async of the cache bytes (E4M3 K for the FP8 path, BF16 K for BF16)
  kE4m3ToBf16 = 1,    // E4M3 K widened to BF16 (exact), BF16 path
  kNvfp4ToE4m3 = 2,   // NVFP4 K dequantised to E4M3_sat(e2m1 x scale), FP8 path
  kNvfp4ToBf16 = 3,   // the same E4M3 values widened to BF16 (exact), BF16 path
};

template <bool kFp8, int kM = kTileRows>
struct Cfg {
  static constexpr int kRowBytes = kFp8 ? 128 : 256;       // one token / one score row
  static constexpr int kStages = kFp8 || kM == kWideRows ? 4 : 2;
  static constexpr int kATile = kM * kRowBytes;              // 16 / 32 / 64 KB
  static constexpr int kBTile = kPage * kRowBytes;           // 16 / 32 KB
  static constexpr int kSmem = kATile + kStages * kBTile + 1024;  // + 1024 B alignment slack
};

// Converting loaders (kLoad != kCopy): raw ring of raw_stages x raw_stage_bytes (NVFP4:
// 8 KB codes + 1 KB scales per page) plus one converted B tile. NVFP4: 4 x 9 KB.
constexpr int raw_stage_bytes(int load) { return load == kNvfp4ToE4m3 || load == kNvfp4ToBf16 ? 9216 : 16384; }
// E4M3 -> BF16: 32 KB A + 32 KB B + 3 x 16 KB raw + 1 KB slack = 113 KB, two CTAs per SM
// exactly (2 x (113 + 1 reserved) KB = 228 KB): up to 6 pages (96 KB) in flight per SM.
// Wide tiles (E4M3 -> BF16): a ring of 4 raw pages and two converted B tiles.
template <int kM>
constexpr int raw_stages(int load) {
  return kM == kWideRows ? 4 : load == kNvfp4ToE4m3 || load == kNvfp4ToBf16 ? 4 : 3;
}
template <bool kFp8, int kM = kTileRows>
constexpr int smem_bytes(int load) {
  using C = Cfg<kFp8, kM>;
  return load == kCopy ? C::kSmem
                       : C::kATile + (kM == kWideRows ? 2 : 1) * C::kBTile +
                             raw_stages<kM>(load) * raw_stage_bytes(load) + 1024;
}

__device__ __forceinline__ float nan_f() { return __uint_as_float(0x7fc00000u); }



__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(g::smem_addr(smem)), "l"(gmem)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Two E4M3 bytes (low byte first) to a bf16x2 register, exact (NaN stays NaN).
__device__ __forceinline__ std::uint32_t e4m3x2_to_bf16x2(std::uint32_t two) {
  const std::uint32_t h = g::e4m3x2_to_f16x2(static_cast<std::uint16_t>(two & 0xffffu));
  float lo, hi;
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "r"(h));
  return g::pack_bf16x2(lo, hi);
}

// Four E4M3 bytes to two bf16x2 registers.
__device__ __forceinline__ void e4m3x4_to_bf16(std::uint32_t w, std::uint32_t* out) {
  out[0] = e4m3x2_to_bf16x2(w & 0xffffu);
  out[1] = e4m3x2_to_bf16x2(w >> 16);
}

// One CTA tile: consecutive query rows of one request.
struct Tile {
  int req;
  long long row0;       // first query row
  int nrows;            // query rows in the tile
  long long first_pos;  // position of row0 (D4)
};

// Tile `t` of the launch. Decode: tile = request (Q rows). Prefill: the tile map entry.
__device__ __forceinline__ bool tile_of(const IndexerParams& p, const int2* map, long long t, int R,
                                        Tile* out) {
  long long start, end;
  int req;
  long long row0;
  if (p.cu_seqlens == nullptr) {
    if (t >= p.batch) return false;
    req = static_cast<int>(t);
    start = t * p.queries_per_request;
    end = start + p.queries_per_request;
    row0 = start;
  } else {
    const int2 e = map[t];
    if (e.x < 0) return false;
    req = e.x;
    row0 = e.y;
    start = p.cu_seqlens[req * p.cu_stride];
    end = p.cu_seqlens[(req + 1) * p.cu_stride];
  }
  long long last = end < p.num_rows ? end : p.num_rows;
  if (last > row0 + R) last = row0 + R;
  if (row0 < 0 || last <= row0) return false;
  out->req = req;
  out->row0 = row0;
  out->nrows = static_cast<int>(last - row0);
  out->first_pos = static_cast<long long>(p.seq_lens[req * p.seq_stride]) - (end - start) + (row0 - start);
  return true;
}

// Prefill tile map: tiles of up to R consecutive rows, never spanning two requests, in
// request order; entries beyond the last tile are {-1, 0}. One CTA of 1024 threads:
// per 1024 requests a block scan of their tile counts, then all threads write the
// chunk's entries (a binary search of the scan per entry).
__global__ void __launch_bounds__(kMapThreads) tile_map_kernel(IndexerParams p, int2* map,
                                                                long long max_tiles, int R) {
  __shared__ long long warp_sum[kMapThreads / 32];
  __shared__ long long pre[kMapThreads + 1];  // exclusive tile offsets inside the chunk
  __shared__ int first_row[kMapThreads];
  __shared__ long long base_s;
  const int tid = threadIdx.x, lane = tid % 32, w = tid / 32;
  if (tid == 0) base_s = 0;
  __syncthreads();
  for (int r0 = 0; r0 < p.batch; r0 += kMapThreads) {
    const int r = r0 + tid;
    long long n = 0, start = 0;
    if (r < p.batch) {
      start = p.cu_seqlens[r * p.cu_stride];
      long long end = p.cu_seqlens[(r + 1) * p.cu_stride];
      if (start < 0) start = 0;
      if (end > p.num_rows) end = p.num_rows;
      n = end > start ? (end - start + R - 1) / R : 0;
    }
    long long x = n;  // inclusive warp scan
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const long long y = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += y;
    }
    if (lane == 31) warp_sum[w] = x;
    __syncthreads();
    long long before = 0;
    for (int i = 0; i < w; ++i) before += warp_sum[i];
    before += x - n;
    pre[tid] = before;
    first_row[tid] = static_cast<int>(start);
    if (tid == kMapThreads - 1) pre[kMapThreads] = before + n;
    __syncthreads();
    const long long total = pre[kMapThreads];
    const long long base = base_s;
    for (long long j = tid; j < total && base + j < max_tiles; j += kMapThreads) {
      int lo = 0, hi = kMapThreads - 1;  // last i with pre[i] <= j (its count is > 0)
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (pre[mid] <= j) lo = mid;
        else hi = mid - 1;
      }
      map[base + j] = make_int2(r0 + lo, static_cast<int>(first_row[lo] + (j - pre[lo]) * R));
    }
    __syncthreads();
    if (tid == 0) base_s = base + total;
    __syncthreads();
  }
  for (long long i = base_s + tid; i < max_tiles; i += kMapThreads) map[i] = make_int2(-1, 0);
}

// Row maxima of a 64 x 128 FP32 wgmma tile for this thread's two rows (16w + l/4 and
// + 8): fmaxf over its columns (NaN ignored, D2), then across the quad.
__device__ __forceinline__ void quad_row_max(const float (&acc)[64], float& m0, float& m1) {
  m0 = acc[0];
  m1 = acc[2];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    m0 = fmaxf(m0, fmaxf(acc[4 * j], acc[4 * j + 1]));
    m1 = fmaxf(m1, fmaxf(acc[4 * j + 2], acc[4 * j + 3]));
  }
  m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, 1));
  m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, 1));
  m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, 2));
  m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, 2));
}

// One thread's share of a raw page (read from the raw ring) for its conversion into the
// SW128 B tile (converting loaders only).
struct Raw {
  uint4 d[4];
  std::uint32_t s;
};

// Page scores: grid (tile, page chunk). Every page of the chunk below the tile's largest
// local page is one 128 x 128 (x 128 dims) wgmma tile per warpgroup; the epilogue takes
// each score row's max over the 128 tokens (fmaxf: NaN tokens ignored, NaN only when
// every token is NaN, as the CPU backend) and stores it for the rows whose local page
// is beyond the page. ws[(row * H + h) * ws_ld + b].
// kSplit (FP8 only): each k32 QGMMA into a fresh zero accumulator, partials summed in
// FP32 on the CUDA cores (Fp8Qk::kE4m3Split); 64 more accumulator registers, 1 CTA / SM.
// kM: score rows per CTA, kTileRows or kWideRows (BF16 pages, copied or widened from
// E4M3, or E4M3 pages copied for the opt-in QGMMA path: kMB = 2 64-row wgmma blocks per
// warpgroup, one CTA per SM).
template <bool kFp8, int kLoad, bool kSplit = false, int kM = kTileRows>
__global__ void __launch_bounds__(kThreads, kSplit || kM == kWideRows ? 1 : 2)
    score_kernel(IndexerParams p, const int2* map, float* ws, long long ws_ld, int R, int chunk) {
  static_assert(kM == kTileRows || (kM == kWideRows && !kSplit &&
                                    (kLoad == kCopy || (!kFp8 && kLoad == kE4m3ToBf16))),
                "wide tiles: BF16 pages (copied or widened from E4M3), or copied E4M3 pages on QGMMA");
  constexpr int kMB = kM / 128;  // 64-row wgmma blocks per warpgroup
  using C = Cfg<kFp8, kM>;
  constexpr int S = C::kStages;
  constexpr int kRowChunks = C::kRowBytes / 16;
  constexpr bool kNv = kLoad == kNvfp4ToE4m3 || kLoad == kNvfp4ToBf16;
  constexpr int kRawBytes = raw_stage_bytes(kLoad);
  constexpr int kRS = raw_stages<kM>(kLoad);
  extern __shared__ std::uint8_t smem_raw[];
  std::uint8_t* smem = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) & ~std::uintptr_t(1023));
  std::uint8_t* sa = smem;
  std::uint8_t* sb = smem + C::kATile;

  Tile t;
  if (!tile_of(p, map, blockIdx.x, R, &t)) return;
  const int H = p.heads;
  const int srows = t.nrows * H;
  const long long last_pos = t.first_pos + t.nrows - 1;
  if (last_pos < kPage) return;  // no row has a history page
  const long long lmax = last_pos / kPage;
  const long long b_begin = static_cast<long long>(blockIdx.y) * chunk;
  long long b_end = b_begin + chunk;
  if (b_end > lmax) b_end = lmax;
  if (b_end > p.bt_width) b_end = p.bt_width;
  if (b_begin >= b_end) return;
  const int n = static_cast<int>(b_end - b_begin);
  const int tid = threadIdx.x;
  const std::int32_t* bt_row = p.block_table + static_cast<long long>(t.req) * p.bt_stride[0];

  auto phys_of = [&](int i) -> long long { return bt_row[(b_begin + i) * p.bt_stride[1]]; };
  auto valid = [&](long long phys) { return phys >= 0 && phys < p.num_pages; };

  // kCopy loader: cp.async of page i's cache bytes into B stage st (SW128).
  // Wide tiles: bit st = whether the page in B stage st is valid (set where its copy is
  // issued), so the epilogue needs no block-table load.
  unsigned stage_ok = 0;
  auto load = [&](int i, int st) {
    if constexpr (kLoad == kCopy) {
      const long long phys = phys_of(i);
      if constexpr (kMB == 2) stage_ok = valid(phys) ? (stage_ok | (1u << st)) : (stage_ok & ~(1u << st));
      if (!valid(phys)) return;
      const std::uint8_t* src = p.k_data + phys * p.k_stride[0];
      std::uint8_t* dst = sb + st * C::kBTile;
#pragma unroll
      for (int k = 0; k < kPage * kRowChunks / kThreads; ++k) {
        const int c = tid + k * kThreads;
        const int tok = c / kRowChunks, ch = c % kRowChunks;
        cp_async16(dst + g::sw128_offset(tok, ch * 16, kPage), src + tok * p.k_stride[1] + ch * 16);
      }
    }
  };
  // Converting loaders: one thread's share of a raw page (registers) -> converted SW128 tile.
  auto store = [&](int i, int st, const Raw& raw) {
    if constexpr (kLoad != kCopy) {
      if (!valid(phys_of(i))) return;
      std::uint8_t* dst = sb + st * C::kBTile;
      const int tok = tid / 2, half = tid % 2;
      if constexpr (kLoad == kE4m3ToBf16) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // 16 e4m3 -> 32 bytes of bf16
          uint4 o0, o1;
          e4m3x4_to_bf16(raw.d[k].x, &o0.x);
          e4m3x4_to_bf16(raw.d[k].y, &o0.z);
          e4m3x4_to_bf16(raw.d[k].z, &o1.x);
          e4m3x4_to_bf16(raw.d[k].w, &o1.z);
          const int b0 = half * 128 + k * 32;
          *reinterpret_cast<uint4*>(dst + g::sw128_offset(tok, b0, kPage)) = o0;
          *reinterpret_cast<uint4*>(dst + g::sw128_offset(tok, b0 + 16, kPage)) = o1;
        }
      } else {
        const std::uint32_t words[8] = {raw.d[0].x, raw.d[0].y, raw.d[0].z, raw.d[0].w,
                                        raw.d[1].x, raw.d[1].y, raw.d[1].z, raw.d[1].w};
#pragma unroll
        for (int blk = 0; blk < 4; ++blk) {  // 16 codes (8 bytes) per e4m3 block scale
          const g::Nvfp4Lut tab = g::nvfp4_lut((raw.s >> (8 * blk)) & 0xffu);
          // 16 E4M3 values = dims 16 * (4 half + blk) ..
          const uint4 e = g::nvfp4x16_lookup(make_uint2(words[2 * blk], words[2 * blk + 1]), tab);
          const int dim0 = 16 * (4 * half + blk);
          if constexpr (kLoad == kNvfp4ToE4m3) {
            *reinterpret_cast<uint4*>(dst + g::sw128_offset(tok, dim0, kPage)) = e;
          } else {
            uint4 o0, o1;
            e4m3x4_to_bf16(e.x, &o0.x);
            e4m3x4_to_bf16(e.y, &o0.z);
            e4m3x4_to_bf16(e.z, &o1.x);
            e4m3x4_to_bf16(e.w, &o1.z);
            *reinterpret_cast<uint4*>(dst + g::sw128_offset(tok, 2 * dim0, kPage)) = o0;
            *reinterpret_cast<uint4*>(dst + g::sw128_offset(tok, 2 * dim0 + 16, kPage)) = o1;
          }
        }
      }
    }
  };

  const int wg = tid / 128;
  const bool wg_active = wg * 64 * kMB < srows;
  const int w = (tid % 128) / 32, l = tid % 32;
  const std::uint32_t a_base = g::smem_addr(sa + wg * kMB * 64 * C::kRowBytes);  // block mb at + mb 64 rows
  const std::uint32_t b_base = g::smem_addr(sb);
  const float kscale = p.k_format == 2 ? p.k_global : 1.0f;
  // Wide tiles: the score row this lane stores (value v = l % 4: block v / 2, half v % 2)
  // and the pages it takes (b < st_lim: below the row's local page), fixed for the CTA,
  // so the epilogue's store is one compare and one address.
  float* st_row = ws;
  long long st_lim = 0;
  if constexpr (kMB == 2) {
    const int v = l & 3;
    const int sr = (wg * kMB + (v >> 1)) * 64 + 16 * w + l / 4 + 8 * (v & 1);
    if (sr < srows) {
      const int qr = sr / H, h = sr % H;
      const long long pos = t.first_pos + qr;
      st_row = ws + ((t.row0 + qr) * H + h) * ws_ld;
      st_lim = pos >= 0 ? pos / kPage : 0;
    }
  }

  // A: the tile's index q rows, zero rows beyond srows (made visible to wgmma by the
  // first iteration's fence and barrier).
  auto load_a = [&]() {
    for (int i = tid; i < kM * kRowChunks; i += kThreads) {
      const int sr = i / kRowChunks, c = i % kRowChunks;
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (sr < srows) {
        const long long row = t.row0 + sr / H;
        const int h = sr % H;
        const long long off = row * p.q_stride[0] + h * p.q_stride[1];
        if (kFp8) {
          v = *reinterpret_cast<const uint4*>(static_cast<const std::uint8_t*>(p.q) + off + c * 16);
        } else if (!p.q_e4m3) {
          v = *reinterpret_cast<const uint4*>(static_cast<const std::uint8_t*>(p.q) + 2 * off + c * 16);
        } else {
          const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const std::uint8_t*>(p.q) + off + c * 8);
          e4m3x4_to_bf16(raw.x, &v.x);
          e4m3x4_to_bf16(raw.y, &v.z);
        }
      }
      *reinterpret_cast<uint4*>(sa + (sr / 64) * 64 * C::kRowBytes + g::sw128_offset(sr % 64, c * 16, 64)) = v;
    }
  };
  // Converting loaders: the raw cache bytes of kRS pages stream by cp.async into a raw
  // ring (kRS x 16 KB E4M3 or 9 KB NVFP4 in flight per CTA, not one page in registers);
  // each page is converted smem -> smem into the SW128 B tile (wide tiles: one of two),
  // then scored.
  // NVFP4 block scales (any strides) go through a register: loaded when the page is
  // issued, stored after that iteration's wgmma (the stage is free by then).
  std::uint8_t* sraw = sb + (kMB == 2 ? 2 : 1) * C::kBTile;
  auto issue = [&](int i, std::uint32_t& sreg) {
    const long long phys = phys_of(i);
    // Wide tiles: bit i % 8 = whether page i is valid (read by its epilogue, steps later).
    if constexpr (kMB == 2) stage_ok = valid(phys) ? (stage_ok | (1u << (i & 7))) : (stage_ok & ~(1u << (i & 7)));
    if (!valid(phys)) return;
    const std::uint8_t* src = p.k_data + phys * p.k_stride[0];
    std::uint8_t* dst = sraw + (i % kRS) * kRawBytes;
    constexpr int kTokChunks = kNv ? 4 : 8;  // 16-byte chunks per token
#pragma unroll
    for (int k = 0; k < kPage * kTokChunks / kThreads; ++k) {
      const int c = tid + k * kThreads;
      const int tok = c / kTokChunks, ch = c % kTokChunks;
      cp_async16(dst + tok * kTokChunks * 16 + ch * 16, src + tok * p.k_stride[1] + ch * 16);
    }
    if constexpr (kNv) {
      const int tok = tid / 2, half = tid % 2;
      const std::uint8_t* sc = p.k_scale + phys * p.ks_stride[0] + tok * p.ks_stride[1] + half * 4;
      sreg = static_cast<std::uint32_t>(sc[0]) | (static_cast<std::uint32_t>(sc[1]) << 8) |
             (static_cast<std::uint32_t>(sc[2]) << 16) | (static_cast<std::uint32_t>(sc[3]) << 24);
    }
  };
  auto put_scale = [&](int i, std::uint32_t sreg) {
    if constexpr (kNv) {
      if (valid(phys_of(i)))
        *reinterpret_cast<std::uint32_t*>(sraw + (i % kRS) * kRawBytes + 8192 + tid * 4) = sreg;
    }
  };
  auto convert = [&](int i, int st) {
    if (!valid(phys_of(i))) return;
    const std::uint8_t* r = sraw + (i % kRS) * kRawBytes;
    const int tok = tid / 2, half = tid % 2;
    Raw raw;
    if constexpr (kNv) {
      const uint4* s = reinterpret_cast<const uint4*>(r + tok * 64 + half * 32);
      raw.d[0] = s[0];
      raw.d[1] = s[1];
      raw.s = *reinterpret_cast<const std::uint32_t*>(r + 8192 + tid * 4);
    } else {
      const uint4* s = reinterpret_cast<const uint4*>(r + tok * 128 + half * 64);
#pragma unroll
      for (int k = 0; k < 4; ++k) raw.d[k] = s[k];
    }
    store(i, st, raw);
  };

  // Prologue: pages 0 .. S-2 (cp.async into the B stages; wide tiles 0 .. S-3) / 0 ..
  // kRS-1 (raw ring).
  if constexpr (kLoad == kCopy) {
#pragma unroll
    for (int i = 0; i < (kMB == 2 ? S - 2 : S - 1); ++i) {
      if (i < n) load(i, i);
      cp_async_commit();
    }
  } else {
#pragma unroll
    for (int j = 0; j < kRS; ++j) {
      std::uint32_t sreg = 0;
      if (j < n) issue(j, sreg);
      cp_async_commit();
      if (j < n) put_scale(j, sreg);
    }
  }
  load_a();
  if constexpr (kMB == 2) {
    // Wide tiles: the two 64-row blocks of each warpgroup are software-pipelined so that
    // a block's epilogue runs under the other block's wgmma. Step i: page i landed
    // (prefetch distance S - 2: page i+2 goes into the stage of page i-2; S - 1 would also
    // overwrite the validity bit of page i-1, stage_ok, before its block 1 epilogue in
    // step i); issue block 0 on page i; epilogue of block 1 of page i-1 (retired at the
    // end of step i-1; from a copy on the copied-pages path, see kPrev); issue block
    // 1; block 0 retired -> its epilogue under block 1; block 1 retired. H200 (2048, 1M, 4 heads, BF16): 4388 /
    // 4473 us against 4937 / 4839 us with both blocks issued and retired together (the
    // epilogue then ran with the tensor cores idle, a third of the loop: ncu session 17
    // run U) and 4684 / 4726 us with only block 0's epilogue under block 1 (run W).
    float acc[2][64];
#pragma unroll
    for (int k = 0; k < 64; ++k) acc[1][k] = 0.0f;  // read (not stored) by step 0's epi(-1, 1)
    const std::uint64_t da = g::desc_k_sw128(a_base);
    auto mma = [&](int mb, std::uint64_t db) {
      g::fence_operands(acc[mb]);
      g::fence();
      if constexpr (kFp8) {  // opt-in QGMMA (Fp8Qk::kE4m3): one 128-byte panel per row
#pragma unroll
        for (int s = 0; s < 4; ++s)
          g::e4m3_ss(g::desc_add(da, mb * 64 * 128 + s * 32), g::desc_add(db, s * 32), acc[mb], s > 0);
      } else {
#pragma unroll
        for (int s = 0; s < 8; ++s)
          g::bf16_ss(g::desc_add(da, mb * 64 * 256 + (s / 4) * 64 * 128 + (s % 4) * 32),
                     g::desc_add(db, (s / 4) * kPage * 128 + (s % 4) * 32), acc[mb], s > 0);
      }
      g::commit();
    };
    // Row max of block mb (rows 16w + l/4 and + 8; columns over the quad); lanes 2 mb and
    // 2 mb + 1 of the quad store it (st_row, st_lim: see above).
    // No branch around the accumulator reads (only the store is conditional): a read in
    // a divergent path makes ptxas serialise the wgmmas (C7518).
    // Block 1's scores of page i-1, copied out of its accumulators (one mov each) after
    // step i-1's last wait, on the copied-pages path: epi(i-1, 1) then reads registers no
    // wgmma defined, and ptxas no longer injects a warpgroup.wait for block 0 of page i
    // there (C7517). H200, session 29 run I/J (docs/bench/h200-2026-11-30-s29): (2048, 1M)
    // BF16 and pre-converted E4M3 1-2 % faster. On the widening path the copies cost more
    // than the overlap gained (E4M3, 1 head: 1.3 % slower), so it keeps the injected wait.
    constexpr bool kPrev = kLoad == kCopy;
    float prev[kPrev ? 64 : 1];
#pragma unroll
    for (int k = 0; k < (kPrev ? 64 : 1); ++k) prev[k] = 0.0f;  // read (not stored) by step 0's epi(-1, 1)
    auto epi = [&](int j, int mb) {
      g::fence_operands(acc[mb]);
      float m0, m1;
      if constexpr (kPrev) {
        if (mb == 1) quad_row_max(prev, m0, m1);
        else quad_row_max(acc[0], m0, m1);
      } else {
        quad_row_max(acc[mb], m0, m1);
      }
      if (wg_active && ((l & 3) >> 1) == mb && j >= 0 && b_begin + j < st_lim) {
        const bool ok = ((stage_ok >> (kLoad == kCopy ? j % S : j & 7)) & 1u) != 0;
        st_row[b_begin + j] = ok ? ((l & 1) ? m1 : m0) * kscale : nan_f();
      }
    };
    // No wgmma stays in flight across the loop's back edge: with block 1 of page i
    // retired only in step i+1, ptxas serialised every wgmma (C7514).
    if constexpr (kLoad == kCopy) {
      for (int i = 0; i < n; ++i) {
        cp_async_wait<S - 3>();
        fence_proxy_async();
        __syncthreads();  // page i landed everywhere; page i-2's stage is free
        const std::uint64_t db = g::desc_k_sw128(b_base + (i % S) * C::kBTile);
        mma(0, db);
        if (i + S - 2 < n) load(i + S - 2, (i + S - 2) % S);
        cp_async_commit();
        epi(i - 1, 1);  // under block 0 of page i (stores nothing for i = 0)
        mma(1, db);
        g::wait<1>();  // block 0 of page i
        epi(i, 0);     // under block 1 of page i
        g::wait<0>();
        g::fence_operands(acc[1]);
#pragma unroll
        for (int k = 0; k < 64; ++k) asm volatile("mov.b32 %0, %1;" : "=f"(prev[k]) : "f"(acc[1][k]));
      }
    } else {
      // E4M3 pages widened in shared memory: raw pages stream into a ring of kRS slots
      // (page i+kRS issued in step i into page i's slot), and page i+1 is widened into
      // the other of two B tiles under page i's wgmmas, so one barrier per step suffices.
      cp_async_wait<kRS - 1>();  // raw page 0
      __syncthreads();
      if (n > 0) convert(0, 0);
      fence_proxy_async();
      for (int i = 0; i < n; ++i) {
        cp_async_wait<kRS - 2>();  // raw page i+1 (this thread's copies)
        __syncthreads();  // B tile of page i and raw page i+1 visible; raw slot i % kRS free
        const std::uint64_t db = g::desc_k_sw128(b_base + (i & 1) * C::kBTile);
        mma(0, db);
        {
          std::uint32_t sreg = 0;
          if (i + kRS < n) issue(i + kRS, sreg);
        }
        cp_async_commit();
        epi(i - 1, 1);
        mma(1, db);
        if (i + 1 < n) convert(i + 1, (i + 1) & 1);  // the B tile of page i-1 (retired)
        fence_proxy_async();
        g::wait<1>();
        epi(i, 0);
        g::wait<0>();
      }
    }
    epi(n - 1, 1);
  } else {
    for (int i = 0; i < n; ++i) {
      std::uint32_t bs = b_base, sreg = 0;
      int nxt;
      if constexpr (kLoad == kCopy) {
        cp_async_wait<S - 2>();
        fence_proxy_async();
        __syncthreads();  // page i landed everywhere; page i - 1's stage is free
        nxt = i + S - 1;
        bs = b_base + (i % S) * C::kBTile;
      } else {
        cp_async_wait<kRS - 1>();
        __syncthreads();  // raw page i landed everywhere; the B tile's last wgmma is done
        convert(i, 0);
        fence_proxy_async();
        __syncthreads();  // B tile (and A) visible to wgmma; raw stage i % kRS free
        nxt = i + kRS;
        if constexpr (kNv) {  // before the wgmma: the scale register would not survive it unspilled
          if (nxt < n) issue(nxt, sreg);
        }
      }
      // Page i: wgmma on B at `bs` (issued), the next page's loads (issued while the
      // tensor cores run), then each row's max over the page, store.
      // Every warpgroup issues and waits (rows beyond srows are zero in the A tile): a
      // wgmma issued and waited under a divergent condition makes ptxas serialise them all
      // (C7518). Only active warpgroups store.
      float acc[64];
      {
        // Descriptors built once per page, advanced by uniform adds (g::desc_add).
        const std::uint64_t da = g::desc_k_sw128(a_base), db = g::desc_k_sw128(bs);
        g::fence_operands(acc);
        g::fence();
        if constexpr (kFp8 && kSplit) {
          g::e4m3_ss(da, db, acc, false);
          g::commit();
          float part[64];
#pragma unroll
          for (int s = 1; s < 4; ++s) {
            g::fence_operands(part);
            g::fence();
            g::e4m3_ss(g::desc_add(da, s * 32), g::desc_add(db, s * 32), part, false);
            g::commit();
            g::wait<0>();
            g::fence_operands(part);
            g::fence_operands(acc);
#pragma unroll
            for (int j = 0; j < 64; ++j) acc[j] += part[j];
          }
        } else if constexpr (kFp8) {
#pragma unroll
          for (int s = 0; s < 4; ++s) g::e4m3_ss(g::desc_add(da, s * 32), g::desc_add(db, s * 32), acc, s > 0);
        } else {
#pragma unroll
          for (int s = 0; s < 8; ++s)
            g::bf16_ss(g::desc_add(da, (s / 4) * 64 * 128 + (s % 4) * 32),
                       g::desc_add(db, (s / 4) * kPage * 128 + (s % 4) * 32), acc, s > 0);
        }
        g::commit();
      }
      if constexpr (kLoad == kCopy) {
        if (nxt < n) load(nxt, nxt % S);
      } else if constexpr (!kNv) {
        if (nxt < n) issue(nxt, sreg);
      }
      cp_async_commit();
      g::wait<0>();
      g::fence_operands(acc);
      if (wg_active) {
        // Rows 16w + l/4 (m0) and + 8 (m1) of this warpgroup; columns spread over the quad.
        float m0, m1;
        quad_row_max(acc, m0, m1);
        if ((l & 3) == 0) {
          const bool ok = valid(phys_of(i));
          const long long b = b_begin + i;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int sr = wg * 64 + 16 * w + l / 4 + 8 * half;
            if (sr >= srows) continue;
            const int qr = sr / H, h = sr % H;
            const long long pos = t.first_pos + qr;
            if (pos < 0 || b >= pos / kPage) continue;
            const float m = half == 0 ? m0 : m1;
            ws[((t.row0 + qr) * H + h) * ws_ld + b] = ok ? m * kscale : nan_f();
          }
        }
      }
      if constexpr (kLoad != kCopy) {
        if (nxt < n) put_scale(nxt, sreg);
      }
    }
  }  // kMB
}

// ---------------------------------------------------------------------------------------
// Decode page scores, E4M3 index q over an E4M3 or NVFP4 index-K cache (Fp8Qk::kExact).
//
// A decode tile has few score rows (Q x H <= 64) and every history page of its request,
// so the index-K stream is the whole cost. The page is the M side of the MMA:
//   S^T (128 tokens x 8 NT rows) = K_page (128 tokens x 128 dims) . Q^T,
// with mma.sync m16n8k16, F16 operands and FP32 accumulation (every E4M3 value and every
// E4M3_sat(e2m1 x block scale) is exact in F16, so the products are exact, as in the
// HGMMA path of score_kernel).
//  - One warp owns one page at a time. Its raw bytes stream by cp.async, in units of
//    kUnitTok tokens, into the warp's own ring of kDecStages slots; the page max over
//    128 tokens is a register and shuffle reduction carried across the page's units, so
//    the loop has no CTA barrier: each warp runs its own pipeline.
//  - A fragments are converted from the raw slot straight into registers (no converted
//    tile). The dot product's dims are permuted, identically in A and B: in k-step s,
//    the thread of quad index q = lane % 4 holds dims 32q + 4s + {0,1} (fragment k
//    2q + {0,1}) and 32q + 4s + {2,3} (k 8 + 2q + {0,1}), so each thread reads 32
//    contiguous dims of a token. The Q fragments (B) stay in registers until the warp
//    crosses into another request.
//  - Raw E4M3 slot: token t at t * 128, its 16-byte chunk c at (c ^ (t & 1)) * 16 (the
//    two rows a quarter-warp reads hit different banks). NVFP4 slot: codes
//    [kUnitTok][64] then block scales [kUnitTok][8].
//  - Block-table entries are read 32 pages at a time (one per lane, shuffled out), so
//    the copies never wait on a dependent block-table load per page.
// Tile choices measured on the H200 (decode suites, E4M3, Q 8 x 4 heads): 12 warps x 4
// stages x 32-token units, one CTA per SM, beat 4 / 6 / 8 / 10 warps, 2-3 stages, 64- and
// 128-token units and two CTAs per SM (16 or 14 warps spill at 128 registers).
#ifndef FLASHMSA_DEC_WARPS  // tile choices (benchmark variants may override them)
#define FLASHMSA_DEC_WARPS 12
#endif
#ifndef FLASHMSA_DEC_STAGES
#define FLASHMSA_DEC_STAGES 4
#endif
#ifndef FLASHMSA_DEC_UNIT_TOKENS
#define FLASHMSA_DEC_UNIT_TOKENS 32
#endif
#ifndef FLASHMSA_DEC_MT  // m16 tiles interleaved per step for up to 32 score rows
#define FLASHMSA_DEC_MT 2
#endif
// Warps per CTA: 12 (up to 168 registers each); 8 for 64-row tiles, whose Q fragments
// alone take 128 registers.
template <int NT>
constexpr int dec_warps() { return NT >= 8 ? 8 : FLASHMSA_DEC_WARPS; }
#ifndef FLASHMSA_DEC_CTAS_PER_SM
#define FLASHMSA_DEC_CTAS_PER_SM 1
#endif
// Resident CTAs per SM (64-row tiles: one, their registers allow no more).
template <int NT>
constexpr int dec_ctas_per_sm() { return NT >= 8 ? 1 : FLASHMSA_DEC_CTAS_PER_SM; }
// Requests a decode_score_kernel launch handles (its page prefix lives in shared memory).
constexpr int kDecMaxBatch = 4096;
// 6144: the static shared memory (the scan's storage, NVFP4's 4 KB block-scale table; ptxas:
// 1696 / 5792 bytes for the per-warp kernel).
// The per-warp kernel runs NVFP4 index-K only (72 bytes per token; E4M3 takes the warpgroup
// kernel, see launch_decode_scores_nt).
static_assert(FLASHMSA_DEC_WARPS * FLASHMSA_DEC_STAGES * FLASHMSA_DEC_UNIT_TOKENS * 72 + 4 * (kDecMaxBatch + 1) +
                      6144 <= 227 * 1024,
              "decode scoring ring + page prefix + static shared memory must fit the 227 KB per CTA");
constexpr int kDecStages = FLASHMSA_DEC_STAGES;
constexpr int kUnitTok = FLASHMSA_DEC_UNIT_TOKENS;  // tokens per copy unit: a page, a half or a quarter
constexpr int kUnitsPerPage = kPage / kUnitTok;
static_assert(kUnitTok == 32 || kUnitTok == 64 || kUnitTok == 128, "a copy unit is a page, a half or a quarter");
template <bool kNv>
constexpr int dec_slot_bytes() { return kNv ? kUnitTok * 72 : kUnitTok * 128; }
template <int NT, bool kNv>
constexpr int dec_smem_bytes() { return dec_warps<NT>() * kDecStages * dec_slot_bytes<kNv>(); }
static_assert(kDecStages >= 2, "the decode ring keeps one unit in flight at least");

__device__ __forceinline__ void cp_async8(void* smem, const void* gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(g::smem_addr(smem)), "l"(gmem) : "memory");
}


// Raw words of slot token t for this thread: dims 32q..32q+31 as 8 words of 4 E4M3
// bytes (word s = dims 32q + 4s .. + 3). NVFP4: each block scale's 8 magnitudes come from
// nv_tab (shared memory, 256 entries of g::nvfp4_lut as {t.x, t.y, d, 0}, filled once per CTA): one
// shared load per 16 dims instead of about 12 ALU instructions. kSlotTok: tokens per slot
// (NVFP4: the block scales follow the slot's kSlotTok x 64 code bytes).
template <bool kNv, int kSlotTok = kUnitTok>
__device__ __forceinline__ void dec_row_words(const std::uint8_t* slot, int t, int q, const uint4* nv_tab,
                                              std::uint32_t (&w)[8]) {
  if constexpr (!kNv) {
    const uint4 a = *reinterpret_cast<const uint4*>(slot + t * 128 + (((2 * q) ^ (t & 1)) << 4));
    const uint4 b = *reinterpret_cast<const uint4*>(slot + t * 128 + (((2 * q + 1) ^ (t & 1)) << 4));
    w[0] = a.x; w[1] = a.y; w[2] = a.z; w[3] = a.w;
    w[4] = b.x; w[5] = b.y; w[6] = b.z; w[7] = b.w;
  } else {
    const uint4 c = *reinterpret_cast<const uint4*>(slot + t * 64 + q * 16);  // 32 codes
    const std::uint8_t* sc = slot + kSlotTok * 64 + t * 8 + 2 * q;            // their 2 block scales
    const std::uint32_t cw[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int half = 0; half < 2; ++half) {  // block scale of dims 32q + 16 half ..
      const g::Nvfp4Lut tab = g::nvfp4_lut_entry(nv_tab[sc[half]]);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        // 8 codes = dims 32q + 16 half + 8i ..
        g::nvfp4x8_lookup(cw[2 * half + i], tab, w[4 * half + 2 * i], w[4 * half + 2 * i + 1]);
      }
    }
  }
}

// MT m16 tiles (tokens t0 + 16i + {lane/4, lane/4 + 8}) against the NT Q fragments,
// interleaved so that MT x NT independent accumulator chains are in flight; the tile
// maxima are folded into mx.
template <int MT, int NT, bool kNv>
__device__ __forceinline__ void dec_mma_tiles(const std::uint8_t* slot, int t0, int r, int q, const uint4* nv_tab,
                                              const std::uint32_t (&bq)[NT][8][2], float (&mx)[NT][2]) {
  std::uint32_t w[MT][2][8];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    dec_row_words<kNv>(slot, t0 + 16 * i + r, q, nv_tab, w[i][0]);
    dec_row_words<kNv>(slot, t0 + 16 * i + r + 8, q, nv_tab, w[i][1]);
  }
  float c[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) c[i][nt][0] = c[i][nt][1] = c[i][nt][2] = c[i][nt][3] = 0.0f;
#pragma unroll
  for (int s = 0; s < 8; ++s)
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      std::uint32_t a0, a1, a2, a3;
      g::f16x2_pair(w[i][0][s], a0, a2);
      g::f16x2_pair(w[i][1][s], a1, a3);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        cute::SM80_16x8x16_F32F16F16F32_TN::fma(c[i][nt][0], c[i][nt][1], c[i][nt][2], c[i][nt][3], a0, a1, a2,
                                                a3, bq[nt][s][0], bq[nt][s][1], c[i][nt][0], c[i][nt][1],
                                                c[i][nt][2], c[i][nt][3]);
    }
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      mx[nt][0] = fmaxf(mx[nt][0], fmaxf(c[i][nt][0], c[i][nt][2]));
      mx[nt][1] = fmaxf(mx[nt][1], fmaxf(c[i][nt][1], c[i][nt][3]));
    }
}

// History pages request b scores (pages below its last row's local page and inside the
// block table; 0 for a request without rows), and its tile.
__device__ __forceinline__ int dec_history_pages(const IndexerParams& p, int b, Tile* t) {
  if (!tile_of(p, nullptr, b, p.queries_per_request, t)) return 0;
  const long long last_pos = t->first_pos + t->nrows - 1;
  if (last_pos < kPage) return 0;
  const long long n = last_pos / kPage;
  return static_cast<int>(n < p.bt_width ? n : p.bt_width);
}

// Shared pieces of the two decode scoring kernels (decode_score_kernel,
// decode_score_wg_kernel).

// pre[b] = history pages of requests before b (exclusive prefix), pre[B] = all of them.
// Each thread counts a contiguous run of requests; ends with a CTA barrier.
template <int kThreads>
__device__ __forceinline__ void dec_page_prefix(const IndexerParams& p, int* pre, int tid) {
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  const int B = p.batch;
  const int per = (B + kThreads - 1) / kThreads;
  const int b0 = tid * per, b1 = min(B, b0 + per);
  int sum = 0;
  for (int b = b0; b < b1; ++b) {
    Tile t;
    const int n = dec_history_pages(p, b, &t);
    pre[b] = n;
    sum += n;
  }
  int before = 0, total = 0;
  Scan(scan_tmp).ExclusiveSum(sum, before, total);
  for (int b = b0; b < b1; ++b) {
    const int n = pre[b];
    pre[b] = before;
    before += n;
  }
  if (tid == 0) pre[B] = total;
  __syncthreads();
}

// Request of flat page f, moving forward from request b (pre is non-decreasing).
__device__ __forceinline__ int dec_advance(const int* pre, int b, int f) {
  while (pre[b + 1] <= f) ++b;
  return b;
}

// The request holding flat page f0 (< pre[B]): a binary search, then past empty requests.
__device__ __forceinline__ int dec_first_request(const int* pre, int B, int f0) {
  int lo = 0, hi = B - 1;
  while (lo < hi) {  // last b with pre[b] <= f0
    const int mid = (lo + hi + 1) / 2;
    if (pre[mid] <= f0) lo = mid;
    else hi = mid - 1;
  }
  return dec_advance(pre, lo, f0);
}

// What the scoring kernels store for decode request b (it has history pages, so at least
// one row): `srows` score rows (query rows x H heads, <= 64 by the launchers), workspace
// rows from `rowh` = first row x H, the first query's position `fpos` (D4).
struct DecRequest {
  long long row0;  // first query row
  int srows, rowh, fpos;
};
__device__ __forceinline__ DecRequest dec_request(const IndexerParams& p, int b, int H) {
  DecRequest d;
  d.row0 = static_cast<long long>(b) * p.queries_per_request;
  const long long nrows = min(static_cast<long long>(p.queries_per_request), p.num_rows - d.row0);
  d.srows = static_cast<int>(nrows) * H;
  Tile t;
  dec_history_pages(p, b, &t);
  d.rowh = static_cast<int>(t.row0) * H;
  d.fpos = static_cast<int>(t.first_pos);
  return d;
}

// The 32 E4M3 bytes of score row sr (query row sr / H, head sr % H) at dims 32 qq ..
// 32 qq + 31 (zeros for sr >= srows).
__device__ __forceinline__ void dec_load_q32(const IndexerParams& p, const DecRequest& d, int sr, int H, int qq,
                                             uint4& a, uint4& c) {
  a = c = make_uint4(0u, 0u, 0u, 0u);
  if (sr < d.srows) {
    const std::uint8_t* src = static_cast<const std::uint8_t*>(p.q) + (d.row0 + sr / H) * p.q_stride[0] +
                              (sr % H) * p.q_stride[1] + 32 * qq;
    a = *reinterpret_cast<const uint4*>(src);
    c = *reinterpret_cast<const uint4*>(src + 16);
  }
}

// A warp's window of 32 block-table entries (lane i: page wbase + i of request wb), read
// 32 pages at a time so the copies never wait on a dependent block-table load per page.
struct DecBtWindow {
  int wb = -1, wbase = 0, wphys = -1;
  // Physical page of logical history page `page` of request ib (-1 past the request's
  // pages); every lane of the warp calls it with the same arguments.
  __device__ __forceinline__ long long phys(const IndexerParams& p, const int* pre, int ib, int page, int lane) {
    if (ib != wb || page >= wbase + 32) {
      wb = ib;
      wbase = page;
      const int j = page + lane;
      wphys = j < pre[ib + 1] - pre[ib] ? p.block_table[static_cast<long long>(ib) * p.bt_stride[0] + j * p.bt_stride[1]]
                                        : -1;
    }
    return __shfl_sync(0xffffffffu, wphys, page - wbase);
  }
};

// The decode scoring grid is one wave of CTAs, and the work is balanced by pages: the
// history pages of all requests, laid end to end (request-major, `pre` = exclusive
// prefix per request in shared memory), are cut into one contiguous range per warp of
// the grid. A warp streams its range across request boundaries (reloading the request's
// Q fragments and block-table window at a boundary), so every warp moves the same number
// of pages whatever the request lengths, and each CTA pays its start-up round trips once.
template <int NT, bool kNv>
__global__ void __launch_bounds__(32 * dec_warps<NT>(), dec_ctas_per_sm<NT>())
    decode_score_kernel(IndexerParams p, float* ws, long long ws_ld) {
  constexpr int kWarps = dec_warps<NT>();
  constexpr int kThreadsD = 32 * kWarps;
  constexpr int kSlot = dec_slot_bytes<kNv>();
  constexpr int S = kDecStages;
  constexpr int MT = NT <= 4 ? FLASHMSA_DEC_MT : 1;  // m16 tiles interleaved (NT = 8 holds 128 registers of Q)
  static_assert((kUnitTok / 16) % MT == 0, "a unit is a whole number of interleaved steps");
  extern __shared__ __align__(16) std::uint8_t dsmem[];
  int* pre = reinterpret_cast<int*>(dsmem + kWarps * S * kSlot);  // [batch + 1]
  const int B = p.batch;
  const int tid = threadIdx.x;
  // NVFP4: the 8 E4M3 magnitudes of every block-scale byte (covered by the scan's barrier).
  __shared__ uint4 nv_tab_s[kNv ? 256 : 1];
  const uint4* nv_tab = nv_tab_s;
  if constexpr (kNv) g::fill_nvfp4_luts<kThreadsD>(nv_tab_s, tid);  // covered by dec_page_prefix's barrier
  dec_page_prefix<kThreadsD>(p, pre, tid);  // 1. page prefix over the requests
  const long long P = pre[B];
  const int warp = tid / 32, l = tid % 32, q = l & 3, r = l >> 2;
  const long long nw = static_cast<long long>(gridDim.x) * kWarps, gw = static_cast<long long>(blockIdx.x) * kWarps + warp;
  const int f0 = static_cast<int>(gw * P / nw), f1 = static_cast<int>((gw + 1) * P / nw);
  if (f0 >= f1) return;  // warps are independent from here on: no CTA barrier below
  const int units = (f1 - f0) * kUnitsPerPage;
  std::uint8_t* ring = dsmem + warp * S * kSlot;
  auto advance = [&](int b, int f) { return dec_advance(pre, b, f); };
  const int b_start = dec_first_request(pre, B, f0);

  // Issue side: block-table window of request ib (lane i: page wbase + i). A page is
  // resolved at its first unit (quarter 0); its later units reuse iok / isrc / isc. A lane
  // copies the same chunks of every unit: E4M3 token l/8 + 4i, 16-byte chunk l%8; NVFP4
  // codes token l/4 + 8i, chunk l%4, and the block scales of token l (+ 32j).
  int ib = b_start;
  DecBtWindow bt;
  unsigned vmask = 0u;  // bit (u % S): unit u's physical page is valid
  bool iok = false;
  const std::uint8_t* isrc = p.k_data;  // this lane's first chunk of the page being issued
  const std::uint8_t* isc = p.k_scale;  // NVFP4: this lane's scale row of that page
  constexpr int kTokStep = kNv ? 8 : 4;  // tokens between a lane's chunks of a unit
  constexpr int kRowBytes = kNv ? 64 : 128;
  const int ltok = kNv ? (l >> 2) : (l >> 3), lch = kNv ? (l & 3) : (l & 7);
  const long long ks1 = p.k_stride[1];
  const long long lane_src = ltok * ks1 + lch * 16;
  const int lane_dst = ltok * kRowBytes + ((kNv ? lch : (lch ^ (ltok & 1))) << 4);
  auto issue = [&](int u) {
    const int quarter = u % kUnitsPerPage;
    if (quarter == 0) {
      const int f = f0 + u / kUnitsPerPage;
      ib = advance(ib, f);
      const long long phys = bt.phys(p, pre, ib, f - pre[ib], l);
      iok = phys >= 0 && phys < p.num_pages;
      const long long pp = iok ? phys : 0;  // no pointer arithmetic from an unmapped page
      isrc = p.k_data + pp * p.k_stride[0] + lane_src;
      if constexpr (kNv) isc = p.k_scale + pp * p.ks_stride[0] + l * p.ks_stride[1];
    }
    const unsigned bit = 1u << (u % S);
    vmask = iok ? (vmask | bit) : (vmask & ~bit);
    if (!iok) return;
    std::uint8_t* dst = ring + (u % S) * kSlot;
    const std::uint8_t* src = isrc + quarter * (kUnitTok * ks1);
#pragma unroll
    for (int i = 0; i < kUnitTok / kTokStep; ++i)
      cp_async16(dst + lane_dst + i * kTokStep * kRowBytes, src + i * (kTokStep * ks1));
    if constexpr (kNv) {
      const long long ss1 = p.ks_stride[1];
      const std::uint8_t* sc = isc + quarter * (kUnitTok * ss1);
#pragma unroll
      for (int j = 0; j < kUnitTok / 32; ++j) cp_async8(dst + kUnitTok * 64 + (l + 32 * j) * 8, sc + j * (32 * ss1));
    }
  };
  // Compute side: request cb's tile and Q fragments (score row sr = 8 nt + lane / 4 ->
  // query row sr / H, head sr % H; zero beyond the tile's rows). fetch_request issues the
  // raw Q loads (decode rows b Q .. need no length) and the tile's length read;
  // convert_request widens Q once the loads are needed.
  const int H = p.heads;
  const int hinv = (65536 + H - 1) / H;  // (sr * hinv) >> 16 == sr / H for sr < 64 and H <= 1024
  // 32-bit copies of the request's first workspace row (row0 H + sr < 4096 x 64: the
  // launcher's batch <= 4096 and Q H <= 64) and first position (seq_len - Q): one 64-bit
  // pair fewer to keep live across the loop.
  int rowh = 0, fpos = 0;
  int cb = -1;
  int srows = 0;
  std::uint32_t qw[NT][8];
  std::uint32_t bq[NT][8][2];
  auto fetch_request = [&](int b) {
    cb = b;
    const DecRequest d = dec_request(p, b, H);
    srows = d.srows;
    rowh = d.rowh;
    fpos = d.fpos;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint4 a, c;
      dec_load_q32(p, d, 8 * nt + r, H, q, a, c);
      qw[nt][0] = a.x; qw[nt][1] = a.y; qw[nt][2] = a.z; qw[nt][3] = a.w;
      qw[nt][4] = c.x; qw[nt][5] = c.y; qw[nt][6] = c.z; qw[nt][7] = c.w;
    }
  };
  auto convert_request = [&]() {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int s2 = 0; s2 < 8; ++s2) {
        g::f16x2_pair(qw[nt][s2], bq[nt][s2][0], bq[nt][s2][1]);
      }
  };

  // The first request's loads go out before the first copies, so their round trips
  // overlap the block-table read and the copies instead of following them.
  fetch_request(b_start);
#pragma unroll
  for (int u = 0; u < S - 1; ++u) {
    if (u < units) issue(u);
    cp_async_commit();
  }
  convert_request();

  const float kscale = kNv ? p.k_global : 1.0f;
  float mx[NT][2];
  for (int u = 0; u < units; ++u) {
    cp_async_wait<S - 2>();
    __syncwarp();  // unit u landed for every lane; slot (u - 1) % S is no longer read
    if (u + S - 1 < units) issue(u + S - 1);
    cp_async_commit();
    const int f = f0 + u / kUnitsPerPage, quarter = u % kUnitsPerPage;
    if (quarter == 0) {
      const int b = advance(cb, f);
      if (b != cb) {
        fetch_request(b);
        convert_request();
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) mx[nt][0] = mx[nt][1] = nan_f();  // fmaxf ignores NaN (D2)
    }
    const bool ok = (vmask >> (u % S)) & 1u;  // the same for every unit of a page
    const std::uint8_t* slot = ring + (u % S) * kSlot;
    if (ok) {
#pragma unroll 1
      for (int m = 0; m < kUnitTok / 16; m += MT) dec_mma_tiles<MT, NT, kNv>(slot, 16 * m, r, q, nv_tab, bq, mx);
    }
    if (quarter != kUnitsPerPage - 1) continue;
    if (ok) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int o = 4; o < 32; o *= 2) mx[nt][e] = fmaxf(mx[nt][e], __shfl_xor_sync(0xffffffffu, mx[nt][e], o));
    }
    // Lane (r, q) stores score row 8 nt + 2q + e for 2 nt + e = r (+ 8 for NT = 8; every
    // lane holds every maximum after the butterfly), NaN for an unmapped page (D2). The
    // workspace row is row0 H + sr; the query row sr / H by a multiply (sr < 64, H <= 64).
    const long long b = f - pre[cb];  // logical page
#pragma unroll
    for (int k0 = 0; k0 < 2 * NT; k0 += 8) {
      if (k0 + r >= 2 * NT) continue;
      float v = mx[k0 / 2][0];
#pragma unroll
      for (int k = 1; k < 8 && k0 + k < 2 * NT; ++k)
        if (r == k) v = mx[(k0 + k) / 2][(k0 + k) % 2];
      const int kk = k0 + r, sr = 8 * (kk >> 1) + 2 * q + (kk & 1);
      if (sr >= srows) continue;
      const int qr = (sr * hinv) >> 16;
      const int pos = fpos + qr;
      static_assert(kPage == 128, "pos >> 7 is pos / kPage");
      if (pos < 0 || b >= (pos >> 7)) continue;
      ws[static_cast<long long>(rowh + sr) * ws_ld + b] = ok ? v * kscale : nan_f();
    }
  }
  cp_async_wait<0>();
}

// ---------------------------------------------------------------------------------------
// Warpgroup decode scoring (session 20; the E4M3 index-K path): the same work split and
// page stream as decode_score_kernel, but a warpgroup (4 warps) owns a page range and
// scores each page as two m64 tiles with wgmma: A = 64 tokens of index K (each warp
// converts its 16 tokens straight into the A registers, exactly as above), B = the
// request's index q (F16 images, the same dim permutation) in a K-major SW128 tile in
// shared memory, N = 8 NT score rows. The Q fragments leave the registers (64 of 168 for
// 32 rows) and the HMMAs leave the issue slots (2 per token): one wgmma per k-step covers
// 64 tokens. The page maximum: a reduce-scatter over each warp's 8 row lanes, then the 4
// warps' column maxima through shared memory (one warpgroup barrier per page).
// Per warp and page the ring holds the warp's 32 tokens: stripe 0 = page tokens 16 w ..
// 16 w + 15 (tile 0), stripe 1 = 64 + 16 w .. (tile 1), w = the warp's index in its group.
// Exact scoring takes it for E4M3 only: NVFP4 stays on decode_score_kernel, which measured
// faster than the same kernel with the F16 NVFP4 lookup (commit 4b270ad has that form; see
// launch_decode_scores_nt).
// kQ8 (opt-in, FLASHMSA_FP8_QK=e4m3, NVFP4 index K only; session 31): the same kernel on
// QGMMA, wgmma m64nNk32 E4M3 with A = the dequantised E4M3 bytes of 64 tokens (no F16
// conversion) and B = the raw E4M3 index q (one 128-byte SW128 panel per row). Not the
// default: QGMMA's accumulation is not FP32 (spec D7/D8, CudaIndexer.Fp8QkPrecision).
// ---------------------------------------------------------------------------------------
#ifndef FLASHMSA_DECWG_STAGES
#define FLASHMSA_DECWG_STAGES 3
#endif
#ifndef FLASHMSA_DECWG_GROUPS
#define FLASHMSA_DECWG_GROUPS 4
#endif
// Warpgroups per CTA (one CTA per SM): 4 (128 registers) up to 32 score rows, else 3 (168
// registers). E4M3 with 4 groups keeps 2 ring stages per warp (3 x 4 KB per warp would not
// fit): 3-14 % faster than 3 groups x 3 stages on the H200 (session 20 run D).
#ifndef FLASHMSA_DECWG_NV_STAGES
#define FLASHMSA_DECWG_NV_STAGES 3
#endif
template <int NT, bool kQ8 = false>
constexpr int decwg_groups() { return NT > 4 ? 3 : FLASHMSA_DECWG_GROUPS; }
// Ring stages per warp (pages in flight + 1): 2 where 4 E4M3 groups leave no room for 3.
template <int NT, bool kQ8 = false>
constexpr int decwg_stages() {
  return kQ8 ? FLASHMSA_DECWG_NV_STAGES : decwg_groups<NT>() == 4 ? 2 : FLASHMSA_DECWG_STAGES;
}
// A warp's 32 tokens of one page: E4M3 rows, or NVFP4 codes then block scales.
template <bool kQ8 = false>
constexpr int decwg_slot_bytes() { return kQ8 ? 32 * 72 : 32 * 128; }
// Q tile bytes per score row: F16 images (two 128-byte panels), or E4M3 (one).
template <bool kQ8 = false>
constexpr int decwg_qrow_bytes() { return kQ8 ? 128 : 256; }
template <int NT, bool kQ8 = false>
constexpr int decwg_smem_bytes() {
  // 1024 (SW128 alignment) + Q tiles + rings + page-max exchange (2 pages x 4 warps x N).
  return 1024 + decwg_groups<NT, kQ8>() * (8 * NT * decwg_qrow_bytes<kQ8>() +
                                           4 * decwg_stages<NT, kQ8>() * decwg_slot_bytes<kQ8>() + 2 * 4 * 8 * NT * 4);
}
// 8192: the static shared memory (the scan's storage for 512 threads, kQ8's 4 KB table;
// ptxas: 2208 / 6304 bytes).
static_assert(decwg_smem_bytes<8>() + 4 * (kDecMaxBatch + 1) + 8192 <= 227 * 1024 &&
                  decwg_smem_bytes<4>() + 4 * (kDecMaxBatch + 1) + 8192 <= 227 * 1024 &&
                  decwg_smem_bytes<8, true>() + 4 * (kDecMaxBatch + 1) + 8192 <= 227 * 1024 &&
                  decwg_smem_bytes<4, true>() + 4 * (kDecMaxBatch + 1) + 8192 <= 227 * 1024,
              "warpgroup decode scoring: smem must fit the 227 KB per CTA");
static_assert(FLASHMSA_DECWG_NV_STAGES >= 2 && FLASHMSA_DECWG_NV_STAGES <= 32,
              "the NVFP4 ring keeps one page in flight at least (vmask: 32 bits)");
static_assert(FLASHMSA_DECWG_STAGES >= 2, "the ring keeps one page in flight at least");

__device__ __forceinline__ void st_shared_u32(std::uint32_t addr, std::uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <int NT, bool kQ8>
__global__ void __launch_bounds__(128 * decwg_groups<NT, kQ8>(), 1)
    decode_score_wg_kernel(IndexerParams p, float* ws, long long ws_ld) {
  constexpr int kGroups = decwg_groups<NT, kQ8>();
  constexpr int kThreadsD = 128 * kGroups;
  constexpr int N = 8 * NT;
  constexpr int kSlot = decwg_slot_bytes<kQ8>();
  constexpr int kQRow = decwg_qrow_bytes<kQ8>();
  constexpr int S = decwg_stages<NT, kQ8>();
  extern __shared__ __align__(16) std::uint8_t dsmem[];
  // Pointer arithmetic on dsmem itself, so the compiler keeps the shared address space (LDS).
  std::uint8_t* base = dsmem + ((1024u - (g::smem_addr(dsmem) & 1023u)) & 1023u);
  std::uint8_t* qtiles = base;                                        // [groups][kQRow / 128 panels][N][128]
  std::uint8_t* rings = qtiles + kGroups * N * kQRow;                 // [warps][S][kSlot]
  float* red_all = reinterpret_cast<float*>(rings + 4 * kGroups * S * kSlot);  // [groups][2][4][N]
  int* pre = reinterpret_cast<int*>(red_all + kGroups * 2 * 4 * N);   // [batch + 1]
  const int B = p.batch;
  const int tid = threadIdx.x;
  // kQ8: the 8 E4M3 magnitudes of every block-scale byte (covered by the scan's barrier).
  __shared__ uint4 nv_tab_s[kQ8 ? 256 : 1];
  const uint4* nv_tab = nv_tab_s;
  if constexpr (kQ8) g::fill_nvfp4_luts<kThreadsD>(nv_tab_s, tid);  // covered by dec_page_prefix's barrier
  dec_page_prefix<kThreadsD>(p, pre, tid);
  const long long P = pre[B];
  const int warp = tid / 32, l = tid % 32, q = l & 3, r = l >> 2;
  // The warpgroup index broadcast from lane 0, so the compiler knows it is warp-uniform and
  // keeps the Q tile's descriptors in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, warp / 4, 0), wq = warp % 4, wt = tid % 128;
  const long long nwg = static_cast<long long>(gridDim.x) * kGroups;
  const long long gwg = static_cast<long long>(blockIdx.x) * kGroups + wg;
  const int f0 = static_cast<int>(gwg * P / nwg), f1 = static_cast<int>((gwg + 1) * P / nwg);
  if (f0 >= f1) return;  // uniform per warpgroup: only warpgroup barriers below
  const int pages = f1 - f0;
  std::uint8_t* ring = rings + warp * S * kSlot;
  std::uint8_t* qtile = qtiles + wg * N * kQRow;
  float* red = red_all + wg * 2 * 4 * N;
  const std::uint32_t qtile_addr = g::smem_addr(qtile);
  auto advance = [&](int b, int f) { return dec_advance(pre, b, f); };
  const int b_start = dec_first_request(pre, B, f0);

  // Issue side (per warp): page u of the range -> its 32 tokens. A lane copies the same
  // chunks of every page: E4M3 slot token l/8 + 4i, chunk l%8; NVFP4 codes slot token
  // l/4 + 8i, chunk l%4, and the block scales of slot token l. Slot token st is page token
  // st + 16 w (st < 16) or st + 48 + 16 w.
  int ib = b_start;
  DecBtWindow bt;
  unsigned vmask = 0u;
  constexpr int kTokStep = kQ8 ? 8 : 4;  // tokens between a lane's chunks of a page
  constexpr int kRowBytes = kQ8 ? 64 : 128;
  constexpr int kHalfI = 16 / kTokStep;  // chunks i < kHalfI are stripe 0
  const int ltok = kQ8 ? (l >> 2) : (l >> 3), lch = kQ8 ? (l & 3) : (l & 7);
  const long long ks1 = p.k_stride[1];
  const long long lane_src = (ltok + 16 * wq) * ks1 + lch * 16;
  const int lane_dst = ltok * kRowBytes + ((kQ8 ? lch : (lch ^ (ltok & 1))) << 4);
  // kQ8: this lane's block-scale row (slot token l)
  const long long lane_sc = kQ8 ? static_cast<long long>(l + (l < 16 ? 16 * wq : 48 + 16 * wq)) * p.ks_stride[1] : 0;
  const int tok_step = static_cast<int>(kTokStep * ks1), tok_jump = static_cast<int>((kTokStep + 48) * ks1);
  auto issue = [&](int u) {
    const int f = f0 + u;
    ib = advance(ib, f);
    const long long phys = bt.phys(p, pre, ib, f - pre[ib], l);
    const bool iok = phys >= 0 && phys < p.num_pages;
    const unsigned bit = 1u << (u % S);
    vmask = iok ? (vmask | bit) : (vmask & ~bit);
    if (!iok) return;
    const long long pp = phys;
    std::uint8_t* dst = ring + (u % S) * kSlot;
    const std::uint8_t* src = p.k_data + pp * p.k_stride[0] + lane_src;
#pragma unroll
    for (int i = 0; i < 32 / kTokStep; ++i) {  // 32-bit steps (decode_mma_applies bounds ks1)
      cp_async16(dst + lane_dst + i * kTokStep * kRowBytes, src);
      src += i == kHalfI - 1 ? tok_jump : tok_step;
    }
    if constexpr (kQ8) cp_async8(dst + 32 * 64 + l * 8, p.k_scale + pp * p.ks_stride[0] + lane_sc);
  };

  // Request side (per warpgroup): the Q tile and the store geometry of request cb.
  const int H = p.heads;
  const int hinv = (65536 + H - 1) / H;  // (sr * hinv) >> 16 == sr / H for sr < 64
  int rowh = 0, fpos = 0, srows = 0, cb = -1;
  // fetch_request issues the request's Q loads (and sets its store geometry); store_request
  // writes the F16 images into the tile. The first request's loads go out before the ring's
  // first copies, so their round trip overlaps them.
  constexpr int kQTasks = (N * 4 + 127) / 128;  // (score row, 32-dim quarter) per thread
  uint4 qa[kQTasks], qc[kQTasks];
  auto fetch_request = [&](int b) {
    cb = b;
    const DecRequest d = dec_request(p, b, H);
    srows = d.srows;
    rowh = d.rowh;
    fpos = d.fpos;
#pragma unroll
    for (int i = 0; i < kQTasks; ++i) {
      const int task = wt + 128 * i;
      dec_load_q32(p, d, task < N * 4 ? task >> 2 : N, H, task & 3, qa[i], qc[i]);  // n = N: zeros
    }
  };
  // Every wgmma reading the previous tile has retired: each warp waited for its last page's
  // wgmmas before that page's barrier.
  auto store_request = [&]() {
#pragma unroll
    for (int i = 0; i < kQTasks; ++i) {
      const int task = wt + 128 * i, n = task >> 2, qq = task & 3;
      if (task >= N * 4) continue;
      const std::uint32_t w[8] = {qa[i].x, qa[i].y, qa[i].z, qa[i].w, qc[i].x, qc[i].y, qc[i].z, qc[i].w};
      // The row's address is made opaque so that ptxas recomputes the 16 swizzled
      // offsets here instead of keeping them live across the page loop (registers).
      std::uint32_t row_addr;
      asm volatile("mov.b32 %0, %1;" : "=r"(row_addr) : "r"(qtile_addr + n * 128 + 4 * qq));
      const int n7 = n & 7;
      if constexpr (kQ8) {
        // E4M3 bytes, k32-step j / 2: K 16 (j % 2) + 4 qq + {0..3} <- dims 32 qq + 4 j + {0..3}
        // (row byte 32 (j / 2) + 16 (j % 2) + 4 qq: 16-byte chunk j), as the A registers.
#pragma unroll
        for (int j = 0; j < 8; ++j) st_shared_u32(row_addr + ((j ^ n7) << 4), w[j]);
      } else {
#pragma unroll
        for (int s = 0; s < 8; ++s) {  // k-step s: K 16 s + 2 qq + {0,1} <- dims 32 qq + 4 s + {0,1}, +8 <- +2
          std::uint32_t lo, hi;
          g::f16x2_pair(w[s], lo, hi);
          const std::uint32_t at = row_addr + (s >> 2) * (N * 128);
          st_shared_u32(at + ((((2 * s) & 7) ^ n7) << 4), lo);
          st_shared_u32(at + ((((2 * s + 1) & 7) ^ n7) << 4), hi);
        }
      }
    }
    fence_proxy_async();
    named_barrier(1 + wg, 128);
  };


  fetch_request(b_start);
#pragma unroll
  for (int u = 0; u < S - 1; ++u) {
    if (u < pages) issue(u);
    cp_async_commit();
  }
  store_request();
  const std::uint64_t qdesc = g::desc_k_sw128(qtile_addr);
  for (int u = 0; u < pages; ++u) {
    cp_async_wait<S - 2>();
    __syncwarp();
    if (u + S - 1 < pages) issue(u + S - 1);
    cp_async_commit();
    const int f = f0 + u;
    {
      const int b = advance(cb, f);
      if (b != cb) {
        fetch_request(b);
        store_request();
      }
    }
    float mx[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) mx[nt][0] = mx[nt][1] = nan_f();
    const bool ok = (vmask >> (u % S)) & 1u;  // uniform per warpgroup (same page)
    const std::uint8_t* slot = ring + (u % S) * kSlot;
    // A registers of tile h (slot tokens 16 h + r, + 8), D += A . Q^T over the kSteps
    // k-steps (8 of k16 in F16; kQ8: 4 of k32 on the E4M3 bytes, word 2 s -> a[s][0 | 1],
    // word 2 s + 1 -> a[s][2 | 3], the K order of store_request).
    constexpr int kSteps = kQ8 ? 4 : 8;
    auto convert_tile = [&](int h, std::uint32_t (&a)[kSteps][4]) {
      std::uint32_t wa[8], wb2[8];
      dec_row_words<kQ8, 32>(slot, 16 * h + r, q, nv_tab, wa);  // 32-token slots
      dec_row_words<kQ8, 32>(slot, 16 * h + r + 8, q, nv_tab, wb2);
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if constexpr (kQ8) {
          a[s][0] = wa[2 * s];
          a[s][1] = wb2[2 * s];
          a[s][2] = wa[2 * s + 1];
          a[s][3] = wb2[2 * s + 1];
        } else {
          g::f16x2_pair(wa[s], a[s][0], a[s][2]);
          g::f16x2_pair(wb2[s], a[s][1], a[s][3]);
        }
      }
    };
    auto mma_tile = [&](const std::uint32_t (&a)[kSteps][4], float (&d)[4 * NT]) {
      g::fence();
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if constexpr (kQ8) g::e4m3_rs_bk<N>(a[s], g::desc_add(qdesc, 32 * s), d, s > 0);
        else g::f16_rs_bk<N>(a[s], g::desc_add(qdesc, (s >> 2) * (N * 128) + (s & 3) * 32), d, s > 0);
      }
      g::commit();
    };
    auto fold = [&](float (&d)[4 * NT]) {
      g::fence_operands(d);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        mx[nt][0] = fmaxf(mx[nt][0], fmaxf(d[4 * nt + 0], d[4 * nt + 2]));
        mx[nt][1] = fmaxf(mx[nt][1], fmaxf(d[4 * nt + 1], d[4 * nt + 3]));
      }
    };
    if (ok) {
#pragma unroll 1
      for (int h = 0; h < 2; ++h) {
        std::uint32_t a[kSteps][4];
        float d[4 * NT];
        convert_tile(h, a);
        mma_tile(a, d);
        g::wait<0>();
        fold(d);
      }
    }
    // Max over the 8 lanes of a column (lane bits 2-4 = r) as a reduce-scatter: each xor
    // step halves the values a lane keeps (the lane with the bit set keeps the upper half).
    // Lane (r, q) ends with values j = off + k of mx (j = 2 nt + e: column 8 nt + 2 q + e).
    constexpr int V = 2 * NT;
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = mx[j / 2][j % 2];
    int off = 0, cnt = V;
#pragma unroll
    for (int o = 16; o >= 4; o /= 2) {
      const bool upper = (l & o) != 0;
      if (cnt > 1) {
        const int half = cnt / 2;
#pragma unroll
        for (int j = 0; j < half; ++j) {
          const float send = upper ? v[j] : v[j + half];
          const float keep = upper ? v[j + half] : v[j];
          v[j] = fmaxf(keep, __shfl_xor_sync(0xffffffffu, send, o));
        }
        off += upper ? half : 0;
        cnt = half;
      } else {
        v[0] = fmaxf(v[0], __shfl_xor_sync(0xffffffffu, v[0], o));
      }
    }
    // This warp's column maxima -> red, then thread wt < N of the group stores score row
    // wt's page maximum over the 4 warps.
    float* rp = red + (u & 1) * 4 * N;
    {
      constexpr int kKeep = V >= 8 ? V / 8 : 1;  // values per lane after the scatter
      constexpr int kDupBits = V >= 8 ? 0 : (V == 4 ? 4 : 12);  // lane bits holding duplicates
      if ((l & kDupBits) == 0) {
#pragma unroll
        for (int k = 0; k < kKeep; ++k) {
          const int j = off + k;
          rp[wq * N + 8 * (j >> 1) + 2 * q + (j & 1)] = v[k];
        }
      }
    }
    named_barrier(1 + wg, 128);
    if (wt < srows) {
      const int sr = wt;
      const float v = fmaxf(fmaxf(rp[sr], rp[N + sr]), fmaxf(rp[2 * N + sr], rp[3 * N + sr]));
      const long long b = f - pre[cb];  // logical page
      const int pos = fpos + ((sr * hinv) >> 16);
      static_assert(kPage == 128, "pos >> 7 is pos / kPage");
      if (pos >= 0 && b < (pos >> 7))
        ws[static_cast<long long>(rowh + sr) * ws_ld + b] = ok ? (kQ8 ? v * p.k_global : v) : nan_f();
    }
  }
  cp_async_wait<0>();
}

// Request and position of query row `row` (D4); false for rows outside every request.
__device__ __forceinline__ bool locate(const IndexerParams& p, long long row, int* req, long long* pos) {
  if (p.batch <= 0) return false;
  long long start, q_len;
  int r;
  if (p.cu_seqlens == nullptr) {
    r = static_cast<int>(row / p.queries_per_request);
    if (r >= p.batch) return false;
    start = static_cast<long long>(r) * p.queries_per_request;
    q_len = p.queries_per_request;
  } else {
    int lo = 0, hi = p.batch - 1;
    while (lo < hi) {  // last r with cu[r] <= row
      const int mid = (lo + hi + 1) / 2;
      if (p.cu_seqlens[mid * p.cu_stride] <= row) lo = mid;
      else hi = mid - 1;
    }
    r = lo;
    start = p.cu_seqlens[lo * p.cu_stride];
    const long long end = p.cu_seqlens[(lo + 1) * p.cu_stride];
    if (row < start || row >= end) return false;
    q_len = end - start;
  }
  *req = r;
  *pos = static_cast<long long>(p.seq_lens[r * p.seq_stride]) - q_len + (row - start);
  return true;
}

// Order-preserving key of a page score: larger score = larger key; NaN = 1 (below every
// number, D2); -0 and +0 equal; 0 is reserved for padding.
__device__ __forceinline__ std::uint32_t score_key(float f) {
  const std::uint32_t u = __float_as_uint(f);
  // Branch-free (selects): ~u for a negative score, u | 2^31 for a positive one.
  const std::uint32_t k = u ^ (static_cast<std::uint32_t>(static_cast<std::int32_t>(u) >> 31) | 0x80000000u);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const bool zero = (u << 1) == 0u;  // -0 ties with +0
  return nan ? 1u : zero ? 0x80000000u : k;
}

// Top-k selection: 32 candidates per thread, 1 to 8 warps per row (rows of up to 1,024
// candidates per warp, 8,192 in all, D10).
constexpr int kTopkKeys = 32;  // the group trees (LaneGroups) are written for 32
constexpr int kTopkMaxWarps = kMaxCandidates / (32 * kTopkKeys);
static_assert(kTopkKeys == 32 && kTopkMaxWarps == 8, "top-k layout: 32 keys per lane, <= 8 warps");

// A lane's kTopkKeys keys in four groups of eight. Keys whose bit is set in `dropped`
// count as 0. Ties go to the smaller index everywhere (the left operand of every
// comparison), so the lane's best is the largest key with the smallest index. After a
// drop only the dropped key's group is recomputed (7 steps) and the four group bests
// combined (3 steps), instead of a 31-step tree over all 32 keys. (Masks and constant
// group indices, never an indexed register array, which the compiler would move to
// local memory.)
struct LaneGroups {
  std::uint32_t k[4];
  int i[4];
};

template <int G>
__device__ __forceinline__ void group_best(const std::uint32_t (&key)[kTopkKeys], std::uint32_t dropped,
                                           LaneGroups& g) {
  std::uint32_t tk[4];
  int ti[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int ia = 8 * G + 2 * j, ib = ia + 1;
    const std::uint32_t a = (dropped >> ia) & 1u ? 0u : key[ia];
    const std::uint32_t b = (dropped >> ib) & 1u ? 0u : key[ib];
    const bool l = a >= b;
    tk[j] = l ? a : b;
    ti[j] = l ? ia : ib;
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const bool l = tk[2 * j] >= tk[2 * j + 1];
    tk[j] = l ? tk[2 * j] : tk[2 * j + 1];
    ti[j] = l ? ti[2 * j] : ti[2 * j + 1];
  }
  const bool l = tk[0] >= tk[1];
  g.k[G] = l ? tk[0] : tk[1];
  g.i[G] = l ? ti[0] : ti[1];
}

__device__ __forceinline__ void groups_best(const LaneGroups& g, std::uint32_t* bk, int* bi) {
  const bool l01 = g.k[0] >= g.k[1], l23 = g.k[2] >= g.k[3];
  const std::uint32_t k01 = l01 ? g.k[0] : g.k[1], k23 = l23 ? g.k[2] : g.k[3];
  const int i01 = l01 ? g.i[0] : g.i[1], i23 = l23 ? g.i[2] : g.i[3];
  const bool l = k01 >= k23;
  *bk = l ? k01 : k23;
  *bi = l ? i01 : i23;
}

// Recomputes the group holding key `idx` (after it was dropped).
__device__ __forceinline__ void regroup(const std::uint32_t (&key)[kTopkKeys], std::uint32_t dropped, int idx,
                                        LaneGroups& g) {
  switch (idx >> 3) {
    case 0: group_best<0>(key, dropped, g); break;
    case 1: group_best<1>(key, dropped, g); break;
    case 2: group_best<2>(key, dropped, g); break;
    default: group_best<3>(key, dropped, g); break;
  }
}

// Top-k of one row (D1, D2), run by the whole CTA (1 to 8 warps): candidates s[b * cs],
// b < min(L, W, 32 * blockDim.x). Thread t holds candidates t + T i (T = blockDim.x,
// i < 32: interleaved, so the loads are coalesced and equal scores, which go to the
// smallest ids, are spread over the lanes). A tournament: each thread keeps its head
// (its largest key, the smallest id among equal keys) and the next key after it. Each of
// the `take` rounds takes the largest head and, among threads holding it, the smallest
// id (two reductions per warp, then across warps through shared memory, one barrier per
// round); the owner promotes its next key to head, and only a thread that wins a second
// time recomputes its best (one group of eight and the four group bests). Exactly `take`
// rounds: equal scores cost no more than spread ones. Winners come out in (score desc,
// id asc) order. History pages b >= W (not scored) count as NaN, after the scored ones;
// the local page L is last. Writes out[j * os] for j < K.
__device__ __forceinline__ void select_row(const float* s, long long cs, long long W, long long L, int K,
                                           std::int32_t* out, long long os) {
  __shared__ uint2 part[2][kTopkMaxWarps];
  constexpr unsigned kFull = 0xffffffffu;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
  const int T = blockDim.x;
  if (L < 0 || L + 1 <= K) {
    for (int j = tid; j < K; j += blockDim.x) out[j * os] = (L >= 0 && j <= L) ? j : -1;
    return;
  }
  long long nl = L < W ? L : W;
  if (nl > static_cast<long long>(T) * kTopkKeys) nl = static_cast<long long>(T) * kTopkKeys;
  const int n = static_cast<int>(nl);
  const int need = K - 1;
  const int take = need < n ? need : n;
  std::uint32_t key[kTopkKeys];
  {
    // All 32 loads first (clamped in-bounds, unconditional), so they are in flight together;
    // then the keys (0 = padding beyond n).
    float x[kTopkKeys];  // read only where tid + T i < n
    if (n > 0) {  // n = 0 (no scored column): nothing to read, take = 0
#pragma unroll
      for (int i = 0; i < kTopkKeys; ++i) x[i] = s[static_cast<long long>(min(tid + T * i, n - 1)) * cs];
    }
#pragma unroll
    for (int i = 0; i < kTopkKeys; ++i) key[i] = tid + T * i < n ? score_key(x[i]) : 0u;
  }
  // Head (hk, hi) and next (nk, ni). `dropped` holds the head (and the next once it is
  // promoted); the groups are current for the next key's removal only while !stale.
  LaneGroups grp;
  group_best<0>(key, 0u, grp);
  group_best<1>(key, 0u, grp);
  group_best<2>(key, 0u, grp);
  group_best<3>(key, 0u, grp);
  std::uint32_t hk, nk;
  int hi, ni;
  groups_best(grp, &hk, &hi);
  std::uint32_t dropped = 1u << hi;
  regroup(key, dropped, hi, grp);
  groups_best(grp, &nk, &ni);
  bool stale = false;
  int mine = -1;  // thread r keeps the id chosen in round r
  for (int r = 0; r < take; ++r) {
    const std::uint32_t hid = static_cast<std::uint32_t>(tid + T * hi);
    std::uint32_t m = __reduce_max_sync(kFull, hk);
    std::uint32_t id = __reduce_min_sync(kFull, hk == m ? hid : kFull);
    if (nwarps > 1) {  // block-uniform
      if (lane == 0) part[r & 1][warp] = make_uint2(m, id);
      __syncthreads();  // double-buffered by round parity: one barrier per round
      const uint2 e = lane < nwarps ? part[r & 1][lane] : make_uint2(0u, kFull);
      m = __reduce_max_sync(kFull, e.x);
      id = __reduce_min_sync(kFull, e.x == m ? e.y : kFull);
    }
    if (tid == r) mine = static_cast<int>(id);
    if (hid == id) {  // the owner: its next key becomes its head
      if (!stale) {
        hk = nk;
        hi = ni;
        stale = true;
      } else {  // second win: the best after the current head, from the groups
        regroup(key, dropped, hi, grp);
        groups_best(grp, &hk, &hi);
      }
      dropped |= 1u << hi;
    }
  }
  if (tid < take) out[tid * os] = mine;
  // History beyond the scored columns (block table narrower than L): NaN, by id.
  for (int j = take + tid; j < need; j += blockDim.x) out[j * os] = n + (j - take);
  if (tid == 0) out[need * os] = static_cast<int>(L);
}

// Threads of a top-k CTA for rows of up to `width` candidates: one warp per 1,024.
unsigned topk_threads(long long width) {
  const long long cand = width < kMaxCandidates ? width : kMaxCandidates;
  long long warps = (cand + 32 * kTopkKeys - 1) / (32 * kTopkKeys);
  if (warps < 1) warps = 1;
  return static_cast<unsigned>(32 * warps);
}

// Indexer top-k: one CTA per score row (row, head) of the workspace; also writes
// page_scores (b < L: the score, NaN beyond the block table; b >= L: -inf).
__global__ void __launch_bounds__(32 * kTopkMaxWarps) topk_kernel(IndexerParams p, const float* ws, long long ws_ld) {
  const long long v = blockIdx.x;
  const long long row = v / p.heads;
  const int h = static_cast<int>(v % p.heads);
  int req;
  long long pos;
  if (!locate(p, row, &req, &pos)) return;
  const long long L = pos < 0 ? -1 : pos / kPage;
  const long long W = p.bt_width;
  const float* s = ws + v * ws_ld;
  select_row(s, 1, W, L, p.topk_k, p.topk + row * p.topk_stride[0] + h * p.topk_stride[1], p.topk_stride[2]);
  if (p.page_scores != nullptr) {
    float* o = p.page_scores + row * p.ps_stride[0] + h * p.ps_stride[1];
    for (long long b = threadIdx.x; b < p.ps_width; b += blockDim.x)
      o[b * p.ps_stride[2]] = b < L ? (b < W ? s[b] : nan_f()) : -INFINITY;
  }
}

// topk_select on given scores: one CTA per row.
__global__ void __launch_bounds__(32 * kTopkMaxWarps) topk_select_kernel(TopkSelectParams p) {
  const long long r = blockIdx.x;
  const long long L = p.local_page[r * p.lp_stride];
  select_row(p.scores + r * p.s_stride[0], p.s_stride[1], p.width, L, p.k, p.topk + r * p.topk_stride[0],
             p.topk_stride[1]);
}


// Prefill, E4M3 index-K scored exactly (BF16 images): every CTA tile that scores a page
// converted it again in shared memory (up to 64 times per page at (2048, 1M, 4 heads)),
// and the conversion, not the wgmma, bounded the kernel (E4M3 6.7 ms against BF16 5.4 ms
// there, session 16). preconvert_kernel writes each referenced history page once as its
// exact BF16 image, contiguous by block-table slot: out[(b W + e) * 128 + tok][128 dims],
// and the slot table bt16[b, e] = b W + e, or -1 where the entry is out of range or the
// page is past the request's pages (seq_lens, read on the device). The BF16 copy kernel
// then scores the copy with the same tiles, chunks and sums, so the scores are
// bit-identical to the converting path. One CTA per slot, 256 threads x 4 x 16 bytes.
constexpr int kPreThreads = 256;
__global__ void __launch_bounds__(kPreThreads) preconvert_kernel(IndexerParams p, std::uint8_t* out,
                                                                 std::int32_t* bt16) {
  const long long slot = blockIdx.x;
  const long long W = p.bt_width;
  const int b = static_cast<int>(slot / W);
  const long long e = slot % W;
  const long long seq = p.seq_lens[b * p.seq_stride];
  const long long pages = seq > 0 ? (seq + kPage - 1) / kPage : 0;
  const long long phys = e < pages ? p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]] : -1;
  const bool ok = phys >= 0 && phys < p.num_pages;
  if (threadIdx.x == 0) bt16[slot] = ok ? static_cast<std::int32_t>(slot) : -1;
  if (!ok) return;
  // Coalesced: item i = (token i / 8, 16-byte chunk i % 8); a warp reads 4 whole 128-byte
  // E4M3 rows and writes 4 whole 256-byte BF16 rows per step.
  const std::uint8_t* src = p.k_data + phys * p.k_stride[0];
  std::uint8_t* dst = out + slot * kPage * 256;
#pragma unroll
  for (int j = 0; j < kPage * 8 / kPreThreads; ++j) {
    const int i = threadIdx.x + j * kPreThreads;
    const int tok = i >> 3, c = i & 7;
    const uint4 v = *reinterpret_cast<const uint4*>(src + tok * p.k_stride[1] + c * 16);
    uint4 o0, o1;
    e4m3x4_to_bf16(v.x, &o0.x);
    e4m3x4_to_bf16(v.y, &o0.z);
    e4m3x4_to_bf16(v.z, &o1.x);
    e4m3x4_to_bf16(v.w, &o1.z);
    uint4* d = reinterpret_cast<uint4*>(dst + tok * 256 + c * 32);
    d[0] = o0;
    d[1] = o1;
  }
}

// Whether the prefill E4M3 path pre-converts (FLASHMSA_INDEXER_PRECONVERT=0 turns it off,
// for A/B), and the largest copy it makes: above that the converting kernel runs
// (logged once).
bool preconvert_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FLASHMSA_INDEXER_PRECONVERT");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}
constexpr std::size_t kPreconvertMaxBytes = std::size_t(1) << 30;

// Whether prefill over a BF16 (or pre-converted) index-K uses 256-row tiles
// (FLASHMSA_INDEXER_WIDE=0: 128-row tiles, for A/B).
bool wide_tiles_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("FLASHMSA_INDEXER_WIDE");
    return e == nullptr || std::strcmp(e, "0") != 0;
  }();
  return on;
}

template <class Kern>
cudaError_t set_smem(Kern k, int bytes) {
  return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

template <bool kFp8, int kLoad, bool kSplit = false, int kM = kTileRows>
cudaError_t launch_scores(const IndexerParams& p, const int2* map, float* ws, long long ws_ld,
                          int R, long long tiles, int chunk, int splits, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<kFp8, kM>(kLoad);
  // Kernel attributes are per device: set them once per device ordinal (retried after a
  // failure), as the attention launchers do.
  static bool configured[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    err = set_smem(score_kernel<kFp8, kLoad, kSplit, kM>, kSmem);
    if (err != cudaSuccess) return err;
    // Largest shared-memory carveout: two CTAs per SM need up to 228 KB.
    err = cudaFuncSetAttribute(score_kernel<kFp8, kLoad, kSplit, kM>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    if (err != cudaSuccess) return err;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(splits));
  score_kernel<kFp8, kLoad, kSplit, kM><<<grid, kThreads, kSmem, stream>>>(p, map, ws, ws_ld, R, chunk);
  return cudaGetLastError();
}

template <int NT, bool kNv>
cudaError_t launch_decode_scores(const IndexerParams& p, float* ws, long long ws_ld, int sms, cudaStream_t stream) {
  static_assert(kNv, "the per-warp decode scorer runs NVFP4 only (its shared-memory budget assumes 72 bytes per token)");
  const int smem = dec_smem_bytes<NT, kNv>() + 4 * (p.batch + 1);
  static bool configured[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    err = set_smem(decode_score_kernel<NT, kNv>, dec_smem_bytes<NT, kNv>() + 4 * (kDecMaxBatch + 1));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(decode_score_kernel<NT, kNv>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    if (err != cudaSuccess) return err;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  // One wave: the work is balanced by pages inside the kernel.
  decode_score_kernel<NT, kNv><<<sms * dec_ctas_per_sm<NT>(), 32 * dec_warps<NT>(), smem, stream>>>(p, ws, ws_ld);
  return cudaGetLastError();
}

// The decode scoring kernels apply: decode, E4M3 index q over E4M3 / NVFP4 index K scored
// exactly (decode_score_kernel, decode_score_wg_kernel) or, NVFP4 with Fp8Qk::kE4m3, on
// QGMMA (decode_score_wg_kernel<NT, true>), at most 64 score rows per request, and the
// 16-byte (NVFP4 scales: 8-byte) alignment their vector loads and copies need. Anything
// else takes score_kernel.
// The decode scoring kernel is the warpgroup one (decode_score_wg_kernel): E4M3 index K,
// or NVFP4 on QGMMA (see launch_decode_scores_nt).
bool decode_uses_wg_kernel(const IndexerParams& p, Fp8Qk mode) {
  return p.k_format == 1 || (p.k_format == 2 && mode == Fp8Qk::kE4m3);
}

bool decode_mma_applies(const IndexerParams& p, bool decode, Fp8Qk mode) {
  if (!decode || !p.q_e4m3 || p.k_format == 0) return false;
  if (mode != Fp8Qk::kExact && !(mode == Fp8Qk::kE4m3 && p.k_format == 2)) return false;
  if (static_cast<long long>(p.queries_per_request) * p.heads > 64 || p.batch > kDecMaxBatch) return false;
  if (static_cast<long long>(p.batch) * p.bt_width >= (1LL << 31)) return false;  // int page prefix
  // The warpgroup kernels' 32-bit token steps (up to 56 tokens).
  if (decode_uses_wg_kernel(p, mode) && p.k_stride[1] > (1 << 20)) return false;
  auto al = [](std::uintptr_t v, unsigned a) { return v % a == 0; };
  bool ok = al(reinterpret_cast<std::uintptr_t>(p.q), 16) && al(static_cast<std::uintptr_t>(p.q_stride[0]), 16) &&
            al(static_cast<std::uintptr_t>(p.q_stride[1]), 16) && al(reinterpret_cast<std::uintptr_t>(p.k_data), 16) &&
            al(static_cast<std::uintptr_t>(p.k_stride[0]), 16) && al(static_cast<std::uintptr_t>(p.k_stride[1]), 16);
  if (p.k_format == 2)
    ok = ok && al(reinterpret_cast<std::uintptr_t>(p.k_scale), 8) &&
         al(static_cast<std::uintptr_t>(p.ks_stride[0]), 8) && al(static_cast<std::uintptr_t>(p.ks_stride[1]), 8);
  return ok;
}

template <int NT, bool kQ8 = false>
cudaError_t launch_decode_scores_wg(const IndexerParams& p, float* ws, long long ws_ld, int sms, cudaStream_t stream) {
  const int smem = decwg_smem_bytes<NT, kQ8>() + 4 * (p.batch + 1);
  static bool configured[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev < 0 || dev >= 64 || !configured[dev]) {
    err = set_smem(decode_score_wg_kernel<NT, kQ8>, decwg_smem_bytes<NT, kQ8>() + 4 * (kDecMaxBatch + 1));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(decode_score_wg_kernel<NT, kQ8>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    if (err != cudaSuccess) return err;
    if (dev >= 0 && dev < 64) configured[dev] = true;
  }
  decode_score_wg_kernel<NT, kQ8><<<sms, 128 * decwg_groups<NT, kQ8>(), smem, stream>>>(p, ws, ws_ld);
  return cudaGetLastError();
}

// Decode scoring kernel per index-K format (H200, session 20 runs C and D, score kernel
// alone at batch >= 32 and contexts >= 50K):
//   - E4M3: the warpgroup (wgmma) kernel, memory bound at 3.8-4.1 TB/s (the per-warp
//     mma.sync kernel: 3.5-3.6);
//   - NVFP4: the per-warp mma.sync kernel, bound by the dequantisation's ALU work at
//     2.1-2.35 TB/s (the warpgroup form: 1.9-2.26, its warps wait for each other at every
//     wgmma).
template <bool kNv>
cudaError_t launch_decode_scores_nt(const IndexerParams& p, float* ws, long long ws_ld, int sms, cudaStream_t stream,
                                    bool q8) {
  const int rows = p.queries_per_request * p.heads;  // N side of the MMA: 8 NT >= rows
  if (kNv && q8) {  // NVFP4 on QGMMA, opt-in (Fp8Qk::kE4m3; not D8-exact)
    if (rows <= 8) return launch_decode_scores_wg<1, true>(p, ws, ws_ld, sms, stream);
    if (rows <= 16) return launch_decode_scores_wg<2, true>(p, ws, ws_ld, sms, stream);
    if (rows <= 32) return launch_decode_scores_wg<4, true>(p, ws, ws_ld, sms, stream);
    return launch_decode_scores_wg<8, true>(p, ws, ws_ld, sms, stream);
  }
  if constexpr (!kNv) {
    if (rows <= 8) return launch_decode_scores_wg<1>(p, ws, ws_ld, sms, stream);
    if (rows <= 16) return launch_decode_scores_wg<2>(p, ws, ws_ld, sms, stream);
    if (rows <= 32) return launch_decode_scores_wg<4>(p, ws, ws_ld, sms, stream);
    return launch_decode_scores_wg<8>(p, ws, ws_ld, sms, stream);
  } else {
    if (rows <= 8) return launch_decode_scores<1, kNv>(p, ws, ws_ld, sms, stream);
    if (rows <= 16) return launch_decode_scores<2, kNv>(p, ws, ws_ld, sms, stream);
    if (rows <= 32) return launch_decode_scores<4, kNv>(p, ws, ws_ld, sms, stream);
    return launch_decode_scores<8, kNv>(p, ws, ws_ld, sms, stream);
  }
}

}  // namespace

namespace {
Fp8Qk fp8_qk_from_env() {
  const char* v = std::getenv("FLASHMSA_FP8_QK");
  Fp8Qk m = Fp8Qk::kExact;
  if (v != nullptr && std::strcmp(v, "e4m3") == 0) m = Fp8Qk::kE4m3;
  else if (v != nullptr && std::strcmp(v, "e4m3_split") == 0) m = Fp8Qk::kE4m3Split;
  if (v != nullptr)
    std::fprintf(stderr, "flashmsa: FLASHMSA_FP8_QK=%s: indexer E4M3 scoring path '%s'\n", v, fp8_qk_name(m));
  return m;
}
std::atomic<int> g_fp8_qk_override{static_cast<int>(Fp8Qk::kDefault)};
std::atomic<int> g_last_score_kernel{static_cast<int>(IndexerScoreKernel::kNone)};
long long ws_ld_of(long long W) { return W < 8 ? 8 : (W + 7) / 8 * 8; }
// CTA tiles: decode one per request; prefill at most ceil(rows / R) + batch (R =
// tile_rows / H rows per tile, a tile never spans two requests).
long long tiles_of(long long rows, int heads, long long batch, bool prefill, int tile_rows = kTileRows) {
  if (!prefill) return batch;
  const int R = tile_rows / heads;
  return (rows + R - 1) / R + batch;
}
}  // namespace

std::size_t indexer_workspace_bytes(std::int64_t rows, int heads, std::int64_t width, int batch, bool prefill) {
  const std::size_t ws = static_cast<std::size_t>(rows) * heads * ws_ld_of(width) * sizeof(float);
  return ws + (prefill ? static_cast<std::size_t>(tiles_of(rows, heads, batch, true)) * sizeof(int2) : 0);
}

const char* fp8_qk_name(Fp8Qk mode) {
  switch (mode) {
    case Fp8Qk::kE4m3: return "e4m3";
    case Fp8Qk::kE4m3Split: return "e4m3_split";
    case Fp8Qk::kExact: return "exact";
    default: return "default";
  }
}

Fp8Qk indexer_fp8_qk_default() {
  const int o = g_fp8_qk_override.load(std::memory_order_relaxed);
  if (o != static_cast<int>(Fp8Qk::kDefault)) return static_cast<Fp8Qk>(o);
  static const Fp8Qk env = fp8_qk_from_env();  // read and logged once
  return env;
}

IndexerScoreKernel indexer_last_score_kernel() {
  return static_cast<IndexerScoreKernel>(g_last_score_kernel.load(std::memory_order_relaxed));
}

void set_indexer_fp8_qk_default(Fp8Qk mode) {
  g_fp8_qk_override.store(static_cast<int>(mode), std::memory_order_relaxed);
}

int indexer_device_malloc(void** ptr, std::size_t bytes) { return static_cast<int>(cudaMalloc(ptr, bytes)); }
int indexer_device_free(void* ptr) { return static_cast<int>(cudaFree(ptr)); }

int launch_indexer(const IndexerParams& p, void* stream_ptr, void* workspace, std::size_t workspace_bytes) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (p.num_rows <= 0 || p.heads <= 0) return 0;
  const bool decode = p.cu_seqlens == nullptr;
  const long long W = p.bt_width;
  const long long ws_ld = ws_ld_of(W);
  const std::size_t need = indexer_workspace_bytes(p.num_rows, p.heads, W, p.batch, !decode);
  const std::size_t ws_bytes = static_cast<std::size_t>(p.num_rows * p.heads * ws_ld) * sizeof(float);
  void* work = workspace;
  cudaError_t err = cudaSuccess;
  if (work == nullptr) {
    err = workspace_alloc(&work, need, stream);
    if (err != cudaSuccess) return static_cast<int>(err);
  } else if (workspace_bytes < need) {
    return static_cast<int>(cudaErrorInvalidValue);
  }
  float* ws = static_cast<float*>(work);
  int2* map = decode ? nullptr : reinterpret_cast<int2*>(static_cast<char*>(work) + ws_bytes);

  // The scoring path. E4M3 q x E4M3 (or NVFP4-dequantised) K: QGMMA only on request (Fp8Qk,
  // see the header).
  const Fp8Qk mode = p.fp8_qk == Fp8Qk::kDefault ? indexer_fp8_qk_default() : p.fp8_qk;
  const bool dec_mma = decode_mma_applies(p, decode, mode);
  const bool dec_q8 = dec_mma && p.k_format == 2 && decode_uses_wg_kernel(p, mode);  // NVFP4 on QGMMA
  const bool fp8 = p.q_e4m3 && p.k_format != 0 && mode != Fp8Qk::kExact;
  const bool split = mode == Fp8Qk::kE4m3Split;
  // Prefill over a BF16 or E4M3 index-K (BF16 images, pre-converted or widened in shared
  // memory; or E4M3 bytes on the opt-in QGMMA path): 256-row tiles (kWideRows).
  const bool wide = !decode && (fp8 ? (!split && p.k_format == 1) : (p.k_format == 0 || p.k_format == 1)) &&
                    wide_tiles_enabled();
  const int tile_rows = wide ? kWideRows : kTileRows;
  const int R = decode ? p.queries_per_request : tile_rows / p.heads;
  const long long tiles = tiles_of(p.num_rows, p.heads, p.batch, !decode, tile_rows);
  // Prefill over an E4M3 index-K, scored exactly: the pages' BF16 images once
  // (preconvert_kernel), then the BF16 copy kernel, when the copy is at most
  // kPreconvertMaxBytes and the call owns its workspace (a caller's workspace means
  // no allocation), with 2 or more index heads, or with 1 where a request has 4 or more
  // tiles on average (each page would be widened that many times in the tile CTAs).
  // H200: run N (session 17, 128-row tiles) at (2048, 1M), 4 heads 6651 -> 5881 us, 1
  // head 1834 -> 1848 us; session 29 run K (wide tiles), 1 head 1380 -> 1243 us at
  // (2048, 1M, 8 tiles), 42.9 -> 45.2 us at (128, 32768, 1 tile). From run K: widening
  // costs about 4.2 ns per page and tile, the copy about 17 ns per page, so the copy pays
  // from about 4 tiles (of the 256-row tiles: with FLASHMSA_INDEXER_WIDE=0, 1 head keeps
  // the widening path, as session 17 measured no gain there). The copy takes up to
  // kPreconvertMaxBytes of workspace (256 MB at a 1M-token context).
  const long long slots = static_cast<long long>(p.batch) * W;
  const std::size_t pre_bytes = static_cast<std::size_t>(slots) * (kPage * 256 + 4);
  const bool many_tiles = !decode && (p.num_rows + R - 1) / R >= 4LL * p.batch;  // 4+ tiles per request on average
  bool pre = !decode && !fp8 && p.k_format == 1 && (p.heads >= 2 || (wide && many_tiles)) && W > 0 &&
             p.batch > 0 && workspace == nullptr && preconvert_enabled();
  if (pre && pre_bytes > kPreconvertMaxBytes) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      std::fprintf(stderr,
                   "flashmsa: indexer prefill: %zu bytes of BF16 index-K copy exceed %zu; converting pages "
                   "on chip instead (logged once)\n",
                   pre_bytes, kPreconvertMaxBytes);
    }
    pre = false;
  }
  void* pre_buf = nullptr;
  if (pre && workspace_alloc(&pre_buf, pre_bytes, stream) != cudaSuccess) {
    (void)cudaGetLastError();
    pre = false;
  }

  if (W > 0 && tiles > 0) {
    if (!decode) tile_map_kernel<<<1, kMapThreads, 0, stream>>>(p, map, tiles, R);
    err = cudaGetLastError();
    // Split each tile's pages into chunks: about 4 (decode) / 16 (prefill) CTAs per SM
    // (2 resident per SM, 1 for wide tiles). Decode is memory bound: two waves of long
    // chunks keep the pipelines full (each CTA start refills its raw ring), prefill wants
    // a short tail.
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const long long target = (decode ? 4LL : 16LL) * sms;
    long long splits = (target + tiles - 1) / tiles;
    const long long max_splits = (W + 7) / 8;
    if (splits > max_splits) splits = max_splits;
    if (splits < 1) splits = 1;
    const long long chunk = (W + splits - 1) / splits;
    splits = (W + chunk - 1) / chunk;
    if (err == cudaSuccess) {
      const int c = static_cast<int>(chunk), sp = static_cast<int>(splits);
      const IndexerScoreKernel used = !dec_mma          ? (wide ? IndexerScoreKernel::kWide : IndexerScoreKernel::kTile)
                                      : p.k_format == 1 ? IndexerScoreKernel::kDecodeWg
                                      : dec_q8          ? IndexerScoreKernel::kDecodeWgQ8
                                                        : IndexerScoreKernel::kDecodeWarp;
      g_last_score_kernel.store(static_cast<int>(used), std::memory_order_relaxed);
      if (dec_mma) {
        err = p.k_format == 1 ? launch_decode_scores_nt<false>(p, ws, ws_ld, sms, stream, false)
                              : launch_decode_scores_nt<true>(p, ws, ws_ld, sms, stream, dec_q8);
      } else if (fp8 && split) {
        err = p.k_format == 1 ? launch_scores<true, kCopy, true>(p, map, ws, ws_ld, R, tiles, c, sp, stream)
                              : launch_scores<true, kNvfp4ToE4m3, true>(p, map, ws, ws_ld, R, tiles, c, sp, stream);
      } else if (fp8) {
        err = p.k_format == 1 ? (wide ? launch_scores<true, kCopy, false, kWideRows>(p, map, ws, ws_ld, R, tiles, c, sp, stream)
                                      : launch_scores<true, kCopy>(p, map, ws, ws_ld, R, tiles, c, sp, stream))
                              : launch_scores<true, kNvfp4ToE4m3>(p, map, ws, ws_ld, R, tiles, c, sp, stream);
      } else if (pre) {
        std::uint8_t* k16 = static_cast<std::uint8_t*>(pre_buf);
        std::int32_t* bt16 = reinterpret_cast<std::int32_t*>(k16 + static_cast<std::size_t>(slots) * kPage * 256);
        preconvert_kernel<<<static_cast<unsigned>(slots), kPreThreads, 0, stream>>>(p, k16, bt16);
        err = cudaGetLastError();
        IndexerParams p16 = p;
        p16.k_format = 0;
        p16.k_data = k16;
        p16.k_stride[0] = kPage * 256;
        p16.k_stride[1] = 256;
        p16.block_table = bt16;
        p16.bt_stride[0] = W;
        p16.bt_stride[1] = 1;
        p16.num_pages = slots;
        if (err == cudaSuccess)
          err = wide ? launch_scores<false, kCopy, false, kWideRows>(p16, map, ws, ws_ld, R, tiles, c, sp, stream)
                     : launch_scores<false, kCopy>(p16, map, ws, ws_ld, R, tiles, c, sp, stream);
      } else if (p.k_format == 0) {
        err = wide ? launch_scores<false, kCopy, false, kWideRows>(p, map, ws, ws_ld, R, tiles, c, sp, stream)
                   : launch_scores<false, kCopy>(p, map, ws, ws_ld, R, tiles, c, sp, stream);
      } else {
        err = p.k_format == 1
                  ? (wide ? launch_scores<false, kE4m3ToBf16, false, kWideRows>(p, map, ws, ws_ld, R, tiles, c, sp, stream)
                          : launch_scores<false, kE4m3ToBf16>(p, map, ws, ws_ld, R, tiles, c, sp, stream))
                  : launch_scores<false, kNvfp4ToBf16>(p, map, ws, ws_ld, R, tiles, c, sp, stream);
      }
    }
  }
  if (pre_buf != nullptr) {
    const cudaError_t ferr = workspace_free(pre_buf, stream);
    if (err == cudaSuccess) err = ferr;
  }
  if (err == cudaSuccess) {
    const unsigned rows = static_cast<unsigned>(p.num_rows * p.heads);
    // (A programmatic dependent launch after the score kernel, pdl.cuh, measured slower on
    // the H200: b32 Q8 50K 88.4 vs 82.7 us, b1 4K 16.9 vs 16.4 us.)
    topk_kernel<<<rows, topk_threads(W), 0, stream>>>(p, ws, ws_ld);
    err = cudaGetLastError();
  }
  if (workspace == nullptr) {
    const cudaError_t ferr = workspace_free(work, stream);
    if (err == cudaSuccess) err = ferr;
  }
  return static_cast<int>(err);
}

int launch_topk_select(const TopkSelectParams& p, void* stream) {
  if (p.rows <= 0) return 0;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  topk_select_kernel<<<static_cast<unsigned>(p.rows), topk_threads(p.width), 0, s>>>(p);
  return static_cast<int>(cudaGetLastError());
}

const char* indexer_error_string(int err) {
  return cudaGetErrorString(static_cast<cudaError_t>(err));
}

}  // namespace flashmsa::cuda

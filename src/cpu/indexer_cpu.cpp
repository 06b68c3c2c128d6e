// CPU indexer: page scores (spec 2.2, 2.3) and top-k selection (2.4, 2.5, D1, D2).
//
// Work decomposition. Each request's query rows are cut into tiles of a few rows; a
// tile's query vectors (rows x heads) are scored against one history page at a time:
// the page is decoded to FP32 once (transposed, [dim][token]) and a small register
// tile of (query vectors x tokens) dot products is accumulated over the 128 dims.
// Work items are (tile, range of pages); they write disjoint parts of a scratch score
// buffer, so the result does not depend on the thread count (D9). A second pass selects
// the top-k per (row, head). Tiles are processed in waves to bound the scratch memory.
//
// Numerics: each dot product is the sequential FP32 sum over d = 0..127 of q[d] * k[d]
// (no FMA, no reassociation), so the kernel is bitwise equal to a naive scalar loop on
// every build; an AVX2 clone of the same source is picked at run time where available.
// A page score is the max over its 128 tokens with NaN dot products ignored (NaN only
// when all are NaN); nvfp4 scores are then multiplied by the index-K global scale.
#include "cpu/indexer_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/parallel.h"
#include "cpu/kv_access.h"

#if !defined(__GNUC__) && !defined(__clang__)
#error "the CPU indexer kernel uses GCC/Clang vector extensions"
#endif
#define FLASHMSA_ALWAYS_INLINE inline __attribute__((always_inline))

// Dot products are plain multiply-then-add, the same sequence of operations as a
// sequential scalar loop (GCC contracts nothing in ISO C++ mode; tell Clang too).
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define FLASHMSA_INDEXER_AVX2 1
#endif

namespace flashmsa::cpu {
namespace {

constexpr int kD = kHeadDim;   // dims per vector
constexpr int kT = kPageSize;  // tokens per page
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---------------------------------------------------------------------------
// Page-score micro-kernel

// FP32 vectors of 4 and 8 lanes (GCC/Clang vector extensions). Plain loops over small
// arrays proved fragile: depending on the tile shape the compiler kept the
// accumulators in memory, several times slower.
typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));

// Max over the 128 tokens of the dot products of NQ consecutive query vectors with a
// transposed page. Tokens are processed in blocks of NV vectors of V; every lane of
// acc accumulates q[d] * k[d] for d = 0..127 in order, exactly like a sequential
// scalar loop. NaN dot products never win (`a > m` is false for NaN); see
// fix_all_nan below.
template <class V, int NQ, int NV>
FLASHMSA_ALWAYS_INLINE void page_max_group(const float* kt, const float* q, float* m) {
  constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));
  constexpr int kBlock = NV * kLanes;
  static_assert(kT % kBlock == 0, "token block must divide the page");
  for (int i = 0; i < NQ; ++i) m[i] = kNegInf;
  for (int t0 = 0; t0 < kT; t0 += kBlock) {
    V acc[NQ][NV];
    for (int i = 0; i < NQ; ++i)
      for (int j = 0; j < NV; ++j) acc[i][j] = V{};
    for (int d = 0; d < kD; ++d) {
      V k[NV];
      for (int j = 0; j < NV; ++j) std::memcpy(&k[j], kt + d * kT + t0 + kLanes * j, sizeof(V));
      for (int i = 0; i < NQ; ++i) {
        const V qd = V{} + q[i * kD + d];  // broadcast
        for (int j = 0; j < NV; ++j) acc[i][j] += qd * k[j];
      }
    }
    for (int i = 0; i < NQ; ++i)
      for (int j = 0; j < NV; ++j)
        for (int l = 0; l < kLanes; ++l) m[i] = acc[i][j][l] > m[i] ? acc[i][j][l] : m[i];
  }
}

// A page max of -inf is either a real -inf score or "every dot product is NaN" (then
// the page score is NaN, D2). Rare: recompute the dots of that vector, same order.
void fix_all_nan(const float* kt, const float* qv, float* m) {
  if (*m != kNegInf) return;
  for (int t = 0; t < kT; ++t) {
    float s = 0.0f;
    for (int d = 0; d < kD; ++d) s += qv[d] * kt[d * kT + t];
    if (!std::isnan(s)) return;
  }
  *m = std::numeric_limits<float>::quiet_NaN();
}

// All nv vectors: groups of NQ, then one at a time.
template <class V, int NQ, int NV>
FLASHMSA_ALWAYS_INLINE void page_max_body(const float* kt, const float* q, int nv, float* out,
                                          std::int64_t out_stride) {
  float m[NQ];
  int v = 0;
  for (; v + NQ <= nv; v += NQ) {
    page_max_group<V, NQ, NV>(kt, q + v * kD, m);
    for (int i = 0; i < NQ; ++i) out[(v + i) * out_stride] = m[i];
  }
  for (; v < nv; ++v) {
    page_max_group<V, 1, NV>(kt, q + v * kD, m);
    out[v * out_stride] = m[0];
  }
}

// Baseline build (SSE2 on x86-64): 4 query vectors x 8 tokens = 8 accumulators.
void page_max_generic(const float* kt, const float* q, int nv, float* out,
                      std::int64_t out_stride) {
  page_max_body<v4f, 4, 2>(kt, q, nv, out, out_stride);
}

#ifdef FLASHMSA_INDEXER_AVX2
// Same source compiled for AVX2, 4 query vectors x 16 tokens. No FMA: every lane performs
// the identical sequence of FP32 multiplies and adds, so results are bitwise equal to
// the generic path.
__attribute__((target("avx2"))) void page_max_avx2(const float* kt, const float* q, int nv,
                                                   float* out, std::int64_t out_stride) {
  page_max_body<v8f, 4, 2>(kt, q, nv, out, out_stride);
}
#endif

using PageMaxFn = void (*)(const float*, const float*, int, float*, std::int64_t);

PageMaxFn select_page_max() {
#ifdef FLASHMSA_INDEXER_AVX2
  if (__builtin_cpu_supports("avx2")) return page_max_avx2;
#endif
  return page_max_generic;
}

// ---------------------------------------------------------------------------
// Selection helpers

// Rank order of D2: NaN below everything (including -inf).
inline bool ranks_above(float a, float b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a > b;
}

// ---------------------------------------------------------------------------
// Tiling

struct Tile {
  std::int64_t request = 0;
  std::int64_t row_begin = 0;  // global row of the tile's first row
  std::int64_t num_rows = 0;
  std::int64_t first_pos = 0;  // position of the tile's first row
  std::int64_t score_row = 0;  // first tile row (local) whose scores are needed
  std::int64_t pages = 0;      // history pages scored: L of the last row, or 0
  std::int64_t chunk = 1;      // pages per work item
  std::int64_t scratch = 0;    // offset of the tile's [num_rows, H, pages] scores
};

// Index-K page `phys` as FP32 [dim][token] (no global scale). Eight tokens are decoded
// at a time and written as contiguous runs of 8 floats per dim.
void decode_page_transposed(const IndexKCache& cache, std::int64_t phys, float* kt) {
  constexpr int kRun = 8;
  float rows[kRun][kD];
  for (int t0 = 0; t0 < kT; t0 += kRun) {
    for (int i = 0; i < kRun; ++i) {
      if (cache.format == KvFormat::bf16) {
        // bf16 -> FP32 is exact: the bits shifted up (same as bf16_to_float, inlined).
        const std::uint16_t* src = at<std::uint16_t>(cache.data, phys, t0 + i);
        for (int d = 0; d < kD; ++d) {
          const std::uint32_t bits = static_cast<std::uint32_t>(src[d]) << 16;
          std::memcpy(&rows[i][d], &bits, sizeof(float));
        }
      } else {
        load_index_k_row_f32(cache, phys, t0 + i, rows[i]);
      }
    }
    for (int d = 0; d < kD; ++d)
      for (int i = 0; i < kRun; ++i) kt[d * kT + t0 + i] = rows[i][d];
  }
}

inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

}  // namespace

void page_max_scores(const float* kt, const float* q, int nv, float* out,
                     std::int64_t out_stride) {
  static const PageMaxFn fn = select_page_max();
  fn(kt, q, nv, out, out_stride);
  for (int v = 0; v < nv; ++v) fix_all_nan(kt, q + v * kD, out + v * out_stride);
}

void page_max_scores_baseline(const float* kt, const float* q, int nv, float* out,
                              std::int64_t out_stride) {
  page_max_generic(kt, q, nv, out, out_stride);
  for (int v = 0; v < nv; ++v) fix_all_nan(kt, q + v * kD, out + v * out_stride);
}

void select_topk_row(const float* scores, std::int64_t score_stride, std::int64_t L, int K,
                     std::int32_t* out, std::int64_t out_stride) {
  if (L < 0) {
    for (int j = 0; j < K; ++j) out[j * out_stride] = -1;
    return;
  }
  if (L + 1 <= K) {
    for (int j = 0; j < K; ++j) out[j * out_stride] = j <= L ? j : -1;
    return;
  }
  // Keep the best K-1 candidates sorted by (rank desc, id asc). Candidates arrive in
  // ascending id order, so a newcomer beats an entry only if it ranks strictly above.
  const int keep = K - 1;  // 0 when K = 1: only the local page
  float best_s[kMaxTopk];
  std::int32_t best_id[kMaxTopk];
  int count = 0;
  for (std::int64_t b = 0; keep > 0 && b < L; ++b) {
    const float s = scores[b * score_stride];
    if (count == keep && !ranks_above(s, best_s[keep - 1])) continue;
    int pos = count < keep ? count : keep - 1;
    while (pos > 0 && ranks_above(s, best_s[pos - 1])) {
      best_s[pos] = best_s[pos - 1];
      best_id[pos] = best_id[pos - 1];
      --pos;
    }
    best_s[pos] = s;
    best_id[pos] = static_cast<std::int32_t>(b);
    if (count < keep) ++count;
  }
  for (int j = 0; j < keep; ++j) out[j * out_stride] = best_id[j];
  out[keep * out_stride] = static_cast<std::int32_t>(L);
}

void run_indexer(const IndexerProblem& p) {
  const std::int64_t H = p.q.shape[1];
  const int K = static_cast<int>(p.topk.shape[2]);
  const bool want_scores = p.page_scores.defined();
  const bool nvfp4 = p.index_k.format == KvFormat::nvfp4;
  const float k_global = p.index_k.global_scale;

  // Rows per tile: about 256 query vectors (rows x heads), so that decoding a page
  // costs little next to scoring it.
  const std::int64_t tile_rows = std::clamp<std::int64_t>(256 / H, 32, 64);

  std::vector<Tile> tiles;
  for (std::size_t r = 0; r < p.requests.size(); ++r) {
    const IndexerRequest& req = p.requests[r];
    for (std::int64_t j0 = 0; j0 < req.num_rows; j0 += tile_rows) {
      Tile t;
      t.request = static_cast<std::int64_t>(r);
      t.row_begin = req.row_begin + j0;
      t.num_rows = std::min(tile_rows, req.num_rows - j0);
      t.first_pos = req.first_pos + j0;
      // A row needs page scores when it ranks (L + 1 > K) or when they are returned.
      // L is non-decreasing along the tile, so the rows that need scores are a suffix.
      const std::int64_t min_l = want_scores ? 1 : K;
      t.score_row = t.num_rows;
      for (std::int64_t j = 0; j < t.num_rows; ++j) {
        if (floor_div(t.first_pos + j, kPageSize) >= min_l) {
          t.score_row = j;
          break;
        }
      }
      const std::int64_t last_l = floor_div(t.first_pos + t.num_rows - 1, kPageSize);
      t.pages = t.score_row < t.num_rows ? last_l : 0;
      // About 4096 (vector, page) pairs per work item.
      const std::int64_t vectors = (t.num_rows - t.score_row) * H;
      t.chunk = vectors > 0 ? std::clamp<std::int64_t>(4096 / vectors, 16, 256) : 1;
      tiles.push_back(t);
    }
  }

  // Waves of tiles whose scratch fits the budget (a single tile always fits).
  constexpr std::int64_t kScratchBudget = std::int64_t{8} << 20;  // floats (32 MiB)
  std::vector<float> scratch;
  std::size_t wave_begin = 0;
  while (wave_begin < tiles.size()) {
    std::size_t wave_end = wave_begin;
    std::int64_t floats = 0;
    while (wave_end < tiles.size()) {
      Tile& t = tiles[wave_end];
      const std::int64_t need = t.num_rows * H * t.pages;
      if (wave_end > wave_begin && floats + need > kScratchBudget) break;
      t.scratch = floats;
      floats += need;
      ++wave_end;
    }
    scratch.assign(static_cast<std::size_t>(floats), 0.0f);

    // Pass 1: page scores, work item = (tile, chunk of pages).
    std::vector<std::int64_t> item_start(wave_end - wave_begin + 1, 0);
    for (std::size_t i = wave_begin; i < wave_end; ++i) {
      const Tile& t = tiles[i];
      item_start[i - wave_begin + 1] =
          item_start[i - wave_begin] + (t.pages + t.chunk - 1) / t.chunk;
    }
    detail::parallel_for(item_start.back(), 0, [&](std::int64_t item, int) {
      const std::size_t ti = static_cast<std::size_t>(
          std::upper_bound(item_start.begin(), item_start.end(), item) - item_start.begin() - 1);
      const Tile& t = tiles[wave_begin + ti];
      const std::int64_t b_begin = (item - item_start[ti]) * t.chunk;
      const std::int64_t b_end = std::min(t.pages, b_begin + t.chunk);

      // Query vectors of the rows that need scores, as FP32 [rows * H][128].
      const std::int64_t nrows = t.num_rows - t.score_row;
      std::vector<float> qf(static_cast<std::size_t>(nrows * H * kD));
      for (std::int64_t j = 0; j < nrows; ++j)
        for (std::int64_t h = 0; h < H; ++h) {
          const std::int64_t row = t.row_begin + t.score_row + j;
          const auto* src = static_cast<const std::uint8_t*>(p.q.data) +
                            (row * p.q.stride[0] + h * p.q.stride[1]) * dtype_size(p.q.dtype);
          load_row_f32(src, p.q.dtype, &qf[static_cast<std::size_t>((j * H + h) * kD)]);
        }

      std::vector<float> kt(static_cast<std::size_t>(kD * kT));
      for (std::int64_t b = b_begin; b < b_end; ++b) {
        const std::int32_t phys = at<std::int32_t>(p.block_table, t.request, b)[0];
        decode_page_transposed(p.index_k, phys, kt.data());
        // Rows whose local page is beyond b: position >= 128 * (b + 1).
        const std::int64_t j0 =
            std::max<std::int64_t>(t.score_row, kPageSize * (b + 1) - t.first_pos);
        if (j0 >= t.num_rows) continue;
        float* out = scratch.data() + t.scratch + (j0 * H) * t.pages + b;
        page_max_scores(kt.data(), &qf[static_cast<std::size_t>((j0 - t.score_row) * H * kD)],
                        static_cast<int>((t.num_rows - j0) * H), out, t.pages);
        if (nvfp4) {
          for (std::int64_t v = 0; v < (t.num_rows - j0) * H; ++v) out[v * t.pages] *= k_global;
        }
      }
    });

    // Pass 2: selection and page-score output, work item = one row of one tile.
    std::vector<std::int64_t> row_start(wave_end - wave_begin + 1, 0);
    for (std::size_t i = wave_begin; i < wave_end; ++i)
      row_start[i - wave_begin + 1] = row_start[i - wave_begin] + tiles[i].num_rows;
    detail::parallel_for(row_start.back(), 0, [&](std::int64_t item, int) {
      const std::size_t ti = static_cast<std::size_t>(
          std::upper_bound(row_start.begin(), row_start.end(), item) - row_start.begin() - 1);
      const Tile& t = tiles[wave_begin + ti];
      const std::int64_t j = item - row_start[ti];
      const std::int64_t row = t.row_begin + j;
      const std::int64_t pos = t.first_pos + j;
      const std::int64_t L = pos < 0 ? -1 : pos / kPageSize;
      for (std::int64_t h = 0; h < H; ++h) {
        const float* s = scratch.data() + t.scratch + (j * H + h) * t.pages;
        std::int32_t* out = p.topk.ptr<std::int32_t>() + row * p.topk.stride[0] +
                            h * p.topk.stride[1];
        select_topk_row(s, 1, L, K, out, p.topk.stride[2]);
        if (want_scores) {
          const TensorView& ps = p.page_scores;
          float* o = ps.ptr<float>() + row * ps.stride[0] + h * ps.stride[1];
          for (std::int64_t b = 0; b < ps.shape[2]; ++b) o[b * ps.stride[2]] = b < L ? s[b] : kNegInf;
        }
      }
    });
    wave_begin = wave_end;
  }
}

}  // namespace flashmsa::cpu

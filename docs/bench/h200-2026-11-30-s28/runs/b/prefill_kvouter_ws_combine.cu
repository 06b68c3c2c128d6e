// SM90 KV-outer sparse attention for prefill (see prefill_kvouter.h for the design): the
// combine (stage 3) and the launch of the three stages. The plan is in prefill_plan.cu, the
// attention kernel in prefill_attention.cu; what they share in prefill_kvouter_detail.cuh.
#include "cuda/sm90/prefill_kvouter.h"

#include <cmath>

#include "cuda/sm90/pdl.cuh"
#include "cuda/sm90/prefill_kvouter_detail.cuh"
#include "cuda/sm90/prefill_tile.cuh"
#include "cuda/sm90/workspace_pool.h"

namespace flashmsa::cuda {
namespace prefill {
namespace {

// ---------------------------------------------------------------------------------------
// Combine, with each query's own page. The plan leaves the own (local) page out of the
// CSR (plan_count: vmask bit kLocalBit instead of a slot bit), so the attention kernel
// writes only history partials, and this kernel computes the own page's causal attention
// itself, on the tensor cores, while it streams the history partials in.
//
// Tiles of kCombineRows (query, head) rows: KV head g = tile % Hkv, queries t0 .. t0 +
// qpt - 1 (qpt = 64 / G, t0 = (tile / Hkv) qpt), row r = head g G + r % G of query
// t0 + r / G. Persistent CTAs (one per SM) take tiles blockIdx.x + i gridDim.x, with two
// warpgroups in their own roles:
// - warpgroup 0, the own page: the tile's queries form runs of one (request, own page)
//   each (a request's queries are consecutive rows and their positions increase, D4).
//   Per run: the page by cp.async, converted as in the attention kernel
//   (at::convert_page); S = Q K^T and the single-page softmax with O = P V
//   (prefill_tile.cuh) for all 64 rows, the run's rows with their causal limit p % 128,
//   the others fully masked; the run's rows then stage BF16(O) and (m c, l), exactly what
//   the attention kernel would have written as the own page's partial. Rows without a
//   valid own page stage l = 0. Then it hands the staging to warpgroup 1 (named barrier
//   kBarFull) and starts the next tile; it waits for the staging to be free (kBarEmpty)
//   only when it has the next tile's O to write.
// - warpgroup 1, the merge: passes of 8 rows, 16 threads (8 dims each) per row. Each pass
//   loads its rows' valid history partials by cp.async into a ring of kRing pass buffers
//   (a thread's O chunks are its own; the rows' (m c, l) pairs are shared, one thread per
//   slot), kRing - 1 passes ahead, across tiles, so the loads run under the merge and under
//   warpgroup 0's page work. Per row, with w = exp(s - M) and M = max s over the terms with
//   l != 0 (history slots in ascending order, then the own page: a fixed order, D9):
//     out = BF16(v_global * sum w O / sum w l),  LSE = M + ln(sum w l) + lse_bias
//   (lse_bias = -ln 448 on the FP8 paths, whose P and l carry the factor 448, spec 3.4).
//   A row without a term of nonzero weight writes 0 and -inf (D5).
constexpr int kCombineThreads = 256;  // two warpgroups
constexpr int kCombineRows = 64;      // (query, head) rows per tile
constexpr int kPassRows = 8;          // rows per merge pass (16 threads each)
constexpr int kPassesPerTile = kCombineRows / kPassRows;
constexpr int kOwnRowBytes = 272;     // a staged own-page O row: 128 BF16 + 16 bytes (conflict-free quad stores)
constexpr int kMlRow = 17;            // float2 per row of a pass's (m c, l) table (16 slots + padding)
enum : int { kBarWg0 = 1, kBarWg1 = 2, kBarFull = 3, kBarEmpty = 4 };

template <int FMT, bool QK16>
struct CombineSmem {
  using PB = at::PageBytes<FMT, QK16>;
  static constexpr bool kQ16 = FMT == at::kBf16 || (QK16 && !kQ8Rs);  // 256-byte Q rows (BF16 or QK16's F16 copy)
  static constexpr int kQ = kCombineRows * (kQ16 ? 256 : 128);        // Q tile, SW128 (panels of 64 rows)
  static constexpr int kOwnO = kCombineRows * kOwnRowBytes;           // staged own-page O
  static constexpr int kOwnMl = kCombineRows * 8;                     // staged own-page (m c, l)
  static constexpr int kMeta = kCombineRows * (8 + 4);                // s_key (long long), s_lim (int)
  static constexpr int kPassO = 16 * 128 * 16;                        // [slot][thread of warpgroup 1][16 bytes]
  static constexpr int kPassMl = kPassRows * kMlRow * 8;
  static constexpr int kFixed = PB::kStage + PB::kConv + kQ + kOwnO + kOwnMl + kMeta;
  // As many pass buffers as fit (at most 4) next to the page work's buffers.
  static constexpr int kRing = (227 * 1024 - 1024 - kFixed) / (kPassO + kPassMl) < 4
                                   ? (227 * 1024 - 1024 - kFixed) / (kPassO + kPassMl)
                                   : 4;
  static_assert(kRing >= 2, "at least two merge passes in flight");
  static constexpr int kBytes = kFixed + kRing * (kPassO + kPassMl);
  static constexpr int kAlloc = kBytes + 1024;  // runtime 1024-byte alignment
  static_assert((PB::kStage + PB::kConv) % 1024 == 0, "1024-byte aligned Q tile");
};

__device__ __forceinline__ void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void named_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
// 8-byte cp.async, zero-filled when !on (src must still be a valid address).
__device__ __forceinline__ void cp_async8_zfill(std::uint32_t dst, const void* src, bool on) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(on ? 8 : 0));
}

// Warpgroup 1's view of one merge pass: the tile, its rows and this thread's row.
struct Pass {
  long long t;  // the thread's query row (>= T: none)
  int h, g;     // its query head, KV head
  int r;        // its row in the tile
};
__device__ __forceinline__ Pass pass_of(const PrefillParams& p, long long tile, int pass, int j) {
  const int G = p.num_q_heads / p.num_kv_heads, qpt = kCombineRows / G;
  Pass x;
  x.g = static_cast<int>(tile % p.num_kv_heads);
  x.r = pass * kPassRows + (j >> 4);
  x.t = (tile / p.num_kv_heads) * qpt + x.r / G;
  x.h = x.g * G + x.r % G;
  return x;
}

// Warpgroup 1: the loads of one pass into ring buffer `buf` (thread j of the warpgroup):
// its row's 16-byte chunk of every valid history slot (zero-filled otherwise), and slot
// j % 16's (m c, l) pair (zero-filled, so l = 0, where the slot is not valid). One
// cp.async group, committed even when the row does not exist.
__device__ __forceinline__ void issue_pass(const PrefillParams& p, const Workspace& w, const Pass& x, unsigned mask,
                                           std::uint32_t o_buf, std::uint32_t ml_buf, int j) {
  const int d0 = (j & 15) * 8, k = j & 15;
  const long long qbase = (x.t * p.topk_k) * p.num_q_heads + x.h;  // row of slot k: qbase + k Hq
#pragma unroll
  for (int s = 0; s < 16; ++s) {
    const bool on = (mask >> s) & 1u;
    const std::uint16_t* src = on ? w.o_part + (qbase + static_cast<long long>(s) * p.num_q_heads) * 128 + d0 : w.o_part;
    at::cp_async16_zfill_s(o_buf + (s * 128 + j) * 16, src, on);
  }
  const bool on = (mask >> k) & 1u;
  const float* msrc = on ? w.ml_part + 2 * (qbase + static_cast<long long>(k) * p.num_q_heads) : w.ml_part;
  cp_async8_zfill(ml_buf + ((j >> 4) * kMlRow + k) * 8, msrc, on);
  at::cp_async_commit();
}

// The history mask of the thread's row (0: no row).
__device__ __forceinline__ unsigned pass_mask(const PrefillParams& p, const Workspace& w, const Pass& x) {
  return x.t < p.num_rows ? w.vmask[x.t * p.num_kv_heads + x.g] & 0xffffu : 0u;
}

// Warpgroup 1: the merge of one pass whose loads completed (see above).
__device__ __forceinline__ void merge_pass(const PrefillParams& p, float lse_bias, const Pass& x,
                                           const std::uint8_t* o_buf, const float2* ml_buf,
                                           const std::uint8_t* own_o, const float2* own_ml, int j) {
  if (x.t >= p.num_rows) return;
  const int d0 = (j & 15) * 8;
  const float2* ml = ml_buf + (j >> 4) * kMlRow;
  const float2 mo = own_ml[x.r];
  // A term counts when its normaliser is not 0 (NaN counts, so NaN inputs propagate).
  bool any = mo.y != 0.0f;
  float M = any ? mo.x : -INFINITY;
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const float2 v = ml[k];
    if (v.y != 0.0f) {
      any = true;
      M = fmaxf(M, v.x);
    }
  }
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float W = 0.0f;
  auto add = [&](float2 v, uint4 ov) {
    const float wt = expf(v.x - M);
    W = fmaf(wt, v.y, W);
    const std::uint32_t vv[4] = {ov.x, ov.y, ov.z, ov.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[2 * i] += wt * __uint_as_float(vv[i] << 16);
      acc[2 * i + 1] += wt * __uint_as_float(vv[i] & 0xffff0000u);
    }
  };
  if (any) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const float2 v = ml[k];
      if (v.y != 0.0f) add(v, *reinterpret_cast<const uint4*>(o_buf + (k * 128 + j) * 16));
    }
    if (mo.y != 0.0f) add(mo, *reinterpret_cast<const uint4*>(own_o + x.r * kOwnRowBytes + 2 * d0));
  }
  const float scale = any ? p.v_global / W : 0.0f;
  uint4 o;
  o.x = gm::pack_bf16x2(acc[0] * scale, acc[1] * scale);
  o.y = gm::pack_bf16x2(acc[2] * scale, acc[3] * scale);
  o.z = gm::pack_bf16x2(acc[4] * scale, acc[5] * scale);
  o.w = gm::pack_bf16x2(acc[6] * scale, acc[7] * scale);
  *reinterpret_cast<uint4*>(p.out + x.t * p.out_row_stride + x.h * p.out_head_stride + d0) = o;
  if (d0 == 0 && p.lse != nullptr)
    p.lse[x.t * p.lse_row_stride + x.h * p.lse_head_stride] = any ? M + logf(W) + lse_bias : -INFINITY;
}

template <int FMT, bool QK16>
__global__ void __launch_bounds__(kCombineThreads, 1)
    prefill_combine(const PrefillParams p, const Workspace w, float lse_bias, long long ntiles) {
  using CS = CombineSmem<FMT, QK16>;
  using PB = at::PageBytes<FMT, QK16>;
  constexpr bool kRs = QK16 && kQ8Rs;  // Q8RS: E4M3 query rows, register-sourced Q K^T
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  const std::uint32_t a0 = gm::smem_addr(smem_raw);
  std::uint8_t* smem = smem_raw + (((a0 + 1023u) & ~1023u) - a0);
  std::uint8_t* stage = smem;
  std::uint8_t* conv = stage + PB::kStage;
  std::uint8_t* q_tile = conv + PB::kConv;
  std::uint8_t* own_o = q_tile + CS::kQ;
  float2* own_ml = reinterpret_cast<float2*>(own_o + CS::kOwnO);
  long long* s_key = reinterpret_cast<long long*>(own_ml + kCombineRows);
  int* s_lim = reinterpret_cast<int*>(s_key + kCombineRows);
  std::uint8_t* ring = reinterpret_cast<std::uint8_t*>(s_lim + kCombineRows);  // [kRing] x (O, (m c, l))
  auto ring_o = [ring](int b) { return ring + b * (CS::kPassO + CS::kPassMl); };

  const int G = p.num_q_heads / p.num_kv_heads, qpt = kCombineRows / G;
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), wtid = tid & 127;
  // A programmatic dependent of the attention kernel: everything below reads the plan's
  // or the attention kernel's output.
  sm90::pdl_wait();
  const long long first = blockIdx.x, step = gridDim.x;

  if (wg == 1) {
    // The merge. Pass n of this CTA: tile first + (n / kPassesPerTile) step.
    const long long npass = (ntiles - first + step - 1) / step * kPassesPerTile;
    auto pass_n = [&](long long n) {
      return pass_of(p, first + (n / kPassesPerTile) * step, static_cast<int>(n % kPassesPerTile), wtid);
    };
    auto issue = [&](long long n, unsigned mask) {
      const int b = static_cast<int>(n % CS::kRing);
      issue_pass(p, w, pass_n(n), mask, gm::smem_addr(ring_o(b)), gm::smem_addr(ring_o(b) + CS::kPassO), wtid);
    };
    auto mask_of = [&](long long n) { return n < npass ? pass_mask(p, w, pass_n(n)) : 0u; };
    for (int n = 0; n < CS::kRing - 1; ++n) issue(n, mask_of(n));
    unsigned mask_next = mask_of(CS::kRing - 1);
    for (long long n = 0; n < npass; ++n) {
      // Pass n + kRing - 1 into the buffer of pass n - 1 (read: the barrier that ended its
      // merge), and the next pass's history mask, whose latency runs under this merge.
      issue(n + CS::kRing - 1, mask_next);
      mask_next = mask_of(n + CS::kRing);
      const Pass x = pass_n(n);
      at::cp_async_wait<CS::kRing - 1>();  // pass n's group
      named_sync(kBarWg1, 128);            // every thread's loads of pass n
      if (n % kPassesPerTile == 0) named_sync(kBarFull, kCombineThreads);  // the tile's own page is staged
      const int b = static_cast<int>(n % CS::kRing);
      merge_pass(p, lse_bias, x, ring_o(b), reinterpret_cast<const float2*>(ring_o(b) + CS::kPassO), own_o, own_ml,
                 wtid);
      if (n % kPassesPerTile == kPassesPerTile - 1) named_arrive(kBarEmpty, kCombineThreads);
      named_sync(kBarWg1, 128);  // pass n's buffer is read: pass n + kRing - 1 + 1 may load into it
    }
    at::cp_async_wait<0>();
    return;
  }

  // Warpgroup 0: the own page of every tile.
  const int lane = wtid & 31, warp = wtid >> 5;
  const int lr0 = 16 * warp + (lane >> 2);  // this thread's accumulator rows lr0, lr0 + 8
  for (long long tile = first, i = 0; tile < ntiles; tile += step, ++i) {
    const int g = static_cast<int>(tile % p.num_kv_heads);
    const long long t0 = (tile / p.num_kv_heads) * qpt;
    // The Q tile by cp.async (rows past T zero-filled): BF16, E4M3 or QK16's F16 copy.
    {
      constexpr int kChunks = CS::kQ16 ? 16 : 8;
      constexpr int es = FMT == at::kBf16 ? 2 : 1;
      for (int c = wtid; c < kCombineRows * kChunks; c += 128) {
        const int r = c / kChunks, ch = c % kChunks;
        const long long t = t0 + r / G;
        const int h = g * G + r % G;
        const bool ok = t < p.num_rows;
        const std::uint8_t* src;
        if constexpr (CS::kQ16 && FMT != at::kBf16)
          src = reinterpret_cast<const std::uint8_t*>(w.q16 + ((ok ? t : 0) * p.num_q_heads + h) * 128);
        else
          src = static_cast<const std::uint8_t*>(p.q) + ((ok ? t : 0) * p.q_row_stride + h * p.q_head_stride) * es;
        at::copy_q_chunk(q_tile, kCombineRows, r, ch, src, ok);
      }
      at::cp_async_commit();
    }
    // The tile's queries: request and own page (-1: none valid, D1 in plan_count), causal limit.
    if (wtid < qpt) {
      long long key = -1;
      int lim = -1;
      const long long t = t0 + wtid;
      if (t < p.num_rows && ((w.vmask[t * p.num_kv_heads + g] >> kLocalBit) & 1u)) {
        int b;
        long long seq, pos;
        locate(p, static_cast<int>(t), &b, &seq, &pos);
        key = static_cast<long long>(b) * p.bt_width + pos / 128;  // pos >= 0: plan_count accepted the slot
        lim = static_cast<int>(pos & 127);
      }
      s_key[wtid] = key;
      s_lim[wtid] = lim;
    }
    named_sync(kBarWg0, 128);
    // The staging: free once warpgroup 1 merged the previous tile. Rows outside every
    // run stage l = 0 (each thread initialises the rows it may write later).
    bool staged = false;
    auto acquire = [&] {
      if (staged) return;
      if (i > 0) named_sync(kBarEmpty, kCombineThreads);
      if ((lane & 3) == 0) {
        own_ml[lr0] = make_float2(-INFINITY, 0.0f);
        own_ml[lr0 + 8] = make_float2(-INFINITY, 0.0f);
      }
      staged = true;
    };
    for (int q0 = 0; q0 < qpt;) {
      const long long run = s_key[q0];
      int q1 = q0 + 1;
      while (q1 < qpt && s_key[q1] == run) ++q1;
      if (run >= 0) {
        // The page: (request, logical page) -> physical (accepted by plan_count, D1).
        const int b = static_cast<int>(run / p.bt_width), e = static_cast<int>(run % p.bt_width);
        UnitDesc un{};
        un.g = g;
        un.phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
        const long long seq = p.seq_lens[b * p.seq_lens_stride];
        const int valid = static_cast<int>(min(128LL, seq - 128LL * e));
        const at::PageSrc src = page_src<FMT>(p, un);
        at::issue_page_copy<FMT, QK16, 128>(src, stage, valid, wtid);
        at::cp_async_commit();
        at::cp_async_wait<0>();  // and the Q tile's group
        at::fence_view_async_shared();
        named_sync(kBarWg0, 128);
        at::convert_page<FMT, QK16, 128, kRs>(src, stage, conv, valid, wtid);
        named_sync(kBarWg0, 128);
        const std::uint32_t k_addr = gm::smem_addr(PB::k_tile(stage, conv));
        const std::uint32_t v_addr = gm::smem_addr(PB::v_tile(stage, conv));
        float s[64], o[64], m[2], l[2];
        std::uint32_t pa[8][4];
        if constexpr (kRs) {
          std::uint32_t qa[8][4];
          load_q_frags(gm::smem_addr(q_tile), 0, wtid, qa);
          wg_qk_rs(qa, k_addr, s);
          gm::wait<0>();
          gm::fence_operands(s);
          fence_pa(qa);
        } else {
          at::wg_qk<FMT, QK16>(gm::smem_addr(q_tile), kCombineRows * 128, k_addr, s);
          gm::wait<0>();
          gm::fence_operands(s);
        }
        const int qa0 = lr0 / G, qa1 = (lr0 + 8) / G;
        const int lim0 = qa0 >= q0 && qa0 < q1 ? s_lim[qa0] : -1;
        const int lim1 = qa1 >= q0 && qa1 < q1 ? s_lim[qa1] : -1;
        softmax_pv<FMT>(p, s, lim0, lim1, v_addr, pa, o, m, l, lane);
        gm::wait<0>();
        gm::fence_operands(o);
        fence_pa(pa);
        acquire();
        // The run's rows: BF16(O) and (m c, l).
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int row = lr0 + 8 * rr;
          if (row / G < q0 || row / G >= q1) continue;
          std::uint8_t* dst = own_o + row * kOwnRowBytes + 4 * (lane & 3);
#pragma unroll
          for (int jj = 0; jj < 16; ++jj)
            *reinterpret_cast<std::uint32_t*>(dst + 16 * jj) =
                gm::pack_bf16x2(o[4 * jj + 2 * rr], o[4 * jj + 2 * rr + 1]);
          if ((lane & 3) == 0) own_ml[row] = make_float2(m[rr] * p.c, l[rr]);
        }
        named_sync(kBarWg0, 128);  // every warp's wgmmas retired: the next run may reload the page
      }
      q0 = q1;
    }
    acquire();
    at::cp_async_wait<0>();  // a tile without page work still waits for its Q tile copy
    named_arrive(kBarFull, kCombineThreads);
    named_sync(kBarWg0, 128);  // s_key, s_lim and the Q tile are read: the next tile may rewrite them
  }
  // Warpgroup 1 arrives on kBarEmpty after every tile; take the last arrival.
  if (ntiles > first) named_sync(kBarEmpty, kCombineThreads);
}

// The combine's launch: one persistent CTA per SM (at most one per tile), a programmatic dependent of the
// attention kernel unless FLASHMSA_PREFILL_PDL says otherwise.
template <int FMT, bool QK16>
cudaError_t run_combine(const PrefillParams& p, const Workspace& w, float lse_bias, cudaStream_t stream) {
  constexpr int smem = CombineSmem<FMT, QK16>::kAlloc;
  static bool configured[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
  if (!configured[dev]) {
    err = cudaFuncSetAttribute(prefill_combine<FMT, QK16>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    configured[dev] = true;
  }
  int sms = 0;
  err = device_sms(&sms);
  if (err != cudaSuccess) return err;
  const int qpt = kCombineRows / (p.num_q_heads / p.num_kv_heads);
  const long long tiles = (static_cast<long long>(p.num_rows) + qpt - 1) / qpt * p.num_kv_heads;
  const unsigned grid = static_cast<unsigned>(tiles < sms ? tiles : sms);
  return sm90::launch_pdl(prefill_combine<FMT, QK16>, grid, kCombineThreads, smem, stream, (prefill_pdl() & 2) != 0,
                          p, w, lse_bias, tiles);
}

}  // namespace
}  // namespace prefill

std::int64_t prefill_kvouter_workspace_bytes(const PrefillParams& p) { return prefill::carve(p, nullptr).bytes; }

int launch_prefill_kvouter(const PrefillParams& p, int kv_format, void* stream_ptr) {
  using namespace prefill;
  if (p.num_rows == 0) return 0;
  const int G = p.num_q_heads / p.num_kv_heads;
  if (p.num_kv_heads <= 0 || G <= 0 || G > 16 || 16 % G != 0 || p.topk_k < 1 || p.topk_k > 16 ||
      p.bt_width <= 0 || p.batch <= 0 || kv_format < 0 || kv_format > 2 ||
      p.num_kv_heads * kMaxTilesPerUnit > kOrderClasses ||
      static_cast<std::int64_t>(p.topk_k) * p.num_rows * p.num_q_heads > kMaxPartialRows ||
      p.num_rows >= kMaxQueryRows || p.q_e4m3 != (kv_format != at::kBf16))
    return cudaErrorInvalidValue;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const std::int64_t bytes = prefill_kvouter_workspace_bytes(p);
  void* base = nullptr;
  cudaError_t err = workspace_alloc(&base, static_cast<size_t>(bytes), stream);
  if (err != cudaSuccess) return err;
  const Workspace w = carve(p, base);
  err = launch_plan(p, w, stream);
  if (err == cudaSuccess && p.stop_after != 1) err = launch_attention(p, w, kv_format, stream);
  if (err == cudaSuccess && p.stop_after == 0) {
    const float lse_bias = kv_format == at::kBf16 ? 0.0f : -std::log(448.0f);
    const bool qk16 = !fp8_qk_on_e4m3_mma();
    switch (kv_format) {
      case at::kBf16: err = run_combine<at::kBf16, false>(p, w, lse_bias, stream); break;
      case at::kFp8:
        err = qk16 ? run_combine<at::kFp8, true>(p, w, lse_bias, stream) : run_combine<at::kFp8, false>(p, w, lse_bias, stream);
        break;
      default:
        err = qk16 ? run_combine<at::kNvfp4, true>(p, w, lse_bias, stream)
                   : run_combine<at::kNvfp4, false>(p, w, lse_bias, stream);
        break;
    }
  }
  const cudaError_t ferr = workspace_free(base, stream);
  return err != cudaSuccess ? err : ferr;
}

}  // namespace flashmsa::cuda

// SM90 KV-outer sparse attention for prefill: the own-page kernel (stage 2a in
// prefill_kvouter.h). Each query's own page (the page of its position, where the causal
// mask bites) is not in the plan's CSR (plan_count does not count it); this kernel
// computes that page's partial instead, from the inputs alone, so it runs beside the plan
// on a second stream (launch_prefill_kvouter) while the plan's small kernels leave most of
// the GPU idle.
#include "cuda/sm90/pdl.cuh"
#include "cuda/sm90/prefill_kvouter_detail.cuh"
#include "cuda/sm90/prefill_tile.cuh"

namespace flashmsa::cuda::prefill {
namespace {

// Tiles of kOwnSubTiles sub-tiles of kOwnRows (query, head) rows: KV head g = tile % Hkv,
// queries T0 .. T0 + nq - 1 (nq = kOwnSubTiles qpt, qpt = 64 / G, T0 = (tile / Hkv) nq),
// row r of sub-tile i = head g G + r % G of query T0 + i qpt + r / G. A CTA takes tiles
// blockIdx.x, + gridDim.x, ...: the grid is half the SMs (run_own_page), so the plan's
// kernels keep the other half while this kernel runs beside them (a CTA holds the whole
// register file of its SM).
// The CTA's queries form runs of one (request, own page) each (a request's queries are
// consecutive rows and their positions increase, D4). Per run:
//   1. the page by cp.async, converted as in the attention kernel (at::convert_page), by
//      both warpgroups;
//   2. the sub-tiles the run touches, alternately per warpgroup, each warpgroup's Q
//      sub-tiles double-buffered and its tile loop software-pipelined: S = Q K^T and the
//      single-page softmax with O = P V (prefill_tile.cuh), the run's rows with their
//      causal limit p % 128, the others fully masked;
//   3. the run's rows store what the attention kernel stores for a page: the
//      unnormalised BF16(O) and (m c, l), at the slot of the query's top-k that
//      plan_count accepted for the own page (the first slot holding it, if the page is
//      valid, D1). A query without such a slot is in no run and stores nothing.
constexpr int kOwnThreads = 256;   // two warpgroups
constexpr int kOwnRows = 64;       // rows per sub-tile (one warpgroup's wgmma M)
constexpr int kOwnSubTiles = 16;   // sub-tiles per CTA (1,024 rows: 64 queries at G = 16)
constexpr int kOwnMaxQueries = kOwnSubTiles * kOwnRows;  // G = 1

template <int FMT, bool QK16>
struct OwnSmem {
  using PB = at::PageBytes<FMT, QK16>;
  static constexpr bool kQ16 = FMT == at::kBf16 || (QK16 && !kQ8Rs);  // 256-byte Q rows (BF16 or F16)
  static constexpr int kQ = kOwnRows * (kQ16 ? 256 : 128);            // one Q sub-tile, SW128 (64-row panels)
  static constexpr int kMeta = kOwnMaxQueries * (8 + 4 + 4);          // s_key (long long), s_lim, s_row (int)
  static constexpr int kBytes = PB::kStage + PB::kConv + 4 * kQ + kMeta;
  static constexpr int kAlloc = kBytes + 1024;  // runtime 1024-byte alignment
  static_assert((PB::kStage + PB::kConv) % 1024 == 0 && kQ % 1024 == 0, "1024-byte aligned Q sub-tiles");
  static_assert(kAlloc <= 227 * 1024, "shared memory");
};

template <int FMT, bool QK16>
__global__ void __launch_bounds__(kOwnThreads, 1)
    prefill_own_page(const PrefillParams p, const Workspace w, long long ntiles) {
  using S = OwnSmem<FMT, QK16>;
  using PB = at::PageBytes<FMT, QK16>;
  constexpr bool kRs = QK16 && kQ8Rs;  // Q8RS: E4M3 query rows, register-sourced Q K^T
  constexpr bool kWiden = S::kQ16 && FMT != at::kBf16;  // QK16 without Q8RS: F16 rows widened here
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  const std::uint32_t a0 = gm::smem_addr(smem_raw);
  std::uint8_t* smem = smem_raw + (((a0 + 1023u) & ~1023u) - a0);
  std::uint8_t* stage = smem;
  std::uint8_t* conv = stage + PB::kStage;
  std::uint8_t* q_base = conv + PB::kConv;                                // [2 warpgroups][2] Q sub-tiles
  long long* s_key = reinterpret_cast<long long*>(q_base + 4 * S::kQ);  // [nq] request x W + own page, -1: none
  int* s_lim = reinterpret_cast<int*>(s_key + kOwnMaxQueries);           // [nq] p % 128
  int* s_row = s_lim + kOwnMaxQueries;                                   // [nq] o_part row of head g G

  const int G = p.num_q_heads / p.num_kv_heads, qpt = kOwnRows / G, nq = kOwnSubTiles * qpt;
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid >> 7, 0), wtid = tid & 127;
  const int lane = wtid & 31, warp = wtid >> 5;

  for (long long tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
    const int g = static_cast<int>(tile % p.num_kv_heads);
    const long long T0 = tile / p.num_kv_heads * nq;
    // The CTA's queries: request and own page e = pos / 128, its causal limit, and the slot
    // plan_count accepts for it (D1: the first slot holding e, where e has a block-table
    // column and a physical page; pos < seq_len, so e is a page of the request).
    for (int q = tid; q < nq; q += kOwnThreads) {
      long long key = -1;
      int row = 0, lim = -1;
      const long long t = T0 + q;
      if (t < p.num_rows) {
        int b;
        long long seq, pos;
        locate(p, static_cast<int>(t), &b, &seq, &pos);
        const long long e = pos / 128;
        if (pos >= 0 && e < p.bt_width) {
          const std::int32_t* tk = p.topk + t * p.topk_stride[0] + g * p.topk_stride[1];
          int slot = -1;
          for (int k = 0; k < p.topk_k && slot < 0; ++k)
            if (tk[k * p.topk_stride[2]] == e) slot = k;
          const long long phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
          if (slot >= 0 && phys >= 0 && phys < p.num_pages) {
            key = static_cast<long long>(b) * p.bt_width + e;
            lim = static_cast<int>(pos & 127);
            row = static_cast<int>((t * p.topk_k + slot) * p.num_q_heads + g * G);
          }
        }
      }
      s_key[q] = key;
      s_lim[q] = lim;
      s_row[q] = row;
    }
    __syncthreads();

    // Sub-tile i's Q rows into this warpgroup's buffer b (rows past T zero-filled; one
    // cp.async group, empty when kWiden stores synchronously).
    auto q_buf = [&](int b) { return q_base + (2 * wg + b) * S::kQ; };
    auto load_q = [&](int i, int b) {
      constexpr int kChunks = S::kQ16 ? 16 : 8;
      constexpr int es = FMT == at::kBf16 ? 2 : 1;
      std::uint8_t* dst = q_buf(b);
      for (int c = wtid; c < kOwnRows * kChunks; c += 128) {
        const int r = c / kChunks, ch = c % kChunks;
        const long long t = T0 + i * qpt + r / G;
        const bool ok = t < p.num_rows;
        const std::uint8_t* src = static_cast<const std::uint8_t*>(p.q) +
                                  ((ok ? t : 0) * p.q_row_stride + (g * G + r % G) * p.q_head_stride) * es;
        if constexpr (kWiden) at::load_q_chunk_e4m3_as_f16(dst, kOwnRows, r, ch, src, ok);
        else at::copy_q_chunk(dst, kOwnRows, r, ch, src, ok);
      }
      at::cp_async_commit();
    };
    auto wg_sync = [wg] { asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory"); };

    const int lr0 = 16 * warp + (lane >> 2);  // this thread's accumulator rows lr0, lr0 + 8
    for (int q0 = 0; q0 < nq;) {
      const long long run = s_key[q0];
      int q1 = q0 + 1;
      while (q1 < nq && s_key[q1] == run) ++q1;
      if (run >= 0) {
        // 1. The page.
        const int b = static_cast<int>(run / p.bt_width), e = static_cast<int>(run % p.bt_width);
        UnitDesc un{};
        un.g = g;
        un.phys = p.block_table[b * p.bt_stride[0] + e * p.bt_stride[1]];
        const long long seq = p.seq_lens[b * p.seq_lens_stride];
        const int valid = static_cast<int>(min(128LL, seq - 128LL * e));
        const at::PageSrc src = page_src<FMT>(p, un);
        at::issue_page_copy<FMT, QK16, kOwnThreads>(src, stage, valid, tid);
        at::cp_async_commit();
        // This warpgroup's first two sub-tiles of the run, under the page copy.
        const int i0 = q0 / qpt + wg, i1 = (q1 - 1) / qpt;  // its sub-tiles: i0, i0 + 2, .. <= i1
        const int nsub = i0 <= i1 ? (i1 - i0) / 2 + 1 : 0;
        if (nsub > 0) load_q(i0, 0);
        if (nsub > 1) load_q(i0 + 2, 1);
        if (nsub > 1) at::cp_async_wait<1>();  // the page and sub-tile 0 (sub-tile 1 may still be in flight)
        else at::cp_async_wait<0>();
        at::fence_view_async_shared();
        __syncthreads();
        at::convert_page<FMT, QK16, kOwnThreads, kRs>(src, stage, conv, valid, tid);
        __syncthreads();
        const std::uint32_t k_addr = gm::smem_addr(PB::k_tile(stage, conv));
        const std::uint32_t v_addr = gm::smem_addr(PB::v_tile(stage, conv));
        // 2. This warpgroup's sub-tiles, software-pipelined as in the attention kernel: the Q
        // K^T of sub-tile k+1 is issued under the P V and the stores of sub-tile k; the Q
        // rows of sub-tile k+2 load meanwhile (into sub-tile k's buffer: its Q K^T retired).
        float s[64], o[64], m[2], l[2];
        std::uint32_t pa[8][4];
        std::uint32_t qa[8][4];  // Q8RS: the A fragments of the Q K^T in flight
        auto issue_qk = [&](int k) {
          if constexpr (kRs) {
            load_q_frags(gm::smem_addr(q_buf(k & 1)), 0, wtid, qa);
            wg_qk_rs(qa, k_addr, s);
          } else {
            at::wg_qk<FMT, QK16>(gm::smem_addr(q_buf(k & 1)), kOwnRows * 128, k_addr, s);
          }
        };
        if (nsub > 0) {
          issue_qk(0);
          gm::wait<0>();
          gm::fence_operands(s);
          if constexpr (kRs) fence_pa(qa);
        }
        // Sub-tile k's limits (its rows outside the run: -1, all keys masked) and its stores.
        int qr[2], lim[2];
        auto limits = [&](int k) {
          const int i = i0 + 2 * k;
  #pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            qr[rr] = i * qpt + (lr0 + 8 * rr) / G;  // the row's query (CTA-local)
            lim[rr] = qr[rr] >= q0 && qr[rr] < q1 ? s_lim[qr[rr]] : -1;
          }
        };
        // 3. The run's rows: BF16(O) (each lane's column pairs) and (m c, l).
        auto store = [&] {
  #pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            if (lim[rr] < 0) continue;
            const long long orow = static_cast<long long>(s_row[qr[rr]]) + (lr0 + 8 * rr) % G;
            std::uint32_t* dst = reinterpret_cast<std::uint32_t*>(w.o_part + orow * 128) + (lane & 3);
  #pragma unroll
            for (int j = 0; j < 16; ++j) dst[4 * j] = gm::pack_bf16x2(o[4 * j + 2 * rr], o[4 * j + 2 * rr + 1]);
            if ((lane & 3) == 0) *reinterpret_cast<float2*>(w.ml_part + 2 * orow) = make_float2(m[rr] * p.c, l[rr]);
          }
        };
  #pragma unroll 1
        for (int k = 0; k + 1 < nsub; ++k) {
          limits(k);
          softmax_pv<FMT>(p, s, lim[0], lim[1], v_addr, pa, o, m, l, lane);
          at::cp_async_wait<0>();  // sub-tile k+1's rows (the only group in flight)
          at::fence_view_async_shared();
          wg_sync();  // every thread's rows of sub-tile k+1; every warp's Q K^T of sub-tile k retired
          issue_qk(k + 1);
          if (k + 2 < nsub) load_q(i0 + 2 * (k + 2), k & 1);
          gm::wait<1>();  // P V of sub-tile k; the Q K^T of sub-tile k+1 stays in flight
          gm::fence_operands(o);
          fence_pa(pa);
          store();
          gm::wait<0>();  // Q K^T of sub-tile k+1
          gm::fence_operands(s);
          if constexpr (kRs) fence_pa(qa);
        }
        if (nsub > 0) {  // the last sub-tile
          limits(nsub - 1);
          softmax_pv<FMT>(p, s, lim[0], lim[1], v_addr, pa, o, m, l, lane);
          gm::wait<0>();
          gm::fence_operands(o);
          fence_pa(pa);
          store();
        }
        __syncthreads();  // both warpgroups are done with the page: the next run may reload it
      }
      q0 = q1;
    }
    __syncthreads();  // s_key, s_lim, s_row are read: the next tile may rewrite them
  }
  at::cp_async_wait<0>();
}

template <int FMT, bool QK16>
cudaError_t run_own_page(const PrefillParams& p, const Workspace& w, cudaStream_t stream) {
  constexpr int smem = OwnSmem<FMT, QK16>::kAlloc;
  static bool configured[64] = {};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
  if (!configured[dev]) {
    err = cudaFuncSetAttribute(prefill_own_page<FMT, QK16>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess) return err;
    configured[dev] = true;
  }
  int sms = 0;
  err = device_sms(&sms);
  if (err != cudaSuccess) return err;
  const int nq = kOwnSubTiles * kOwnRows / (p.num_q_heads / p.num_kv_heads);
  const long long tiles = (static_cast<long long>(p.num_rows) + nq - 1) / nq * p.num_kv_heads;
  static const int forced = env_whole("FLASHMSA_PREFILL_OWN_CTAS", 1, 1 << 20);  // benchmark A/B
  const long long want = forced > 0 ? forced : (sms + 1) / 2;
  const unsigned grid = static_cast<unsigned>(tiles < want ? tiles : want);
  return sm90::launch_pdl(prefill_own_page<FMT, QK16>, grid, kOwnThreads, smem, stream, false, p, w, tiles);
}

}  // namespace

cudaError_t launch_own_page(const PrefillParams& p, const Workspace& w, int kv_format, cudaStream_t stream) {
  const bool qk16 = !fp8_qk_on_e4m3_mma();
  switch (kv_format) {
    case at::kBf16: return run_own_page<at::kBf16, false>(p, w, stream);
    case at::kFp8: return qk16 ? run_own_page<at::kFp8, true>(p, w, stream) : run_own_page<at::kFp8, false>(p, w, stream);
    default: return qk16 ? run_own_page<at::kNvfp4, true>(p, w, stream) : run_own_page<at::kNvfp4, false>(p, w, stream);
  }
}

}  // namespace flashmsa::cuda::prefill

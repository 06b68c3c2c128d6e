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

// Tiles of kOwnRows (query, head) rows, one warpgroup per CTA: KV head g = blockIdx.x %
// Hkv, queries t0 .. t0 + qpt - 1 (qpt = 64 / G, t0 = (blockIdx.x / Hkv) qpt), row r =
// head g G + r % G of query t0 + r / G. The tile's queries form runs of one (request, own
// page) each (a request's queries are consecutive rows and their positions increase,
// D4). Per run:
//   1. the page by cp.async, converted as in the attention kernel (at::convert_page);
//   2. S = Q K^T and the single-page softmax with O = P V (prefill_tile.cuh) for all 64
//      rows, the run's rows with their causal limit p % 128, the others fully masked;
//   3. the run's rows store what the attention kernel stores for a page: the
//      unnormalised BF16(O) and (m c, l), at the slot of the query's top-k that
//      plan_count accepted for the own page (the first slot holding it, if the page is
//      valid, D1). A query without such a slot has no run and stores nothing.
constexpr int kOwnThreads = 128;
constexpr int kOwnRows = 64;
constexpr int kOwnRowBytes = 272;  // a staged O row: 128 BF16 + 16 bytes (conflict-free quad stores)

template <int FMT, bool QK16>
struct OwnSmem {
  using PB = at::PageBytes<FMT, QK16>;
  static constexpr bool kQ16 = FMT == at::kBf16 || (QK16 && !kQ8Rs);  // 256-byte Q rows (BF16 or F16)
  static constexpr int kQ = kOwnRows * (kQ16 ? 256 : 128);            // Q tile, SW128 (panels of 64 rows)
  // The staged O rows (64 x kOwnRowBytes) lie over the page stage, dead once P V retired.
  static_assert(kOwnRows * kOwnRowBytes <= PB::kStage, "the staged O fits the page stage");
  static constexpr int kMeta = kOwnRows * (8 + 4 + 4 + 8);  // s_key (long long), s_lim, s_row (int), s_ml (float2)
  static constexpr int kBytes = PB::kStage + PB::kConv + kQ + kMeta;
  static constexpr int kAlloc = kBytes + 1024;  // runtime 1024-byte alignment
  static_assert((PB::kStage + PB::kConv) % 1024 == 0, "1024-byte aligned Q tile");
  static_assert(2 * (kAlloc + 1024) <= 228 * 1024, "two CTAs per SM");
};

template <int FMT, bool QK16>
__global__ void __launch_bounds__(kOwnThreads, 2) prefill_own_page(const PrefillParams p, const Workspace w) {
  using S = OwnSmem<FMT, QK16>;
  using PB = at::PageBytes<FMT, QK16>;
  constexpr bool kRs = QK16 && kQ8Rs;  // Q8RS: E4M3 query rows, register-sourced Q K^T
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  const std::uint32_t a0 = gm::smem_addr(smem_raw);
  std::uint8_t* smem = smem_raw + (((a0 + 1023u) & ~1023u) - a0);
  std::uint8_t* stage = smem;
  std::uint8_t* conv = stage + PB::kStage;
  std::uint8_t* q_tile = conv + PB::kConv;
  long long* s_key = reinterpret_cast<long long*>(q_tile + S::kQ);  // [qpt] request x W + own page, -1: none
  int* s_lim = reinterpret_cast<int*>(s_key + kOwnRows);            // [qpt] p % 128
  int* s_row = s_lim + kOwnRows;                                    // [qpt] o_part row of the query's head g G
  float2* s_ml = reinterpret_cast<float2*>(s_row + kOwnRows);       // [64] staged (m c, l)
  std::uint8_t* s_o = stage;                                        // [64] staged BF16(O) rows

  const int G = p.num_q_heads / p.num_kv_heads, qpt = kOwnRows / G;
  const int g = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.num_kv_heads));
  const long long t0 = static_cast<long long>(blockIdx.x / static_cast<unsigned>(p.num_kv_heads)) * qpt;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // The Q tile (rows past T zero-filled): BF16 or E4M3 rows by cp.async; the F16 image
  // of E4M3 rows (QK16 without Q8RS) widened on the way (the plan's copy of it may not
  // exist yet: this kernel runs beside the plan).
  {
    constexpr bool kWiden = S::kQ16 && FMT != at::kBf16;
    constexpr int kChunks = S::kQ16 ? 16 : 8;
    constexpr int es = FMT == at::kBf16 ? 2 : 1;
    for (int c = tid; c < kOwnRows * kChunks; c += kOwnThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      const long long t = t0 + r / G;
      const bool ok = t < p.num_rows;
      const std::uint8_t* src =
          static_cast<const std::uint8_t*>(p.q) + ((ok ? t : 0) * p.q_row_stride + (g * G + r % G) * p.q_head_stride) * es;
      if constexpr (kWiden) at::load_q_chunk_e4m3_as_f16(q_tile, kOwnRows, r, ch, src, ok);
      else at::copy_q_chunk(q_tile, kOwnRows, r, ch, src, ok);
    }
    at::cp_async_commit();
  }
  // The tile's queries: request and own page e = pos / 128, its causal limit, and the
  // slot plan_count accepts for it (D1: the first slot holding e, where e has a block-table
  // column and a physical page; pos < seq_len, so e is a page of the request).
  if (tid < qpt) {
    long long key = -1;
    int row = 0, lim = -1;
    const long long t = t0 + tid;
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
    s_key[tid] = key;
    s_lim[tid] = lim;
    s_row[tid] = row;
  }
  __syncthreads();

  const int lr0 = 16 * warp + (lane >> 2);  // this thread's accumulator rows lr0, lr0 + 8
  for (int q0 = 0; q0 < qpt;) {
    const long long run = s_key[q0];
    int q1 = q0 + 1;
    while (q1 < qpt && s_key[q1] == run) ++q1;
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
      at::cp_async_wait<0>();  // and the Q tile's group
      at::fence_view_async_shared();
      __syncthreads();
      at::convert_page<FMT, QK16, kOwnThreads, kRs>(src, stage, conv, valid, tid);
      __syncthreads();
      const std::uint32_t k_addr = gm::smem_addr(PB::k_tile(stage, conv));
      const std::uint32_t v_addr = gm::smem_addr(PB::v_tile(stage, conv));
      // 2. S = Q K^T, softmax, O = P V.
      float s[64], o[64], m[2], l[2];
      std::uint32_t pa[8][4];
      if constexpr (kRs) {
        std::uint32_t qa[8][4];
        load_q_frags(gm::smem_addr(q_tile), 0, tid, qa);
        wg_qk_rs(qa, k_addr, s);
        gm::wait<0>();
        gm::fence_operands(s);
        fence_pa(qa);
      } else {
        at::wg_qk<FMT, QK16>(gm::smem_addr(q_tile), kOwnRows * 128, k_addr, s);
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
      __syncthreads();  // every warp's wgmmas retired: the page stage is free for the staged O
      // 3. The run's rows: staged, then stored 16 bytes per thread.
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        const int r = lr0 + 8 * rr;
        if (r / G < q0 || r / G >= q1) continue;
        std::uint8_t* dst = s_o + r * kOwnRowBytes + 4 * (lane & 3);
#pragma unroll
        for (int j = 0; j < 16; ++j)
          *reinterpret_cast<std::uint32_t*>(dst + 16 * j) = gm::pack_bf16x2(o[4 * j + 2 * rr], o[4 * j + 2 * rr + 1]);
        if ((lane & 3) == 0) s_ml[r] = make_float2(m[rr] * p.c, l[rr]);
      }
      __syncthreads();
      for (int r = q0 * G + (tid >> 4); r < q1 * G; r += kOwnThreads / 16) {
        const long long orow = static_cast<long long>(s_row[r / G]) + r % G;
        const int d0 = (tid & 15) * 8;
        *reinterpret_cast<uint4*>(w.o_part + orow * 128 + d0) =
            *reinterpret_cast<const uint4*>(s_o + r * kOwnRowBytes + 2 * d0);
        if (d0 == 0) *reinterpret_cast<float2*>(w.ml_part + 2 * orow) = s_ml[r];
      }
      __syncthreads();  // the staged rows are out: the next run may reload the page
    }
    q0 = q1;
  }
  at::cp_async_wait<0>();  // a tile without a run still waits for its Q tile copy
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
  const int qpt = kOwnRows / (p.num_q_heads / p.num_kv_heads);
  const long long tiles = (static_cast<long long>(p.num_rows) + qpt - 1) / qpt * p.num_kv_heads;
  return sm90::launch_pdl(prefill_own_page<FMT, QK16>, static_cast<unsigned>(tiles), kOwnThreads, smem, stream, false, p,
                          w);
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

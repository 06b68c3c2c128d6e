// FlashMSA — block-sparse GQA attention over the selected pages (spec 3, D1, D4-D7).
//
// For query row at position p, Q head h, KV head g = h / G (G = Hq / Hkv):
//   S      = valid entries of topk[row, g, :] (entries that are < 0, beyond the
//            request's pages or beyond p // 128 are ignored; duplicates count once)
//   V(p,g) = { t : t // 128 in S and t <= p }
//   z_t    = c * dot(q[row, h], K[g, t]),  c = softmax_scale * q_scale * k_global_scale
//   out    = sum_t softmax(z)_t * V[g, t] * v_global_scale   (BF16)
//   lse    = ln sum_t exp(z_t)                               (FP32, natural log)
// A row with no visible key (padding, D5) gets out = 0 and lse = -inf.
// Formats (D7): q bf16 over a bf16 cache (P rounded to BF16 for the PV product);
// q e4m3 over an fp8 cache (Q8KV8) or an nvfp4 cache (Q8KV4, K/V dequantised to
// E4M3_sat(e2m1 * block_scale)); FP8 paths use P = E4M3_sat(448 * exp(z - m)) in the PV
// product with the normaliser summed from the unrounded values (spec 3.4).
#pragma once

#include <cmath>
#include <cstddef>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "flashmsa/cache.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"

namespace flashmsa {

/// Default softmax scale 1/sqrt(128) (spec 1.1).
inline constexpr float kDefaultSoftmaxScale = 0.08838834764831845f;

/// Arguments of sparse_attention_prefill (varlen, chunked prefill).
struct SparseAttentionPrefillArgs {
  TensorView q;             ///< bf16 | e4m3 [T, Hq, 128], innermost stride 1, 16-byte aligned
  PagedKvCache kv;          ///< K/V cache views (any KvFormat, see header comment), 16-byte aligned
  TensorView topk_indices;  ///< i32 [T, Hkv, K], K in 1..16, any strides (logical page ids)
  TensorView block_table;   ///< i32 [B, max_pages]: logical -> physical page
  TensorView cu_seqlens_q;  ///< i32 [B+1], monotone, cu[0] = 0, cu[B] = T
  TensorView seq_lens;      ///< i32 [B], final KV length incl. the chunk, >= q_len
  float softmax_scale = kDefaultSoftmaxScale;  ///< > 0
  float q_scale = 1.0f;     ///< e4m3 q: dequant scale (q = q8 * q_scale); bf16 q: must be 1
  TensorView out;           ///< out bf16 [T, Hq, 128]
  TensorView lse;           ///< optional out f32 [T, Hq]
  void* stream = nullptr;   ///< cudaStream_t for CUDA tensors (0 = default stream); ignored on CPU
};

/// Sparse attention for chunked prefill: row j of request r sits at
/// p = seq_len_r - q_len_r + j (D4). Errors: InvalidArgument naming the argument,
/// Unsupported for a format pair outside D7 or a backend not built.
/// CUDA: the KV-outer kernels (spec 3.5: plan, per-page attention, combine) run on
/// `stream` with no host synchronisation and are graph-capturable; their workspace
/// (about K x T x Hq x 260 bytes, mostly the BF16 partials) is taken with
/// a stream-ordered allocation from a FlashMSA-private memory pool that keeps its
/// memory between calls (not the device's default pool) and freed on the stream.
/// FLASHMSA_PREFILL_KERNEL=query_outer selects the v1 query-outer kernel instead.
Status sparse_attention_prefill(const SparseAttentionPrefillArgs& args);

/// Request metadata a decode plan is built for (capacity; values read at run time).
struct DecodePlanArgs {
  int batch_size = 0;              ///< B, requests per step (> 0)
  int queries_per_request = 1;     ///< Q in 1..32 (1 + MTP drafts)
  int num_q_heads = 64;            ///< Hq
  int num_kv_heads = 4;            ///< Hkv in 1..8, Hq / Hkv in {1, 2, 4, 8, 16}
  int max_pages_per_request = 0;   ///< block-table capacity (pages), 1..8192
  int topk = kMaxTopk;             ///< K in 1..16
  KvFormat kv_format = KvFormat::bf16;
  DType q_dtype = DType::bf16;     ///< bf16 for a bf16 cache, e4m3 for fp8 / nvfp4
  Device device = Device::cpu;
  int num_threads = 0;             ///< CPU threads; 0 = FLASHMSA_NUM_THREADS or all cores
};

/// Per-layer tensors of one decode step.
struct DecodeRunArgs {
  TensorView q;             ///< bf16 | e4m3 [B*Q, Hq, 128], row = b*Q + j
  PagedKvCache kv;
  TensorView topk_indices;  ///< i32 [B*Q, Hkv, K], any strides
  TensorView block_table;   ///< i32 [B, >= max_pages_per_request]
  TensorView seq_lens;      ///< i32 [B], KV length incl. the Q new tokens, <= capacity;
                            ///< 0 marks a padding request (D5)
  float softmax_scale = kDefaultSoftmaxScale;  ///< > 0, finite
  float q_scale = 1.0f;     ///< e4m3 q: dequant scale; bf16 q: must be 1
  TensorView out;           ///< out bf16 [B*Q, Hq, 128]
  TensorView lse;           ///< optional out f32 [B*Q, Hq]
  void* stream = nullptr;   ///< cudaStream_t for CUDA tensors (0 = default stream); ignored on CPU
};

/// Decode sparse attention as a plan/run pair (CUTLASS-style handle):
///   can_implement(args) -> plan(args) (host, owns the workspace) -> run(...) per layer.
/// One plan serves every layer of a step; query j of request b sits at
/// p = seq_lens[b] - Q + j (D4); rows with p < 0 are empty (D5). run() does no
/// allocation. seq_lens / block_table / topk contents are read at run time.
/// One plan per thread / CUDA stream: run() reuses the plan's workspace, so concurrent
/// runs of one plan race. On CUDA, metadata contents are not validated on the host:
/// a request longer than the block table, a negative length or an out-of-range entry
/// is not an error there; the kernel skips what it cannot address (D1) and never reads
/// out of bounds, where the CPU path returns InvalidArgument.
class SparseDecodePlan {
 public:
  SparseDecodePlan() = default;
  ~SparseDecodePlan();  ///< frees the (device) workspace
  SparseDecodePlan(const SparseDecodePlan&) = delete;
  SparseDecodePlan& operator=(const SparseDecodePlan&) = delete;
  /// Moves the plan and its workspace; `other` becomes unplanned.
  SparseDecodePlan(SparseDecodePlan&& other) noexcept;
  SparseDecodePlan& operator=(SparseDecodePlan&& other) noexcept;

  /// Checks a plan request against D10 and the supported format pairs.
  /// Errors: InvalidArgument naming the field (batch_size, queries_per_request, heads,
  /// max_pages_per_request, topk, q_dtype, num_threads); Unsupported for a (q, kv) pair
  /// outside D7 or device cuda in a build without CUDA kernels.
  static Status can_implement(const DecodePlanArgs& args);
  /// Validates (can_implement) and sizes the workspace for `args`. On CUDA it chooses
  /// the kernel and the split-KV factor from the SM count and, unless the splits merge
  /// in a thread-block cluster (warp-MMA kernel; no workspace then), allocates the split
  /// partials (f32 O and LSE per (query row, head, split)) with cudaMalloc: call it
  /// outside graph capture. Runs of one plan share this workspace: do not overlap them
  /// (one plan per stream). Errors: those of can_implement, InvalidArgument when no CUDA device is
  /// usable, Internal when the allocation fails.
  Status plan(const DecodePlanArgs& args);
  /// Runs one layer. All tensors must be on the planned device. On CUDA it launches on
  /// `args.stream` with no allocation and no host synchronisation (graph-capturable);
  /// the contents of seq_lens / block_table / topk are not read on the host: the kernel
  /// applies the D1 skipping rules and never reads out of bounds.
  /// Errors: not planned; tensors inconsistent with the plan or invalid (InvalidArgument
  /// naming the argument); Internal if a kernel launch fails.
  Status run(const DecodeRunArgs& args);

  /// True after a successful plan() (a moved-from plan is unplanned).
  bool planned() const { return planned_; }
  /// The arguments of the last successful plan().
  const DecodePlanArgs& args() const { return args_; }
  std::size_t workspace_bytes() const {
    return workspace_.size() * sizeof(float) + device_workspace_bytes_;
  }
  /// CUDA: KV splits per (query row, KV head) chosen by plan() (1 on the CPU).
  int num_splits() const { return num_splits_; }
  /// CUDA: the decode kernel plan() chose. Small batches: one CTA per query row, KV head
  /// and split, on warp-level MMAs, with P V split across the warps by head dims
  /// ("warp_mma_dsplit": one or two pages per split) or by tokens ("warp_mma"). Larger
  /// batches: "tile" (wgmma over tiles of up to 128 query rows x heads, in a
  /// warp-specialised form where a producer warpgroup copies (and widens FP8 / NVFP4)
  /// the pages; the FLASHMSA_FP8_QK=e4m3 opt-in in the serial form), or "tile_serial" (the
  /// serial form, CTA barriers between the steps of every page, for every format; only
  /// when FLASHMSA_DECODE_KERNEL=tile_serial forces it).
  /// "cpu" for CPU plans, before any plan() and after a failed one.
  const char* kernel() const { return kernel_; }

 private:
  Status plan_cuda();
  Status run_cuda(const DecodeRunArgs& args);
  void release();

  bool planned_ = false;
  DecodePlanArgs args_;
  int num_threads_ = 1;
  std::vector<float> workspace_;  // CPU: per-thread logit / probability scratch
  int num_splits_ = 1;                      // CUDA: split-KV factor
  int queries_per_cta_ = 1;                 // CUDA: query rows per CTA of the kernel
  bool cluster_merge_ = false;              // CUDA, warp_mma: splits merge in a cluster
  const char* kernel_ = "cpu";              // CUDA: "warp_mma", "warp_mma_dsplit" or "tile"
  void* device_workspace_ = nullptr;        // CUDA: split partials (O, LSE), owned
  std::size_t device_workspace_bytes_ = 0;
};

/// Decode plans keyed by everything that shapes a plan: batch_size, queries_per_request,
/// num_q_heads, num_kv_heads, max_pages_per_request, topk, kv_format, q_dtype, device,
/// num_threads, and for CUDA plans the current CUDA device ordinal (a plan's workspace
/// lives on one GPU). An engine keeps one cache per stream and calls get() once per step:
/// the same key returns the same plan object (planned on first use, workspace kept), so
/// captured CUDA graphs stay valid. Not thread-safe.
class DecodePlanCache {
 public:
  /// Sets *plan to the cached plan for `args`, planning it on first use.
  /// Errors: those of SparseDecodePlan::plan (nothing is cached then); InvalidArgument
  /// naming 'plan' for a null output pointer.
  Status get(const DecodePlanArgs& args, SparseDecodePlan** plan);
  /// Number of cached plans.
  std::size_t size() const { return plans_.size(); }
  /// Drops every plan (and its workspace).
  void clear() { plans_.clear(); }

 private:
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, int>;
  std::map<Key, std::unique_ptr<SparseDecodePlan>> plans_;
};

}  // namespace flashmsa

// Internal: the CUDA entry of sparse_attention_prefill (src/ops/attention_cuda.cpp).
#pragma once

#include "flashmsa/attention.h"

namespace flashmsa::detail {

/// Launches the SM90 kernel for validated prefill arguments (all tensors on cuda; the
/// contents of cu_seqlens_q / seq_lens / block_table / topk are not read on the host:
/// the kernel applies the D1 rules and never reads out of bounds). Unsupported in a
/// build without CUDA kernels.
Status run_prefill_cuda(const SparseAttentionPrefillArgs& args);

}  // namespace flashmsa::detail

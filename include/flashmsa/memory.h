// FlashMSA — device memory the library keeps between calls.
#pragma once

#include "flashmsa/status.h"

namespace flashmsa {

/// The CUDA launchers of sparse_attention_prefill and indexer_prefill take their per-call
/// workspaces (plan, partial outputs, page scores, up to hundreds of MB at long contexts)
/// as stream-ordered allocations from a FlashMSA-private memory pool per device that
/// keeps its mapped memory between calls, so repeated calls do not map it again (from
/// the default pool that cost about 0.3 ms per call for 269 MB on an H200; the caller's
/// own cudaMallocAsync pool is not touched). The pool holds at most the largest set of
/// workspaces live at once. This returns its unused memory on every device to the
/// driver, like torch.cuda.empty_cache(); workspaces of calls still in flight stay.
/// FLASHMSA_WORKSPACE_POOL=0 (read once) makes the launchers use the default pool.
/// Errors: Internal with the CUDA error. Ok, doing nothing, in a build without CUDA or
/// before any CUDA call.
Status release_cached_workspace();

}  // namespace flashmsa

// FlashMSA — MiniMax Sparse Attention for Hopper GPUs and CPUs. Umbrella header.
//
// Semantics: shared/spec/msa-semantics.md (section D is binding; a copy is in
// docs/spec/). Entry points:
//   cache.h      cache_insert, index_cache_insert, quantize_query_e4m3, nvfp4_to_fp8,
//                nvfp4_to_fp8_selected, packed_kv_views, nvfp4_head_slot_views
//   fused.h      fused_qknorm_rope_insert (projection row -> norm + RoPE -> caches, q)
//   indexer.h    indexer_prefill, indexer_decode, IndexerDecodePlan, topk_select
//   attention.h  sparse_attention_prefill, SparseDecodePlan (plan / run), DecodePlanCache
//   memory.h     release_cached_workspace (the CUDA launchers' workspace pool)
#pragma once

#include "flashmsa/attention.h"
#include "flashmsa/cache.h"
#include "flashmsa/fused.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/indexer.h"
#include "flashmsa/memory.h"
#include "flashmsa/numerics.h"
#include "flashmsa/status.h"
#include "flashmsa/tensor.h"
#include "flashmsa/version.h"

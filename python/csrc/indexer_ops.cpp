// Indexer ops: indexer_prefill, indexer_decode (page scores + top-k into caller buffers) and
// topk_select (the D1 selection alone, on given page scores).
#include "binding.h"

namespace flashmsa_py {
namespace {

void indexer_prefill(const at::Tensor& q, const at::Tensor& index_cache,
                     const std::optional<at::Tensor>& index_block_scale, double index_global_scale,
                     const at::Tensor& block_table, const at::Tensor& cu_seqlens_q,
                     const at::Tensor& seq_lens, const at::Tensor& topk_indices,
                     const std::optional<at::Tensor>& page_scores) {
  const char* op = "indexer_prefill";
  const at::Tensor* bs = index_block_scale.has_value() ? &*index_block_scale : nullptr;
  const at::Tensor* ps = page_scores.has_value() ? &*page_scores : nullptr;
  OpDevice dev(op, {{"q", &q}, {"index_cache", &index_cache}, {"index_block_scale", bs},
                    {"block_table", &block_table}, {"cu_seqlens_q", &cu_seqlens_q},
                    {"seq_lens", &seq_lens}, {"topk_indices", &topk_indices}, {"page_scores", ps}});
  flashmsa::IndexerPrefillArgs a;
  a.q = to_view(op, "q", q);
  a.index_k = index_cache_view(op, index_cache, index_block_scale, index_global_scale);
  a.block_table = to_view(op, "block_table", block_table);
  a.cu_seqlens_q = to_view(op, "cu_seqlens_q", cu_seqlens_q);
  a.seq_lens = to_view(op, "seq_lens", seq_lens);
  a.topk_indices = to_view(op, "topk_indices", topk_indices);
  a.page_scores = to_view(op, "page_scores", page_scores);
  a.stream = dev.stream();
  check_status(flashmsa::indexer_prefill(a));
}

void indexer_decode(const at::Tensor& q, const at::Tensor& index_cache,
                    const std::optional<at::Tensor>& index_block_scale, double index_global_scale,
                    const at::Tensor& block_table, const at::Tensor& seq_lens,
                    int64_t queries_per_request, const at::Tensor& topk_indices,
                    const std::optional<at::Tensor>& page_scores) {
  const char* op = "indexer_decode";
  const at::Tensor* bs = index_block_scale.has_value() ? &*index_block_scale : nullptr;
  const at::Tensor* ps = page_scores.has_value() ? &*page_scores : nullptr;
  OpDevice dev(op, {{"q", &q}, {"index_cache", &index_cache}, {"index_block_scale", bs},
                    {"block_table", &block_table}, {"seq_lens", &seq_lens},
                    {"topk_indices", &topk_indices}, {"page_scores", ps}});
  flashmsa::IndexerDecodeArgs a;
  a.q = to_view(op, "q", q);
  a.index_k = index_cache_view(op, index_cache, index_block_scale, index_global_scale);
  a.block_table = to_view(op, "block_table", block_table);
  a.seq_lens = to_view(op, "seq_lens", seq_lens);
  a.queries_per_request = static_cast<int>(queries_per_request);
  a.topk_indices = to_view(op, "topk_indices", topk_indices);
  a.page_scores = to_view(op, "page_scores", page_scores);
  a.stream = dev.stream();
  check_status(flashmsa::indexer_decode(a));
}

void topk_select(const at::Tensor& scores, const at::Tensor& local_page, const at::Tensor& topk) {
  const char* op = "topk_select";
  OpDevice dev(op, {{"scores", &scores}, {"local_page", &local_page}, {"topk", &topk}});
  check_status(flashmsa::topk_select(to_view(op, "scores", scores), to_view(op, "local_page", local_page),
                                     to_view(op, "topk", topk), dev.stream()));
}

}  // namespace
}  // namespace flashmsa_py

TORCH_LIBRARY_FRAGMENT(flashmsa, m) {
  m.def("topk_select(Tensor scores, Tensor local_page, Tensor(a!) topk) -> ()");
  m.def("indexer_prefill(Tensor q, Tensor index_cache, Tensor? index_block_scale, "
        "float index_global_scale, Tensor block_table, Tensor cu_seqlens_q, Tensor seq_lens, "
        "Tensor(a!) topk_indices, Tensor(b!)? page_scores=None) -> ()");
  m.def("indexer_decode(Tensor q, Tensor index_cache, Tensor? index_block_scale, "
        "float index_global_scale, Tensor block_table, Tensor seq_lens, int queries_per_request, "
        "Tensor(a!) topk_indices, Tensor(b!)? page_scores=None) -> ()");
}

TORCH_LIBRARY_IMPL(flashmsa, CPU, m) {
  m.impl("topk_select", &flashmsa_py::topk_select);
  m.impl("indexer_prefill", &flashmsa_py::indexer_prefill);
  m.impl("indexer_decode", &flashmsa_py::indexer_decode);
}
TORCH_LIBRARY_IMPL(flashmsa, CUDA, m) {
  m.impl("topk_select", &flashmsa_py::topk_select);
  m.impl("indexer_prefill", &flashmsa_py::indexer_prefill);
  m.impl("indexer_decode", &flashmsa_py::indexer_decode);
}

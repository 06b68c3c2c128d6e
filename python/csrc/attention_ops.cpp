// Attention ops: sparse_attention_prefill, and decode through SparseDecodePlan handles:
//   decode_plan_create(...) -> handle   (host, allocates the workspace; outside capture)
//   sparse_attention_decode(..., plan=handle)   (no allocation: graph-capturable on CUDA)
//   decode_plan_destroy(handle)
// plan=0 uses a process-wide DecodePlanCache per device keyed by the call's shapes
// (planned on first use, so the first call of a shape must not be inside a capture).
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "binding.h"

namespace flashmsa_py {
namespace {

std::mutex g_mu;
std::map<int64_t, std::unique_ptr<flashmsa::SparseDecodePlan>> g_plans;
int64_t g_next_handle = 1;
flashmsa::DecodePlanCache g_plan_cache;  // keys include device and CUDA ordinal

flashmsa::KvFormat format_of(const at::Tensor& kv_cache) {
  switch (kv_cache.scalar_type()) {
    case at::kFloat8_e4m3fn: return flashmsa::KvFormat::fp8;
    case at::kByte: return flashmsa::KvFormat::nvfp4;
    default: return flashmsa::KvFormat::bf16;
  }
}

// The arguments prefill and decode share (both argument structs name them alike).
template <class Args>
void fill_attention_args(const char* op, const at::Tensor& q, const at::Tensor& kv_cache,
                         const at::Tensor& topk_indices, const at::Tensor& block_table, const at::Tensor& seq_lens,
                         const at::Tensor& out, const std::optional<at::Tensor>& lse, double softmax_scale,
                         double q_scale, double k_scale, double v_scale, bool k_swizzled, bool v_swizzled,
                         const OpDevice& dev, Args* a) {
  a->q = to_view(op, "q", q);
  a->kv = kv_cache_views(op, kv_cache, k_scale, v_scale, k_swizzled, v_swizzled);
  a->topk_indices = to_view(op, "topk_indices", topk_indices);
  a->block_table = to_view(op, "block_table", block_table);
  a->seq_lens = to_view(op, "seq_lens", seq_lens);
  a->softmax_scale = static_cast<float>(softmax_scale);
  a->q_scale = static_cast<float>(q_scale);
  a->out = to_view(op, "out", out);
  a->lse = to_view(op, "lse", lse);
  a->stream = dev.stream();
}

void sparse_attention_prefill(const at::Tensor& q, const at::Tensor& kv_cache,
                              const at::Tensor& topk_indices, const at::Tensor& block_table,
                              const at::Tensor& cu_seqlens_q, const at::Tensor& seq_lens,
                              const at::Tensor& out, const std::optional<at::Tensor>& lse,
                              double softmax_scale, double q_scale, double k_scale, double v_scale,
                              bool k_swizzled, bool v_swizzled) {
  const char* op = "sparse_attention_prefill";
  const at::Tensor* l = lse.has_value() ? &*lse : nullptr;
  OpDevice dev(op, {{"q", &q}, {"kv_cache", &kv_cache}, {"topk_indices", &topk_indices},
                    {"block_table", &block_table}, {"cu_seqlens_q", &cu_seqlens_q},
                    {"seq_lens", &seq_lens}, {"out", &out}, {"lse", l}});
  flashmsa::SparseAttentionPrefillArgs a;
  fill_attention_args(op, q, kv_cache, topk_indices, block_table, seq_lens, out, lse, softmax_scale, q_scale,
                      k_scale, v_scale, k_swizzled, v_swizzled, dev, &a);
  a.cu_seqlens_q = to_view(op, "cu_seqlens_q", cu_seqlens_q);
  check_status(flashmsa::sparse_attention_prefill(a));
}

int64_t decode_plan_create(int64_t batch_size, int64_t queries_per_request, int64_t num_q_heads,
                           int64_t num_kv_heads, int64_t max_pages_per_request, int64_t topk,
                           int64_t kv_format, at::ScalarType q_dtype, at::Device device,
                           int64_t num_threads) {
  const char* op = "decode_plan_create";
  flashmsa::DecodePlanArgs p;
  p.batch_size = static_cast<int>(batch_size);
  p.queries_per_request = static_cast<int>(queries_per_request);
  p.num_q_heads = static_cast<int>(num_q_heads);
  p.num_kv_heads = static_cast<int>(num_kv_heads);
  p.max_pages_per_request = static_cast<int>(max_pages_per_request);
  p.topk = static_cast<int>(topk);
  if (kv_format < 0 || kv_format > 2) throw_arg(op, "kv_format", "0 (bf16), 1 (fp8) or 2 (nvfp4)", std::to_string(kv_format));
  p.kv_format = static_cast<flashmsa::KvFormat>(kv_format);
  if (q_dtype == at::kBFloat16) p.q_dtype = flashmsa::DType::bf16;
  else if (q_dtype == at::kFloat8_e4m3fn) p.q_dtype = flashmsa::DType::e4m3;
  else throw_arg(op, "q_dtype", "torch.bfloat16 or torch.float8_e4m3fn", c10::toString(q_dtype));
  if (device.is_cpu()) p.device = flashmsa::Device::cpu;
  else if (device.is_cuda()) p.device = flashmsa::Device::cuda;
  else throw_arg(op, "device", "cpu or cuda", device.str());
  p.num_threads = static_cast<int>(num_threads);
  std::optional<c10::DeviceGuard> guard;  // the plan's workspace lives on `device`
  if (device.is_cuda() && device.has_index()) guard.emplace(device);
  auto plan = std::make_unique<flashmsa::SparseDecodePlan>();
  check_status(plan->plan(p));
  std::lock_guard<std::mutex> lock(g_mu);
  const int64_t handle = g_next_handle++;
  g_plans.emplace(handle, std::move(plan));
  return handle;
}

void decode_plan_destroy(int64_t handle) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_plans.erase(handle);
}

void sparse_attention_decode(const at::Tensor& q, const at::Tensor& kv_cache,
                             const at::Tensor& topk_indices, const at::Tensor& block_table,
                             const at::Tensor& seq_lens, int64_t queries_per_request,
                             const at::Tensor& out, const std::optional<at::Tensor>& lse,
                             double softmax_scale, double q_scale, double k_scale, double v_scale,
                             bool k_swizzled, bool v_swizzled, int64_t plan) {
  const char* op = "sparse_attention_decode";
  const at::Tensor* l = lse.has_value() ? &*lse : nullptr;
  OpDevice dev(op, {{"q", &q}, {"kv_cache", &kv_cache}, {"topk_indices", &topk_indices},
                    {"block_table", &block_table}, {"seq_lens", &seq_lens}, {"out", &out}, {"lse", l}});
  flashmsa::DecodeRunArgs a;
  fill_attention_args(op, q, kv_cache, topk_indices, block_table, seq_lens, out, lse, softmax_scale, q_scale,
                      k_scale, v_scale, k_swizzled, v_swizzled, dev, &a);

  std::lock_guard<std::mutex> lock(g_mu);  // one workspace per plan: runs are serialised
  flashmsa::SparseDecodePlan* p = nullptr;
  if (plan != 0) {
    auto it = g_plans.find(plan);
    if (it == g_plans.end())
      throw_arg(op, "plan", "a live handle from decode_plan_create (or 0)", std::to_string(plan));
    p = it->second.get();
  } else {
    check_dim(op, "q", q, 3);
    check_dim(op, "topk_indices", topk_indices, 3);
    check_dim(op, "block_table", block_table, 2);
    check_dim(op, "seq_lens", seq_lens, 1);
    flashmsa::DecodePlanArgs pa;
    pa.batch_size = static_cast<int>(seq_lens.size(0));
    pa.queries_per_request = static_cast<int>(queries_per_request);
    pa.num_q_heads = static_cast<int>(q.size(1));
    pa.num_kv_heads = static_cast<int>(a.kv.k.data.shape[1]);
    pa.max_pages_per_request = static_cast<int>(std::min<int64_t>(block_table.size(1), flashmsa::kMaxContext / flashmsa::kPageSize));
    pa.topk = static_cast<int>(topk_indices.size(2));
    pa.kv_format = format_of(kv_cache);
    pa.q_dtype = a.q.dtype;
    pa.device = a.q.device;
    check_status(g_plan_cache.get(pa, &p));
  }
  check_status(p->run(a));
}

}  // namespace
}  // namespace flashmsa_py

TORCH_LIBRARY_FRAGMENT(flashmsa, m) {
  m.def("sparse_attention_prefill(Tensor q, Tensor kv_cache, Tensor topk_indices, "
        "Tensor block_table, Tensor cu_seqlens_q, Tensor seq_lens, Tensor(a!) out, "
        "Tensor(b!)? lse=None, float softmax_scale=0.08838834764831845, float q_scale=1.0, "
        "float k_scale=1.0, float v_scale=1.0, bool k_swizzled=False, bool v_swizzled=False) -> ()");
  // Host-side plan management: no tensor arguments, so catch-all kernels.
  m.def("decode_plan_create(int batch_size, int queries_per_request, int num_q_heads, "
        "int num_kv_heads, int max_pages_per_request, int topk, int kv_format, "
        "ScalarType q_dtype, Device device, int num_threads=0) -> int",
        &flashmsa_py::decode_plan_create);
  m.def("decode_plan_destroy(int plan) -> ()", &flashmsa_py::decode_plan_destroy);
  m.def("sparse_attention_decode(Tensor q, Tensor kv_cache, Tensor topk_indices, "
        "Tensor block_table, Tensor seq_lens, int queries_per_request, Tensor(a!) out, "
        "Tensor(b!)? lse=None, float softmax_scale=0.08838834764831845, float q_scale=1.0, "
        "float k_scale=1.0, float v_scale=1.0, bool k_swizzled=False, bool v_swizzled=False, "
        "int plan=0) -> ()");
}

TORCH_LIBRARY_IMPL(flashmsa, CPU, m) {
  m.impl("sparse_attention_prefill", &flashmsa_py::sparse_attention_prefill);
  m.impl("sparse_attention_decode", &flashmsa_py::sparse_attention_decode);
}
TORCH_LIBRARY_IMPL(flashmsa, CUDA, m) {
  m.impl("sparse_attention_prefill", &flashmsa_py::sparse_attention_prefill);
  m.impl("sparse_attention_decode", &flashmsa_py::sparse_attention_decode);
}

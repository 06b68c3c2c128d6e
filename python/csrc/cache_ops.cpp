// Write-path ops: cache_insert, index_cache_insert, quantize_query_e4m3, nvfp4_to_fp8,
// fused_qknorm_rope_insert. Each mutates its outputs in place and returns nothing.
#include "binding.h"

namespace flashmsa_py {
namespace {

void cache_insert(const at::Tensor& k, const at::Tensor& v, const at::Tensor& slot_mapping,
                  const at::Tensor& kv_cache, double k_scale, double v_scale, bool k_swizzled,
                  bool v_swizzled) {
  const char* op = "cache_insert";
  OpDevice dev(op, {{"k", &k}, {"v", &v}, {"slot_mapping", &slot_mapping}, {"kv_cache", &kv_cache}});
  const flashmsa::PagedKvCache kv = kv_cache_views(op, kv_cache, k_scale, v_scale, k_swizzled, v_swizzled);
  check_status(flashmsa::cache_insert(to_view(op, "k", k), to_view(op, "v", v),
                                      to_view(op, "slot_mapping", slot_mapping), kv, dev.stream()));
}

void index_cache_insert(const at::Tensor& index_k, const at::Tensor& slot_mapping,
                        const at::Tensor& index_cache, const std::optional<at::Tensor>& index_block_scale,
                        double index_global_scale) {
  const char* op = "index_cache_insert";
  const at::Tensor* bs = index_block_scale.has_value() ? &*index_block_scale : nullptr;
  OpDevice dev(op, {{"index_k", &index_k}, {"slot_mapping", &slot_mapping},
                    {"index_cache", &index_cache}, {"index_block_scale", bs}});
  const flashmsa::IndexKCache c = index_cache_view(op, index_cache, index_block_scale, index_global_scale);
  check_status(flashmsa::index_cache_insert(to_view(op, "index_k", index_k),
                                            to_view(op, "slot_mapping", slot_mapping), c, dev.stream()));
}

void quantize_query_e4m3(const at::Tensor& q, double q_scale, const at::Tensor& out) {
  const char* op = "quantize_query_e4m3";
  OpDevice dev(op, {{"q", &q}, {"out", &out}});
  check_status(flashmsa::quantize_query_e4m3(to_view(op, "q", q), static_cast<float>(q_scale),
                                             to_view(op, "out", out), dev.stream()));
}

void nvfp4_to_fp8(const at::Tensor& packed, const at::Tensor& scale, const at::Tensor& out) {
  const char* op = "nvfp4_to_fp8";
  OpDevice dev(op, {{"packed", &packed}, {"scale", &scale}, {"out", &out}});
  check_status(flashmsa::nvfp4_to_fp8(to_view(op, "packed", packed), to_view(op, "scale", scale),
                                      to_view(op, "out", out), dev.stream()));
}

void fused_qknorm_rope_insert(const at::Tensor& qkv, const at::Tensor& q_norm_weight,
                              const at::Tensor& k_norm_weight, const at::Tensor& index_q_norm_weight,
                              const at::Tensor& index_k_norm_weight, const at::Tensor& cos_sin_cache,
                              const at::Tensor& positions, double eps, int64_t num_q_heads,
                              int64_t num_kv_heads, int64_t num_index_heads,
                              const at::Tensor& slot_mapping, const at::Tensor& kv_cache,
                              const at::Tensor& index_slot_mapping, const at::Tensor& index_cache,
                              const at::Tensor& q_out, const at::Tensor& index_q_out, double q_scale,
                              double k_scale, double v_scale, bool k_swizzled, bool v_swizzled,
                              const std::optional<at::Tensor>& index_block_scale,
                              double index_global_scale) {
  const char* op = "fused_qknorm_rope_insert";
  const at::Tensor* bs = index_block_scale.has_value() ? &*index_block_scale : nullptr;
  OpDevice dev(op, {{"qkv", &qkv}, {"q_norm_weight", &q_norm_weight}, {"k_norm_weight", &k_norm_weight},
                    {"index_q_norm_weight", &index_q_norm_weight},
                    {"index_k_norm_weight", &index_k_norm_weight}, {"cos_sin_cache", &cos_sin_cache},
                    {"positions", &positions}, {"slot_mapping", &slot_mapping}, {"kv_cache", &kv_cache},
                    {"index_slot_mapping", &index_slot_mapping}, {"index_cache", &index_cache},
                    {"q_out", &q_out}, {"index_q_out", &index_q_out}, {"index_block_scale", bs}});
  flashmsa::FusedQkvInsertArgs a;
  a.qkv = to_view(op, "qkv", qkv);
  a.q_norm_weight = to_view(op, "q_norm_weight", q_norm_weight);
  a.k_norm_weight = to_view(op, "k_norm_weight", k_norm_weight);
  a.index_q_norm_weight = to_view(op, "index_q_norm_weight", index_q_norm_weight);
  a.index_k_norm_weight = to_view(op, "index_k_norm_weight", index_k_norm_weight);
  a.cos_sin_cache = to_view(op, "cos_sin_cache", cos_sin_cache);
  a.positions = to_view(op, "positions", positions);
  a.eps = static_cast<float>(eps);
  a.num_q_heads = static_cast<int>(num_q_heads);
  a.num_kv_heads = static_cast<int>(num_kv_heads);
  a.num_index_heads = static_cast<int>(num_index_heads);
  a.slot_mapping = to_view(op, "slot_mapping", slot_mapping);
  a.kv = kv_cache_views(op, kv_cache, k_scale, v_scale, k_swizzled, v_swizzled);
  a.index_slot_mapping = to_view(op, "index_slot_mapping", index_slot_mapping);
  a.index_k = index_cache_view(op, index_cache, index_block_scale, index_global_scale);
  a.q_out = to_view(op, "q_out", q_out);
  a.q_scale = static_cast<float>(q_scale);
  a.index_q_out = to_view(op, "index_q_out", index_q_out);
  a.stream = dev.stream();
  check_status(flashmsa::fused_qknorm_rope_insert(a));
}

}  // namespace
}  // namespace flashmsa_py

TORCH_LIBRARY_FRAGMENT(flashmsa, m) {
  m.def("cache_insert(Tensor k, Tensor v, Tensor slot_mapping, Tensor(a!) kv_cache, "
        "float k_scale=1.0, float v_scale=1.0, bool k_swizzled=False, bool v_swizzled=False) -> ()");
  m.def("index_cache_insert(Tensor index_k, Tensor slot_mapping, Tensor(a!) index_cache, "
        "Tensor(b!)? index_block_scale=None, float index_global_scale=1.0) -> ()");
  m.def("quantize_query_e4m3(Tensor q, float q_scale, Tensor(a!) out) -> ()");
  m.def("nvfp4_to_fp8(Tensor packed, Tensor scale, Tensor(a!) out) -> ()");
  m.def("fused_qknorm_rope_insert(Tensor qkv, Tensor q_norm_weight, Tensor k_norm_weight, "
        "Tensor index_q_norm_weight, Tensor index_k_norm_weight, Tensor cos_sin_cache, "
        "Tensor positions, float eps, int num_q_heads, int num_kv_heads, int num_index_heads, "
        "Tensor slot_mapping, Tensor(a!) kv_cache, Tensor index_slot_mapping, "
        "Tensor(b!) index_cache, Tensor(c!) q_out, Tensor(d!) index_q_out, float q_scale=1.0, "
        "float k_scale=1.0, float v_scale=1.0, bool k_swizzled=False, bool v_swizzled=False, "
        "Tensor(e!)? index_block_scale=None, float index_global_scale=1.0) -> ()");
}

#define FLASHMSA_PY_REGISTER(m)                                              \
  m.impl("cache_insert", &flashmsa_py::cache_insert);                        \
  m.impl("index_cache_insert", &flashmsa_py::index_cache_insert);            \
  m.impl("quantize_query_e4m3", &flashmsa_py::quantize_query_e4m3);          \
  m.impl("nvfp4_to_fp8", &flashmsa_py::nvfp4_to_fp8);                        \
  m.impl("fused_qknorm_rope_insert", &flashmsa_py::fused_qknorm_rope_insert)

TORCH_LIBRARY_IMPL(flashmsa, CPU, m) { FLASHMSA_PY_REGISTER(m); }
TORCH_LIBRARY_IMPL(flashmsa, CUDA, m) { FLASHMSA_PY_REGISTER(m); }

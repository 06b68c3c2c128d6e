#include "binding.h"

#include <string>

namespace flashmsa_py {

void check_status(const flashmsa::Status& s) {
  if (s.ok()) return;
  if (s.code() == flashmsa::StatusCode::kInvalidArgument) {
    TORCH_CHECK_VALUE(false, s.message());
  }
  TORCH_CHECK(false, s.message());
}

void throw_arg(const char* op, const char* arg, const std::string& expected,
               const std::string& actual) {
  TORCH_CHECK_VALUE(false, "flashmsa.", op, ": argument '", arg, "': expected ", expected,
                    ", got ", actual);
  __builtin_unreachable();
}

namespace {
std::string int_list(c10::IntArrayRef v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}
}  // namespace

// Built without iostreams: on the H200 image, formatting through std::ostream inside the
// extension crashed in libstdc++'s num_put (an ABI mismatch between the headers the
// extension was compiled with and the libstdc++ the python process had loaded).
std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return int_list(t.sizes()) + " " + c10::toString(t.scalar_type()) + " (" + t.device().str() + ") strides " +
         int_list(t.strides());
}

namespace {
alignas(256) unsigned char g_empty_placeholder[256];

bool to_dtype(at::ScalarType s, flashmsa::DType* out) {
  switch (s) {
    case at::kBFloat16: *out = flashmsa::DType::bf16; return true;
    case at::kHalf: *out = flashmsa::DType::f16; return true;
    case at::kFloat: *out = flashmsa::DType::f32; return true;
    case at::kInt: *out = flashmsa::DType::i32; return true;
    case at::kFloat8_e4m3fn: *out = flashmsa::DType::e4m3; return true;
    case at::kByte: *out = flashmsa::DType::u8; return true;
    default: return false;
  }
}
}  // namespace

flashmsa::TensorView to_view(const char* op, const char* arg, const at::Tensor& t) {
  if (!t.defined()) throw_arg(op, arg, "a tensor", "an undefined tensor");
  flashmsa::TensorView v;
  if (!to_dtype(t.scalar_type(), &v.dtype))
    throw_arg(op, arg, "dtype bfloat16, float16, float32, int32, float8_e4m3fn or uint8",
              describe(t));
  if (t.dim() > flashmsa::kMaxRank) throw_arg(op, arg, "at most 4 dimensions", describe(t));
  if (t.device().is_cpu()) {
    v.device = flashmsa::Device::cpu;
  } else if (t.device().is_cuda()) {
    v.device = flashmsa::Device::cuda;
  } else {
    throw_arg(op, arg, "a cpu or cuda tensor", describe(t));
  }
  v.rank = static_cast<int>(t.dim());
  for (int d = 0; d < v.rank; ++d) {
    v.shape[d] = t.size(d);
    v.stride[d] = t.stride(d);
  }
  v.data = t.numel() == 0 ? static_cast<void*>(g_empty_placeholder) : t.data_ptr();
  return v;
}

flashmsa::TensorView to_view(const char* op, const char* arg, const std::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return flashmsa::TensorView{};
  return to_view(op, arg, *t);
}

void check_dim(const char* op, const char* arg, const at::Tensor& t, int64_t rank) {
  if (t.dim() != rank) throw_arg(op, arg, std::to_string(rank) + " dimensions", describe(t));
}

OpDevice::OpDevice(const char* op,
                   std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors) {
  const at::Tensor* first = nullptr;
  for (const auto& [name, t] : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) {
      first = t;
      device_ = t->device();
      continue;
    }
    if (t->device() != device_)
      throw_arg(op, name, std::string("a tensor on ") + device_.str() + " (the device of the first tensor)",
                describe(*t));
  }
  if (device_.is_cuda()) {
    guard_.emplace(device_);
#ifdef FLASHMSA_PY_CUDA
    stream_ = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
#endif
  }
}

flashmsa::PagedKvCache kv_cache_views(const char* op, const at::Tensor& kv_cache, double k_scale,
                                      double v_scale, bool k_swizzled, bool v_swizzled) {
  const flashmsa::TensorView v = to_view(op, "kv_cache", kv_cache);
  flashmsa::PagedKvCache kv;
  switch (kv_cache.scalar_type()) {
    case at::kBFloat16:
      check_status(flashmsa::packed_kv_views(v, flashmsa::KvFormat::bf16, static_cast<float>(k_scale),
                                             static_cast<float>(v_scale), &kv));
      break;
    case at::kFloat8_e4m3fn:
      check_status(flashmsa::packed_kv_views(v, flashmsa::KvFormat::fp8, static_cast<float>(k_scale),
                                             static_cast<float>(v_scale), &kv));
      break;
    case at::kByte:
      check_status(flashmsa::nvfp4_head_slot_views(v, k_swizzled, v_swizzled, static_cast<float>(k_scale),
                                                   static_cast<float>(v_scale), &kv));
      break;
    default:
      throw_arg(op, "kv_cache",
                "bfloat16 or float8_e4m3fn [pages, Hkv, 128, 256], or uint8 [pages, 2*Hkv, 128, 72] (NVFP4)",
                describe(kv_cache));
  }
  return kv;
}

flashmsa::IndexKCache index_cache_view(const char* op, const at::Tensor& index_cache,
                                       const std::optional<at::Tensor>& block_scale,
                                       double global_scale) {
  flashmsa::IndexKCache c;
  c.data = to_view(op, "index_cache", index_cache);
  const bool has_scale = block_scale.has_value() && block_scale->defined();
  switch (index_cache.scalar_type()) {
    case at::kBFloat16: c.format = flashmsa::KvFormat::bf16; break;
    case at::kFloat8_e4m3fn: c.format = flashmsa::KvFormat::fp8; break;
    case at::kByte: c.format = flashmsa::KvFormat::nvfp4; break;
    default:
      throw_arg(op, "index_cache",
                "bfloat16 or float8_e4m3fn [pages, 128, 128], or uint8 [pages, 128, 64] (NVFP4)",
                describe(index_cache));
  }
  if (c.format == flashmsa::KvFormat::nvfp4) {
    if (!has_scale)
      throw_arg(op, "index_block_scale", "float8_e4m3fn [pages, 128, 8] for a uint8 (NVFP4) index_cache",
                "None");
    c.block_scale = to_view(op, "index_block_scale", *block_scale);
    c.global_scale = static_cast<float>(global_scale);
  } else if (has_scale) {
    throw_arg(op, "index_block_scale", "None for a bfloat16 / float8_e4m3fn index_cache",
              describe(*block_scale));
  }
  return c;
}

}  // namespace flashmsa_py

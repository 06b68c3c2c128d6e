// FlashMSA — fused QK-norm + partial RoPE + cache insert: validation, CPU backend and
// CUDA dispatch (semantics and the exact FP32 evaluation order in flashmsa/fused.h).
//
// CPU: tokens are independent work items (detail::parallel_for); the normed+rotated K
// rows and index keys are staged as BF16 and written with cache_insert /
// index_cache_insert, so the cache bytes are by construction those of the unfused path.
// The FP32 math below must not be contracted into FMAs (CMake builds this file with
// -ffp-contract=off); the CUDA kernel uses explicitly rounded intrinsics in the same order.
#include "flashmsa/fused.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/parallel.h"
#include "common/validate.h"
#include "flashmsa/host_tensor.h"
#include "flashmsa/numerics.h"

#ifdef FLASHMSA_WITH_CUDA
#include "cuda/sm90/decode_attention.h"  // error_string
#include "cuda/sm90/fused_qknorm_rope.h"
#include "ops/cache_cuda_params.h"
#endif

namespace flashmsa {

namespace {

using detail::to_string;

constexpr const char* kOp = "fused_qknorm_rope_insert";
constexpr int kHalfRot = kRotaryDim / 2;  // 32

// bf16 [128] weight vector.
Status check_weight(const char* arg, const TensorView& t) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(kOp, arg, t, {DType::bf16}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(kOp, arg, t, {kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(kOp, arg, t));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(kOp, arg, t));
  return Status::Ok();
}

Status check_index_vector(const char* arg, const TensorView& t, std::int64_t n) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(kOp, arg, t, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(kOp, arg, t, {n}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(kOp, arg, t));
  return Status::Ok();
}

Status check_output(const char* arg, const TensorView& t, std::int64_t n, std::int64_t heads) {
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(kOp, arg, t, {DType::bf16, DType::e4m3}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_shape(kOp, arg, t, {n, heads, kHeadDim}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(kOp, arg, t));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(kOp, arg, t));
  return Status::Ok();
}

Status check_same_device(const std::string& arg, const TensorView& t, Device want) {
  if (t.defined() && t.device != want)
    return Status::InvalidArgument(kOp, arg,
                                   std::string("device ") + device_name(want) +
                                       " (every tensor on the device of 'qkv')",
                                   std::string("device ") + device_name(t.device));
  return Status::Ok();
}

inline std::int32_t at_i32(const TensorView& t, std::int64_t i) {
  return t.ptr<const std::int32_t>()[i * t.stride[0]];
}

// Host-side value checks (CPU tensors only): every entry < limit (and >= lo).
Status check_values(const char* arg, const TensorView& t, std::int64_t lo, std::int64_t limit,
                    const std::string& expected) {
  for (std::int64_t i = 0; i < t.shape[0]; ++i) {
    const std::int64_t v = at_i32(t, i);
    if (v < lo || v >= limit)
      return Status::InvalidArgument(kOp, std::string(arg) + "[" + to_string(i) + "]", expected,
                                     to_string(v));
  }
  return Status::Ok();
}

// Everything except the CPU-side value checks of positions and slots.
Status validate(const FusedQkvInsertArgs& a) {
  // Presence.
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "qkv", a.qkv));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "q_norm_weight", a.q_norm_weight));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "k_norm_weight", a.k_norm_weight));
  FLASHMSA_RETURN_IF_ERROR(
      detail::check_defined(kOp, "index_q_norm_weight", a.index_q_norm_weight));
  FLASHMSA_RETURN_IF_ERROR(
      detail::check_defined(kOp, "index_k_norm_weight", a.index_k_norm_weight));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "cos_sin_cache", a.cos_sin_cache));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "positions", a.positions));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "slot_mapping", a.slot_mapping));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "kv.k.data", a.kv.k.data));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "kv.v.data", a.kv.v.data));
  FLASHMSA_RETURN_IF_ERROR(
      detail::check_defined(kOp, "index_slot_mapping", a.index_slot_mapping));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "index_k.data", a.index_k.data));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "q_out", a.q_out));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(kOp, "index_q_out", a.index_q_out));

  // One device for everything (the first tensor that differs from qkv is named).
  const Device dev = a.qkv.device;
  FLASHMSA_RETURN_IF_ERROR(check_same_device("q_norm_weight", a.q_norm_weight, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("k_norm_weight", a.k_norm_weight, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("index_q_norm_weight", a.index_q_norm_weight, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("index_k_norm_weight", a.index_k_norm_weight, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("cos_sin_cache", a.cos_sin_cache, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("positions", a.positions, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("slot_mapping", a.slot_mapping, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("kv.k.data", a.kv.k.data, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("kv.v.data", a.kv.v.data, dev));
  if (a.kv.format == KvFormat::nvfp4) {
    FLASHMSA_RETURN_IF_ERROR(check_same_device("kv.k.block_scale", a.kv.k.block_scale, dev));
    FLASHMSA_RETURN_IF_ERROR(check_same_device("kv.v.block_scale", a.kv.v.block_scale, dev));
  }
  FLASHMSA_RETURN_IF_ERROR(check_same_device("index_slot_mapping", a.index_slot_mapping, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("index_k.data", a.index_k.data, dev));
  if (a.index_k.format == KvFormat::nvfp4)
    FLASHMSA_RETURN_IF_ERROR(
        check_same_device("index_k.block_scale", a.index_k.block_scale, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("q_out", a.q_out, dev));
  FLASHMSA_RETURN_IF_ERROR(check_same_device("index_q_out", a.index_q_out, dev));

  // Geometry (D10).
  FLASHMSA_RETURN_IF_ERROR(detail::check_gqa(kOp, a.num_q_heads, a.num_kv_heads));
  if (a.num_index_heads != a.num_kv_heads)
    return Status::InvalidArgument(kOp, "num_index_heads",
                                   "num_kv_heads = " + to_string(a.num_kv_heads) + " (D10)",
                                   to_string(a.num_index_heads));
  if (!std::isfinite(a.eps) || a.eps < 0.0f) {
    return Status::InvalidArgument(kOp, "eps", "a finite value >= 0", detail::float_string(a.eps));
  }

  // Packed projection row.
  const std::int64_t hq = a.num_q_heads, hkv = a.num_kv_heads, hidx = a.num_index_heads;
  const std::int64_t row = (hq + 2 * hkv + hidx) * kHeadDim + kHeadDim;
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(kOp, "qkv", a.qkv, {DType::bf16}));
  if (a.qkv.rank != 2 || a.qkv.shape[1] != row)
    return Status::InvalidArgument(
        kOp, "qkv",
        "shape [T, (Hq + 2*Hkv + Hidx)*128 + 128] = [T, " + to_string(row) + "] for Hq " +
            to_string(hq) + ", Hkv " + to_string(hkv) + ", Hidx " + to_string(hidx),
        a.qkv.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(kOp, "qkv", a.qkv));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(kOp, "qkv", a.qkv));
  const std::int64_t t = a.qkv.shape[0];

  FLASHMSA_RETURN_IF_ERROR(check_weight("q_norm_weight", a.q_norm_weight));
  FLASHMSA_RETURN_IF_ERROR(check_weight("k_norm_weight", a.k_norm_weight));
  FLASHMSA_RETURN_IF_ERROR(check_weight("index_q_norm_weight", a.index_q_norm_weight));
  FLASHMSA_RETURN_IF_ERROR(check_weight("index_k_norm_weight", a.index_k_norm_weight));

  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(kOp, "cos_sin_cache", a.cos_sin_cache, {DType::bf16}));
  FLASHMSA_RETURN_IF_ERROR(
      detail::check_shape(kOp, "cos_sin_cache", a.cos_sin_cache, {-1, kRotaryDim}));
  if (a.cos_sin_cache.shape[0] < 1)
    return Status::InvalidArgument(kOp, "cos_sin_cache", "max_pos (dim 0) >= 1",
                                   a.cos_sin_cache.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_inner_contiguous(kOp, "cos_sin_cache", a.cos_sin_cache));
  FLASHMSA_RETURN_IF_ERROR(detail::check_aligned16(kOp, "cos_sin_cache", a.cos_sin_cache));

  FLASHMSA_RETURN_IF_ERROR(check_index_vector("positions", a.positions, t));
  FLASHMSA_RETURN_IF_ERROR(check_index_vector("slot_mapping", a.slot_mapping, t));
  FLASHMSA_RETURN_IF_ERROR(check_index_vector("index_slot_mapping", a.index_slot_mapping, t));

  std::int64_t num_pages = 0, cache_hkv = 0, index_pages = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_kv_cache(kOp, a.kv, &num_pages, &cache_hkv));
  if (cache_hkv != hkv)
    return Status::InvalidArgument(kOp, "kv.k.data",
                                   "num_kv_heads (dim 1) = " + to_string(hkv),
                                   a.kv.k.data.describe());
  FLASHMSA_RETURN_IF_ERROR(detail::check_index_k_cache(kOp, a.index_k, &index_pages));

  FLASHMSA_RETURN_IF_ERROR(check_output("q_out", a.q_out, t, hq));
  if (a.q_out.dtype == DType::e4m3) {
    FLASHMSA_RETURN_IF_ERROR(detail::check_positive_finite(kOp, "q_scale", a.q_scale));
  } else if (a.q_scale != 1.0f) {
    return Status::InvalidArgument(kOp, "q_scale", "1 for a bf16 q_out", detail::float_string(a.q_scale));
  }
  FLASHMSA_RETURN_IF_ERROR(check_output("index_q_out", a.index_q_out, t, hidx));
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// CPU backend

// Gemma RMSNorm + partial NeoX RoPE of one 128-vector, in the order of flashmsa/fused.h.
// w1[d] = 1 + w[d] (rounded), cs = 32 cos then 32 sin (float, exact from BF16).
void norm_rope(const std::uint16_t* x16, const float* w1, const float* cs, float eps,
               float* y) {
  float x[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) x[d] = bf16_to_float(x16[d]);
  float ps[32];
  for (int l = 0; l < 32; ++l) {
    float acc = 0.0f;
    for (int i = 0; i < 4; ++i) {
      const float sq = x[4 * l + i] * x[4 * l + i];
      acc = acc + sq;
    }
    ps[l] = acc;
  }
  for (int o = 16; o > 0; o >>= 1)
    for (int l = 0; l < o; ++l) ps[l] = ps[l] + ps[l + o];
  const float mean = ps[0] / 128.0f;
  const float r = 1.0f / std::sqrt(mean + eps);
  for (int d = 0; d < kHeadDim; ++d) {
    const float xr = x[d] * r;
    y[d] = xr * w1[d];
  }
  for (int j = 0; j < kHalfRot; ++j) {
    const float c = cs[j], s = cs[kHalfRot + j];
    const float lo = y[j], hi = y[j + kHalfRot];
    const float a = lo * c, b = hi * s, a2 = hi * c, b2 = lo * s;
    y[j] = a - b;
    y[j + kHalfRot] = a2 + b2;
  }
}

void load_weight(const TensorView& w, float* out) {
  const auto* p = w.ptr<const std::uint16_t>();
  for (int d = 0; d < kHeadDim; ++d) out[d] = 1.0f + bf16_to_float(p[d]);
}

// Writes one FP32 vector to a bf16 or e4m3 output row (e4m3: E4M3_sat(y / scale)).
void store_row(const float* y, const TensorView& out, std::int64_t i, std::int64_t h,
               float scale) {
  if (out.dtype == DType::bf16) {
    auto* dst = out.ptr<std::uint16_t>() + i * out.stride[0] + h * out.stride[1];
    for (int d = 0; d < kHeadDim; ++d) dst[d] = float_to_bf16(y[d]);
  } else {
    auto* dst = out.ptr<std::uint8_t>() + i * out.stride[0] + h * out.stride[1];
    if (scale == 1.0f) {
      for (int d = 0; d < kHeadDim; ++d) dst[d] = float_to_e4m3_sat(y[d]);
    } else {
      for (int d = 0; d < kHeadDim; ++d) dst[d] = float_to_e4m3_sat(y[d] / scale);
    }
  }
}

Status run_cpu(const FusedQkvInsertArgs& a) {
  const std::int64_t t = a.qkv.shape[0];
  const std::int64_t hq = a.num_q_heads, hkv = a.num_kv_heads, hidx = a.num_index_heads;
  const std::int64_t max_pos = a.cos_sin_cache.shape[0];

  // Value checks before anything is written.
  FLASHMSA_RETURN_IF_ERROR(check_values("positions", a.positions, 0, max_pos,
                                        "a position in [0, max_pos = " + to_string(max_pos) + ")"));
  const std::int64_t kv_slots = a.kv.k.data.shape[0] * kPageSize;
  FLASHMSA_RETURN_IF_ERROR(check_values(
      "slot_mapping", a.slot_mapping, INT32_MIN, kv_slots,
      "a slot in [0, num_pages*128 = " + to_string(kv_slots) + ") or < 0 to skip"));
  const std::int64_t idx_slots = a.index_k.data.shape[0] * kPageSize;
  FLASHMSA_RETURN_IF_ERROR(check_values(
      "index_slot_mapping", a.index_slot_mapping, INT32_MIN, idx_slots,
      "a slot in [0, num_pages*128 = " + to_string(idx_slots) + ") or < 0 to skip"));
  if (t == 0) return Status::Ok();

  float wq[kHeadDim], wk[kHeadDim], wiq[kHeadDim], wik[kHeadDim];
  load_weight(a.q_norm_weight, wq);
  load_weight(a.k_norm_weight, wk);
  load_weight(a.index_q_norm_weight, wiq);
  load_weight(a.index_k_norm_weight, wik);

  HostTensor k_stage(DType::bf16, {t, hkv, kHeadDim});
  HostTensor ik_stage(DType::bf16, {t, kHeadDim});
  auto* ks = k_stage.data<std::uint16_t>();
  auto* iks = ik_stage.data<std::uint16_t>();
  const auto* qkv = a.qkv.ptr<const std::uint16_t>();
  const auto* cs_base = a.cos_sin_cache.ptr<const std::uint16_t>();
  const float eps = a.eps;

  const int threads = t >= 16 ? 0 : 1;
  detail::parallel_for(t, threads, [&](std::int64_t i, int) {
    const std::uint16_t* row = qkv + i * a.qkv.stride[0];
    const std::int64_t p = at_i32(a.positions, i);
    float cs[kRotaryDim];
    const std::uint16_t* csr = cs_base + p * a.cos_sin_cache.stride[0];
    for (int j = 0; j < kRotaryDim; ++j) cs[j] = bf16_to_float(csr[j]);
    float y[kHeadDim];
    for (std::int64_t h = 0; h < hq; ++h) {
      norm_rope(row + h * kHeadDim, wq, cs, eps, y);
      store_row(y, a.q_out, i, h, a.q_scale);
    }
    for (std::int64_t h = 0; h < hkv; ++h) {
      norm_rope(row + (hq + h) * kHeadDim, wk, cs, eps, y);
      std::uint16_t* dst = ks + (i * hkv + h) * kHeadDim;
      for (int d = 0; d < kHeadDim; ++d) dst[d] = float_to_bf16(y[d]);
    }
    for (std::int64_t h = 0; h < hidx; ++h) {
      norm_rope(row + (hq + 2 * hkv + h) * kHeadDim, wiq, cs, eps, y);
      store_row(y, a.index_q_out, i, h, 1.0f);
    }
    norm_rope(row + (hq + 2 * hkv + hidx) * kHeadDim, wik, cs, eps, y);
    std::uint16_t* dst = iks + i * kHeadDim;
    for (int d = 0; d < kHeadDim; ++d) dst[d] = float_to_bf16(y[d]);
  });

  // V: a strided view of the packed rows (raw, no norm / RoPE).
  TensorView v = make_strided_view(
      const_cast<std::uint16_t*>(qkv) + (hq + hkv) * kHeadDim, DType::bf16,
      {t, hkv, kHeadDim}, {a.qkv.stride[0], kHeadDim, 1}, Device::cpu);
  Status s = cache_insert(k_stage.view(), v, a.slot_mapping, a.kv);
  if (!s.ok()) return Status::Internal(kOp, "cache_insert failed after validation: " + s.message());
  s = index_cache_insert(ik_stage.view(), a.index_slot_mapping, a.index_k);
  if (!s.ok())
    return Status::Internal(kOp, "index_cache_insert failed after validation: " + s.message());
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// CUDA dispatch

#ifdef FLASHMSA_WITH_CUDA
Status run_cuda(const FusedQkvInsertArgs& a) {
  const std::int64_t vectors =
      a.qkv.shape[0] * (a.num_q_heads + 2 * a.num_kv_heads + a.num_index_heads + 1);
  if (vectors >= (std::int64_t{1} << 32) - 64)
    return Status::InvalidArgument(kOp, "qkv",
                                   "T * (Hq + 2*Hkv + Hidx + 1) < 2^32 head vectors per call on cuda",
                                   a.qkv.describe());
  cuda::FusedQkvParams p;
  p.qkv = a.qkv.ptr<const std::uint16_t>();
  p.qkv_row_stride = a.qkv.stride[0];
  p.q_w = a.q_norm_weight.ptr<const std::uint16_t>();
  p.k_w = a.k_norm_weight.ptr<const std::uint16_t>();
  p.iq_w = a.index_q_norm_weight.ptr<const std::uint16_t>();
  p.ik_w = a.index_k_norm_weight.ptr<const std::uint16_t>();
  p.cos_sin = a.cos_sin_cache.ptr<const std::uint16_t>();
  p.cos_sin_row_stride = a.cos_sin_cache.stride[0];
  p.max_pos = a.cos_sin_cache.shape[0];
  p.positions = a.positions.ptr<const std::int32_t>();
  p.positions_stride = a.positions.stride[0];
  p.slots = a.slot_mapping.ptr<const std::int32_t>();
  p.slots_stride = a.slot_mapping.stride[0];
  p.index_slots = a.index_slot_mapping.ptr<const std::int32_t>();
  p.index_slots_stride = a.index_slot_mapping.stride[0];
  p.num_tokens = static_cast<int>(a.qkv.shape[0]);
  p.nq = a.num_q_heads;
  p.nkv = a.num_kv_heads;
  p.nidx = a.num_index_heads;
  p.eps = a.eps;
  const bool kv4 = a.kv.format == KvFormat::nvfp4, ik4 = a.index_k.format == KvFormat::nvfp4;
  const TensorView none;
  p.kv_format = static_cast<int>(a.kv.format);
  p.k = detail::side_params(a.kv.k.data, kv4 ? a.kv.k.block_scale : none,
                            kv4 && a.kv.k.scale_swizzled, a.kv.k.global_scale, true);
  p.v = detail::side_params(a.kv.v.data, kv4 ? a.kv.v.block_scale : none,
                            kv4 && a.kv.v.scale_swizzled, a.kv.v.global_scale, true);
  p.kv_num_pages = a.kv.k.data.shape[0];
  // Index-K fp8 has no scale (spec 2.1 item 4): divisor 1, as index_cache_insert.
  p.index_format = static_cast<int>(a.index_k.format);
  p.ik = detail::side_params(a.index_k.data, ik4 ? a.index_k.block_scale : none, false,
                             ik4 ? a.index_k.global_scale : 1.0f, false);
  p.index_num_pages = a.index_k.data.shape[0];
  p.q_out = a.q_out.data;
  p.q_e4m3 = a.q_out.dtype == DType::e4m3;
  p.q_stride[0] = a.q_out.stride[0];
  p.q_stride[1] = a.q_out.stride[1];
  p.q_scale = a.q_scale;
  p.iq_out = a.index_q_out.data;
  p.iq_e4m3 = a.index_q_out.dtype == DType::e4m3;
  p.iq_stride[0] = a.index_q_out.stride[0];
  p.iq_stride[1] = a.index_q_out.stride[1];
  const int err = cuda::launch_fused_qknorm_rope_insert(p, a.stream);
  if (err != 0) return Status::Internal(kOp, std::string("kernel launch failed: ") + cuda::error_string(err));
  return Status::Ok();
}
#else
Status run_cuda(const FusedQkvInsertArgs&) {
  return Status::Unsupported(kOp, "device cuda",
                             "this build of FlashMSA has no CUDA kernels (configure with nvcc)");
}
#endif

}  // namespace

Status fused_qknorm_rope_insert(const FusedQkvInsertArgs& args) {
  FLASHMSA_RETURN_IF_ERROR(validate(args));
  if (args.qkv.device == Device::cuda) return run_cuda(args);
  return run_cpu(args);
}

}  // namespace flashmsa

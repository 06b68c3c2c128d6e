// FP64 dense attention reference; see dense_reference.h.
#include "reference/dense_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/validate.h"
#include "cpu/attention_cpu.h"
#include "cpu/kv_access.h"
#include "flashmsa/numerics.h"

namespace flashmsa::reference {

namespace {

constexpr int kD = kHeadDim;

inline std::int32_t read_i32(const TensorView& t, std::int64_t i) {
  return t.ptr<const std::int32_t>()[i * t.stride[0]];
}
inline std::int32_t read_i32(const TensorView& t, std::int64_t i, std::int64_t j) {
  return t.ptr<const std::int32_t>()[i * t.stride[0] + j * t.stride[1]];
}

double round_operand(double p, ProbRounding r) {
  switch (r) {
    case ProbRounding::none:
      return p;
    case ProbRounding::bf16:
      return bf16_to_float(float_to_bf16(static_cast<float>(p)));
    case ProbRounding::e4m3_448:
      return e4m3_to_float(float_to_e4m3_sat(static_cast<float>(448.0 * p))) / 448.0;
  }
  return p;
}

}  // namespace

Status dequantize_request_kv(const PagedKvCache& cache, const TensorView& block_table,
                             std::int64_t request, std::int64_t seq_len, DenseKv* out) {
  const char* op = "reference::dequantize_request_kv";
  if (out == nullptr) return Status::InvalidArgument(op, "out", "a non-null DenseKv*", "nullptr");
  std::int64_t num_pages = 0, hkv = 0;
  FLASHMSA_RETURN_IF_ERROR(detail::check_kv_cache(op, cache, &num_pages, &hkv));
  FLASHMSA_RETURN_IF_ERROR(detail::check_defined(op, "block_table", block_table));
  FLASHMSA_RETURN_IF_ERROR(detail::check_dtype(op, "block_table", block_table, {DType::i32}));
  FLASHMSA_RETURN_IF_ERROR(detail::check_rank(op, "block_table", block_table, 2));
  FLASHMSA_RETURN_IF_ERROR(detail::check_strides_nonnegative(op, "block_table", block_table));
  if (request < 0 || request >= block_table.shape[0])
    return Status::InvalidArgument(op, "request",
                                   "a row of block_table in [0, " +
                                       detail::to_string(block_table.shape[0]) + ")",
                                   detail::to_string(request));
  if (seq_len < 0 || seq_len > kMaxContext)
    return Status::InvalidArgument(op, "seq_len", "a length in [0, 1048576]",
                                   detail::to_string(seq_len));
  const std::int64_t pages = (seq_len + kPageSize - 1) / kPageSize;
  if (pages > block_table.shape[1])
    return Status::InvalidArgument(op, "block_table",
                                   "at least " + detail::to_string(pages) + " columns",
                                   block_table.describe());
  for (std::int64_t j = 0; j < pages; ++j) {
    const std::int32_t phys = read_i32(block_table, request, j);
    if (phys < 0 || phys >= num_pages)
      return Status::InvalidArgument(op, "block_table", "physical page ids in [0, " +
                                                            detail::to_string(num_pages) + ")",
                                     detail::to_string(phys));
  }
  out->num_kv_heads = hkv;
  out->seq_len = seq_len;
  out->k_scale = cache.k.global_scale;
  out->v_scale = cache.v.global_scale;
  out->k.assign(static_cast<std::size_t>(hkv * seq_len * kD), 0.0f);
  out->v.assign(static_cast<std::size_t>(hkv * seq_len * kD), 0.0f);
  for (std::int64_t g = 0; g < hkv; ++g)
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const std::int64_t phys = read_i32(block_table, request, t / kPageSize);
      const int off = static_cast<int>(t % kPageSize);
      cpu::load_cache_row_f32(cache.k, cache.format, phys, g, off,
                              out->k.data() + (g * seq_len + t) * kD);
      cpu::load_cache_row_f32(cache.v, cache.format, phys, g, off,
                              out->v.data() + (g * seq_len + t) * kD);
    }
  return Status::Ok();
}

void attention_row(const DenseKv& kv, const float* q, std::int64_t num_q_heads,
                   std::int64_t position, const std::int32_t* pages, int pages_per_head,
                   double c, double v_scale, ProbRounding rounding, double* out, double* lse) {
  const std::int64_t hkv = kv.num_kv_heads;
  const std::int64_t group = num_q_heads / hkv;
  const std::int64_t req_pages = (kv.seq_len + kPageSize - 1) / kPageSize;
  for (std::int64_t h = 0; h < num_q_heads; ++h) {
    double* o = out + h * kD;
    std::fill(o, o + kD, 0.0);
    lse[h] = -std::numeric_limits<double>::infinity();
    const std::int64_t g = h / group;

    // Visible keys, ascending: t <= p, t < seq_len, page allowed (D1).
    std::vector<bool> allowed(static_cast<std::size_t>(req_pages), pages == nullptr);
    if (pages != nullptr)
      for (int i = 0; i < pages_per_head; ++i) {
        const std::int64_t e = pages[g * pages_per_head + i];
        if (e >= 0 && e < req_pages && position >= 0 && e <= position / kPageSize)
          allowed[static_cast<std::size_t>(e)] = true;
      }
    std::vector<std::int64_t> keys;
    for (std::int64_t t = 0; t <= position && t < kv.seq_len; ++t)
      if (allowed[static_cast<std::size_t>(t / kPageSize)]) keys.push_back(t);
    if (keys.empty()) continue;

    std::vector<double> z(keys.size());
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const float* k = kv.k_row(g, keys[i]);
      double dot = 0.0;
      for (int d = 0; d < kD; ++d)
        dot += static_cast<double>(q[h * kD + d]) * static_cast<double>(k[d]);
      z[i] = c * dot;
      m = std::max(m, z[i]);
    }
    double sum = 0.0;
    std::vector<double> acc(kD, 0.0);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const double p = std::exp(z[i] - m);
      sum += p;
      const double w = round_operand(p, rounding);
      const float* v = kv.v_row(g, keys[i]);
      for (int d = 0; d < kD; ++d) acc[d] += w * static_cast<double>(v[d]);
    }
    for (int d = 0; d < kD; ++d) o[d] = acc[d] / sum * v_scale;
    lse[h] = m + std::log(sum);
  }
}

namespace {

// Shared driver: row -> (request, position) given by `locate`.
template <class Locate>
Status run_reference(const PagedKvCache& kv, const TensorView& q, const TensorView& topk,
                     const TensorView& block_table, const TensorView& seq_lens,
                     float softmax_scale, float q_scale, const detail::AttentionGeometry& geo,
                     const ReferenceOptions& options, Locate locate, std::vector<double>* out,
                     std::vector<double>* lse) {
  const char* op = "reference";
  if (out == nullptr || lse == nullptr)
    return Status::InvalidArgument(op, "out / lse", "non-null vectors", "nullptr");
  const std::int64_t rows = geo.rows, hq = geo.num_q_heads, hkv = geo.num_kv_heads;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out->assign(static_cast<std::size_t>(rows * hq * kD), nan);
  lse->assign(static_cast<std::size_t>(rows * hq), nan);

  std::vector<std::int64_t> row_list = options.rows;
  if (row_list.empty()) {
    row_list.resize(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) row_list[static_cast<std::size_t>(r)] = r;
  }
  for (std::int64_t r : row_list)
    if (r < 0 || r >= rows)
      return Status::InvalidArgument(op, "options.rows", "row ids in [0, " +
                                                             detail::to_string(rows) + ")",
                                     detail::to_string(r));
  // Group rows by request so each request's K/V is dequantized once.
  std::vector<std::pair<std::int64_t, std::int64_t>> by_req;  // (request, row)
  for (std::int64_t r : row_list) {
    std::int64_t b = 0, p = 0;
    locate(r, &b, &p);
    by_req.emplace_back(b, r);
  }
  std::stable_sort(by_req.begin(), by_req.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });

  const double c = static_cast<double>(softmax_scale) * q_scale * kv.k.global_scale;
  const double vs = kv.v.global_scale;
  DenseKv dense;
  std::int64_t loaded = -1;
  std::vector<float> qf(static_cast<std::size_t>(hq * kD));
  std::vector<std::int32_t> pages(static_cast<std::size_t>(hkv * geo.topk_k));
  const std::size_t q_es = dtype_size(q.dtype);
  for (const auto& [b, r] : by_req) {
    if (b != loaded) {
      FLASHMSA_RETURN_IF_ERROR(
          dequantize_request_kv(kv, block_table, b, read_i32(seq_lens, b), &dense));
      loaded = b;
    }
    std::int64_t bb = 0, p = 0;
    locate(r, &bb, &p);
    for (std::int64_t h = 0; h < hq; ++h)
      cpu::load_row_f32(static_cast<const std::uint8_t*>(q.data) +
                            (r * q.stride[0] + h * q.stride[1]) * q_es,
                        q.dtype, qf.data() + h * kD);
    for (std::int64_t g = 0; g < hkv; ++g)
      for (std::int64_t k = 0; k < geo.topk_k; ++k)
        pages[static_cast<std::size_t>(g * geo.topk_k + k)] =
            topk.ptr<const std::int32_t>()[r * topk.stride[0] + g * topk.stride[1] +
                                           k * topk.stride[2]];
    attention_row(dense, qf.data(), hq, p, options.dense ? nullptr : pages.data(),
                  static_cast<int>(geo.topk_k), c, vs, options.rounding,
                  out->data() + r * hq * kD, lse->data() + r * hq);
  }
  return Status::Ok();
}

}  // namespace

Status reference_prefill(const SparseAttentionPrefillArgs& a, const ReferenceOptions& options,
                         std::vector<double>* out, std::vector<double>* lse) {
  detail::AttentionGeometry geo;
  FLASHMSA_RETURN_IF_ERROR(
      detail::validate_prefill_args("reference_prefill", a, false, &geo));
  const std::int64_t batch = a.seq_lens.shape[0];
  std::vector<std::int64_t> req(static_cast<std::size_t>(geo.rows)),
      pos(static_cast<std::size_t>(geo.rows));
  for (std::int64_t r = 0; r < batch; ++r) {
    const std::int64_t begin = read_i32(a.cu_seqlens_q, r), end = read_i32(a.cu_seqlens_q, r + 1);
    for (std::int64_t row = begin; row < end; ++row) {
      req[static_cast<std::size_t>(row)] = r;
      pos[static_cast<std::size_t>(row)] = read_i32(a.seq_lens, r) - (end - begin) + (row - begin);
    }
  }
  auto locate = [&](std::int64_t row, std::int64_t* b, std::int64_t* p) {
    *b = req[static_cast<std::size_t>(row)];
    *p = pos[static_cast<std::size_t>(row)];
  };
  return run_reference(a.kv, a.q, a.topk_indices, a.block_table, a.seq_lens, a.softmax_scale,
                       a.q_scale, geo, options, locate, out, lse);
}

Status reference_decode(const DecodeRunArgs& a, int queries_per_request,
                        const ReferenceOptions& options, std::vector<double>* out,
                        std::vector<double>* lse) {
  detail::AttentionGeometry geo;
  FLASHMSA_RETURN_IF_ERROR(
      detail::validate_decode_args("reference_decode", a, queries_per_request, false, &geo));
  const std::int64_t qn = queries_per_request;
  auto locate = [&](std::int64_t row, std::int64_t* b, std::int64_t* p) {
    *b = row / qn;
    *p = static_cast<std::int64_t>(read_i32(a.seq_lens, *b)) - qn + row % qn;
  };
  return run_reference(a.kv, a.q, a.topk_indices, a.block_table, a.seq_lens, a.softmax_scale,
                       a.q_scale, geo, options, locate, out, lse);
}

std::vector<double> to_double(const TensorView& t) {
  std::vector<double> v;
  if (!t.defined() || t.rank < 1 || t.rank > kMaxRank) return v;
  const std::int64_t n = t.numel();
  v.reserve(static_cast<std::size_t>(n));
  std::int64_t idx[kMaxRank] = {0, 0, 0, 0};
  const std::size_t es = dtype_size(t.dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t off = 0;
    for (int d = 0; d < t.rank; ++d) off += idx[d] * t.stride[d];
    const auto* p = static_cast<const std::uint8_t*>(t.data) + off * static_cast<std::int64_t>(es);
    double x = 0.0;
    switch (t.dtype) {
      case DType::bf16: {
        std::uint16_t b;
        std::memcpy(&b, p, 2);
        x = bf16_to_float(b);
        break;
      }
      case DType::f16: {  // IEEE half, decoded by hand
        std::uint16_t b;
        std::memcpy(&b, p, 2);
        const int e = (b >> 10) & 0x1f, m = b & 0x3ff;
        const double s = (b & 0x8000) ? -1.0 : 1.0;
        if (e == 0) x = s * std::ldexp(m, -24);
        else if (e == 31) x = m ? std::numeric_limits<double>::quiet_NaN() : s * HUGE_VAL;
        else x = s * std::ldexp(1024 + m, e - 25);
        break;
      }
      case DType::f32: {
        float f;
        std::memcpy(&f, p, 4);
        x = f;
        break;
      }
      case DType::i32: {
        std::int32_t k;
        std::memcpy(&k, p, 4);
        x = k;
        break;
      }
      case DType::e4m3:
        x = e4m3_to_float(*p);
        break;
      case DType::u8:
        x = *p;
        break;
    }
    v.push_back(x);
    for (int d = t.rank - 1; d >= 0; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return v;
}

std::string Comparison::summary() const {
  std::ostringstream os;
  os << (pass ? "PASS" : "FAIL") << ": " << count << " elements, " << num_mismatch
     << " outside tolerance, max_abs_err " << max_abs_err << " (index " << worst_index
     << "), cosine " << cosine << ", max_lse_err " << max_lse_err << " (index "
     << worst_lse_index << "), non-finite mismatches " << nonfinite_mismatch;
  return os.str();
}

Comparison compare(const std::vector<double>& actual, const std::vector<double>& expected,
                   const std::vector<double>& actual_lse, const std::vector<double>& expected_lse,
                   const Tolerance& tol) {
  Comparison r;
  if (actual.size() != expected.size() || actual_lse.size() != expected_lse.size()) {
    r.pass = false;
    r.nonfinite_mismatch = -1;
    return r;
  }
  r.count = static_cast<std::int64_t>(actual.size());
  auto nonfinite_equal = [](double a, double b) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return a == b;  // infinities: same sign
  };
  double dot = 0.0, na = 0.0, nb = 0.0;
  double worst_excess = -HUGE_VAL;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], b = expected[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (!nonfinite_equal(a, b)) {
        ++r.nonfinite_mismatch;
        ++r.num_mismatch;
      }
      continue;
    }
    const double err = std::fabs(a - b);
    const double excess = err - (tol.atol + tol.rtol * std::fabs(b));
    if (excess > 0) ++r.num_mismatch;
    if (err > r.max_abs_err) r.max_abs_err = err;
    if (excess > worst_excess) {
      worst_excess = excess;
      r.worst_index = static_cast<std::int64_t>(i);
    }
    dot += a * b;
    na += a * a;
    nb += b * b;
  }
  if (na == 0.0 && nb == 0.0) r.cosine = 1.0;
  else if (na == 0.0 || nb == 0.0) r.cosine = 0.0;
  else r.cosine = std::min(1.0, dot / (std::sqrt(na) * std::sqrt(nb)));  // rounding can exceed 1
  for (std::size_t i = 0; i < actual_lse.size(); ++i) {
    const double a = actual_lse[i], b = expected_lse[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (!nonfinite_equal(a, b)) {
        ++r.nonfinite_mismatch;
        r.worst_lse_index = static_cast<std::int64_t>(i);
        r.max_lse_err = HUGE_VAL;
      }
      continue;
    }
    const double err = std::fabs(a - b);
    if (err > r.max_lse_err) {
      r.max_lse_err = err;
      r.worst_lse_index = static_cast<std::int64_t>(i);
    }
  }
  r.pass = r.num_mismatch == 0 && r.nonfinite_mismatch == 0 && r.cosine >= tol.min_cosine &&
           r.max_lse_err <= tol.lse_atol;
  return r;
}

}  // namespace flashmsa::reference

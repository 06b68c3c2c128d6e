// FlashMSA tools — FP64 spot checks of a finished case (see check.h).
#include "check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "common/parallel.h"
#include "cpu/kv_access.h"
#include "flashmsa/numerics.h"
#include "reference/dense_reference.h"

namespace flashmsa::tools {

namespace {

constexpr int kD = kHeadDim;

/// Decodes a 128-vector of a bf16 / e4m3 [rows, H, 128] tensor.
void load_vec(const TensorView& t, std::int64_t row, std::int64_t head, float* out) {
  const std::size_t es = dtype_size(t.dtype);
  const auto* base = static_cast<const std::uint8_t*>(t.data) +
                     static_cast<std::size_t>(row * t.stride[0] + head * t.stride[1]) * es;
  cpu::load_row_f32(base, t.dtype, out);
}

std::int32_t bt_at(const TensorView& bt, std::int64_t r, std::int64_t b) {
  return bt.ptr<const std::int32_t>()[r * bt.stride[0] + b * bt.stride[1]];
}

std::int32_t topk_at(const TensorView& t, std::int64_t row, std::int64_t g, std::int64_t k) {
  return t.ptr<const std::int32_t>()[row * t.stride[0] + g * t.stride[1] + k * t.stride[2]];
}

struct AttnItem {
  std::vector<double> out;  // [G][128]
  std::vector<double> lse;  // [G]
};

/// FP64 attention of one (row, KV head) over the row's selected pages.
void reference_attention(const CheckInputs& in, std::int64_t row, int g, AttnItem* res) {
  const int G = in.num_q_heads / in.num_kv_heads;
  const std::int64_t r = in.row_request[static_cast<std::size_t>(row)];
  const std::int64_t p = in.row_position[static_cast<std::size_t>(row)];
  const std::int64_t seq = in.seq_lens[static_cast<std::size_t>(r)];
  const std::int64_t npages = (seq + kPageSize - 1) / kPageSize;
  const std::int64_t L = p >= 0 ? p / kPageSize : -1;
  const int K = static_cast<int>(in.topk.shape[2]);
  // Valid distinct pages (D1 filtering).
  std::vector<std::int64_t> pages;
  for (int k = 0; k < K; ++k) {
    const std::int64_t b = topk_at(in.topk, row, g, k);
    if (b < 0 || b >= npages || b > L) continue;
    if (std::find(pages.begin(), pages.end(), b) != pages.end()) continue;
    pages.push_back(b);
  }
  std::sort(pages.begin(), pages.end());
  // Query rows of the group.
  std::vector<float> q(static_cast<std::size_t>(G) * kD);
  for (int j = 0; j < G; ++j) load_vec(in.q, row, g * G + j, q.data() + static_cast<std::size_t>(j) * kD);
  const double c = static_cast<double>(in.softmax_scale) * in.q_scale * in.kv.k.global_scale;
  const double vs = in.kv.v.global_scale;
  std::vector<double> z;      // [keys][G]
  std::vector<float> vrows;   // [keys][128]
  float kr[kD];
  for (std::int64_t b : pages) {
    const std::int64_t phys = bt_at(in.block_table, r, b);
    const std::int64_t last = std::min<std::int64_t>(kPageSize - 1, p - b * kPageSize);
    for (std::int64_t t = 0; t <= last; ++t) {
      cpu::load_cache_row_f32(in.kv.k, in.kv.format, phys, g, static_cast<int>(t), kr);
      for (int j = 0; j < G; ++j) {
        const float* qj = q.data() + static_cast<std::size_t>(j) * kD;
        double s = 0;
        for (int d = 0; d < kD; ++d) s += static_cast<double>(qj[d]) * kr[d];
        z.push_back(c * s);
      }
      const std::size_t off = vrows.size();
      vrows.resize(off + kD);
      cpu::load_cache_row_f32(in.kv.v, in.kv.format, phys, g, static_cast<int>(t), vrows.data() + off);
    }
  }
  const std::size_t nkeys = vrows.size() / kD;
  res->out.assign(static_cast<std::size_t>(G) * kD, 0.0);
  res->lse.assign(static_cast<std::size_t>(G), -std::numeric_limits<double>::infinity());
  if (nkeys == 0) return;
  for (int j = 0; j < G; ++j) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t t = 0; t < nkeys; ++t) m = std::max(m, z[t * G + j]);
    double sum = 0;
    double* o = res->out.data() + static_cast<std::size_t>(j) * kD;
    for (std::size_t t = 0; t < nkeys; ++t) {
      const double w = std::exp(z[t * G + j] - m);
      sum += w;
      const float* v = vrows.data() + t * kD;
      for (int d = 0; d < kD; ++d) o[d] += w * v[d];
    }
    for (int d = 0; d < kD; ++d) o[d] = o[d] / sum * vs;
    res->lse[static_cast<std::size_t>(j)] = m + std::log(sum);
  }
}

struct TopkItem {
  int checked = 0;
  int mismatches = 0;
  int near_ties = 0;
  std::string message;
};

/// Exact page scores of one row for every KV head and the D1/D2 selection check.
void check_topk_row(const CheckInputs& in, std::int64_t row, TopkItem* res) {
  const int H = in.num_kv_heads;
  const std::int64_t r = in.row_request[static_cast<std::size_t>(row)];
  const std::int64_t p = in.row_position[static_cast<std::size_t>(row)];
  const int K = static_cast<int>(in.topk.shape[2]);
  const std::int64_t L = p >= 0 ? p / kPageSize : -1;
  std::vector<float> iq(static_cast<std::size_t>(H) * kD);
  for (int g = 0; g < H; ++g) load_vec(in.index_q, row, g, iq.data() + static_cast<std::size_t>(g) * kD);
  // scores[g][b] for history pages b < L (only needed when L + 1 > K).
  const bool ranked = L + 1 > K;
  std::vector<double> scores;
  if (ranked) {
    scores.assign(static_cast<std::size_t>(H * L), -std::numeric_limits<double>::infinity());
    float kr[kD];
    for (std::int64_t b = 0; b < L; ++b) {
      const std::int64_t phys = bt_at(in.block_table, r, b);
      for (int t = 0; t < kPageSize; ++t) {
        cpu::load_index_k_row_f32(in.index_k, phys, t, kr);
        for (int g = 0; g < H; ++g) {
          const float* qg = iq.data() + static_cast<std::size_t>(g) * kD;
          double s = 0;
          for (int d = 0; d < kD; ++d) s += static_cast<double>(qg[d]) * kr[d];
          s *= in.index_k.global_scale;
          double& best = scores[static_cast<std::size_t>(g * L + b)];
          if (s > best) best = s;
        }
      }
    }
  }
  auto fail = [&](int g, const std::string& what) {
    ++res->mismatches;
    if (res->message.empty()) {
      std::ostringstream os;
      os << "top-k of row " << row << " (position " << p << ") KV head " << g << ": " << what;
      res->message = os.str();
    }
  };
  for (int g = 0; g < H; ++g) {
    ++res->checked;
    std::vector<std::int32_t> sel(static_cast<std::size_t>(K));
    for (int k = 0; k < K; ++k) sel[static_cast<std::size_t>(k)] = topk_at(in.topk, row, g, k);
    if (L < 0) {
      for (int k = 0; k < K; ++k)
        if (sel[static_cast<std::size_t>(k)] != -1) { fail(g, "expected all -1 for a padding row"); break; }
      continue;
    }
    if (!ranked) {
      bool ok = true;
      for (int k = 0; k < K; ++k) {
        const std::int32_t want = k <= L ? k : -1;
        if (sel[static_cast<std::size_t>(k)] != want) ok = false;
      }
      if (!ok) fail(g, "expected pages 0..L ascending then -1 (D1)");
      continue;
    }
    if (sel[static_cast<std::size_t>(K - 1)] != L) {
      fail(g, "local page L = " + std::to_string(L) + " not in the last slot (D1)");
      continue;
    }
    const double* sc = scores.data() + static_cast<std::size_t>(g) * L;
    std::vector<double> sorted(sc, sc + L);
    std::nth_element(sorted.begin(), sorted.begin() + (K - 1), sorted.end(), std::greater<double>());
    const double s16 = sorted[static_cast<std::size_t>(K - 1)];  // K-th best (16th)
    double s15 = s16;  // K == 1: no history slot, so no near-tie question
    if (K >= 2) {
      std::nth_element(sorted.begin(), sorted.begin() + (K - 2), sorted.begin() + (K - 1), std::greater<double>());
      s15 = sorted[static_cast<std::size_t>(K - 2)];  // (K-1)-th best (15th)
    }
    const double tol = 2e-4 * std::max(std::fabs(s15), std::fabs(s16)) + 1e-6;
    if (s15 - s16 <= tol) ++res->near_ties;
    std::vector<char> chosen(static_cast<std::size_t>(L), 0);
    bool ok = true;
    std::string why;
    for (int k = 0; k + 1 < K; ++k) {
      const std::int32_t b = sel[static_cast<std::size_t>(k)];
      if (b < 0 || b >= L || chosen[static_cast<std::size_t>(b)]) {
        ok = false;
        why = "slot " + std::to_string(k) + " holds " + std::to_string(b) +
              " (expected 15 distinct history pages < L)";
        break;
      }
      chosen[static_cast<std::size_t>(b)] = 1;
      if (sc[b] < s15 - tol) {
        ok = false;
        std::ostringstream os;
        os << "page " << b << " selected with score " << sc[b] << " below the 15th best " << s15;
        why = os.str();
        break;
      }
      if (k > 0 && sc[b] > sc[sel[static_cast<std::size_t>(k - 1)]] + tol) {
        ok = false;
        why = "history slots not in descending score order (D1)";
        break;
      }
    }
    if (ok) {
      for (std::int64_t b = 0; b < L; ++b)
        if (!chosen[static_cast<std::size_t>(b)] && sc[b] > s15 + tol) {
          std::ostringstream os;
          os << "page " << b << " (score " << sc[b] << ") above the 15th best " << s15 << " not selected";
          ok = false;
          why = os.str();
          break;
        }
    }
    if (!ok) fail(g, why);
  }
}

}  // namespace

std::vector<std::int64_t> sample_rows(std::int64_t total_rows, int n) {
  std::vector<std::int64_t> rows;
  if (total_rows <= 0 || n <= 0) return rows;
  if (n == 1 || total_rows == 1) {
    rows.push_back(total_rows - 1);
    return rows;
  }
  for (int k = 0; k < n; ++k) {
    const std::int64_t r = (static_cast<std::int64_t>(k) * (total_rows - 1) + (n - 1) / 2) / (n - 1);
    if (rows.empty() || rows.back() != r) rows.push_back(r);
  }
  return rows;
}

CheckResult run_check(const CheckInputs& in) {
  CheckResult res;
  res.enabled = true;
  const std::int64_t T = in.q.shape[0];
  const int G = in.num_q_heads / in.num_kv_heads;
  const int Hkv = in.num_kv_heads;
  res.rows = sample_rows(T, in.check_rows);
  res.rows_checked = static_cast<int>(res.rows.size());
  const reference::Tolerance tol = reference::Tolerance::for_q_dtype(in.q.dtype);
  res.atol = tol.atol;
  res.rtol = tol.rtol;
  res.min_cosine = tol.min_cosine;
  res.lse_tol = tol.lse_atol;

  // Attention: one work item per (sampled row, KV head); results reduced in order.
  const std::int64_t items = static_cast<std::int64_t>(res.rows.size()) * Hkv;
  std::vector<AttnItem> attn(static_cast<std::size_t>(items));
  std::vector<TopkItem> topk(res.rows.size());
  detail::parallel_for(items + static_cast<std::int64_t>(res.rows.size()), in.threads,
                       [&](std::int64_t i, int) {
                         if (i < static_cast<std::int64_t>(res.rows.size())) {
                           check_topk_row(in, res.rows[static_cast<std::size_t>(i)],
                                          &topk[static_cast<std::size_t>(i)]);
                           return;
                         }
                         const std::int64_t a = i - static_cast<std::int64_t>(res.rows.size());
                         reference_attention(in, res.rows[static_cast<std::size_t>(a / Hkv)],
                                             static_cast<int>(a % Hkv), &attn[static_cast<std::size_t>(a)]);
                       });
  std::vector<double> got, want, got_lse, want_lse;
  for (std::size_t ri = 0; ri < res.rows.size(); ++ri) {
    const std::int64_t row = res.rows[ri];
    for (int g = 0; g < Hkv; ++g) {
      const AttnItem& it = attn[ri * static_cast<std::size_t>(Hkv) + static_cast<std::size_t>(g)];
      for (int j = 0; j < G; ++j) {
        const std::int64_t h = g * G + j;
        const auto* o = in.out.ptr<const std::uint16_t>() + row * in.out.stride[0] + h * in.out.stride[1];
        for (int d = 0; d < kD; ++d) {
          got.push_back(bf16_to_float(o[d]));
          want.push_back(it.out[static_cast<std::size_t>(j) * kD + static_cast<std::size_t>(d)]);
        }
        got_lse.push_back(in.lse.ptr<const float>()[row * in.lse.stride[0] + h * in.lse.stride[1]]);
        want_lse.push_back(it.lse[static_cast<std::size_t>(j)]);
      }
    }
  }
  const reference::Comparison cmp = reference::compare(got, want, got_lse, want_lse, tol);
  res.elements = cmp.count;
  res.mismatches = cmp.num_mismatch;
  res.max_abs_err = cmp.max_abs_err;
  res.cosine = cmp.cosine;
  res.max_lse_err = cmp.max_lse_err;
  res.nonfinite = cmp.nonfinite_mismatch;
  for (const TopkItem& t : topk) {
    res.topk_rows_checked += t.checked;
    res.topk_mismatches += t.mismatches;
    res.topk_near_ties += t.near_ties;
    if (res.message.empty() && !t.message.empty()) res.message = t.message;
  }
  if (!cmp.pass) {
    std::ostringstream os;
    os << "attention vs FP64 reference: " << cmp.summary();
    if (cmp.worst_index >= 0) {
      const std::int64_t per_row = static_cast<std::int64_t>(in.num_q_heads) * kD;
      const std::int64_t ri = cmp.worst_index / per_row;
      os << " (worst at row " << res.rows[static_cast<std::size_t>(ri)] << ", head "
         << (cmp.worst_index % per_row) / kD << ", dim " << cmp.worst_index % kD << ")";
    }
    res.message = os.str() + (res.message.empty() ? "" : "; " + res.message);
  }
  res.pass = cmp.pass && res.topk_mismatches == 0;
  return res;
}

}  // namespace flashmsa::tools

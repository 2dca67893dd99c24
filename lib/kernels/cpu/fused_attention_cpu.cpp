// The fused attention core of training (Backend::attention_forward/backward): the plain per-slice reference of the
// CUDA kernels, in fp32 with double sums, over the token-major operands (no head split). Scores, probabilities and
// their gradients live in per-thread row buffers; backward recomputes the probabilities from the saved log-sum-exp,
// as the GPU does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/fused_attention_layout.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

namespace {

float dot(const float* a, const float* b, int n) {
  double s = 0.0;
  for (int d = 0; d < n; ++d) s += static_cast<double>(a[d]) * b[d];
  return static_cast<float>(s);
}

// The probabilities' dropout masks of Backend::attention_forward: element (slice s, row i, key j) at
// (s*q_len + i)*k_len + j; refused where the fused core does not drop out (the caller composes there).
cpu::DropoutMask attention_mask(const Dropout& drop, int q_len, int k_len, const char* op) {
  check_fused_attention_dropout(op, q_len, k_len, drop);
  cpu::require_dropout_p(drop.p, op);
  return cpu::DropoutMask(drop);
}

}  // namespace

void CpuBackend::attention_forward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                   const int32_t* k_lengths, int batch, int heads, int q_len, int k_len, int head_dim,
                                   float scale, bool causal, void* context, float* lse, const int32_t* q_offsets,
                                   const int32_t* k_offsets, const Dropout& drop) {
  cpu::require_f32(dt, "attention_forward");
  check_fused_attention_shape("attention_forward", batch, heads, q_len, k_len, head_dim, ldq, ldkv);
  const cpu::DropoutMask mask = attention_mask(drop, q_len, k_len, "attention_forward");
  const int64_t slices = static_cast<int64_t>(batch) * heads, width = static_cast<int64_t>(heads) * head_dim;
  cpu::parallel_for(threads_, slices, int64_t(q_len) * k_len * head_dim * 2, [&](int64_t s) {
    const float* qs = f32(q) + fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
    const float* ks = f32(k) + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
    const float* vs = f32(v) + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
    float* cs = f32(context) + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets);
    const int q_rows = fused_attention_rows(s / heads, q_len, q_offsets);
    const int k_rows = fused_attention_rows(s / heads, k_len, k_offsets);
    thread_local std::vector<float> p;  // scaled scores of a row, then its probabilities
    p.resize(static_cast<std::size_t>(k_len));
    for (int i = 0; i < q_rows; ++i) {
      const int valid = std::min(k_rows, cpu::attention_valid_keys(k_lengths, s / heads, i, k_len, causal));
      float max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < valid; ++j) {
        p[j] = scale * dot(qs + i * ldq, ks + j * ldkv, head_dim);
        max = std::max(max, p[j]);
      }
      double sum = 0.0;
      for (int j = 0; j < valid; ++j) {
        p[j] = std::exp(p[j] - max);
        sum += p[j];
      }
      const double inv = valid > 0 ? 1.0 / sum : 0.0;
      lse[s * q_len + i] =
          valid > 0 ? max + static_cast<float>(std::log(sum)) : -std::numeric_limits<float>::infinity();
      const int64_t masks_at = (s * q_len + i) * int64_t(k_len);
      for (int j = 0; j < valid; ++j) p[j] *= mask(masks_at + j);
      float* out = cs + i * width;
      for (int d = 0; d < head_dim; ++d) {
        double o = 0.0;
        for (int j = 0; j < valid; ++j) o += p[j] * inv * vs[j * ldkv + d];
        out[d] = static_cast<float>(o);
      }
    }
  });
}

void CpuBackend::attention_backward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                    const int32_t* k_lengths, int batch, int heads, int q_len, int k_len,
                                    int head_dim, float scale, bool causal, const float* lse,
                                    const void* /*context: D_i is summed from P and dP here*/, const void* d_context,
                                    void* d_q, void* d_k, void* d_v, const int32_t* q_offsets,
                                    const int32_t* k_offsets, const Dropout& drop) {
  cpu::require_f32(dt, "attention_backward");
  check_fused_attention_shape("attention_backward", batch, heads, q_len, k_len, head_dim, ldq, ldkv);
  const cpu::DropoutMask mask = attention_mask(drop, q_len, k_len, "attention_backward");
  const int64_t slices = static_cast<int64_t>(batch) * heads, width = static_cast<int64_t>(heads) * head_dim;
  cpu::parallel_for(threads_, slices, int64_t(q_len) * k_len * head_dim * 4, [&](int64_t s) {
    const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
    const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
    const float *qs = f32(q) + q_at, *ks = f32(k) + k_at, *vs = f32(v) + k_at;
    const float* dos = f32(d_context) + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets);
    const int q_rows = fused_attention_rows(s / heads, q_len, q_offsets);
    const int k_rows = fused_attention_rows(s / heads, k_len, k_offsets);
    float *dqs = f32(d_q) + q_at, *dks = f32(d_k) + k_at, *dvs = f32(d_v) + k_at;
    thread_local std::vector<float> p, ds;    // a row's probabilities and score gradients
    thread_local std::vector<double> dk, dv;  // the slice's key/value gradients, summed over its rows
    p.resize(static_cast<std::size_t>(k_len));
    ds.resize(static_cast<std::size_t>(k_len));
    dk.assign(static_cast<std::size_t>(k_len) * head_dim, 0.0);
    dv.assign(static_cast<std::size_t>(k_len) * head_dim, 0.0);
    for (int i = 0; i < q_rows; ++i) {
      const int valid = std::min(k_rows, cpu::attention_valid_keys(k_lengths, s / heads, i, k_len, causal));
      const float* qi = qs + i * ldq;
      const float* doi = dos + i * width;
      const float row_lse = lse[s * q_len + i];
      const int64_t masks_at = (s * q_len + i) * int64_t(k_len);
      double row_dot = 0.0;  // D_i = sum_j p_ij dp_ij, dp_ij = (do_i . v_j) m_ij
      for (int j = 0; j < valid; ++j) {
        p[j] = std::exp(scale * dot(qi, ks + j * ldkv, head_dim) - row_lse);
        ds[j] = dot(doi, vs + j * ldkv, head_dim) * mask(masks_at + j);  // dp_ij for now
        row_dot += static_cast<double>(p[j]) * ds[j];
      }
      for (int j = 0; j < valid; ++j) ds[j] = static_cast<float>(scale * p[j] * (ds[j] - row_dot));
      for (int d = 0; d < head_dim; ++d) {
        double g = 0.0;
        for (int j = 0; j < valid; ++j) g += static_cast<double>(ds[j]) * ks[j * ldkv + d];
        dqs[i * ldq + d] = static_cast<float>(g);
      }
      for (int j = 0; j < valid; ++j) {
        const double kept = static_cast<double>(p[j]) * mask(masks_at + j);  // the weight v_j had in forward
        for (int d = 0; d < head_dim; ++d) {
          dk[std::size_t(j) * head_dim + d] += static_cast<double>(ds[j]) * qi[d];
          dv[std::size_t(j) * head_dim + d] += kept * doi[d];
        }
      }
    }
    for (int j = 0; j < k_rows; ++j)
      for (int d = 0; d < head_dim; ++d) {
        dks[j * ldkv + d] = static_cast<float>(dk[std::size_t(j) * head_dim + d]);
        dvs[j * ldkv + d] = static_cast<float>(dv[std::size_t(j) * head_dim + d]);
      }
  });
}

}  // namespace lseq::kernels

// The fused attention core of training (Backend::attention_forward/backward): the plain per-slice reference of the
// CUDA kernels, in fp32 with double sums. Scores, probabilities and their gradients live in per-thread row buffers;
// backward recomputes the probabilities from the saved log-sum-exp, as the GPU does.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

namespace {

float dot(const float* a, const float* b, int n) {
  double s = 0.0;
  for (int d = 0; d < n; ++d) s += static_cast<double>(a[d]) * b[d];
  return static_cast<float>(s);
}

}  // namespace

void CpuBackend::attention_forward(DType dt, const void* q, const void* k, const void* v, const int32_t* k_lengths,
                                   int batch, int heads, int lq, int lk, int k_len, int head_dim, float scale,
                                   bool causal, void* context, float* lse) {
  cpu::require_f32(dt, "attention_forward");
  check_fused_attention_shape("attention_forward", batch, heads, lq, lk, k_len, head_dim);
  const float* pq = f32(q);
  const float* pk = f32(k);
  const float* pv = f32(v);
  float* pc = f32(context);
  const int64_t slices = static_cast<int64_t>(batch) * heads;
  cpu::parallel_for(threads_, slices, int64_t(lq) * lk * head_dim * 2, [&](int64_t s) {
    const float* qs = pq + s * lq * head_dim;
    const float* ks = pk + s * lk * head_dim;
    const float* vs = pv + s * lk * head_dim;
    thread_local std::vector<float> p;  // scaled scores of a row, then its probabilities
    p.resize(static_cast<std::size_t>(lk));
    for (int i = 0; i < lq; ++i) {
      const int valid = cpu::attention_valid_keys(k_lengths, s / heads, i, k_len, causal);
      float max = -std::numeric_limits<float>::infinity();
      for (int j = 0; j < valid; ++j) {
        p[j] = scale * dot(qs + int64_t(i) * head_dim, ks + int64_t(j) * head_dim, head_dim);
        max = std::max(max, p[j]);
      }
      double sum = 0.0;
      for (int j = 0; j < valid; ++j) {
        p[j] = std::exp(p[j] - max);
        sum += p[j];
      }
      const double inv = valid > 0 ? 1.0 / sum : 0.0;
      lse[s * lq + i] = valid > 0 ? max + static_cast<float>(std::log(sum)) : -std::numeric_limits<float>::infinity();
      float* out = pc + (s * lq + i) * head_dim;
      for (int d = 0; d < head_dim; ++d) {
        double o = 0.0;
        for (int j = 0; j < valid; ++j) o += p[j] * inv * vs[int64_t(j) * head_dim + d];
        out[d] = static_cast<float>(o);
      }
    }
  });
}

void CpuBackend::attention_backward(DType dt, const void* q, const void* k, const void* v, const int32_t* k_lengths,
                                    int batch, int heads, int lq, int lk, int k_len, int head_dim, float scale,
                                    bool causal, const float* lse, const void* d_context, void* d_q, void* d_k,
                                    void* d_v) {
  cpu::require_f32(dt, "attention_backward");
  check_fused_attention_shape("attention_backward", batch, heads, lq, lk, k_len, head_dim);
  const float* pq = f32(q);
  const float* pk = f32(k);
  const float* pv = f32(v);
  const float* pdo = f32(d_context);
  const int64_t slices = static_cast<int64_t>(batch) * heads;
  cpu::parallel_for(threads_, slices, int64_t(lq) * lk * head_dim * 4, [&](int64_t s) {
    const float* qs = pq + s * lq * head_dim;
    const float* ks = pk + s * lk * head_dim;
    const float* vs = pv + s * lk * head_dim;
    const float* dos = pdo + s * lq * head_dim;
    float* dqs = f32(d_q) + s * lq * head_dim;
    thread_local std::vector<float> p, ds;        // a row's probabilities and score gradients
    thread_local std::vector<double> dk, dv;      // the slice's key/value gradients, summed over its rows
    p.resize(static_cast<std::size_t>(lk));
    ds.resize(static_cast<std::size_t>(lk));
    dk.assign(static_cast<std::size_t>(lk) * head_dim, 0.0);
    dv.assign(static_cast<std::size_t>(lk) * head_dim, 0.0);
    for (int i = 0; i < lq; ++i) {
      const int valid = cpu::attention_valid_keys(k_lengths, s / heads, i, k_len, causal);
      const float* qi = qs + int64_t(i) * head_dim;
      const float* doi = dos + int64_t(i) * head_dim;
      double row_dot = 0.0;  // D_i = sum_j p_ij dp_ij
      for (int j = 0; j < valid; ++j) {
        p[j] = std::exp(scale * dot(qi, ks + int64_t(j) * head_dim, head_dim) - lse[s * lq + i]);
        ds[j] = dot(doi, vs + int64_t(j) * head_dim, head_dim);  // dp_ij for now
        row_dot += static_cast<double>(p[j]) * ds[j];
      }
      for (int j = 0; j < valid; ++j) ds[j] = static_cast<float>(scale * p[j] * (ds[j] - row_dot));
      for (int d = 0; d < head_dim; ++d) {
        double g = 0.0;
        for (int j = 0; j < valid; ++j) g += static_cast<double>(ds[j]) * ks[int64_t(j) * head_dim + d];
        dqs[int64_t(i) * head_dim + d] = static_cast<float>(g);
      }
      for (int j = 0; j < valid; ++j)
        for (int d = 0; d < head_dim; ++d) {
          dk[std::size_t(j) * head_dim + d] += static_cast<double>(ds[j]) * qi[d];
          dv[std::size_t(j) * head_dim + d] += static_cast<double>(p[j]) * doi[d];
        }
    }
    float* dks = f32(d_k) + s * lk * head_dim;
    float* dvs = f32(d_v) + s * lk * head_dim;
    for (std::size_t e = 0; e < dk.size(); ++e) {
      dks[e] = static_cast<float>(dk[e]);
      dvs[e] = static_cast<float>(dv[e]);
    }
  });
}

}  // namespace lseq::kernels

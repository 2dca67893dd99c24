// Attention helpers: splitting projections into heads (and back) and the masked, scaled softmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::split_heads(DType dt, const void* qkv, const void* bias, int batch, int len, int padded_len,
                             int heads, int head_dim, int parts, void* out) {
  cpu::require_f32(dt, "split_heads");
  if (batch < 0 || len < 0 || padded_len < len || heads < 0 || head_dim < 0 || parts < 1)
    fail("split_heads: invalid shape batch={} len={} padded_len={} heads={} head_dim={} parts={}", batch, len,
         padded_len, heads, head_dim, parts);
  const float* in = f32(qkv);
  const float* pb = static_cast<const float*>(bias);
  float* po = f32(out);
  const int width = parts * heads * head_dim;
  const int64_t tokens = static_cast<int64_t>(batch) * len;
  auto slice = [&](int64_t p, int64_t b, int64_t h) {
    return po + ((p * batch + b) * heads + h) * padded_len * head_dim;
  };
  // One task per input row (b, t): it scatters into every (part, head) block of the output.
  cpu::parallel_for(threads_, tokens, width, [&](int64_t row) {
    const int64_t b = row / len, t = row % len;
    for (int p = 0; p < parts; ++p)
      for (int h = 0; h < heads; ++h) {
        const int col = (p * heads + h) * head_dim;
        float* dst = slice(p, b, h) + t * head_dim;
        const float* src = in + row * width + col;
        for (int d = 0; d < head_dim; ++d) dst[d] = src[d] + (pb ? pb[col + d] : 0.0f);
      }
  });
  if (padded_len > len)
    for (int64_t p = 0; p < parts; ++p)
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < heads; ++h)
          std::fill(slice(p, b, h) + static_cast<int64_t>(len) * head_dim,
                    slice(p, b, h) + static_cast<int64_t>(padded_len) * head_dim, 0.0f);
}

void CpuBackend::merge_heads(DType dt, const void* in, int batch, int len, int padded_len, int heads, int head_dim,
                             int parts, void* out, float* dparam_bias) {
  cpu::require_f32(dt, "merge_heads");
  if (batch < 0 || len < 0 || padded_len < len || heads < 0 || head_dim < 0 || parts < 1)
    fail("merge_heads: invalid shape batch={} len={} padded_len={} heads={} head_dim={} parts={}", batch, len,
         padded_len, heads, head_dim, parts);
  const float* pi = f32(in);
  float* po = f32(out);
  const int width = parts * heads * head_dim;
  const int64_t tokens = static_cast<int64_t>(batch) * len;
  cpu::parallel_for(threads_, tokens, width, [&](int64_t row) {
    const int64_t b = row / len, t = row % len;
    for (int p = 0; p < parts; ++p)
      for (int h = 0; h < heads; ++h) {
        const int col = (p * heads + h) * head_dim;
        const float* src = pi + ((((p * batch + b) * heads + h) * padded_len + t) * head_dim);
        float* dst = po + row * width + col;
        for (int d = 0; d < head_dim; ++d) dst[d] = src[d];
      }
  });
  if (dparam_bias)
    cpu::accumulate_column_sums(threads_, static_cast<int>(tokens), width, dparam_bias, [&](int r, int c) {
      return static_cast<double>(po[static_cast<int64_t>(r) * width + c]);
    });
}

void CpuBackend::attention_softmax_forward(DType dt, const void* scores, const int32_t* k_lengths, int batch, int heads,
                                           int q_len, int k_len, int ld, float scale, bool causal, void* probs,
                                           const int32_t* key_starts) {
  cpu::require_f32(dt, "attention_softmax_forward");
  if (batch < 0 || heads < 0 || q_len < 0 || k_len < 0 || ld < k_len)
    fail("attention_softmax_forward: invalid shape batch={} heads={} q_len={} k_len={} ld={}", batch, heads, q_len,
         k_len, ld);
  const float* ps = f32(scores);
  float* pp = f32(probs);
  const int64_t rows = static_cast<int64_t>(batch) * heads * q_len;
  cpu::parallel_for(threads_, rows, k_len * 4, [&](int64_t row) {
    const int64_t b = row / (static_cast<int64_t>(heads) * q_len);
    const int i = static_cast<int>(row % q_len);
    const int valid = cpu::attention_valid_keys(k_lengths, b, i, k_len, causal);
    const int first = key_starts ? std::clamp(key_starts[b * q_len + i], 0, valid) : 0;
    const float* s = ps + row * ld;
    float* p = pp + row * ld;
    // Keys [first, valid) take part; the rest (and the padding up to ld) get exactly 0. A row without keys is all
    // zeros, never NaN.
    float max = -std::numeric_limits<float>::infinity();
    for (int j = first; j < valid; ++j) max = std::max(max, scale * s[j]);
    double sum = 0.0;
    for (int j = first; j < valid; ++j) {
      const float e = std::exp(scale * s[j] - max);
      p[j] = e;  // s and p may alias: s[j] is read before p[j] is written
      sum += e;
    }
    const double inv = valid > first ? 1.0 / sum : 0.0;
    for (int j = 0; j < first; ++j) p[j] = 0.0f;
    for (int j = first; j < valid; ++j) p[j] = static_cast<float>(p[j] * inv);
    for (int j = valid; j < ld; ++j) p[j] = 0.0f;
  });
}

void CpuBackend::attention_softmax_backward(DType dt, const void* probs, const void* dprobs, int rows, int k_len,
                                            int ld, float scale, void* dscores) {
  cpu::require_f32(dt, "attention_softmax_backward");
  if (rows < 0 || k_len < 0 || ld < k_len)
    fail("attention_softmax_backward: invalid shape rows={} k_len={} ld={}", rows, k_len, ld);
  const float* pp = f32(probs);
  const float* pdp = f32(dprobs);
  float* pds = f32(dscores);
  cpu::parallel_for(threads_, rows, k_len * 3, [&](int64_t r) {
    const float* p = pp + r * ld;
    const float* dp = pdp + r * ld;
    float* ds = pds + r * ld;
    double dot = 0.0;
    for (int j = 0; j < k_len; ++j) dot += static_cast<double>(p[j]) * dp[j];
    for (int j = 0; j < k_len; ++j) ds[j] = static_cast<float>(scale * p[j] * (dp[j] - dot));
    for (int j = k_len; j < ld; ++j) ds[j] = 0.0f;
  });
}

}  // namespace lseq::kernels

// Incremental decoding's attention (one query per row and head over cached keys/values): the plain reference of
// the fused CUDA kernel, with the arithmetic of the GEMM + masked softmax + GEMM path it replaces.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::attention_step(DType dt, const void* q, const void* k, const void* v, int64_t slice_stride,
                                const int32_t* kv_index, const int32_t* origin, int origin_stride,
                                const int32_t* k_lengths, int rows, int heads, int head_dim, int k_len, float scale,
                                void* context, const int32_t* key_starts) {
  cpu::require_f32(dt, "attention_step");
  check_attention_step_shape(rows, heads, head_dim, k_len, slice_stride, kv_index, origin, origin_stride);
  const int64_t slices = static_cast<int64_t>(rows) * heads;
  if (kv_index)
    for (int64_t i = 0; i < slices; ++i)
      if (kv_index[i] < 0) fail("attention_step: kv_index[{}] = {} is negative", i, kv_index[i]);
  if (origin && heads > 0)
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < k_len; ++j)
        if (origin[int64_t(r) * origin_stride + j] < 0)
          fail("attention_step: origin[{}][{}] = {} is negative", r, j, origin[int64_t(r) * origin_stride + j]);
  const float* pq = f32(q);
  const float* pk = f32(k);
  const float* pv = f32(v);
  float* pc = f32(context);
  cpu::parallel_for(threads_, slices, static_cast<int64_t>(k_len) * head_dim * 2, [&](int64_t i) {
    const int64_t r = i / std::max(heads, 1);
    const int64_t h = i - r * heads;
    const int valid = k_lengths ? std::clamp(k_lengths[r], 0, k_len) : k_len;
    const int first = key_starts ? std::clamp(key_starts[r], 0, valid) : 0;
    const int64_t slice = kv_index ? kv_index[i] : i;
    // Offsets of key (and value) j: in the slice of the row that wrote position j (origin), else in one slice.
    // Keys [first, valid) take part; the entries below first stay unused.
    thread_local std::vector<int64_t> at;
    thread_local std::vector<float> p;  // scaled scores, then exp(score - max)
    at.resize(static_cast<std::size_t>(valid));
    p.resize(static_cast<std::size_t>(valid));
    for (int j = first; j < valid; ++j) {
      const int64_t s = origin ? origin[r * origin_stride + j] * int64_t(heads) + h : slice;
      at[j] = s * slice_stride + int64_t(j) * head_dim;
    }
    const float* qi = pq + i * head_dim;
    float max = -std::numeric_limits<float>::infinity();
    for (int j = first; j < valid; ++j) {
      double dot = 0.0;
      for (int d = 0; d < head_dim; ++d) dot += static_cast<double>(qi[d]) * pk[at[j] + d];
      p[j] = scale * static_cast<float>(dot);
      max = std::max(max, p[j]);
    }
    double sum = 0.0;
    for (int j = first; j < valid; ++j) {
      p[j] = std::exp(p[j] - max);
      sum += p[j];
    }
    const double inv = valid > first ? 1.0 / sum : 0.0;  // no keys: context 0, never NaN
    float* out = pc + i * head_dim;
    for (int d = 0; d < head_dim; ++d) {
      double acc = 0.0;
      for (int j = first; j < valid; ++j) acc += static_cast<double>(p[j]) * pv[at[j] + d];
      out[d] = static_cast<float>(acc * inv);
    }
  });
}

}  // namespace lseq::kernels

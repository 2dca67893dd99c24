// Embedding lookup (+ scale, + positions, dropout) and its backward into the table and position gradients.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/embedding_grad_order.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::embedding_forward(DType dt, const int32_t* tokens, int batch, int len, const void* table, int dim,
                                   float scale, const void* positions, const Dropout& drop, void* out) {
  cpu::require_f32(dt, "embedding_forward");
  cpu::require_dropout_p(drop.p, "embedding_forward");
  const cpu::DropoutMask mask(drop);
  const float* tab = f32(table);
  const float* pos = static_cast<const float*>(positions);
  float* y = f32(out);
  cpu::parallel_for(threads_, static_cast<int64_t>(batch) * len, dim, [&](int64_t row) {
    const int t = static_cast<int>(row % len);
    const float* e = tab + static_cast<int64_t>(tokens[row]) * dim;
    const float* p = pos ? pos + static_cast<int64_t>(t) * dim : nullptr;
    float* o = y + row * dim;
    for (int d = 0; d < dim; ++d) {
      float v = e[d] * scale + (p ? p[d] : 0.0f);
      if (mask.active()) v *= mask(row * dim + d);
      o[d] = v;
    }
  });
}

void CpuBackend::embedding_backward(DType dt, const int32_t* tokens, int batch, int len, int dim, float scale,
                                    const Dropout& drop, const void* dout, float* dparam_table,
                                    float* dparam_positions) {
  cpu::require_f32(dt, "embedding_backward");
  cpu::require_dropout_p(drop.p, "embedding_backward");
  const cpu::DropoutMask mask(drop);
  const float* dy = f32(dout);
  const int64_t rows = static_cast<int64_t>(batch) * len;
  if (rows <= 0 || dim <= 0) return;
  // Tokens repeat, so rows cannot be split between threads without atomics: threads own slices of the
  // embedding dimension instead and walk the rows in a fixed order (deterministic).
  constexpr int kSlice = 16;
  const int64_t slices = (dim + kSlice - 1) / kSlice;
  if (dparam_table) {
    // The order of kernels/embedding_grad_order.h (the CUDA backend's): rows stably sorted by token, per window
    // of sorted rows one partial sum per token, partials added in window order.
    std::vector<int32_t> order(static_cast<std::size_t>(rows));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
    cpu::parallel_for(threads_, slices, rows * kSlice, [&](int64_t s) {
      const int d0 = static_cast<int>(s) * kSlice;
      const int d1 = d0 + kSlice < dim ? d0 + kSlice : dim;
      float partial[kSlice];
      for (int64_t j = 0; j < rows;) {
        const int32_t token = tokens[order[j]];
        const int64_t window_end = std::min<int64_t>((j / kEmbeddingGradWindow + 1) * kEmbeddingGradWindow, rows);
        for (int d = d0; d < d1; ++d) partial[d - d0] = 0.0f;
        for (; j < window_end && tokens[order[j]] == token; ++j) {
          const int64_t row = order[j];
          const float* g = dy + row * dim;
          for (int d = d0; d < d1; ++d) {
            float v = g[d];
            if (mask.active()) v *= mask(row * dim + d);
            partial[d - d0] += scale * v;
          }
        }
        float* dt_row = dparam_table + static_cast<int64_t>(token) * dim;
        for (int d = d0; d < d1; ++d) dt_row[d] += partial[d - d0];
      }
    });
  }
  if (dparam_positions)
    cpu::parallel_for(threads_, slices, rows * kSlice, [&](int64_t s) {
      const int d0 = static_cast<int>(s) * kSlice;
      const int d1 = d0 + kSlice < dim ? d0 + kSlice : dim;
      for (int64_t row = 0; row < rows; ++row) {
        float* dp_row = dparam_positions + static_cast<int64_t>(row % len) * dim;
        const float* g = dy + row * dim;
        for (int d = d0; d < d1; ++d) {
          float v = g[d];
          if (mask.active()) v *= mask(row * dim + d);
          dp_row[d] += v;
        }
      }
    });
}

}  // namespace lseq::kernels

// Embedding lookup (+ scale, + positions, dropout) and its backward into the table and position gradients.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
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
  // Tokens repeat, so rows cannot be split between threads without atomics: threads own slices of the
  // embedding dimension instead and walk all rows in order (deterministic).
  constexpr int kSlice = 16;
  const int64_t slices = (dim + kSlice - 1) / kSlice;
  cpu::parallel_for(threads_, slices, rows * kSlice, [&](int64_t s) {
    const int d0 = static_cast<int>(s) * kSlice;
    const int d1 = d0 + kSlice < dim ? d0 + kSlice : dim;
    for (int64_t row = 0; row < rows; ++row) {
      const int t = static_cast<int>(row % len);
      float* dt_row = dparam_table + static_cast<int64_t>(tokens[row]) * dim;
      float* dp_row = dparam_positions ? dparam_positions + static_cast<int64_t>(t) * dim : nullptr;
      const float* g = dy + row * dim;
      for (int d = d0; d < d1; ++d) {
        float v = g[d];
        if (mask.active()) v *= mask(row * dim + d);
        dt_row[d] += scale * v;
        if (dp_row) dp_row[d] += v;
      }
    }
  });
}

}  // namespace lseq::kernels

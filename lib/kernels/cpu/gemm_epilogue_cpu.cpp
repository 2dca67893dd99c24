// A linear map with its bias (and ReLU or GELU): the CPU twin of the CUDA backend's cuBLASLt epilogue, a GEMM followed
// by one pass over its output.
#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::linear_bias_forward(DType dt, const void* x, const void* w, const void* bias, int rows, int k, int n,
                                     BiasActivation act, void* y, int ld_y) {
  cpu::require_f32(dt, "linear_bias_forward");
  check_linear_bias_shape(rows, k, n);
  const int ld = row_stride("linear_bias_forward", ld_y, n);
  if (rows == 0 || n == 0) return;
  GemmArgs g;  // y = x w^T
  g.trans_b = true;
  g.m = rows, g.n = n, g.k = k;
  g.a = x, g.lda = k;
  g.b = w, g.ldb = k;
  g.c = y, g.ldc = ld;
  gemm(g);
  const float* pb = f32(bias);
  float* py = f32(y);
  cpu::parallel_for(threads_, rows, n, [&](int64_t r) {
    float* row = py + r * ld;
    switch (act) {
      case BiasActivation::none:
        for (int c = 0; c < n; ++c) row[c] += pb[c];
        break;
      case BiasActivation::relu:
        for (int c = 0; c < n; ++c) row[c] = std::max(row[c] + pb[c], 0.0f);
        break;
      case BiasActivation::gelu:
        for (int c = 0; c < n; ++c) row[c] = cpu::gelu(row[c] + pb[c]);
        break;
    }
  });
}

}  // namespace lseq::kernels

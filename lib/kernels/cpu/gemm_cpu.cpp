// GEMM of the CPU backend: OpenBLAS sgemm, row-major; a batched product is a loop over its batch (B optionally
// indexed per product).
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lseq::kernels {

void CpuBackend::gemm(const GemmArgs& g) {
  cpu::require_f32(g.ab, "gemm");
  cpu::require_f32(g.c_type, "gemm");
  check_gemm_shape(g);
  if (g.m == 0 || g.n == 0) return;
  const auto* a = static_cast<const float*>(g.a);
  const auto* b = static_cast<const float*>(g.b);
  auto* c = static_cast<float*>(g.c);
  const CBLAS_TRANSPOSE ta = g.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = g.trans_b ? CblasTrans : CblasNoTrans;
  if (g.index_b)
    for (int i = 0; i < g.batch; ++i)
      if (g.index_b[i] < 0) fail("gemm: index_b[{}] = {} is negative", i, g.index_b[i]);
  for (int i = 0; i < g.batch; ++i) {
    const int64_t bi = g.index_b ? g.index_b[i] : i;
    float* ci = c + i * g.stride_c;
    if (g.k == 0) {  // an empty sum: C = beta * C (and BLAS may skip the call altogether)
      for (int r = 0; r < g.m; ++r)
        for (int col = 0; col < g.n; ++col) {
          float& x = ci[static_cast<int64_t>(r) * g.ldc + col];
          x = g.beta == 0.0f ? 0.0f : g.beta * x;
        }
      continue;
    }
    cblas_sgemm(CblasRowMajor, ta, tb, g.m, g.n, g.k, g.alpha, a + i * g.stride_a, g.lda, b + bi * g.stride_b, g.ldb,
                g.beta, ci, g.ldc);
  }
}

}  // namespace lseq::kernels

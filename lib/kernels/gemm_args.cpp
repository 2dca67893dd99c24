#include <algorithm>

#include "kernels/backend.h"
#include "util/error.h"

namespace lseq::kernels {

void check_gemm_shape(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 1)
    fail("gemm: invalid shape m={} n={} k={} batch={}", g.m, g.n, g.k, g.batch);
  // Row-major leading dimensions are at least the stored row length.
  const int need_a = std::max(1, g.trans_a ? g.m : g.k);
  const int need_b = std::max(1, g.trans_b ? g.k : g.n);
  const int need_c = std::max(1, g.n);
  if (g.lda < need_a || g.ldb < need_b || g.ldc < need_c)
    fail("gemm: leading dimensions lda={} ldb={} ldc={} are smaller than the rows they describe ({}, {}, {})", g.lda,
         g.ldb, g.ldc, need_a, need_b, need_c);
}

void check_linear_bias_shape(int rows, int k, int n) {
  if (rows < 0 || k < 1 || n < 0)
    fail("linear_bias_forward: invalid shape rows={} k={} n={} (k >= 1, the others >= 0)", rows, k, n);
}

}  // namespace lseq::kernels

// GEMM of the CPU backend: OpenBLAS sgemm, row-major; a batched product is a loop over its batch (B optionally
// indexed per product). OpenBLAS runs on one thread (CpuBackend's constructor) and the backend's pool splits the
// work instead: between calls OpenBLAS's own worker threads spin in sched_yield, which on a 2-core box took about a
// third of the CPU from the pool's threads (perf, lstrain on configs/tiny.yaml). A batch is split by products, a
// single product by rows or columns of C (every element is still one sgemm's sum over k).
#include <cblas.h>

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/thread_pool.h"
#include "util/error.h"

namespace lseq::kernels {

namespace {

constexpr int64_t kMinSplitWork = int64_t(1) << 18;  // multiply-adds below which a product runs on one thread
constexpr int kMinSplitSide = 16;                     // rows or columns a part gets at least

}  // namespace

void CpuBackend::gemm(const GemmArgs& g) {
  cpu::require_f32(g.ab, "gemm");
  cpu::require_f32(g.c_type, "gemm");
  check_gemm_shape(g);
  if (g.m == 0 || g.n == 0 || g.batch <= 0) return;
  const auto* a = static_cast<const float*>(g.a);
  const auto* b = static_cast<const float*>(g.b);
  auto* c = static_cast<float*>(g.c);
  const CBLAS_TRANSPOSE ta = g.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = g.trans_b ? CblasTrans : CblasNoTrans;
  if (g.index_b)
    for (int i = 0; i < g.batch; ++i)
      if (g.index_b[i] < 0) fail("gemm: index_b[{}] = {} is negative", i, g.index_b[i]);
  // The block rows [r0, r1) x columns [c0, c1) of product i's C: row r of op(A) starts at a + r * lda (a + r when A
  // is transposed), column j of op(B) at b + j (b + j * ldb when B is transposed).
  auto block = [&](int i, int r0, int r1, int c0, int c1) {
    const int64_t bi = g.index_b ? g.index_b[i] : i;
    float* ci = c + i * g.stride_c + static_cast<int64_t>(r0) * g.ldc + c0;
    if (g.k == 0) {  // an empty sum: C = beta * C (and BLAS may skip the call altogether)
      for (int r = 0; r < r1 - r0; ++r)
        for (int col = 0; col < c1 - c0; ++col) {
          float& x = ci[static_cast<int64_t>(r) * g.ldc + col];
          x = g.beta == 0.0f ? 0.0f : g.beta * x;
        }
      return;
    }
    const float* ai = a + i * g.stride_a + (g.trans_a ? r0 : static_cast<int64_t>(r0) * g.lda);
    const float* bj = b + bi * g.stride_b + (g.trans_b ? static_cast<int64_t>(c0) * g.ldb : c0);
    cblas_sgemm(CblasRowMajor, ta, tb, r1 - r0, c1 - c0, g.k, g.alpha, ai, g.lda, bj, g.ldb, g.beta, ci, g.ldc);
  };
  const int64_t work = static_cast<int64_t>(g.m) * g.n * std::max(g.k, 1);
  if (g.batch > 1) {
    cpu::parallel_for(threads_, g.batch, work / 16, [&](int64_t i) { block(static_cast<int>(i), 0, g.m, 0, g.n); });
    return;
  }
  // One product: split the longer side of C (decoding's steps have few rows and many columns).
  const bool by_rows = g.m >= g.n;
  const int side = by_rows ? g.m : g.n;
  const int parts = work < kMinSplitWork ? 1 : std::min(threads_, std::max(1, side / kMinSplitSide));
  cpu::run_parallel(parts, [&](int part) {
    const int first = static_cast<int>(static_cast<int64_t>(side) * part / parts);
    const int last = static_cast<int>(static_cast<int64_t>(side) * (part + 1) / parts);
    if (by_rows) {
      block(0, first, last, 0, g.n);
    } else {
      block(0, 0, g.m, first, last);
    }
  });
}

}  // namespace lseq::kernels

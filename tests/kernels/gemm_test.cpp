// gemm: every transpose combination, padded leading dimensions, alpha/beta, batches, against a double loop.
#include "kernels_test_util.h"
#include "util/error.h"

namespace lseq::kernels::test {
namespace {

struct GemmShape {
  int m, n, k, batch;
};

// C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] in double.
std::vector<double> reference_gemm(const GemmArgs& g, const std::vector<float>& a, const std::vector<float>& b,
                                   const std::vector<float>& c0) {
  std::vector<double> c(c0.begin(), c0.end());
  for (int p = 0; p < g.batch; ++p)
    for (int i = 0; i < g.m; ++i)
      for (int j = 0; j < g.n; ++j) {
        const int64_t pb = g.index_b ? g.index_b[p] : p;  // which B this product reads
        double s = 0;
        for (int l = 0; l < g.k; ++l) {
          const double av =
              g.trans_a ? a[p * g.stride_a + int64_t(l) * g.lda + i] : a[p * g.stride_a + int64_t(i) * g.lda + l];
          const double bv =
              g.trans_b ? b[pb * g.stride_b + int64_t(j) * g.ldb + l] : b[pb * g.stride_b + int64_t(l) * g.ldb + j];
          s += av * bv;
        }
        double& out = c[p * g.stride_c + int64_t(i) * g.ldc + j];
        out = g.alpha * s + (g.beta == 0.0f ? 0.0 : g.beta * out);
      }
  return c;
}

TEST_F(CpuKernels, GemmMatchesDoubleReference) {
  // The last three are large enough for the backend's two threads to split them (gemm_cpu.cpp): by products, by
  // rows of C (m >= n) and by columns (n > m), each part one sgemm on offset operands.
  const std::vector<GemmShape> shapes = {{1, 1, 1, 1}, {1, 7, 5, 1},     {13, 1, 9, 1},   {17, 23, 31, 1},
                                         {8, 5, 3, 4}, {65, 130, 97, 2}, {71, 43, 97, 1}, {21, 151, 97, 1}};
  uint64_t seed = 100;
  for (const auto& s : shapes)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (float beta : {0.0f, 0.5f}) {
          GemmArgs g;
          g.trans_a = ta, g.trans_b = tb, g.m = s.m, g.n = s.n, g.k = s.k, g.batch = s.batch;
          g.alpha = 0.75f, g.beta = beta;
          const int a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
          const int b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
          g.lda = a_cols + 3, g.ldb = b_cols + 1, g.ldc = s.n + 2;  // padded rows
          g.stride_a = int64_t(a_rows) * g.lda + 5, g.stride_b = int64_t(b_rows) * g.ldb,
          g.stride_c = int64_t(s.m) * g.ldc + 1;
          const auto a = random_floats(g.stride_a * s.batch, ++seed);
          const auto b = random_floats(g.stride_b * s.batch, ++seed);
          // With beta == 0 C is poisoned: BLAS must overwrite, not scale, it. Padding must stay untouched.
          auto c = beta == 0.0f ? poisoned(g.stride_c * s.batch) : random_floats(g.stride_c * s.batch, ++seed);
          const auto c0 = c;
          auto ref = reference_gemm(g, a, b, c0);
          g.a = a.data(), g.b = b.data(), g.c = c.data();
          backend.gemm(g);
          for (std::size_t i = 0; i < c.size(); ++i) {
            const bool inside =
                (i % g.stride_c) < std::size_t(s.m) * g.ldc && (i % g.stride_c) % g.ldc < std::size_t(s.n);
            if (inside) {
              // fp32 products of k terms of size <= 1: error well below 1e-6 * k
              ASSERT_NEAR(c[i], ref[i], 1e-6 * s.k + 1e-6 * std::abs(ref[i]))
                  << "m=" << s.m << " n=" << s.n << " k=" << s.k << " ta=" << ta << " tb=" << tb << " i=" << i;
            } else {
              ASSERT_TRUE(std::isnan(c0[i]) ? std::isnan(c[i]) : c[i] == c0[i]) << "padding written at " << i;
            }
          }
        }
}

// Decoding's shape: one query row per product, products sharing B through index_b (hypotheses of one sentence).
TEST_F(CpuKernels, GemmWithIndexedBReadsTheNamedOperand) {
  uint64_t seed = 150;
  for (int tb = 0; tb < 2; ++tb) {
    GemmArgs g;
    g.trans_b = tb;
    g.m = 1, g.n = 6, g.k = 4, g.batch = 7;
    g.lda = g.k, g.ldb = tb ? g.k : g.n, g.ldc = g.n;
    g.stride_a = g.k, g.stride_b = 9 * 4 + 3, g.stride_c = g.n;  // B slices of 3 operands, padded apart
    const std::vector<int32_t> index = {2, 0, 0, 1, 2, 2, 1};
    g.index_b = index.data();
    const auto a = random_floats(g.stride_a * g.batch, ++seed);
    const auto b = random_floats(g.stride_b * 3, ++seed);
    auto c = poisoned(g.stride_c * g.batch);
    const auto ref = reference_gemm(g, a, b, c);
    g.a = a.data(), g.b = b.data(), g.c = c.data();
    backend.gemm(g);
    EXPECT_TRUE(all_close(c, ref, 1e-6, 1e-6)) << "trans_b " << tb;
  }
  GemmArgs bad;
  bad.m = bad.n = bad.k = 1, bad.lda = bad.ldb = bad.ldc = 1, bad.batch = 2;
  const std::vector<int32_t> negative = {0, -1};
  std::vector<float> x(4, 1.0f);
  bad.a = bad.b = x.data(), bad.c = x.data() + 2, bad.stride_c = 1, bad.index_b = negative.data();
  EXPECT_THROW(backend.gemm(bad), lseq::Error);
}

TEST_F(CpuKernels, GemmWithEmptyInnerDimensionScalesC) {
  GemmArgs g;
  g.m = 2, g.n = 3, g.k = 0, g.lda = 1, g.ldb = 3, g.ldc = 3, g.beta = 0.5f;
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  g.c = c.data();
  backend.gemm(g);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
}

TEST_F(CpuKernels, GemmRejectsOtherTypesAndBadLeadingDimensions) {
  GemmArgs g;
  g.m = 2, g.n = 2, g.k = 2, g.lda = 2, g.ldb = 2, g.ldc = 2;
  g.ab = DType::bf16;
  try {
    backend.gemm(g);
    FAIL() << "bf16 gemm accepted";
  } catch (const lseq::Error& e) {
    EXPECT_STREQ(e.what(), "the CPU backend computes in fp32; gemm was asked for bf16");
  }
  g.ab = DType::f32, g.lda = 1;
  EXPECT_THROW(backend.gemm(g), lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

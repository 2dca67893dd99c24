// LayerNorm forward against a double reference (output, mean, rstd); backward against finite differences
// of sum(w * forward) for x, gamma and beta; gamma/beta gradients accumulate.
#include "kernels/dropout_rng.h"
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

std::vector<double> ref_layer_norm(const std::vector<double>& x, const std::vector<double>& gamma,
                                   const std::vector<double>& beta, MatrixShape s, double eps,
                                   std::vector<double>* mean = nullptr, std::vector<double>* rstd = nullptr) {
  std::vector<double> y(x.size());
  for (int r = 0; r < s.rows; ++r) {
    const double* xr = &x[std::size_t(r) * s.cols];
    double mu = 0, var = 0;
    for (int c = 0; c < s.cols; ++c) mu += xr[c];
    mu /= s.cols;
    for (int c = 0; c < s.cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= s.cols;
    const double rs = 1 / std::sqrt(var + eps);
    for (int c = 0; c < s.cols; ++c) y[std::size_t(r) * s.cols + c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
    if (mean) mean->push_back(mu);
    if (rstd) rstd->push_back(rs);
  }
  return y;
}

TEST_F(CpuKernels, LayerNormForwardMatchesReference) {
  uint64_t seed = 900;
  const float eps = 1e-5f;
  for (MatrixShape s : std::vector<MatrixShape>{{1, 1}, {1, 8}, {5, 33}, {64, 512}}) {
    const std::size_t n = std::size_t(s.rows) * s.cols;
    const auto x = random_floats(n, ++seed, -2, 3);  // nonzero mean
    const auto gamma = random_floats(s.cols, ++seed, 0.5f, 1.5f), beta = random_floats(s.cols, ++seed);
    auto y = poisoned(n), mean = poisoned(s.rows), rstd = poisoned(s.rows);
    backend.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, eps, y.data(),
                               mean.data(), rstd.data());
    std::vector<double> ref_mean, ref_rstd;
    const auto ref = ref_layer_norm(to_double(x), to_double(gamma), to_double(beta), s, eps, &ref_mean, &ref_rstd);
    EXPECT_TRUE(all_close(y, ref, 1e-5, 1e-6)) << s.rows << "x" << s.cols;
    EXPECT_TRUE(all_close(mean, ref_mean, 1e-6, 1e-7));
    EXPECT_TRUE(all_close(rstd, ref_rstd, 1e-6, 0));
    // Without statistics (inference) the output is the same.
    auto y2 = poisoned(n);
    backend.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, eps, y2.data(),
                               nullptr, nullptr);
    EXPECT_EQ(y2, y);
  }
}

// The post-norm residual block's end: s = residual + dropout(x + bias), y = LN(s). Without dropout s and y against
// a double reference; with dropout every s element is either the residual (dropped) or residual + (x + b)/(1 - p),
// about p of them dropped, and y is the LayerNorm of the s returned. Without a sum buffer y is the same.
TEST_F(CpuKernels, ResidualLayerNormForwardMatchesReference) {
  uint64_t seed = 950;
  const float eps = 1e-5f;
  for (MatrixShape s : std::vector<MatrixShape>{{1, 1}, {3, 8}, {5, 33}, {64, 512}})
    for (float p : {0.0f, 0.25f}) {
      const std::size_t n = std::size_t(s.rows) * s.cols;
      const auto x = random_floats(n, ++seed, -2, 3), residual = random_floats(n, ++seed, -1, 2);
      const auto bias = random_floats(s.cols, ++seed);
      const auto gamma = random_floats(s.cols, ++seed, 0.5f, 1.5f), beta = random_floats(s.cols, ++seed);
      const Dropout drop{p, dropout_key(7, 3, 2)};
      auto sum = poisoned(n), y = poisoned(n), mean = poisoned(s.rows), rstd = poisoned(s.rows);
      backend.residual_layer_norm_forward(DType::f32, x.data(), bias.data(), residual.data(), s.rows, s.cols, drop,
                                          gamma.data(), beta.data(), eps, sum.data(), y.data(), mean.data(),
                                          rstd.data());
      const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.cols) + " p=" + std::to_string(p);
      std::vector<double> kept(n);
      int dropped = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double full = residual[i] + (double(x[i]) + bias[i % s.cols]) / (1.0 - p);
        // Dropped or kept, whichever the returned sum is nearer (both fit where the two are that close).
        const bool was_dropped = p > 0 && std::abs(sum[i] - residual[i]) < std::abs(sum[i] - full);
        dropped += was_dropped;
        kept[i] = was_dropped ? residual[i] : full;
      }
      EXPECT_TRUE(all_close(sum, kept, 1e-5, 1e-6)) << what << " sum";
      if (p == 0) EXPECT_EQ(dropped, 0) << what;
      if (n >= 10000) EXPECT_NEAR(double(dropped) / n, p, 0.03) << what << " dropped fraction";
      std::vector<double> ref_mean, ref_rstd;
      const auto ref = ref_layer_norm(to_double(sum), to_double(gamma), to_double(beta), s, eps, &ref_mean, &ref_rstd);
      EXPECT_TRUE(all_close(y, ref, 1e-5, 1e-6)) << what << " y";
      EXPECT_TRUE(all_close(mean, ref_mean, 1e-6, 1e-7)) << what << " mean";
      EXPECT_TRUE(all_close(rstd, ref_rstd, 1e-6, 0)) << what << " rstd";
      // Decoding: no sum and no statistics, the same output.
      auto y2 = poisoned(n);
      backend.residual_layer_norm_forward(DType::f32, x.data(), bias.data(), residual.data(), s.rows, s.cols, drop,
                                          gamma.data(), beta.data(), eps, nullptr, y2.data(), nullptr, nullptr);
      EXPECT_EQ(y2, y) << what;
      // A pre-norm decoding step: the sum written over the residual stream it reads, the same sum and output.
      auto stream = residual, y3 = poisoned(n);
      backend.residual_layer_norm_forward(DType::f32, x.data(), bias.data(), stream.data(), s.rows, s.cols, drop,
                                          gamma.data(), beta.data(), eps, stream.data(), y3.data(), nullptr, nullptr);
      EXPECT_EQ(stream, sum) << what << " sum in place";
      EXPECT_EQ(y3, y) << what << " y with the sum in place";
    }
}

// Central finite differences of L = sum(w * LayerNorm(x; gamma, beta)) with respect to x, gamma and beta.
struct LayerNormGradients {
  std::vector<double> x, gamma, beta;
};
LayerNormGradients finite_difference_gradients(const std::vector<float>& x, const std::vector<float>& gamma,
                                               const std::vector<float>& beta, const std::vector<float>& w,
                                               MatrixShape s, double eps) {
  const auto xd = to_double(x), gd = to_double(gamma), bd = to_double(beta), wd = to_double(w);
  LayerNormGradients g;
  g.x = finite_difference(
      [&](const std::vector<double>& v) { return weighted_sum(wd, ref_layer_norm(v, gd, bd, s, eps)); }, xd);
  g.gamma = finite_difference(
      [&](const std::vector<double>& v) { return weighted_sum(wd, ref_layer_norm(xd, v, bd, s, eps)); }, gd);
  g.beta = finite_difference(
      [&](const std::vector<double>& v) { return weighted_sum(wd, ref_layer_norm(xd, gd, v, s, eps)); }, bd);
  return g;
}

TEST_F(CpuKernels, LayerNormBackwardMatchesFiniteDifferencesAndAccumulates) {
  uint64_t seed = 1000;
  const float eps = 1e-5f;
  for (MatrixShape s : std::vector<MatrixShape>{{1, 2}, {1, 7}, {3, 8}, {4, 19}}) {
    const std::size_t n = std::size_t(s.rows) * s.cols;
    const auto x = random_floats(n, ++seed, -2, 3);
    const auto gamma = random_floats(s.cols, ++seed, 0.5f, 1.5f), beta = random_floats(s.cols, ++seed);
    const auto w = random_floats(n, ++seed);
    auto [fd_x, fd_g, fd_b] = finite_difference_gradients(x, gamma, beta, w, s, eps);

    auto y = poisoned(n), mean = poisoned(s.rows), rstd = poisoned(s.rows);
    backend.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, eps, y.data(),
                               mean.data(), rstd.data());
    auto dx = poisoned(n);
    const auto dg0 = random_floats(s.cols, ++seed), db0 = random_floats(s.cols, ++seed);
    auto dg = dg0, db = db0;
    for (int call = 0; call < 2; ++call)
      backend.layer_norm_backward(DType::f32, x.data(), gamma.data(), mean.data(), rstd.data(), w.data(), s.rows,
                                  s.cols, dx.data(), dg.data(), db.data(), false);
    for (int c = 0; c < s.cols; ++c) fd_g[c] = dg0[c] + 2 * fd_g[c], fd_b[c] = db0[c] + 2 * fd_b[c];
    EXPECT_TRUE(all_close(dg, fd_g, 1e-4, 1e-5)) << s.rows << "x" << s.cols;
    EXPECT_TRUE(all_close(db, fd_b, 1e-4, 1e-5)) << s.rows << "x" << s.cols;
    // dx may overwrite dy in place.
    auto inplace = w;
    backend.layer_norm_backward(DType::f32, x.data(), gamma.data(), mean.data(), rstd.data(), inplace.data(), s.rows,
                                s.cols, inplace.data(), dg.data(), db.data(), false);
    EXPECT_EQ(inplace, dx);
    EXPECT_TRUE(all_close(dx, fd_x, 1e-4, 1e-5)) << s.rows << "x" << s.cols;
    // With accumulate_dx, dx is added to what the buffer held (the residual's share of a pre-norm block's gradient).
    const auto before = random_floats(n, ++seed);
    auto added = before;
    backend.layer_norm_backward(DType::f32, x.data(), gamma.data(), mean.data(), rstd.data(), w.data(), s.rows, s.cols,
                                added.data(), nullptr, nullptr, true);
    std::vector<double> expected(n);
    for (std::size_t i = 0; i < n; ++i) expected[i] = static_cast<double>(before[i]) + dx[i];
    EXPECT_TRUE(all_close(added, expected, 1e-6, 1e-6)) << s.rows << "x" << s.cols << " accumulated";
  }
}

// The backward from LayerNorm's output (xhat = (y - beta) / gamma, only rstd saved): the same finite differences,
// with gains of both signs, accumulating, and in place; and a gain of exactly 0 (whose column's xhat y cannot give
// back) still yields finite gradients, the other columns' dgamma unchanged.
TEST_F(CpuKernels, LayerNormBackwardFromOutputMatchesFiniteDifferences) {
  uint64_t seed = 1100;
  const float eps = 1e-5f;
  for (MatrixShape s : std::vector<MatrixShape>{{1, 2}, {1, 7}, {3, 8}, {4, 19}}) {
    const std::size_t n = std::size_t(s.rows) * s.cols;
    const auto x = random_floats(n, ++seed, -2, 3);
    auto gamma = random_floats(s.cols, ++seed, 0.5f, 1.5f);
    for (int c = 0; c < s.cols; c += 2) gamma[c] = -gamma[c];
    const auto beta = random_floats(s.cols, ++seed);
    const auto w = random_floats(n, ++seed);
    auto [fd_x, fd_g, fd_b] = finite_difference_gradients(x, gamma, beta, w, s, eps);

    auto y = poisoned(n), rstd = poisoned(s.rows);
    backend.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, eps, y.data(),
                               nullptr, rstd.data());
    auto dx = poisoned(n);
    const auto dg0 = random_floats(s.cols, ++seed), db0 = random_floats(s.cols, ++seed);
    auto dg = dg0, db = db0;
    for (int call = 0; call < 2; ++call)
      backend.layer_norm_backward_from_output(DType::f32, y.data(), gamma.data(), beta.data(), rstd.data(), w.data(),
                                              s.rows, s.cols, dx.data(), dg.data(), db.data());
    for (int c = 0; c < s.cols; ++c) fd_g[c] = dg0[c] + 2 * fd_g[c], fd_b[c] = db0[c] + 2 * fd_b[c];
    const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    EXPECT_TRUE(all_close(dg, fd_g, 1e-4, 1e-5)) << what;
    EXPECT_TRUE(all_close(db, fd_b, 1e-4, 1e-5)) << what;
    EXPECT_TRUE(all_close(dx, fd_x, 1e-4, 1e-5)) << what;
    auto inplace = w;
    backend.layer_norm_backward_from_output(DType::f32, y.data(), gamma.data(), beta.data(), rstd.data(),
                                            inplace.data(), s.rows, s.cols, inplace.data(), nullptr, nullptr);
    EXPECT_EQ(inplace, dx) << what;

    // A dead gain: column 0 of gamma is 0, so y there is beta whatever x was.
    auto dead = gamma;
    dead[0] = 0.0f;
    auto y0 = poisoned(n);
    backend.layer_norm_forward(DType::f32, x.data(), dead.data(), beta.data(), s.rows, s.cols, eps, y0.data(),
                               nullptr, rstd.data());
    std::vector<float> dx0(n), dg_dead(s.cols, 0.0f), db_dead(s.cols, 0.0f);
    backend.layer_norm_backward_from_output(DType::f32, y0.data(), dead.data(), beta.data(), rstd.data(), w.data(),
                                            s.rows, s.cols, dx0.data(), dg_dead.data(), db_dead.data());
    for (float v : dx0) EXPECT_TRUE(std::isfinite(v)) << what;
    for (float v : dg_dead) EXPECT_TRUE(std::isfinite(v)) << what;
    const std::vector<double> fd_g_dead = finite_difference_gradients(x, dead, beta, w, s, eps).gamma;
    for (int c = 1; c < s.cols; ++c)
      EXPECT_NEAR(dg_dead[c], fd_g_dead[c], 1e-4 + 1e-4 * std::fabs(fd_g_dead[c])) << what;
  }
}

}  // namespace
}  // namespace lseq::kernels::test

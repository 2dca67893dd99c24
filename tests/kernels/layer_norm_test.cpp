// LayerNorm forward against a double reference (output, mean, rstd); backward against finite differences
// of sum(w * forward) for x, gamma and beta; gamma/beta gradients accumulate.
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

struct Shape {
  int rows, cols;
};

std::vector<double> ref_layer_norm(const std::vector<double>& x, const std::vector<double>& gamma,
                                   const std::vector<double>& beta, Shape s, double eps,
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
  for (Shape s : std::vector<Shape>{{1, 1}, {1, 8}, {5, 33}, {64, 512}}) {
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

TEST_F(CpuKernels, LayerNormBackwardMatchesFiniteDifferencesAndAccumulates) {
  uint64_t seed = 1000;
  const float eps = 1e-5f;
  for (Shape s : std::vector<Shape>{{1, 2}, {1, 7}, {3, 8}, {4, 19}}) {
    const std::size_t n = std::size_t(s.rows) * s.cols;
    const auto x = random_floats(n, ++seed, -2, 3);
    const auto gamma = random_floats(s.cols, ++seed, 0.5f, 1.5f), beta = random_floats(s.cols, ++seed);
    const auto w = random_floats(n, ++seed);
    const auto xd = to_double(x), gd = to_double(gamma), bd = to_double(beta), wd = to_double(w);
    const auto fd_x = finite_difference(
        [&](const std::vector<double>& v) { return weighted_sum(wd, ref_layer_norm(v, gd, bd, s, eps)); }, xd);
    auto fd_g = finite_difference(
        [&](const std::vector<double>& v) { return weighted_sum(wd, ref_layer_norm(xd, v, bd, s, eps)); }, gd);
    auto fd_b = finite_difference(
        [&](const std::vector<double>& v) { return weighted_sum(wd, ref_layer_norm(xd, gd, v, s, eps)); }, bd);

    auto y = poisoned(n), mean = poisoned(s.rows), rstd = poisoned(s.rows);
    backend.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, eps, y.data(),
                               mean.data(), rstd.data());
    auto dx = poisoned(n);
    const auto dg0 = random_floats(s.cols, ++seed), db0 = random_floats(s.cols, ++seed);
    auto dg = dg0, db = db0;
    for (int call = 0; call < 2; ++call)
      backend.layer_norm_backward(DType::f32, x.data(), gamma.data(), mean.data(), rstd.data(), w.data(), s.rows,
                                  s.cols, dx.data(), dg.data(), db.data());
    for (int c = 0; c < s.cols; ++c) fd_g[c] = dg0[c] + 2 * fd_g[c], fd_b[c] = db0[c] + 2 * fd_b[c];
    EXPECT_TRUE(all_close(dg, fd_g, 1e-4, 1e-5)) << s.rows << "x" << s.cols;
    EXPECT_TRUE(all_close(db, fd_b, 1e-4, 1e-5)) << s.rows << "x" << s.cols;
    // dx may overwrite dy in place.
    auto inplace = w;
    backend.layer_norm_backward(DType::f32, x.data(), gamma.data(), mean.data(), rstd.data(), inplace.data(), s.rows,
                                s.cols, inplace.data(), dg.data(), db.data());
    EXPECT_EQ(inplace, dx);
    EXPECT_TRUE(all_close(dx, fd_x, 1e-4, 1e-5)) << s.rows << "x" << s.cols;
  }
}

}  // namespace
}  // namespace lseq::kernels::test

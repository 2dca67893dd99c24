// Bias, activation and residual ops: forward against double references, backward against finite differences
// of sum(w * forward) (w = dy), with dropout, accumulation of bias gradients.
#include "kernels/dropout_rng.h"
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

double act_ref(Activation act, double z) {
  switch (act) {
    case Activation::relu: return z > 0 ? z : 0;
    case Activation::gelu: return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
    case Activation::swish: return z / (1 + std::exp(-z));
  }
  return z;
}

double mask(const Dropout& d, std::size_t i) { return d.p > 0 ? dropout_multiplier(d.key, i, d.p) : 1.0; }

std::vector<double> ref_bias_act(const std::vector<double>& x, const std::vector<double>& bias, MatrixShape s,
                                 Activation act, const Dropout& d) {
  std::vector<double> y(x.size());
  for (int r = 0; r < s.rows; ++r)
    for (int c = 0; c < s.cols; ++c) {
      const std::size_t i = std::size_t(r) * s.cols + c;
      y[i] = act_ref(act, x[i] + bias[c]) * mask(d, i);
    }
  return y;
}

std::vector<double> ref_bias_residual(const std::vector<double>& x, const std::vector<double>& bias,
                                      const std::vector<double>& res, MatrixShape s, const Dropout& d) {
  std::vector<double> y(x.size());
  for (int r = 0; r < s.rows; ++r)
    for (int c = 0; c < s.cols; ++c) {
      const std::size_t i = std::size_t(r) * s.cols + c;
      y[i] = res[i] + (x[i] + bias[c]) * mask(d, i);
    }
  return y;
}

const std::vector<MatrixShape> kForwardShapes = {{1, 1}, {1, 9}, {7, 13}, {64, 600}};
const std::vector<MatrixShape> kGradShapes = {{1, 1}, {1, 6}, {4, 7}};

TEST_F(CpuKernels, AddBiasAndBiasGradMatchReference) {
  uint64_t seed = 400;
  for (auto s : kForwardShapes) {
    const std::size_t n = std::size_t(s.rows) * s.cols;
    const auto x = random_floats(n, ++seed), bias = random_floats(s.cols, ++seed);
    auto y = poisoned(n);
    backend.add_bias(DType::f32, x.data(), bias.data(), s.rows, s.cols, y.data());
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = double(x[i]) + bias[i % s.cols];
    EXPECT_TRUE(all_close(y, ref, 1e-7, 1e-7));
    // bias_grad accumulates column sums
    auto acc = random_floats(s.cols, ++seed);
    std::vector<double> ref_acc(acc.begin(), acc.end());
    for (std::size_t i = 0; i < n; ++i) ref_acc[i % s.cols] += x[i];
    backend.bias_grad(DType::f32, x.data(), s.rows, s.cols, acc.data());
    EXPECT_TRUE(all_close(acc, ref_acc, 1e-6, 1e-6));
  }
}

TEST_F(CpuKernels, BiasActivationDropoutForwardMatchesReference) {
  uint64_t seed = 500;
  for (auto act : {Activation::relu, Activation::gelu, Activation::swish})
    for (float p : {0.0f, 0.25f})
      for (auto s : kForwardShapes) {
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto x = random_floats(n, ++seed, -3, 3), bias = random_floats(s.cols, ++seed);
        const Dropout d{p, 31};
        auto y = poisoned(n);
        backend.bias_activation_dropout_forward(DType::f32, x.data(), bias.data(), s.rows, s.cols, act, d, y.data());
        EXPECT_TRUE(all_close(y, ref_bias_act(to_double(x), to_double(bias), s, act, d), 1e-5, 1e-6))
            << "act " << int(act) << " p " << p << " shape " << s.rows << "x" << s.cols;
      }
}

TEST_F(CpuKernels, BiasActivationDropoutBackwardMatchesFiniteDifferences) {
  uint64_t seed = 600;
  for (auto act : {Activation::relu, Activation::gelu, Activation::swish})
    for (float p : {0.0f, 0.25f})
      for (auto s : kGradShapes) {
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto x = random_floats(n, ++seed, -3, 3), bias = random_floats(s.cols, ++seed);
        const auto w = random_floats(n, ++seed);
        const Dropout d{p, 41};
        const auto xd = to_double(x), bd = to_double(bias), wd = to_double(w);
        const auto fd_x = finite_difference(
            [&](const std::vector<double>& v) { return weighted_sum(wd, ref_bias_act(v, bd, s, act, d)); }, xd);
        auto fd_b = finite_difference(
            [&](const std::vector<double>& v) { return weighted_sum(wd, ref_bias_act(xd, v, s, act, d)); }, bd);
        auto dx = poisoned(n);
        auto db = random_floats(s.cols, ++seed);
        for (int c = 0; c < s.cols; ++c) fd_b[c] += db[c];
        backend.bias_activation_dropout_backward(DType::f32, x.data(), bias.data(), w.data(), s.rows, s.cols, act, d,
                                                 dx.data(), db.data());
        EXPECT_TRUE(all_close(dx, fd_x, 1e-4, 1e-5)) << "act " << int(act) << " p " << p << " rows " << s.rows;
        EXPECT_TRUE(all_close(db, fd_b, 1e-4, 1e-5)) << "act " << int(act) << " p " << p << " rows " << s.rows;
        // in place (dx over dy), as the feed-forward block's backward calls it: the same values
        auto in_place = w;
        backend.bias_activation_dropout_backward(DType::f32, x.data(), bias.data(), in_place.data(), s.rows, s.cols,
                                                 act, d, in_place.data(), nullptr);
        EXPECT_EQ(in_place, dx) << "act " << int(act) << " p " << p << " rows " << s.rows << " in place";
      }
}

TEST_F(CpuKernels, BiasDropoutResidualForwardMatchesReference) {
  uint64_t seed = 700;
  for (float p : {0.0f, 0.1f})
    for (auto s : kForwardShapes) {
      const std::size_t n = std::size_t(s.rows) * s.cols;
      const auto x = random_floats(n, ++seed), bias = random_floats(s.cols, ++seed), res = random_floats(n, ++seed);
      const Dropout d{p, 51};
      auto y = poisoned(n);
      backend.bias_dropout_residual_forward(DType::f32, x.data(), bias.data(), res.data(), s.rows, s.cols, d, y.data());
      EXPECT_TRUE(all_close(y, ref_bias_residual(to_double(x), to_double(bias), to_double(res), s, d), 1e-6, 1e-6));
      // without a bias
      backend.bias_dropout_residual_forward(DType::f32, x.data(), nullptr, res.data(), s.rows, s.cols, d, y.data());
      EXPECT_TRUE(all_close(y, ref_bias_residual(to_double(x), std::vector<double>(s.cols, 0.0), to_double(res), s, d),
                            1e-6, 1e-6));
    }
}

TEST_F(CpuKernels, BiasDropoutResidualBackwardMatchesFiniteDifferences) {
  uint64_t seed = 800;
  for (float p : {0.0f, 0.3f})
    for (auto s : kGradShapes) {
      const std::size_t n = std::size_t(s.rows) * s.cols;
      const auto x = to_double(random_floats(n, ++seed)), bias = to_double(random_floats(s.cols, ++seed));
      const auto res = to_double(random_floats(n, ++seed));
      const auto w = random_floats(n, ++seed);
      const auto wd = to_double(w);
      const Dropout d{p, 61};
      const auto fd_x = finite_difference(
          [&](const std::vector<double>& v) { return weighted_sum(wd, ref_bias_residual(v, bias, res, s, d)); }, x);
      auto fd_b = finite_difference(
          [&](const std::vector<double>& v) { return weighted_sum(wd, ref_bias_residual(x, v, res, s, d)); }, bias);
      const auto fd_r = finite_difference(
          [&](const std::vector<double>& v) { return weighted_sum(wd, ref_bias_residual(x, bias, v, s, d)); }, res);
      EXPECT_TRUE(all_close(w, fd_r, 1e-6, 1e-6));  // the residual's gradient is dy itself
      auto dx = poisoned(n);
      auto db = random_floats(s.cols, ++seed);
      for (int c = 0; c < s.cols; ++c) fd_b[c] += db[c];
      backend.bias_dropout_residual_backward(DType::f32, w.data(), s.rows, s.cols, d, dx.data(), db.data());
      EXPECT_TRUE(all_close(dx, fd_x, 1e-4, 1e-5));
      EXPECT_TRUE(all_close(db, fd_b, 1e-4, 1e-5));
    }
}

TEST_F(CpuKernels, BiasGradIsTheSameOnOneAndTwoThreads) {
  CpuBackend one(1);
  const int rows = 300, cols = 515;
  const auto dy = random_floats(std::size_t(rows) * cols, 13);
  std::vector<float> a(cols, 0.0f), b(cols, 0.0f);
  one.bias_grad(DType::f32, dy.data(), rows, cols, a.data());
  backend.bias_grad(DType::f32, dy.data(), rows, cols, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace lseq::kernels::test

// Bias, activation and residual ops on the device against the CPU backend, forward and backward, with the CPU's
// dropout masks, bias == nullptr, wide rows (a 32000-column output bias) and accumulated bias gradients.
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

const std::vector<MatrixShape> kBiasShapes = {{1, 1}, {1, 9}, {7, 13}, {300, 600}, {2048, 512}, {5, 32000}};

// Column sums of `rows` values of magnitude ~1, summed in a different order than the CPU's.
Bound column_sum_bound(int rows) { return {1e-5, 2e-7 * rows + 1e-6}; }

void expect_same_zeros(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i] == 0.0f, ref[i] == 0.0f) << what << ": dropout mask differs at " << i;
}

TEST_F(GpuKernels, AddBiasAndBiasGradMatchCpu) {
  uint64_t seed = 9200;
  for (DType dt : dtypes())
    for (auto s : kBiasShapes) {
      const std::size_t n = std::size_t(s.rows) * s.cols;
      const auto x = quantize(random_floats(n, ++seed), dt), bias = quantize(random_floats(s.cols, ++seed), dt);
      std::vector<float> ref(n);
      cpu.add_bias(DType::f32, x.data(), bias.data(), s.rows, s.cols, ref.data());
      DeviceBuffer dx(gpu(), dt, x), db(gpu(), dt, bias), y(gpu(), dt, n);
      y.poison();
      gpu().add_bias(dt, dx.get(), db.get(), s.rows, s.cols, y.get());
      EXPECT_TRUE(within(y.download(), ref, bound_for(dt, 1e-3))) << label(dt) << " " << s.rows << "x" << s.cols;
      auto acc = random_floats(s.cols, ++seed);
      DeviceBuffer dacc(gpu(), DType::f32, acc);
      cpu.bias_grad(DType::f32, x.data(), s.rows, s.cols, acc.data());
      gpu().bias_grad(dt, dx.get(), s.rows, s.cols, dacc.f32());
      EXPECT_TRUE(within(dacc.download(), acc, column_sum_bound(s.rows))) << label(dt) << " bias_grad";
    }
}

TEST_F(GpuKernels, BiasActivationDropoutMatchesCpuForwardAndBackward) {
  uint64_t seed = 9300;
  for (DType dt : dtypes())
    for (auto act : {Activation::relu, Activation::gelu, Activation::swish})
      for (float p : {0.0f, 0.25f})
        for (auto s : kBiasShapes)
          for (bool with_bias : {true, false}) {
            const std::size_t n = std::size_t(s.rows) * s.cols;
            const auto x = quantize(random_floats(n, ++seed, -3, 3), dt);
            const auto bias = quantize(random_floats(s.cols, ++seed), dt);
            const auto dy = quantize(random_floats(n, ++seed), dt);
            const Dropout drop{p, dropout_key(7, seed, 4)};
            const void* hb = with_bias ? bias.data() : nullptr;
            const std::string what = label(dt) + " act " + std::to_string(int(act)) + " p " + std::to_string(p) + " " +
                                     std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                     (with_bias ? "" : " no bias");
            std::vector<float> ref(n), ref_dx(n);
            auto ref_db = random_floats(s.cols, ++seed);
            DeviceBuffer dx(gpu(), dt, x), db(gpu(), dt, bias), ddy(gpu(), dt, dy), y(gpu(), dt, n),
                dgrad(gpu(), dt, n), ddb(gpu(), DType::f32, ref_db);
            cpu.bias_activation_dropout_forward(DType::f32, x.data(), hb, s.rows, s.cols, act, drop, ref.data());
            cpu.bias_activation_dropout_backward(DType::f32, x.data(), hb, dy.data(), s.rows, s.cols, act, drop,
                                                 ref_dx.data(), ref_db.data());
            const void* gb = with_bias ? db.get() : nullptr;
            y.poison();
            dgrad.poison();
            gpu().bias_activation_dropout_forward(dt, dx.get(), gb, s.rows, s.cols, act, drop, y.get());
            gpu().bias_activation_dropout_backward(dt, dx.get(), gb, ddy.get(), s.rows, s.cols, act, drop, dgrad.get(),
                                                   ddb.f32());
            const auto got = y.download();
            // act' of GELU and swish crosses zero: fp32 rounding differences (library tanh/exp, fused multiply-add)
            // are absolute there, ~1e-7 of the terms.
            EXPECT_TRUE(within(got, ref, bound_for(dt, 1.0))) << what << " forward";
            if (p > 0) expect_same_zeros(got, ref, what);
            EXPECT_TRUE(within(dgrad.download(), ref_dx, bound_for(dt, 1.0))) << what << " dx";
            EXPECT_TRUE(within(ddb.download(), ref_db, column_sum_bound(s.rows))) << what << " dbias";
            // without a bias gradient
            dgrad.poison();
            gpu().bias_activation_dropout_backward(dt, dx.get(), gb, ddy.get(), s.rows, s.cols, act, drop, dgrad.get(),
                                                   nullptr);
            EXPECT_TRUE(within(dgrad.download(), ref_dx, bound_for(dt, 1.0))) << what << " dx, no dbias";
            // in place: dx over dy (the feed-forward block's backward)
            DeviceBuffer in_place(gpu(), dt, dy);
            gpu().bias_activation_dropout_backward(dt, dx.get(), gb, in_place.get(), s.rows, s.cols, act, drop,
                                                   in_place.get(), nullptr);
            EXPECT_TRUE(within(in_place.download(), ref_dx, bound_for(dt, 1.0))) << what << " dx in place";
          }
}

TEST_F(GpuKernels, BiasDropoutResidualMatchesCpuForwardAndBackward) {
  uint64_t seed = 9400;
  for (DType dt : dtypes())
    for (float p : {0.0f, 0.1f})
      for (auto s : kBiasShapes)
        for (bool with_bias : {true, false}) {
          const std::size_t n = std::size_t(s.rows) * s.cols;
          const auto x = quantize(random_floats(n, ++seed, 0.1f, 2.0f), dt);  // positive: zeros come from the mask
          const auto bias = quantize(random_floats(s.cols, ++seed, 0.0f, 0.5f), dt);
          const auto res = quantize(random_floats(n, ++seed), dt);
          const auto dy = quantize(random_floats(n, ++seed, 0.1f, 1.0f), dt);
          const Dropout drop{p, dropout_key(8, seed, 5)};
          const std::string what = label(dt) + " p " + std::to_string(p) + " " + std::to_string(s.rows) + "x" +
                                   std::to_string(s.cols) + (with_bias ? "" : " no bias");
          std::vector<float> ref(n), ref_dx(n);
          auto ref_db = random_floats(s.cols, ++seed);
          DeviceBuffer ddb(gpu(), DType::f32, ref_db);  // before the CPU accumulates into ref_db
          cpu.bias_dropout_residual_forward(DType::f32, x.data(), with_bias ? bias.data() : nullptr, res.data(), s.rows,
                                            s.cols, drop, ref.data());
          cpu.bias_dropout_residual_backward(DType::f32, dy.data(), s.rows, s.cols, drop, ref_dx.data(), ref_db.data());
          DeviceBuffer dx(gpu(), dt, x), db(gpu(), dt, bias), dres(gpu(), dt, res), ddy(gpu(), dt, dy), y(gpu(), dt, n),
              dgrad(gpu(), dt, n);
          y.poison();
          dgrad.poison();
          gpu().bias_dropout_residual_forward(dt, dx.get(), with_bias ? db.get() : nullptr, dres.get(), s.rows, s.cols,
                                              drop, y.get());
          gpu().bias_dropout_residual_backward(dt, ddy.get(), s.rows, s.cols, drop, dgrad.get(), ddb.f32());
          EXPECT_TRUE(within(y.download(), ref, bound_for(dt, 1e-3))) << what << " forward";
          const auto got_dx = dgrad.download();
          EXPECT_TRUE(within(got_dx, ref_dx, bound_for(dt, 1e-3))) << what << " dx";
          if (p > 0) expect_same_zeros(got_dx, ref_dx, what);
          EXPECT_TRUE(within(ddb.download(), ref_db, column_sum_bound(s.rows))) << what << " dbias";
        }
}

}  // namespace
}  // namespace lseq::kernels::test

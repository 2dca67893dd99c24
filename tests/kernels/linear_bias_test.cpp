// A linear map with its bias (and ReLU or GELU) fused, linear_bias_forward, against a double reference: shapes off
// multiples of 8 and 128, with each activation and none, every output written, and the argument checks.
#include <algorithm>
#include <cmath>
#include <string>

#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

// GELU's tanh approximation in double: the reference the fp32 epilogue is held to.
double gelu_tanh(double z) { return 0.5 * z * (1.0 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z))); }

TEST_F(CpuKernels, LinearBiasForwardMatchesReference) {
  uint64_t seed = 2600;
  const std::vector<LinearShape> shapes = {{1, 1, 1},     {7, 5, 13},    {9, 16, 130},
                                           {33, 17, 257}, {64, 24, 128}, {3, 40, 300}};
  for (BiasActivation act : {BiasActivation::none, BiasActivation::relu, BiasActivation::gelu})
    for (LinearShape s : shapes) {
      const auto x = random_floats(std::size_t(s.rows) * s.k, ++seed);
      const auto w = random_floats(std::size_t(s.n) * s.k, ++seed);
      const auto bias = random_floats(s.n, ++seed);
      std::vector<double> ref(std::size_t(s.rows) * s.n);
      int positive = 0;
      for (int r = 0; r < s.rows; ++r)
        for (int c = 0; c < s.n; ++c) {
          double sum = bias[c];
          for (int i = 0; i < s.k; ++i) sum += double(x[std::size_t(r) * s.k + i]) * w[std::size_t(c) * s.k + i];
          ref[std::size_t(r) * s.n + c] = act == BiasActivation::relu   ? std::max(sum, 0.0)
                                          : act == BiasActivation::gelu ? gelu_tanh(sum)
                                                                        : sum;
          positive += sum > 0;
        }
      auto y = poisoned(ref.size());  // NaN: an output left unwritten fails
      backend.linear_bias_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, act, y.data());
      const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) +
                               (act == BiasActivation::relu   ? " relu"
                                : act == BiasActivation::gelu ? " gelu"
                                                              : " bias only");
      EXPECT_TRUE(all_close(y, ref, 1e-5, 1e-6)) << what;
      if (ref.size() > 100) {
        EXPECT_GT(positive, 0) << what << ": the activation was never open, the case tests too little";
        EXPECT_LT(positive, int(ref.size())) << what << ": the activation was never closed, the case tests too little";
      }
    }
}

// Output rows ld apart (decoding's logits padded to 16-byte rows): the packed product's values, the padding
// untouched.
TEST_F(CpuKernels, LinearBiasForwardWritesRowsLdApart) {
  const LinearShape s{6, 9, 13};
  const int ld = 16;
  const auto x = random_floats(std::size_t(s.rows) * s.k, 2700), w = random_floats(std::size_t(s.n) * s.k, 2701),
             bias = random_floats(s.n, 2702);
  std::vector<float> packed(std::size_t(s.rows) * s.n), padded(std::size_t(s.rows) * ld, 7.5f);
  backend.linear_bias_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, BiasActivation::none,
                              packed.data());
  backend.linear_bias_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, BiasActivation::none,
                              padded.data(), ld);
  for (int r = 0; r < s.rows; ++r)
    for (int c = 0; c < ld; ++c) {
      const float got = padded[std::size_t(r) * ld + c];
      if (c < s.n)
        EXPECT_EQ(got, packed[std::size_t(r) * s.n + c]) << "row " << r << " col " << c;
      else
        EXPECT_EQ(got, 7.5f) << "padding written at row " << r << " col " << c;
    }
  EXPECT_THROW(backend.linear_bias_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n,
                                           BiasActivation::none, padded.data(), s.n - 1),
               lseq::Error);
}

TEST_F(CpuKernels, LinearBiasForwardRejectsBadShapes) {
  std::vector<float> a(16, 1.0f), out(16);
  EXPECT_THROW(
      backend.linear_bias_forward(DType::f32, a.data(), a.data(), a.data(), -1, 2, 4, BiasActivation::relu, out.data()),
      lseq::Error);
  EXPECT_THROW(
      backend.linear_bias_forward(DType::f32, a.data(), a.data(), a.data(), 2, 0, 4, BiasActivation::none, out.data()),
      lseq::Error);
  EXPECT_THROW(
      backend.linear_bias_forward(DType::f32, a.data(), a.data(), a.data(), 2, 2, -4, BiasActivation::relu, out.data()),
      lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

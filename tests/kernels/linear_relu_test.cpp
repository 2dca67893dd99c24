// The feed-forward block's fused first layer: linear_bias_relu_forward and linear_drelu_bias_grad against double
// references, with shapes off multiples of 8 and 128, accumulated bias gradients, no mask (inference), the mask's
// size on every backend and the argument checks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

struct Shape {
  int rows, k, n;  // x [rows, k], w_in [n, k], outputs [rows, n]; the backward's dy is [rows, k] and w_out [k, n]
};
const std::vector<Shape> kShapes = {{1, 1, 1}, {7, 5, 13}, {9, 16, 130}, {33, 17, 257}, {64, 24, 128}, {3, 40, 300}};

// Random inputs of one shape and the pre-activations h = x w^T + bias in double.
struct Inputs {
  std::vector<float> x, w, bias;
  std::vector<double> h;
  std::string what;
};

Inputs random_inputs(Shape s, uint64_t& seed) {
  Inputs in;
  in.x = random_floats(std::size_t(s.rows) * s.k, ++seed);
  in.w = random_floats(std::size_t(s.n) * s.k, ++seed);
  in.bias = random_floats(s.n, ++seed);
  in.h.resize(std::size_t(s.rows) * s.n);
  for (int r = 0; r < s.rows; ++r)
    for (int c = 0; c < s.n; ++c) {
      double sum = in.bias[c];
      for (int i = 0; i < s.k; ++i) sum += double(in.x[std::size_t(r) * s.k + i]) * in.w[std::size_t(c) * s.k + i];
      in.h[std::size_t(r) * s.n + c] = sum;
    }
  in.what = std::to_string(s.rows) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
  return in;
}

constexpr uint8_t kGuard = 0xA5;

TEST_F(CpuKernels, LinearBiasReluForwardMatchesReference) {
  uint64_t seed = 2600;
  for (auto s : kShapes) {
    const std::size_t count = std::size_t(s.rows) * s.n;
    const Inputs in = random_inputs(s, seed);
    const auto &x = in.x, &w = in.w, &bias = in.bias;
    const std::string& what = in.what;
    std::vector<double> ref(count);
    for (std::size_t i = 0; i < count; ++i) ref[i] = std::max(in.h[i], 0.0);

    auto y = poisoned(count);
    const std::size_t mask_bytes = backend.relu_mask_bytes(s.rows, s.n);
    std::vector<uint8_t> mask(mask_bytes + 64, kGuard);  // 64 guard bytes after the mask
    backend.linear_bias_relu_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, y.data(),
                                     mask.data());
    EXPECT_TRUE(all_close(y, ref, 1e-5, 1e-6)) << what;
    for (std::size_t i = mask_bytes; i < mask.size(); ++i) ASSERT_EQ(mask[i], kGuard) << what << ": byte " << i;

    auto y_only = poisoned(count);  // inference: no mask, the same outputs
    backend.linear_bias_relu_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, y_only.data(),
                                     nullptr);
    EXPECT_EQ(std::memcmp(y_only.data(), y.data(), count * sizeof(float)), 0) << what;
  }
}

TEST_F(CpuKernels, LinearDreluBiasGradMatchesReferenceAndAccumulates) {
  uint64_t seed = 2700;
  for (auto s : kShapes) {
    const std::size_t count = std::size_t(s.rows) * s.n;
    const Inputs in = random_inputs(s, seed);
    const auto &x = in.x, &w_in = in.w, &bias = in.bias;
    const auto& h = in.h;
    const auto dy = random_floats(std::size_t(s.rows) * s.k, ++seed);
    const auto w_out = random_floats(std::size_t(s.k) * s.n, ++seed);
    std::vector<float> y(count);
    std::vector<uint8_t> mask(backend.relu_mask_bytes(s.rows, s.n), kGuard);
    backend.linear_bias_relu_forward(DType::f32, x.data(), w_in.data(), bias.data(), s.rows, s.k, s.n, y.data(),
                                     mask.data());

    auto d_bias = random_floats(s.n, ++seed);  // accumulated onto
    std::vector<double> ref_dh(count), ref_db(d_bias.begin(), d_bias.end());
    std::vector<float> got_dh(count);
    for (int r = 0; r < s.rows; ++r)
      for (int c = 0; c < s.n; ++c) {
        const std::size_t i = std::size_t(r) * s.n + c;
        double sum = 0;
        for (int j = 0; j < s.k; ++j) sum += double(dy[std::size_t(r) * s.k + j]) * w_out[std::size_t(j) * s.n + c];
        // A pre-activation within rounding of 0 may fall on either side in fp32: take the side the forward saw.
        const bool positive = std::abs(h[i]) < 1e-5 ? y[i] > 0.0f : h[i] > 0.0;
        ref_dh[i] = positive ? sum : 0.0;
        ref_db[c] += ref_dh[i];
      }
    auto d_h = poisoned(count);
    backend.linear_drelu_bias_grad(DType::f32, dy.data(), w_out.data(), mask.data(), s.rows, s.k, s.n, d_h.data(),
                                   d_bias.data());
    const std::string& what = in.what;
    EXPECT_TRUE(all_close(d_h, ref_dh, 1e-5, 1e-6)) << what << " d_h";
    // Sums of `rows` fp32-rounded values of magnitude ~sqrt(k), some of them cancelling.
    EXPECT_TRUE(all_close(d_bias, ref_db, 1e-5, 2e-7 * s.rows * std::sqrt(double(s.k)))) << what << " bias gradient";
  }
}

TEST_F(CpuKernels, ReluMaskHoldsOneBitPerOutputInRowsOf128) {
  EXPECT_EQ(backend.relu_mask_bytes(3, 1), 3u * 16);
  EXPECT_EQ(backend.relu_mask_bytes(3, 128), 3u * 16);
  EXPECT_EQ(backend.relu_mask_bytes(3, 129), 3u * 32);
  EXPECT_EQ(backend.relu_mask_bytes(16384, 2048), 16384u * 256);
  EXPECT_EQ(backend.relu_mask_bytes(0, 2048), 0u);
}

TEST_F(CpuKernels, LinearReluOpsRejectBadArguments) {
  std::vector<float> a(64, 0.5f), b(64, 0.5f), out(64);
  std::vector<uint8_t> mask(backend.relu_mask_bytes(2, 4));
  EXPECT_THROW(backend.linear_bias_relu_forward(DType::f32, a.data(), b.data(), b.data(), -1, 2, 4, out.data(),
                                                mask.data()),
               lseq::Error);
  EXPECT_THROW(backend.linear_bias_relu_forward(DType::f32, a.data(), b.data(), b.data(), 2, 0, 4, out.data(),
                                                mask.data()),
               lseq::Error);
  EXPECT_THROW(backend.linear_bias_relu_forward(DType::bf16, a.data(), b.data(), b.data(), 2, 2, 4, out.data(),
                                                mask.data()),
               lseq::Error);
  EXPECT_THROW(backend.linear_drelu_bias_grad(DType::f32, a.data(), b.data(), nullptr, 2, 2, 4, out.data(), b.data()),
               lseq::Error);
  EXPECT_THROW(
      backend.linear_drelu_bias_grad(DType::f32, a.data(), b.data(), mask.data(), 2, 2, 4, out.data(), nullptr),
      lseq::Error);
  EXPECT_THROW(backend.linear_drelu_bias_grad(DType::f32, a.data(), b.data(), mask.data(), 2, 2, -4, out.data(),
                                              b.data()),
               lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

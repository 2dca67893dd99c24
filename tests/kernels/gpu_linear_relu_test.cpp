// The feed-forward block's fused first layer on the device (cuBLASLt epilogues RELU_AUX_BIAS, RELU_BIAS and
// DRELU_BGRAD) against the CPU backend: odd shapes and the transformer-base one, a mask that stays inside
// relu_mask_bytes, no mask, and bias gradients accumulated onto non-zero values.
//
// x, w_in and the bias lie on a grid (multiples of 1/8, the bias offset by 1/128) that every dtype holds exactly
// and on which every sum is exact in fp32: the pre-activations are then the same on both backends and never 0, so
// the ReLU masks agree bit for bit and a difference in the backward is the op's, not a sign flip of a rounding.
#include <cmath>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct Shape {
  int rows, k, n;  // x [rows, k], w_in [n, k], outputs [rows, n]; the backward's dy is [rows, k], w_out [k, n]
};
const std::vector<Shape> kShapes = {{1, 8, 1}, {5, 3, 7}, {77, 40, 129}, {256, 64, 384}, {1027, 512, 2048},
                                    {2048, 512, 2048}};

std::vector<float> grid_floats(std::size_t n, uint64_t seed, float offset = 0.0f) {
  const auto steps = random_ints(n, seed, -8, 8);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(steps[i]) / 8.0f + offset;
  return v;
}

// Column sums of `rows` products of `inner` terms: fp32 sums in another order than the CPU's double ones, and for
// 16-bit types possibly of rounded values or a rounded sum.
Bound bias_grad_bound(DType dt, int rows, int inner) {
  const double magnitude = std::sqrt(double(inner));
  if (dt == DType::f32) return {1e-5, (2e-7 * rows + 1e-6) * magnitude};
  return {bound_for(dt).rtol, bound_for(dt).rtol * std::sqrt(double(rows)) * magnitude};
}

TEST_F(GpuKernels, LinearBiasReluAndDreluBiasGradMatchCpu) {
  uint64_t seed = 9700;
  for (DType dt : dtypes())
    for (auto s : kShapes) {
      const std::size_t count = std::size_t(s.rows) * s.n;
      const std::string what = label(dt) + " " + std::to_string(s.rows) + "x" + std::to_string(s.k) + "x" +
                               std::to_string(s.n);
      const auto x = grid_floats(std::size_t(s.rows) * s.k, ++seed);
      const auto w_in = grid_floats(std::size_t(s.n) * s.k, ++seed);
      const auto bias = grid_floats(s.n, ++seed, 1.0f / 128);
      const auto dy = quantize(random_floats(std::size_t(s.rows) * s.k, ++seed), dt);
      const auto w_out = quantize(random_floats(std::size_t(s.k) * s.n, ++seed), dt);
      auto ref_db = random_floats(s.n, ++seed);
      DeviceBuffer ddb(gpu(), DType::f32, ref_db);  // before the CPU accumulates into ref_db

      std::vector<float> ref_y(count), ref_dh(count);
      std::vector<uint8_t> cpu_mask(cpu.relu_mask_bytes(s.rows, s.n));
      cpu.linear_bias_relu_forward(DType::f32, x.data(), w_in.data(), bias.data(), s.rows, s.k, s.n, ref_y.data(),
                                   cpu_mask.data());
      cpu.linear_drelu_bias_grad(DType::f32, dy.data(), w_out.data(), cpu_mask.data(), s.rows, s.k, s.n,
                                 ref_dh.data(), ref_db.data());

      // The mask with 256 guard bytes after it (4-byte elements: relu_mask_bytes is a multiple of 16).
      const std::size_t mask_words = gpu().relu_mask_bytes(s.rows, s.n) / 4;
      const auto guard = random_floats(mask_words + 64, ++seed);
      DeviceBuffer dx(gpu(), dt, x), dw_in(gpu(), dt, w_in), dbias(gpu(), dt, bias), ddy(gpu(), dt, dy),
          dw_out(gpu(), dt, w_out), y(gpu(), dt, count), d_h(gpu(), dt, count), mask(gpu(), DType::f32, guard);
      y.poison();
      d_h.poison();
      gpu().linear_bias_relu_forward(dt, dx.get(), dw_in.get(), dbias.get(), s.rows, s.k, s.n, y.get(), mask.get());
      gpu().linear_drelu_bias_grad(dt, ddy.get(), dw_out.get(), mask.get(), s.rows, s.k, s.n, d_h.get(), ddb.f32());
      const double scale = std::sqrt(double(s.k));
      EXPECT_TRUE(within(y.download(), ref_y, bound_for(dt, scale))) << what << " forward";
      EXPECT_TRUE(within(d_h.download(), ref_dh, bound_for(dt, scale))) << what << " d_h";
      EXPECT_TRUE(within(ddb.download(), ref_db, bias_grad_bound(dt, s.rows, s.k))) << what << " bias gradient";
      const auto after = mask.download();
      for (std::size_t i = mask_words; i < after.size(); ++i)
        ASSERT_EQ(std::memcmp(&after[i], &guard[i], 4), 0) << what << ": the mask overran its bytes at word " << i;

      y.poison();  // inference: no mask
      gpu().linear_bias_relu_forward(dt, dx.get(), dw_in.get(), dbias.get(), s.rows, s.k, s.n, y.get(), nullptr);
      EXPECT_TRUE(within(y.download(), ref_y, bound_for(dt, scale))) << what << " forward without a mask";
    }
}

TEST_F(GpuKernels, LinearReluOpsRejectBadShapes) {
  DeviceBuffer a(gpu(), DType::f32, 64), mask(gpu(), DType::f32, 64);
  EXPECT_THROW(gpu().linear_bias_relu_forward(DType::f32, a.get(), a.get(), a.get(), -1, 2, 4, a.get(), mask.get()),
               lseq::Error);
  EXPECT_THROW(gpu().linear_drelu_bias_grad(DType::f32, a.get(), a.get(), nullptr, 2, 2, 4, a.get(), a.f32()),
               lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

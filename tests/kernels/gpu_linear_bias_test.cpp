// A linear map with its bias (and ReLU or GELU) fused on the device (cuBLASLt's BIAS, RELU_BIAS and GELU_BIAS
// epilogues) against the CPU backend: odd shapes and the transformer-base ones, every output written, and the backward
// the feed-forward layer builds on the ReLU version (relu' read off the output: bias_activation_dropout_backward over y
// with no bias) equal to the CPU's.
//
// x, w and the bias lie on a grid (multiples of 1/8, the bias offset by 1/128) that every dtype holds exactly and
// on which every sum is exact in fp32: the pre-activations are then the same on both backends and never 0, so which
// outputs the ReLU opens agrees exactly and a difference is the op's, not a sign flip of a rounding.
#include <algorithm>
#include <cmath>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

std::vector<float> grid_floats(std::size_t n, uint64_t seed, float offset = 0.0f) {
  const auto steps = random_ints(n, seed, -8, 8);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(steps[i]) / 8.0f + offset;
  return v;
}

// One shape's operands on the grid (the bias offset by 1/128), and its name in failure messages.
struct Operands {
  std::vector<float> x, w, bias;
  std::string what;
  Operands(LinearShape s, DType dt, uint64_t& seed)
      : x(grid_floats(std::size_t(s.rows) * s.k, ++seed)),
        w(grid_floats(std::size_t(s.n) * s.k, ++seed)),
        bias(grid_floats(s.n, ++seed, 1.0f / 128)),
        what(label(dt) + " " + std::to_string(s.rows) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n)) {}
};

TEST_F(GpuKernels, LinearBiasReluForwardMatchesCpu) {
  uint64_t seed = 9700;
  const std::vector<LinearShape> shapes = {{1, 8, 1},      {5, 3, 7},         {77, 40, 129},
                                           {256, 64, 384}, {1027, 512, 2048}, {2048, 512, 2048}};
  for (DType dt : dtypes())
    for (LinearShape s : shapes) {
      const std::size_t count = std::size_t(s.rows) * s.n;
      const Operands op(s, dt, seed);
      const auto& [x, w, bias, what] = op;
      const auto dy = quantize(random_floats(count, ++seed), dt);
      std::vector<float> ref_y(count), ref_dx(count), ref_db = random_floats(s.n, ++seed);
      DeviceBuffer dx(gpu(), dt, x), dw(gpu(), dt, w), dbias(gpu(), dt, bias), ddy(gpu(), dt, dy), y(gpu(), dt, count),
          grad_x(gpu(), dt, count), db(gpu(), DType::f32, ref_db);
      cpu.linear_bias_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, BiasActivation::relu,
                              ref_y.data());
      y.poison();
      gpu().linear_bias_forward(dt, dx.get(), dw.get(), dbias.get(), s.rows, s.k, s.n, BiasActivation::relu, y.get());
      const auto got_y = y.download();
      EXPECT_TRUE(within(got_y, ref_y, bound_for(dt, std::sqrt(double(s.k))))) << what;

      // The layer's backward over the output: the same outputs open on both sides, so the same gradient.
      cpu.bias_activation_dropout_backward(DType::f32, ref_y.data(), nullptr, dy.data(), s.rows, s.n,
                                           Activation::relu, Dropout{}, ref_dx.data(), ref_db.data());
      grad_x.poison();
      gpu().bias_activation_dropout_backward(dt, y.get(), nullptr, ddy.get(), s.rows, s.n, Activation::relu,
                                             Dropout{}, grad_x.get(), db.f32());
      EXPECT_EQ(grad_x.download(), quantize(ref_dx, dt)) << what << ": relu' read off the output";
      EXPECT_TRUE(within(db.download(), ref_db, bound_for(dt, std::sqrt(double(s.rows))))) << what << " bias grad";
    }
}

// One shape's forward with a given activation on the GPU (in dt) and on the CPU (fp32): outputs and reference.
struct ForwardPair {
  std::vector<float> got, ref;
  std::string what;
};
ForwardPair forward_on_both(Backend& gpu, Backend& cpu, LinearShape s, DType dt, BiasActivation act, uint64_t& seed) {
  const std::size_t count = std::size_t(s.rows) * s.n;
  const Operands op(s, dt, seed);
  const auto& [x, w, bias, what] = op;
  std::vector<float> ref_y(count);
  DeviceBuffer dx(gpu, dt, x), dw(gpu, dt, w), dbias(gpu, dt, bias), y(gpu, dt, count);
  cpu.linear_bias_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, act, ref_y.data());
  y.poison();
  gpu.linear_bias_forward(dt, dx.get(), dw.get(), dbias.get(), s.rows, s.k, s.n, act, y.get());
  return {y.download(), ref_y, what};
}

// The bias-only epilogue, as the output layer (vocabulary-wide n) and decoding's query projection use it.
TEST_F(GpuKernels, LinearBiasForwardWithoutReluMatchesCpu) {
  uint64_t seed = 9800;
  const std::vector<LinearShape> shapes = {{1, 8, 1}, {5, 3, 7}, {77, 40, 129}, {512, 512, 512}, {96, 512, 32000}};
  for (DType dt : dtypes())
    for (LinearShape s : shapes) {
      const auto [got_y, ref_y, what] = forward_on_both(gpu(), cpu, s, dt, BiasActivation::none, seed);
      EXPECT_TRUE(within(got_y, ref_y, bound_for(dt, std::sqrt(double(s.k))))) << what;
      const auto negative = std::count_if(got_y.begin(), got_y.end(), [](float v) { return v < 0.0f; });
      if (got_y.size() > 100) EXPECT_GT(negative, 0) << what << ": no ReLU, so negative outputs stay";
    }
}

// The GELU epilogue (decoding's feed-forward blocks with GELU, GPT-2's): the tanh approximation, as the CPU's
// bias_activation_dropout_forward computes it, applied to the fp32 accumulator. Shapes: odd ones, GPT-2 small's and
// medium's first feed-forward layer at decoding's 128 rows.
TEST_F(GpuKernels, LinearBiasGeluForwardMatchesCpu) {
  uint64_t seed = 9850;
  const std::vector<LinearShape> shapes = {{1, 8, 1}, {5, 3, 7}, {77, 40, 129}, {128, 768, 3072}, {128, 1024, 4096}};
  for (DType dt : dtypes())
    for (LinearShape s : shapes) {
      const auto [got_y, ref_y, what] = forward_on_both(gpu(), cpu, s, dt, BiasActivation::gelu, seed);
      EXPECT_TRUE(within(got_y, ref_y, bound_for(dt, std::sqrt(double(s.k))))) << what;
      // GELU's negative lobe (down to about -0.17) stays; a ReLU or no activation would fail one of these.
      const auto lobe = std::count_if(got_y.begin(), got_y.end(), [](float v) { return v < -0.01f && v > -0.2f; });
      const auto below = std::count_if(got_y.begin(), got_y.end(), [](float v) { return v < -0.2f; });
      if (got_y.size() > 100) {
        EXPECT_GT(lobe, 0) << what << ": no output in GELU's negative lobe";
        EXPECT_EQ(below, 0) << what << ": outputs below GELU's minimum";
      }
    }
}

// Output rows ld apart (decoding's logits padded to 16-byte rows, written as an aligned product and a narrow one
// beside it): the CPU's values in the n columns, the padding untouched.
TEST_F(GpuKernels, LinearBiasForwardWritesRowsLdApart) {
  uint64_t seed = 9900;
  struct Case {
    LinearShape s;
    int ld, column;  // y's first column within the padded rows
  };
  const std::vector<Case> cases = {{{77, 40, 128}, 136, 0}, {{128, 64, 2000}, 2008, 0}, {{128, 64, 1}, 2008, 2000},
                                   {{9, 24, 5}, 13, 3}};
  for (DType dt : dtypes())
    for (const Case& c : cases) {
      const LinearShape s = c.s;
      const Operands op(s, dt, seed);
      const auto& [x, w, bias, what] = op;
      const float kPad = 7.0f;  // exact in every dtype, never an output on this grid's bias offset
      const std::size_t total = std::size_t(s.rows) * c.ld;
      std::vector<float> ref_y(total, kPad);
      cpu.linear_bias_forward(DType::f32, x.data(), w.data(), bias.data(), s.rows, s.k, s.n, BiasActivation::none,
                              ref_y.data() + c.column, c.ld);
      DeviceBuffer dx(gpu(), dt, x), dw(gpu(), dt, w), dbias(gpu(), dt, bias),
          y(gpu(), dt, std::vector<float>(total, kPad));
      gpu().linear_bias_forward(dt, dx.get(), dw.get(), dbias.get(), s.rows, s.k, s.n, BiasActivation::none,
                                static_cast<char*>(y.get()) + c.column * dtype_size(dt), c.ld);
      const auto got_y = y.download();
      std::vector<float> got_cells, ref_cells;
      for (int r = 0; r < s.rows; ++r)
        for (int v = 0; v < c.ld; ++v) {
          const std::size_t at = std::size_t(r) * c.ld + v;
          if (v >= c.column && v < c.column + s.n) {
            got_cells.push_back(got_y[at]);
            ref_cells.push_back(ref_y[at]);
          } else {
            ASSERT_EQ(got_y[at], kPad) << what << " ld " << c.ld << ": padding written at row " << r << " col " << v;
          }
        }
      EXPECT_TRUE(within(got_cells, ref_cells, bound_for(dt, std::sqrt(double(s.k))))) << what << " ld " << c.ld;
    }
}

TEST_F(GpuKernels, LinearBiasForwardRejectsBadShapes) {
  DeviceBuffer a(gpu(), DType::f32, 64);
  EXPECT_THROW(
      gpu().linear_bias_forward(DType::f32, a.get(), a.get(), a.get(), -1, 2, 4, BiasActivation::relu, a.get()),
      lseq::Error);
  EXPECT_THROW(gpu().linear_bias_forward(DType::f32, a.get(), a.get(), a.get(), 2, 0, 4, BiasActivation::none, a.get()),
               lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

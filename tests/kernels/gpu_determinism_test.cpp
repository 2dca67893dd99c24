// The device's reductions give the same bits run after run (two-stage sums in a fixed order, the sorted embedding
// scatter): bias, LayerNorm and merge_heads parameter gradients, the embedding gradient, grad_norm, reduce_sum.
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

// Runs `op` into a fresh copy of `start` twice and expects identical results.
template <typename Op>
void expect_reproducible(Backend& gpu, const std::vector<float>& start, Op op, const std::string& what) {
  DeviceBuffer first(gpu, DType::f32, start), second(gpu, DType::f32, start);
  op(first.f32());
  op(second.f32());
  const auto a = first.download(), b = second.download();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(float_bits(a[i]), float_bits(b[i])) << what << " element " << i;
  EXPECT_NE(a, start) << what << ": nothing was accumulated";
}

TEST_F(GpuKernels, ReductionsAreReproducible) {
  const int rows = 4099, cols = 515;  // odd sizes: partial tiles and chunks
  const std::size_t n = std::size_t(rows) * cols;
  for (DType dt : dtypes()) {
    const auto x = quantize(random_floats(n, 12000, -2, 2), dt), dy = quantize(random_floats(n, 12001), dt);
    const auto gamma = quantize(random_floats(cols, 12002), dt), beta = quantize(random_floats(cols, 12003), dt);
    DeviceBuffer dx(gpu(), dt, x), ddy(gpu(), dt, dy), dg(gpu(), dt, gamma), db(gpu(), dt, beta), y(gpu(), dt, n),
        out(gpu(), dt, n), mean(gpu(), DType::f32, rows), rstd(gpu(), DType::f32, rows);
    gpu().layer_norm_forward(dt, dx.get(), dg.get(), db.get(), rows, cols, 1e-5f, y.get(), mean.f32(), rstd.f32());
    const auto start = random_floats(cols, 12004);
    const std::string what = label(dt);
    expect_reproducible(
        gpu(), start, [&](float* acc) { gpu().bias_grad(dt, ddy.get(), rows, cols, acc); }, what + " bias_grad");
    expect_reproducible(
        gpu(), start,
        [&](float* acc) {
          gpu().layer_norm_backward(dt, dx.get(), dg.get(), mean.f32(), rstd.f32(), ddy.get(), rows, cols, out.get(),
                                    acc, nullptr, false);
        },
        what + " layer_norm dgamma");
    expect_reproducible(
        gpu(), start,
        [&](float* acc) {
          gpu().layer_norm_backward_from_output(dt, y.get(), dg.get(), db.get(), rstd.f32(), ddy.get(), rows, cols,
                                                out.get(), acc, nullptr);
        },
        what + " layer_norm dgamma from the output");
    expect_reproducible(
        gpu(), start,
        [&](float* acc) {
          gpu().bias_activation_dropout_backward(dt, dx.get(), db.get(), ddy.get(), rows, cols, Activation::gelu,
                                                 Dropout{0.1f, 5}, out.get(), acc);
        },
        what + " bias_gelu_dropout dbias");
    // merge_heads over 4099 tokens of 5 heads x 103 dims
    expect_reproducible(
        gpu(), start, [&](float* acc) { gpu().merge_heads(dt, dx.get(), 1, rows, rows, 5, 103, 1, out.get(), acc); },
        what + " merge_heads dbias");
    // embedding: 4099 tokens of a 7-word vocabulary, 515 columns
    const auto tokens = random_ints(rows, 12005, 0, 6);
    DeviceBuffer dtok(gpu(), tokens);
    expect_reproducible(
        gpu(), random_floats(std::size_t(7) * cols, 12006),
        [&](float* acc) {
          gpu().embedding_backward(dt, dtok.i32(), 1, rows, cols, 2.0f, Dropout{0.1f, 6}, ddy.get(), acc, nullptr);
        },
        what + " embedding table");
  }
  const auto g = random_floats(std::size_t(5) << 20, 12007);
  DeviceBuffer dg(gpu(), DType::f32, g);
  expect_reproducible(
      gpu(), {0.5f, 0.5f}, [&](float* out) { gpu().grad_norm(dg.f32(), g.size(), 0.5f, 1.0f, out, out + 1); },
      "grad_norm");
  expect_reproducible(
      gpu(), {0.5f}, [&](float* out) { gpu().reduce_sum(dg.f32(), g.size(), out, true); }, "reduce_sum");
}

}  // namespace
}  // namespace lseq::kernels::test

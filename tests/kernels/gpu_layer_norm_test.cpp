// LayerNorm on the device against the CPU backend: outputs and saved statistics, the fused residual + LayerNorm,
// then the backward (dx, and the gamma/beta gradients accumulated) from the CPU's statistics; one column, odd
// widths, wide rows; dx aliasing dy.
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

// 520 and 768: warp-per-row rows whose last lanes hold no pack.
const std::vector<MatrixShape> kLayerNormShapes = {{1, 1},    {3, 7},    {1, 512},     {64, 512},
                                                   {37, 520}, {77, 768}, {1000, 1024}, {2, 5000}};
// The forwards also at 4000 rows: more than one wave of the warp kernel's early-gain form (20 warps an SM), so the
// gains are loaded at the output, as in training; the shapes above take the early form.
std::vector<MatrixShape> forward_shapes() {
  std::vector<MatrixShape> shapes = kLayerNormShapes;
  shapes.push_back({4000, 512});
  shapes.push_back({4000, 1024});
  return shapes;
}

TEST_F(GpuKernels, LayerNormForwardMatchesCpu) {
  uint64_t seed = 9500;
  for (DType dt : dtypes())
    for (auto s : forward_shapes()) {
      const std::size_t n = std::size_t(s.rows) * s.cols;
      const auto x = quantize(random_floats(n, ++seed, -2, 3), dt);
      const auto gamma = quantize(random_floats(s.cols, ++seed, 0.5f, 1.5f), dt);
      const auto beta = quantize(random_floats(s.cols, ++seed), dt);
      std::vector<float> ref(n), ref_mean(s.rows), ref_rstd(s.rows);
      cpu.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, 1e-5f, ref.data(),
                             ref_mean.data(), ref_rstd.data());
      DeviceBuffer dx(gpu(), dt, x), dg(gpu(), dt, gamma), db(gpu(), dt, beta), y(gpu(), dt, n),
          mean(gpu(), DType::f32, s.rows), rstd(gpu(), DType::f32, s.rows);
      y.poison();
      mean.poison();
      rstd.poison();
      gpu().layer_norm_forward(dt, dx.get(), dg.get(), db.get(), s.rows, s.cols, 1e-5f, y.get(), mean.f32(),
                               rstd.f32());
      const std::string what = label(dt) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
      // cols == 1: x - mean is exactly 0, rstd = 1/sqrt(eps) ~ 316
      EXPECT_TRUE(within(y.download(), ref, bound_for(dt, 10.0))) << what << " y";
      EXPECT_TRUE(within(mean.download(), ref_mean, Bound{1e-5, 1e-6})) << what << " mean";
      EXPECT_TRUE(within(rstd.download(), ref_rstd, Bound{1e-5, 1e-6})) << what << " rstd";
      // statistics are optional
      y.poison();
      gpu().layer_norm_forward(dt, dx.get(), dg.get(), db.get(), s.rows, s.cols, 1e-5f, y.get(), nullptr, nullptr);
      EXPECT_TRUE(within(y.download(), ref, bound_for(dt, 10.0))) << what << " y without statistics";
    }
}

// The fused residual + LayerNorm (warp kernel where the row fits, the two ops in sequence elsewhere): against the
// CPU with and without dropout, and bit for bit equal to the device's own two ops (the fused kernel rounds the sum
// to the dtype before normalising, as the sequence does), with and without the sum and statistics.
TEST_F(GpuKernels, ResidualLayerNormForwardMatchesCpuAndTheTwoOps) {
  uint64_t seed = 9550;
  for (DType dt : dtypes())
    for (auto s : forward_shapes())
      for (float p : {0.0f, 0.1f}) {
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto x = quantize(random_floats(n, ++seed, -2, 3), dt);
        const auto residual = quantize(random_floats(n, ++seed, -1, 2), dt);
        const auto bias = quantize(random_floats(s.cols, ++seed), dt);
        const auto gamma = quantize(random_floats(s.cols, ++seed, 0.5f, 1.5f), dt);
        const auto beta = quantize(random_floats(s.cols, ++seed), dt);
        const Dropout drop{p, dropout_key(11, 5, 4)};
        std::vector<float> ref_sum(n), ref(n), ref_mean(s.rows), ref_rstd(s.rows);
        cpu.residual_layer_norm_forward(DType::f32, x.data(), bias.data(), residual.data(), s.rows, s.cols, drop,
                                        gamma.data(), beta.data(), 1e-5f, ref_sum.data(), ref.data(), ref_mean.data(),
                                        ref_rstd.data());
        DeviceBuffer dx(gpu(), dt, x), dres(gpu(), dt, residual), dbias(gpu(), dt, bias), dg(gpu(), dt, gamma),
            db(gpu(), dt, beta), sum(gpu(), dt, n), y(gpu(), dt, n), mean(gpu(), DType::f32, s.rows),
            rstd(gpu(), DType::f32, s.rows), two_sum(gpu(), dt, n), two_y(gpu(), dt, n),
            two_mean(gpu(), DType::f32, s.rows), two_rstd(gpu(), DType::f32, s.rows);
        for (DeviceBuffer* b : {&sum, &y, &mean, &rstd, &two_y}) b->poison();
        gpu().residual_layer_norm_forward(dt, dx.get(), dbias.get(), dres.get(), s.rows, s.cols, drop, dg.get(),
                                          db.get(), 1e-5f, sum.get(), y.get(), mean.f32(), rstd.f32());
        const std::string what = label(dt) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 " p=" + std::to_string(p);
        const auto got_sum = sum.download(), got_y = y.download();
        EXPECT_TRUE(within(got_sum, ref_sum, bound_for(dt, 4.0))) << what << " sum";
        EXPECT_TRUE(within(got_y, ref, bound_for(dt, 10.0))) << what << " y";
        EXPECT_TRUE(within(mean.download(), ref_mean, bound_for(dt, 1.0))) << what << " mean";
        EXPECT_TRUE(within(rstd.download(), ref_rstd, bound_for(dt, 10.0))) << what << " rstd";

        gpu().bias_dropout_residual_forward(dt, dx.get(), dbias.get(), dres.get(), s.rows, s.cols, drop,
                                            two_sum.get());
        gpu().layer_norm_forward(dt, two_sum.get(), dg.get(), db.get(), s.rows, s.cols, 1e-5f, two_y.get(),
                                 two_mean.f32(), two_rstd.f32());
        EXPECT_EQ(got_sum, two_sum.download()) << what << ": the sum differs from bias_dropout_residual_forward's";
        EXPECT_EQ(got_y, two_y.download()) << what << ": y differs from the two ops'";
        EXPECT_EQ(mean.download(), two_mean.download()) << what;
        EXPECT_EQ(rstd.download(), two_rstd.download()) << what;

        y.poison();  // decoding: no sum, no statistics
        gpu().residual_layer_norm_forward(dt, dx.get(), dbias.get(), dres.get(), s.rows, s.cols, drop, dg.get(),
                                          db.get(), 1e-5f, nullptr, y.get(), nullptr, nullptr);
        EXPECT_EQ(y.download(), got_y) << what << " without the sum";

        y.poison();  // a pre-norm decoding step: the sum written over the residual stream it reads
        gpu().residual_layer_norm_forward(dt, dx.get(), dbias.get(), dres.get(), s.rows, s.cols, drop, dg.get(),
                                          db.get(), 1e-5f, dres.get(), y.get(), nullptr, nullptr);
        EXPECT_EQ(dres.download(), got_sum) << what << " sum in place";
        EXPECT_EQ(y.download(), got_y) << what << " y with the sum in place";
      }
}

// A backward's dx (in `dx`) and its accumulated gamma/beta gradients against the CPU's.
void expect_backward_matches(DType dt, MatrixShape s, const std::string& mode, DeviceBuffer& dx, DeviceBuffer& dgamma,
                             DeviceBuffer& dbeta, const std::vector<float>& ref_dx, const std::vector<float>& ref_dg,
                             const std::vector<float>& ref_db) {
  const std::string what = label(dt) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + mode;
  // dx of one column is rstd * (g - g - 0) = 0 up to rounding; bounds relative to rstd there.
  const double magnitude = s.cols == 1 ? 1e3 : 10.0;
  EXPECT_TRUE(within(dx.download(), ref_dx, bound_for(dt, magnitude))) << what << " dx";
  const Bound sums{1e-5, 1e-6 * s.rows + 1e-5};
  EXPECT_TRUE(within(dgamma.download(), ref_dg, sums)) << what << " dgamma";
  EXPECT_TRUE(within(dbeta.download(), ref_db, sums)) << what << " dbeta";
}

// Into a buffer of its own, in place over dy, and added to a buffer's values (accumulate_dx).
TEST_F(GpuKernels, LayerNormBackwardMatchesCpu) {
  uint64_t seed = 9600;
  enum Mode { own_buffer, in_place, accumulated };
  for (DType dt : dtypes())
    for (auto s : kLayerNormShapes)
      for (Mode mode : {own_buffer, in_place, accumulated}) {
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto x = quantize(random_floats(n, ++seed, -2, 3), dt);
        const auto gamma = quantize(random_floats(s.cols, ++seed, 0.5f, 1.5f), dt);
        const auto beta = quantize(random_floats(s.cols, ++seed), dt);
        const auto dy = quantize(random_floats(n, ++seed), dt);
        std::vector<float> y(n), mean(s.rows), rstd(s.rows), ref_dx(n);
        cpu.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, 1e-5f, y.data(),
                               mean.data(), rstd.data());
        auto ref_dg = random_floats(s.cols, ++seed), ref_db = random_floats(s.cols, ++seed);
        DeviceBuffer dx(gpu(), dt, x), dg(gpu(), dt, gamma), dmean(gpu(), DType::f32, mean),
            drstd(gpu(), DType::f32, rstd), ddy(gpu(), dt, dy), dgrad(gpu(), dt, n), dgamma(gpu(), DType::f32, ref_dg),
            dbeta(gpu(), DType::f32, ref_db);
        const bool accumulate = mode == accumulated;
        if (accumulate) {
          ref_dx = quantize(random_floats(n, ++seed), dt);
          dgrad.upload(ref_dx);
        } else {
          dgrad.poison();
        }
        cpu.layer_norm_backward(DType::f32, x.data(), gamma.data(), mean.data(), rstd.data(), dy.data(), s.rows, s.cols,
                                ref_dx.data(), ref_dg.data(), ref_db.data(), accumulate);
        void* out = mode == in_place ? ddy.get() : dgrad.get();
        gpu().layer_norm_backward(dt, dx.get(), dg.get(), dmean.f32(), drstd.f32(), ddy.get(), s.rows, s.cols, out,
                                  dgamma.f32(), dbeta.f32(), accumulate);
        const char* name = mode == own_buffer ? "own buffer" : mode == in_place ? "in place" : "accumulated";
        expect_backward_matches(dt, s, name, mode == in_place ? ddy : dgrad, dgamma, dbeta, ref_dx, ref_dg, ref_db);
      }
}

// The backward from the output (xhat = (y - beta) / gamma) against the CPU's from the same rounded y, gains of
// both signs; the warp kernels and the block-per-row fallback (odd widths), dx aliasing dy.
TEST_F(GpuKernels, LayerNormBackwardFromOutputMatchesCpu) {
  uint64_t seed = 9700;
  for (DType dt : dtypes())
    for (auto s : kLayerNormShapes)
      for (bool in_place : {false, true}) {
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto x = random_floats(n, ++seed, -2, 3);
        auto gamma = random_floats(s.cols, ++seed, 0.5f, 1.5f);
        for (int c = 1; c < s.cols; c += 3) gamma[c] = -gamma[c];
        gamma = quantize(gamma, dt);
        const auto beta = quantize(random_floats(s.cols, ++seed), dt);
        const auto dy = quantize(random_floats(n, ++seed), dt);
        std::vector<float> y(n), rstd(s.rows), ref_dx(n);
        cpu.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), s.rows, s.cols, 1e-5f, y.data(),
                               nullptr, rstd.data());
        y = quantize(y, dt);  // as the forward stored it
        auto ref_dg = random_floats(s.cols, ++seed), ref_db = random_floats(s.cols, ++seed);
        DeviceBuffer dyv(gpu(), dt, y), dg(gpu(), dt, gamma), db(gpu(), dt, beta), drstd(gpu(), DType::f32, rstd),
            ddy(gpu(), dt, dy), dgrad(gpu(), dt, n), dgamma(gpu(), DType::f32, ref_dg),
            dbeta(gpu(), DType::f32, ref_db);
        cpu.layer_norm_backward_from_output(DType::f32, y.data(), gamma.data(), beta.data(), rstd.data(), dy.data(),
                                            s.rows, s.cols, ref_dx.data(), ref_dg.data(), ref_db.data());
        dgrad.poison();
        void* out = in_place ? ddy.get() : dgrad.get();
        gpu().layer_norm_backward_from_output(dt, dyv.get(), dg.get(), db.get(), drstd.f32(), ddy.get(), s.rows,
                                              s.cols, out, dgamma.f32(), dbeta.f32());
        expect_backward_matches(dt, s, in_place ? "in place" : "own buffer", in_place ? ddy : dgrad, dgamma, dbeta,
                                ref_dx, ref_dg, ref_db);
      }
}

// The post-norm block's backward start in one op against the device's two ops (layer_norm_backward_from_output,
// then bias_dropout_residual_backward): ds and d_o bit for bit, the gamma/beta/bias gradients within the rounding
// of differently ordered sums; with and without dropout, on the warp kernels and the fallback widths.
TEST_F(GpuKernels, ResidualLayerNormBackwardEqualsTheTwoOps) {
  uint64_t seed = 9800;
  for (DType dt : dtypes())
    for (auto s : kLayerNormShapes)
      for (float p : {0.0f, 0.1f}) {
        const std::size_t n = std::size_t(s.rows) * s.cols;
        const auto y = quantize(random_floats(n, ++seed, -2, 3), dt);
        const auto gamma = quantize(random_floats(s.cols, ++seed, 0.5f, 1.5f), dt);
        const auto beta = quantize(random_floats(s.cols, ++seed), dt);
        const auto dy = quantize(random_floats(n, ++seed), dt);
        const auto rstd = random_floats(s.rows, ++seed, 0.5f, 2.0f);
        const auto start = random_floats(s.cols, ++seed);
        const Dropout drop{p, dropout_key(3, 9, 2)};
        DeviceBuffer dyv(gpu(), dt, y), dg(gpu(), dt, gamma), db(gpu(), dt, beta), drstd(gpu(), DType::f32, rstd),
            ddy(gpu(), dt, dy), ds(gpu(), dt, n), d_o(gpu(), dt, n), two_ds(gpu(), dt, n), two_d_o(gpu(), dt, n);
        DeviceBuffer dgamma(gpu(), DType::f32, start), dbeta(gpu(), DType::f32, start), dbias(gpu(), DType::f32, start),
            two_dgamma(gpu(), DType::f32, start), two_dbeta(gpu(), DType::f32, start),
            two_dbias(gpu(), DType::f32, start);
        for (DeviceBuffer* b : {&ds, &d_o, &two_ds, &two_d_o}) b->poison();
        gpu().residual_layer_norm_backward(dt, dyv.get(), dg.get(), db.get(), drstd.f32(), ddy.get(), s.rows, s.cols,
                                           drop, ds.get(), d_o.get(), dgamma.f32(), dbeta.f32(), dbias.f32());
        gpu().layer_norm_backward_from_output(dt, dyv.get(), dg.get(), db.get(), drstd.f32(), ddy.get(), s.rows,
                                              s.cols, two_ds.get(), two_dgamma.f32(), two_dbeta.f32());
        gpu().bias_dropout_residual_backward(dt, two_ds.get(), s.rows, s.cols, drop, two_d_o.get(), two_dbias.f32());
        const std::string what = label(dt) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                                 " p=" + std::to_string(p);
        EXPECT_EQ(ds.download(), two_ds.download()) << what << ": ds";
        EXPECT_EQ(d_o.download(), two_d_o.download()) << what << ": d_o";
        const Bound sums{1e-5, 1e-5 * s.rows + 1e-5};
        EXPECT_TRUE(within(dgamma.download(), two_dgamma.download(), sums)) << what << " dgamma";
        EXPECT_TRUE(within(dbeta.download(), two_dbeta.download(), sums)) << what << " dbeta";
        EXPECT_TRUE(within(dbias.download(), two_dbias.download(), sums)) << what << " dbias";
        EXPECT_NE(dbias.download(), start) << what << ": no bias gradient accumulated";
      }
}

}  // namespace
}  // namespace lseq::kernels::test

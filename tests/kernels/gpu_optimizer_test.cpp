// Gradient norm and AdamW on the device against the CPU backend: norm and clipping factor as device scalars
// (NaN on a non-finite norm), Adam's step with the factor read on the device, the working copy written in every
// type, and the skipped step when the factor is not finite.
#include <cmath>
#include <limits>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

const std::vector<std::size_t> kAdamSizes = {1, 1001, (std::size_t(1) << 20) + 3};

TEST_F(GpuKernels, GradNormAndFactorMatchCpu) {
  uint64_t seed = 11000;
  for (std::size_t n : {std::size_t(1), std::size_t(1001), std::size_t(3) << 20})
    for (float max_norm : {0.0f, 1.0f, 1e9f}) {
      const auto g = random_floats(n, ++seed, -0.5f, 0.5f);
      float ref_norm = 0, ref_factor = 0;
      cpu.grad_norm(g.data(), n, 0.25f, max_norm, &ref_norm, &ref_factor);
      DeviceBuffer dg(gpu(), DType::f32, g), norm(gpu(), DType::f32, 1), factor(gpu(), DType::f32, 1);
      norm.poison();
      factor.poison();
      gpu().grad_norm(dg.f32(), n, 0.25f, max_norm, norm.f32(), factor.f32());
      EXPECT_NEAR(norm.download()[0], ref_norm, 1e-6 * ref_norm) << "n " << n << " max_norm " << max_norm;
      EXPECT_NEAR(factor.download()[0], ref_factor, 1e-6 * ref_factor) << "n " << n << " max_norm " << max_norm;
    }
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto g = random_floats(5000, 11100);
    g[4321] = bad;
    DeviceBuffer dg(gpu(), DType::f32, g), norm(gpu(), DType::f32, 1), factor(gpu(), DType::f32, 1);
    gpu().grad_norm(dg.f32(), g.size(), 1.0f, 1.0f, norm.f32(), factor.f32());
    EXPECT_FALSE(std::isfinite(norm.download()[0]));
    EXPECT_TRUE(std::isnan(factor.download()[0])) << "bad value " << bad;
  }
}

TEST_F(GpuKernels, AdamUpdateMatchesCpuAndWritesTheWorkingCopy) {
  uint64_t seed = 11200;
  AdamArgs args;
  args.lr = 3e-4f;
  args.weight_decay = 0.01f;
  args.bias_correction1 = 1.0f - std::pow(0.9f, 7.0f);
  args.bias_correction2 = 1.0f - std::pow(0.98f, 7.0f);
  for (DType working_dt : dtypes())
    for (std::size_t n : kAdamSizes)
      for (bool with_factor : {true, false}) {
        auto params = random_floats(n, ++seed), grads = random_floats(n, ++seed),
             m = random_floats(n, ++seed, -0.1f, 0.1f), v = random_floats(n, ++seed, 0.0f, 0.01f);
        const float factor = 0.7f;
        DeviceBuffer dp(gpu(), DType::f32, params), dg(gpu(), DType::f32, grads), dm(gpu(), DType::f32, m),
            dv(gpu(), DType::f32, v), df(gpu(), DType::f32, std::vector<float>{factor}), work(gpu(), working_dt, n);
        work.poison();
        cpu.adam_update(params.data(), grads.data(), m.data(), v.data(), n, args, with_factor ? &factor : nullptr,
                        DType::f32, nullptr);
        gpu().adam_update(dp.f32(), dg.f32(), dm.f32(), dv.f32(), n, args, with_factor ? df.f32() : nullptr, working_dt,
                          work.get());
        const std::string what = std::string("working ") + dtype_name(working_dt) + " n " + std::to_string(n);
        // Same operations in the same order, each rounded: equal up to the last bit of a library sqrt/division.
        const auto got = dp.download();
        EXPECT_TRUE(within(got, params, Bound{3e-7, 1e-12})) << what << " params";
        EXPECT_TRUE(within(dm.download(), m, Bound{3e-7, 1e-12})) << what << " m";
        EXPECT_TRUE(within(dv.download(), v, Bound{3e-7, 1e-12})) << what << " v";
        // The working copy is the device's own parameters rounded like the CPU's cast.
        EXPECT_EQ(work.download(), quantize(got, working_dt)) << what << " working copy";
      }
}

TEST_F(GpuKernels, AdamSkipsTheStepWhenTheFactorIsNotFinite) {
  const std::size_t n = 777;
  const auto params = random_floats(n, 11300), grads = random_floats(n, 11301), m = random_floats(n, 11302),
             v = random_floats(n, 11303, 0.0f, 0.01f);
  const auto work_before = random_floats(n, 11304);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    DeviceBuffer dp(gpu(), DType::f32, params), dg(gpu(), DType::f32, grads), dm(gpu(), DType::f32, m),
        dv(gpu(), DType::f32, v), df(gpu(), DType::f32, std::vector<float>{bad}), work(gpu(), DType::f32, work_before);
    AdamArgs args;
    args.lr = 1e-3f;
    gpu().adam_update(dp.f32(), dg.f32(), dm.f32(), dv.f32(), n, args, df.f32(), DType::f32, work.get());
    EXPECT_EQ(dp.download(), params);
    EXPECT_EQ(dm.download(), m);
    EXPECT_EQ(dv.download(), v);
    EXPECT_EQ(work.download(), work_before);
  }
}

}  // namespace
}  // namespace lseq::kernels::test

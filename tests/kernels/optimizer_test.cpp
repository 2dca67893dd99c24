// grad_norm (clipping, pre-scale, non-finite -> NaN factor) and AdamW against a double reference over several
// steps, the skipped NaN step, and the working copy written in the same pass.
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

TEST_F(CpuKernels, GradNormAndClippingFactorMatchReference) {
  for (std::size_t n : {1u, 1001u, 300007u}) {
    const auto g = random_floats(n, 2000 + n);
    const float pre_scale = 0.25f;
    double sq = 0;
    for (float x : g) sq += (pre_scale * double(x)) * (pre_scale * double(x));
    const double ref_norm = std::sqrt(sq);
    for (float max_norm : {0.0f, float(ref_norm * 0.5), float(ref_norm * 2)}) {
      float norm = std::numeric_limits<float>::quiet_NaN(), factor = norm;
      backend.grad_norm(g.data(), n, pre_scale, max_norm, &norm, &factor);
      EXPECT_NEAR(norm, ref_norm, 1e-6 * ref_norm);
      const double clip = max_norm > 0 && ref_norm > max_norm ? max_norm / ref_norm : 1.0;
      EXPECT_NEAR(factor, pre_scale * clip, 1e-6 * pre_scale) << "n " << n << " max_norm " << max_norm;
    }
  }
}

TEST_F(CpuKernels, GradNormOfNonFiniteGradientsGivesNaNFactor) {
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    auto g = random_floats(5000, 2100);
    g[1234] = bad;
    float norm = 0, factor = 0;
    backend.grad_norm(g.data(), g.size(), 1.0f, 1.0f, &norm, &factor);
    EXPECT_FALSE(std::isfinite(norm));
    EXPECT_TRUE(std::isnan(factor));
  }
}

TEST_F(CpuKernels, GradNormIsTheSameOnOneAndTwoThreads) {
  CpuBackend one(1);
  const auto g = random_floats(700001, 2200);
  float n1, f1, n2, f2;
  one.grad_norm(g.data(), g.size(), 1.0f, 0.5f, &n1, &f1);
  backend.grad_norm(g.data(), g.size(), 1.0f, 0.5f, &n2, &f2);
  EXPECT_EQ(n1, n2);
  EXPECT_EQ(f1, f2);
}

TEST_F(CpuKernels, AdamMatchesDoubleReferenceOverSeveralSteps) {
  for (std::size_t n : {1u, 37u, 100003u}) {
    AdamArgs args;
    args.lr = 3e-3f, args.beta1 = 0.9f, args.beta2 = 0.98f, args.eps = 1e-8f, args.weight_decay = 0.01f;
    auto params = random_floats(n, 2300 + n);
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    std::vector<double> rp(params.begin(), params.end()), rm(n, 0.0), rv(n, 0.0);
    std::vector<uint16_t> working(n, 0xDEAD);
    for (int step = 1; step <= 4; ++step) {
      const auto grads = random_floats(n, 2400 + step, -2, 2);
      const float factor = 0.5f + 0.1f * step;
      args.bias_correction1 = 1 - std::pow(args.beta1, step);
      args.bias_correction2 = 1 - std::pow(args.beta2, step);
      backend.adam_update(params.data(), grads.data(), m.data(), v.data(), n, args, &factor, DType::bf16,
                          working.data());
      for (std::size_t i = 0; i < n; ++i) {
        const double g = double(grads[i]) * factor;
        rm[i] = double(args.beta1) * rm[i] + (1 - double(args.beta1)) * g;
        rv[i] = double(args.beta2) * rv[i] + (1 - double(args.beta2)) * g * g;
        const double update = rm[i] / args.bias_correction1 / (std::sqrt(rv[i] / args.bias_correction2) + args.eps) +
                              double(args.weight_decay) * rp[i];
        rp[i] -= double(args.lr) * update;
      }
    }
    EXPECT_TRUE(all_close(params, rp, 1e-5, 1e-6)) << "n " << n;
    EXPECT_TRUE(all_close(m, rm, 1e-5, 1e-6)) << "n " << n;
    EXPECT_TRUE(all_close(v, rv, 1e-5, 1e-7)) << "n " << n;
    // The bf16 working copy is the rounded master copy.
    std::vector<uint16_t> expected(n);
    backend.cast(DType::f32, params.data(), DType::bf16, expected.data(), n);
    EXPECT_EQ(working, expected);
  }
}

TEST_F(CpuKernels, AdamWritesFp32AndFp16WorkingCopies) {
  const std::size_t n = 1000;
  AdamArgs args;
  args.lr = 1e-2f;
  for (DType dt : {DType::f32, DType::f16}) {
    auto params = random_floats(n, 2500);
    const auto grads = random_floats(n, 2501);
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    std::vector<uint16_t> working16(n, 0xDEAD);
    auto working32 = poisoned(n);
    const float factor = 1.0f;
    backend.adam_update(params.data(), grads.data(), m.data(), v.data(), n, args, &factor, dt,
                        dt == DType::f32 ? static_cast<void*>(working32.data()) : working16.data());
    if (dt == DType::f32) {
      EXPECT_EQ(working32, params);
    } else {
      std::vector<uint16_t> expected(n);
      backend.cast(DType::f32, params.data(), DType::f16, expected.data(), n);
      EXPECT_EQ(working16, expected);
    }
  }
}

TEST_F(CpuKernels, AdamSkipsTheStepWhenTheFactorIsNotFinite) {
  const std::size_t n = 500;
  auto g = random_floats(n, 2600);
  g[17] = std::numeric_limits<float>::infinity();
  float norm, factor;
  backend.grad_norm(g.data(), n, 1.0f, 1.0f, &norm, &factor);
  auto params = random_floats(n, 2601), m = random_floats(n, 2602), v = random_floats(n, 2603, 0, 1);
  const auto p0 = params, m0 = m, v0 = v;
  std::vector<uint16_t> working(n, 0xBEEF);
  AdamArgs args;
  args.lr = 1e-2f;
  backend.adam_update(params.data(), g.data(), m.data(), v.data(), n, args, &factor, DType::bf16, working.data());
  EXPECT_EQ(params, p0);
  EXPECT_EQ(m, m0);
  EXPECT_EQ(v, v0);
  EXPECT_EQ(working, std::vector<uint16_t>(n, 0xBEEF));
}

}  // namespace
}  // namespace lseq::kernels::test

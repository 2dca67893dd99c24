// fill, add, scale, reduce_sum and dropout against double references; dropout mask properties.
#include "kernels/dropout_rng.h"
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

TEST_F(CpuKernels, FillWritesEveryElementInEachType) {
  for (std::size_t n : {1u, 17u, 40001u}) {
    auto x = poisoned(n);
    backend.fill(DType::f32, x.data(), n, 2.5f);
    for (float v : x) ASSERT_EQ(v, 2.5f);
    std::vector<uint16_t> h(n, 0xDEAD);
    backend.fill(DType::f16, h.data(), n, -2.0f);
    for (uint16_t v : h) ASSERT_EQ(v, 0xC000);
    backend.fill(DType::bf16, h.data(), n, 1.0f);
    for (uint16_t v : h) ASSERT_EQ(v, 0x3F80);
  }
}

TEST_F(CpuKernels, AddAndScaleMatchDoubleReference) {
  for (std::size_t n : {1u, 33u, 50001u}) {
    const auto a = random_floats(n, 1 + n), b = random_floats(n, 2 + n);
    auto y = poisoned(n);
    backend.add(DType::f32, a.data(), b.data(), n, y.data());
    std::vector<double> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = double(a[i]) + b[i];
    EXPECT_TRUE(all_close(y, ref, 1e-7, 1e-7));  // one fp32 rounding
    backend.scale(DType::f32, a.data(), n, -1.75f, y.data());
    for (std::size_t i = 0; i < n; ++i) ref[i] = -1.75 * a[i];
    EXPECT_TRUE(all_close(y, ref, 1e-7, 0));
  }
}

TEST_F(CpuKernels, AddAndScaleMayWorkInPlace) {
  auto a = random_floats(1000, 3);
  const auto b = random_floats(1000, 4);
  const auto a0 = a;
  backend.add(DType::f32, a.data(), b.data(), a.size(), a.data());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], a0[i] + b[i]);
  backend.scale(DType::f32, a.data(), a.size(), 0.5f, a.data());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], 0.5f * (a0[i] + b[i]));
}

TEST_F(CpuKernels, ReduceSumOverwritesOrAccumulates) {
  for (std::size_t n : {1u, 999u, 300001u}) {
    const auto x = random_floats(n, 11 + n, 0.0f, 2.0f);
    double ref = 0;
    for (float v : x) ref += v;
    float out = std::numeric_limits<float>::quiet_NaN();
    backend.reduce_sum(x.data(), n, &out, false);
    EXPECT_NEAR(out, ref, 1e-6 * ref);  // summed in double: only the final rounding
    backend.reduce_sum(x.data(), n, &out, true);
    EXPECT_NEAR(out, 2 * ref, 2e-6 * ref);
  }
}

TEST_F(CpuKernels, EmptyInputsAreHandled) {
  float out = std::numeric_limits<float>::quiet_NaN();
  backend.reduce_sum(nullptr, 0, &out, false);
  EXPECT_EQ(out, 0.0f);
  float norm = -1, factor = -1;
  backend.grad_norm(nullptr, 0, 0.5f, 1.0f, &norm, &factor);
  EXPECT_EQ(norm, 0.0f);
  EXPECT_EQ(factor, 0.5f);
  backend.fill(DType::f32, nullptr, 0, 1.0f);
  backend.add(DType::f32, nullptr, nullptr, 0, nullptr);
  backend.dropout(DType::f32, nullptr, 0, Dropout{0.5f, 1}, nullptr);
  backend.layer_norm_forward(DType::f32, nullptr, nullptr, nullptr, 0, 8, 1e-5f, nullptr, nullptr, nullptr);
  backend.cross_entropy(DType::f32, nullptr, nullptr, nullptr, 0, 8, 0.1f, -1, 1.0f, nullptr, nullptr, nullptr);
}

TEST_F(CpuKernels, ReduceSumIsTheSameOnOneAndTwoThreads) {
  CpuBackend one(1);
  const auto x = random_floats(1000003, 5);
  float a = 0, b = 0;
  one.reduce_sum(x.data(), x.size(), &a, false);
  backend.reduce_sum(x.data(), x.size(), &b, false);
  EXPECT_EQ(a, b);
}

TEST_F(CpuKernels, DropoutKeepsAboutOneMinusPAndScalesKeptElements) {
  const std::size_t n = 200000;
  const auto x = random_floats(n, 21, 0.5f, 1.5f);  // never zero, so dropped elements are recognisable
  for (float p : {0.1f, 0.5f}) {
    auto y = poisoned(n);
    backend.dropout(DType::f32, x.data(), n, Dropout{p, 12345}, y.data());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (y[i] == 0.0f) continue;
      ++kept;
      ASSERT_NEAR(y[i], x[i] / (1.0 - p), 1e-6) << i;
    }
    const double rate = double(kept) / n;
    // binomial standard deviation is below 0.0012 here; 6 sigma
    EXPECT_NEAR(rate, 1.0 - p, 0.007) << "p=" << p;
  }
}

TEST_F(CpuKernels, DropoutMaskDependsOnlyOnKeyAndIndex) {
  const std::size_t n = 5000;
  const auto x = random_floats(n, 22, 0.5f, 1.5f);
  auto y1 = poisoned(n), y2 = poisoned(n), y3 = poisoned(n);
  backend.dropout(DType::f32, x.data(), n, Dropout{0.3f, dropout_key(1, 7, 2)}, y1.data());
  backend.dropout(DType::f32, x.data(), n, Dropout{0.3f, dropout_key(1, 7, 2)}, y2.data());
  backend.dropout(DType::f32, x.data(), n, Dropout{0.3f, dropout_key(1, 7, 3)}, y3.data());
  EXPECT_EQ(y1, y2);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) differ += (y1[i] == 0.0f) != (y3[i] == 0.0f);
  EXPECT_GT(differ, n / 5);  // independent masks disagree on 2 p (1-p) = 42% of elements
  // The mask of element i is dropout_multiplier(key, i, p), whatever the array length.
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(y1[i], x[i] * dropout_multiplier(dropout_key(1, 7, 2), i, 0.3f)) << i;
}

TEST_F(CpuKernels, DropoutWithZeroPCopiesAndRejectsPOfOne) {
  const auto x = random_floats(100, 23);
  auto y = poisoned(100);
  backend.dropout(DType::f32, x.data(), x.size(), Dropout{0.0f, 99}, y.data());
  EXPECT_EQ(y, x);
  EXPECT_THROW(backend.dropout(DType::f32, x.data(), x.size(), Dropout{1.0f, 99}, y.data()), lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

// --exponential-smoothing: the averaging factor follows Marian's warm-up (large at first, the option's value after
// 9 / value - 9 updates), and the smoothed weights follow the recurrence it defines.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/train/optimizer.h"
#include "kernels/backend.h"

namespace lseq {
namespace {

TEST(OptimizerSmoothing, FactorWarmsUpAsMarianDoes) {
  auto backend = kernels::make_cpu_backend(1);
  OptimizerOptions options;
  options.smoothing = 1e-4f;
  Optimizer optimizer(*backend, 4, options);
  EXPECT_FLOAT_EQ(optimizer.smoothing_factor(1), 0.9f);
  EXPECT_FLOAT_EQ(optimizer.smoothing_factor(91), 0.09f);
  EXPECT_NEAR(optimizer.smoothing_factor(891), 0.01f, 1e-7f);
  EXPECT_FLOAT_EQ(optimizer.smoothing_factor(200000), 1e-4f) << "the option's value once the warm-up is over";
  for (int64_t step = 1; step < 100000; step += 997) {
    EXPECT_GE(optimizer.smoothing_factor(step), optimizer.smoothing_factor(step + 1)) << step;
  }
}

// With learning rate 0 the weights stay at p while the average moves from its start s0 towards them:
// s_K - p = (s0 - p) * prod_k (1 - a_k).
TEST(OptimizerSmoothing, AverageFollowsTheWarmedUpRecurrence) {
  auto backend = kernels::make_cpu_backend(1);
  const std::size_t n = 64;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> start(n), weights(n), grads(n);
  for (std::size_t i = 0; i < n; ++i) start[i] = uniform(rng), weights[i] = uniform(rng), grads[i] = uniform(rng);
  OptimizerOptions options;
  options.smoothing = 0.2f;  // the warm-up ends at update 36
  Optimizer optimizer(*backend, n, options);
  auto* params = static_cast<float*>(backend->allocate(n * sizeof(float)));
  auto* g = static_cast<float*>(backend->allocate(n * sizeof(float)));
  backend->copy_to_device(params, start.data(), n * sizeof(float));
  optimizer.start_smoothing_from(params);
  backend->copy_to_device(params, weights.data(), n * sizeof(float));
  backend->copy_to_device(g, grads.data(), n * sizeof(float));
  double keep = 1.0;
  for (int step = 1; step <= 50; ++step) {
    optimizer.step(params, g, 1.0f, 0.0);
    keep *= 1.0 - static_cast<double>(optimizer.smoothing_factor(step));
  }
  std::vector<float> smoothed(n), after(n);
  backend->copy_to_host(smoothed.data(), optimizer.smoothed(), n * sizeof(float));
  backend->copy_to_host(after.data(), params, n * sizeof(float));
  EXPECT_EQ(after, weights) << "learning rate 0 leaves the weights";
  EXPECT_LT(keep, 0.2 * 0.2) << "the test must move the average well away from its start";
  for (std::size_t i = 0; i < n; ++i) {
    const double want = weights[i] + (static_cast<double>(start[i]) - weights[i]) * keep;
    EXPECT_NEAR(smoothed[i], want, 1e-5) << i;
  }
  backend->release(g);
  backend->release(params);
}

}  // namespace
}  // namespace lseq

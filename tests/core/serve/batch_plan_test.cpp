// The batch plan of lsserve's scheduler: limits always hold, and the plan is the cheapest cut (checked against every
// cut of small pools).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/serve/batch_plan.h"
#include "util/error.h"

namespace lseq::serve {
namespace {

double plan_cost(const std::vector<int>& lengths, const std::vector<int>& ends, double fixed_cost) {
  double cost = 0;
  int begin = 0;
  for (int end : ends) {
    cost += batch_cost(lengths[end - 1], end - begin, fixed_cost);
    begin = end;
  }
  return cost;
}

bool within(const std::vector<int>& lengths, const std::vector<int>& ends, const BatchLimits& limits) {
  int begin = 0;
  for (int end : ends) {
    const int n = end - begin;
    if (n < 1) return false;
    if (limits.max_sentences > 0 && n > limits.max_sentences) return false;
    if (n > 1 && limits.max_tokens > 0 && static_cast<int64_t>(n) * lengths[end - 1] > limits.max_tokens) return false;
    begin = end;
  }
  return begin == static_cast<int>(lengths.size());
}

// The cheapest cut within the limits, trying all 2^(n-1) of them.
double cheapest(const std::vector<int>& lengths, const BatchLimits& limits) {
  const int n = static_cast<int>(lengths.size());
  double best = 1e300;
  for (uint32_t cuts = 0; cuts < (1u << (n - 1)); ++cuts) {
    std::vector<int> ends;
    for (int i = 1; i < n; ++i)
      if (cuts & (1u << (i - 1))) ends.push_back(i);
    ends.push_back(n);
    if (within(lengths, ends, limits)) best = std::min(best, plan_cost(lengths, ends, limits.fixed_cost));
  }
  return best;
}

TEST(BatchPlan, IsTheCheapestCutWithinTheLimits) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(rng() % 11);
    std::vector<int> lengths(n);
    for (int& l : lengths) l = 2 + static_cast<int>(rng() % 40);
    std::sort(lengths.begin(), lengths.end());
    BatchLimits limits;
    limits.max_sentences = static_cast<int>(rng() % 6);  // 0: no limit
    limits.max_tokens = rng() % 3 == 0 ? 0 : 20 + static_cast<int64_t>(rng() % 100);
    limits.fixed_cost = static_cast<double>(rng() % 30);
    const std::vector<int> ends = plan_batches(lengths, limits);
    ASSERT_TRUE(within(lengths, ends, limits)) << "round " << round;
    EXPECT_NEAR(plan_cost(lengths, ends, limits.fixed_cost), cheapest(lengths, limits), 1e-9) << "round " << round;
  }
}

TEST(BatchPlan, FixedCostTradesPaddingForFewerBatches) {
  const std::vector<int> lengths = {5, 5, 5, 30, 30, 30};
  BatchLimits limits;
  limits.max_sentences = 0;
  limits.fixed_cost = 0;
  EXPECT_EQ(plan_batches(lengths, limits), (std::vector<int>{3, 6})) << "no fixed cost: equal lengths together";
  limits.fixed_cost = 1000;
  EXPECT_EQ(plan_batches(lengths, limits), (std::vector<int>{6})) << "a large fixed cost: one batch";
}

TEST(BatchPlan, SentenceAndTokenLimitsCutBatches) {
  const std::vector<int> lengths(10, 8);
  BatchLimits limits;
  limits.fixed_cost = 1000;
  limits.max_sentences = 4;
  EXPECT_EQ(plan_batches(lengths, limits).size(), 3u);
  limits.max_sentences = 0;
  limits.max_tokens = 16;  // two sentences of 8
  EXPECT_EQ(plan_batches(lengths, limits).size(), 5u);
  // One sentence over the budget still gets a batch of its own.
  EXPECT_EQ(plan_batches({100}, limits), (std::vector<int>{1}));
  EXPECT_TRUE(plan_batches({}, limits).empty());
}

TEST(BatchPlan, RefusesUnsortedLengths) { EXPECT_THROW(plan_batches({5, 3}, BatchLimits{}), Error); }

}  // namespace
}  // namespace lseq::serve

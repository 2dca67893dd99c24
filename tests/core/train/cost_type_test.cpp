// --cost-type: the factor on the model's summed gradients (cost_gradient_scale), for each of Marian's cost types.
#include <gtest/gtest.h>

#include <cmath>

#include "core/train/trainer.h"

namespace lseq {
namespace {

using Cost = TrainerOptions::Cost;

TEST(CostType, EachCostScalesTheSummedGradientsAsItsDefinitionSays) {
  // An update of 4 sentences with 50 target tokens and a summed cross-entropy of 100 (2 nats a token).
  EXPECT_DOUBLE_EQ(cost_gradient_scale(Cost::ce_mean_words, 100.0, 50, 4), 1.0 / 50);
  EXPECT_DOUBLE_EQ(cost_gradient_scale(Cost::ce_mean, 100.0, 50, 4), 1.0 / 4);
  EXPECT_DOUBLE_EQ(cost_gradient_scale(Cost::ce_sum, 100.0, 50, 4), 1.0);
  // perplexity = exp(ce-mean-words): its gradient is exp(2) times that of ce-mean-words.
  EXPECT_DOUBLE_EQ(cost_gradient_scale(Cost::perplexity, 100.0, 50, 4), std::exp(2.0) / 50);
}

TEST(CostType, PerplexityMatchesAFiniteDifferenceOfItsDefinition) {
  // d/dL exp(L/N) at L = 30, N = 20, against the scale applied to dL.
  const double loss = 30.0, tokens = 20.0, h = 1e-6;
  const double numeric = (std::exp((loss + h) / tokens) - std::exp((loss - h) / tokens)) / (2 * h);
  EXPECT_NEAR(cost_gradient_scale(Cost::perplexity, loss, 20, 3), numeric, 1e-8);
}

TEST(CostType, CeMeanOfAnUpdateWithoutSentencesDoesNotDivideByZero) {
  EXPECT_DOUBLE_EQ(cost_gradient_scale(Cost::ce_mean, 10.0, 5, 0), 1.0);
}

}  // namespace
}  // namespace lseq

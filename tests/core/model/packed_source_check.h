#pragma once
// Source packing (EncoderDecoderModel::set_pack_source) against the padded step, for the CPU and GPU model tests: two
// copies of a model with the same parameters run one training step over the same batch (no dropout: its draws are
// keyed by row, so they differ between the layouts). The packed step must give the same loss and gradients up to
// summation order.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "kernels/workspace.h"
#include "training_step.h"

namespace lseq::test {

inline void expect_packed_source_matches(kernels::Backend& backend, const ModelConfig& config, kernels::DType dt,
                                         const std::vector<float>& params, const data::Batch& b, double rtol) {
  EncoderDecoderModel packed(config, backend, dt), padded(config, backend, dt);
  packed.load_params(params);
  padded.load_params(params);
  padded.set_pack_source(false);
  ASSERT_TRUE(packed.packs_source(b, true)) << "the batch must pack for the comparison to mean anything";
  ASSERT_FALSE(padded.packs_source(b, true));

  kernels::Workspace ws(backend, 0, "test workspace");
  std::vector<float> want, got;
  const StepLoss want_loss = training_step(backend, padded, b, ws, want);
  const StepLoss got_loss = training_step(backend, packed, b, ws, got);
  EXPECT_NEAR(got_loss.loss_sum, want_loss.loss_sum, rtol * std::fabs(want_loss.loss_sum));
  EXPECT_EQ(got_loss.target_tokens, want_loss.target_tokens);
  ASSERT_EQ(got.size(), want.size());
  double scale = 0.0;
  for (float g : want) scale = std::max(scale, double(std::fabs(g)));
  ASSERT_GT(scale, 0.0);
  std::size_t bad = 0, first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(double(got[i]) - want[i]) <= rtol * (std::fabs(double(want[i])) + scale))) {
      ++bad;
      first = std::min(first, i);
    }
  EXPECT_EQ(bad, 0u) << "gradients differ, first at " << first << ": "
                     << (first < got.size() ? got[first] : 0.0f) << " vs " << (first < got.size() ? want[first] : 0.0f);
}

}  // namespace lseq::test

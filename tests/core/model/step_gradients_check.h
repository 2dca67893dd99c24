#pragma once
// Gradients in step memory (Model::set_gradients_in_step_memory) against the model's own gradient buffer, for the
// CPU and GPU model tests (either model type, make_model): two copies of a model with the same parameters run training steps over the
// same batches with the same dropout keys. Placing the gradients in the workspace changes where they are written,
// not how they are summed, so each step's loss and gradients must be bit-identical to a zeroed own buffer's; a
// second batch checks that a step's gradients are its own (nothing carried over from the step before). The step
// must need less memory than the activations plus a whole gradient buffer, since the gradients reuse the room of
// released activations.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/model/step_memory.h"
#include "kernels/workspace.h"
#include "model_test_util.h"

namespace lseq::test {

inline void expect_step_memory_gradients_match(kernels::Backend& backend, const ModelConfig& config,
                                               kernels::DType dt, const std::vector<float>& params,
                                               const std::vector<data::Batch>& batches) {
  const auto own_model = make_model(config, backend, dt), in_step_model = make_model(config, backend, dt);
  Model& own = *own_model;
  Model& in_step = *in_step_model;
  own.load_params(params);
  in_step.load_params(params);
  in_step.set_gradients_in_step_memory(true);
  ASSERT_TRUE(in_step.gradients_in_step_memory());
  ASSERT_FALSE(own.gradients_in_step_memory());
  EXPECT_GT(in_step.param_store().side_end(), 0u) << "the embedding tables are written out of order";

  kernels::Workspace own_ws(backend, 0, "test workspace"), step_ws(backend, 0, "test workspace");
  const std::size_t grad_bytes = StepMemory::align(own.num_params() * sizeof(float));
  for (std::size_t i = 0; i < batches.size(); ++i) {
    SCOPED_TRACE("batch " + std::to_string(i));
    const data::Batch& b = batches[i];
    const std::size_t own_bytes = own.step_bytes(b, true), step_bytes = in_step.step_bytes(b, true);
    EXPECT_GE(step_bytes, grad_bytes) << "the step's memory holds the whole gradient buffer at the end";
    EXPECT_LT(step_bytes, own_bytes + grad_bytes) << "gradients must reuse released activations";
    EXPECT_EQ(in_step.step_bytes(b, false), own.step_bytes(b, false)) << "forward-only steps have no gradients";

    own.zero_grads();
    const StepLoss want_loss = own.forward_backward(b, 9, 4 + i, 1.0f, own_ws);
    const StepLoss got_loss = in_step.forward_backward(b, 9, 4 + i, 1.0f, step_ws);
    EXPECT_EQ(got_loss.loss_sum, want_loss.loss_sum);
    std::vector<float> want(own.num_params()), got(in_step.num_params());
    backend.copy_to_host(want.data(), own.grads(), want.size() * sizeof(float));
    backend.copy_to_host(got.data(), in_step.grads(), got.size() * sizeof(float));
    expect_same_gradient_bits(got, want);
  }
}

// Steps summed in the model (set_gradients_in_step_memory(true, true): --optimizer-delay in one process) give, bit
// for bit, 0 + g1 + g2 + ... of each batch's own gradients added in float in that order: what data parallelism's
// all-reduce of the ranks' gradients gives (for two ranks, g1 + g2). The losses are each step's.
inline void expect_summed_steps_are_the_sum_of_steps(kernels::Backend& backend, const ModelConfig& config,
                                                     kernels::DType dt, const std::vector<float>& params,
                                                     const std::vector<data::Batch>& batches) {
  const auto single_model = make_model(config, backend, dt), summed_model = make_model(config, backend, dt);
  Model& single = *single_model;
  Model& summed = *summed_model;
  single.load_params(params);
  summed.load_params(params);
  single.set_gradients_in_step_memory(true);
  summed.set_gradients_in_step_memory(true, true);
  ASSERT_TRUE(summed.param_store().sums_steps());
  kernels::Workspace single_ws(backend, 0, "test workspace"), summed_ws(backend, 0, "test workspace");
  std::vector<float> want(single.num_params(), 0.0f), step(single.num_params()), got(summed.num_params());
  for (int round = 0; round < 2; ++round) {  // the second round checks that zero_grads starts a new sum
    SCOPED_TRACE("round " + std::to_string(round));
    std::fill(want.begin(), want.end(), 0.0f);
    summed.zero_grads();
    for (std::size_t i = 0; i < batches.size(); ++i) {
      const StepLoss a = single.forward_backward(batches[i], 9, 4 + i, 1.0f, single_ws);
      backend.copy_to_host(step.data(), single.grads(), step.size() * sizeof(float));
      for (std::size_t j = 0; j < want.size(); ++j) want[j] = want[j] + step[j];
      const StepLoss b = summed.forward_backward(batches[i], 9, 4 + i, 1.0f, summed_ws);
      EXPECT_EQ(b.loss_sum, a.loss_sum) << "batch " << i;
    }
    backend.copy_to_host(got.data(), summed.grads(), got.size() * sizeof(float));
    expect_same_gradient_bits(got, want);
  }
}

}  // namespace lseq::test

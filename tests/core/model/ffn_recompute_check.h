#pragma once
// --recompute-ffn against the kept hidden layer, for the CPU and GPU model tests (either model type): two copies of a
// model with the same parameters run one training step over the same batch with the same dropout key. The copy that
// recomputes its feed-forward hidden layers in backward must give the same loss and bit-identical gradients (the
// recompute repeats the same product), and its step must need less workspace by about the hidden layers it keeps per
// block (one or two).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/step_memory.h"
#include "kernels/workspace.h"
#include "model_test_util.h"
#include "training_step.h"

namespace lseq::test {

inline void expect_recompute_ffn_matches(kernels::Backend& backend, const ModelConfig& config, kernels::DType dt,
                                         const std::vector<float>& params, const data::Batch& b) {
  const auto kept_model = make_model(config, backend, dt), recomputed_model = make_model(config, backend, dt);
  Model& kept = *kept_model;
  Model& recomputed = *recomputed_model;
  kept.load_params(params);
  recomputed.load_params(params);
  recomputed.set_recompute_ffn(true);
  // The accounting below counts padded source rows (source packing has its own tests).
  for (Model* m : {&kept, &recomputed})
    if (auto* translation = dynamic_cast<EncoderDecoderModel*>(m)) translation->set_pack_source(false);

  // Memory: each block's hidden layers [rows, dim_ffn] leave the kept activations (one, a = relu(x W^T + b), on the
  // fused ReLU path; two, h = x W^T and a = act(h + b), otherwise); backward holds one block's recomputed copies as
  // temporaries at most.
  const std::size_t esize = kernels::dtype_size(dt);
  const bool fused_relu = config.activation == kernels::Activation::relu && config.dropout_ffn == 0.0f;
  const std::size_t per_block = fused_relu ? 1 : 2;
  const std::size_t src_hidden =
      per_block * StepMemory::align(std::size_t(b.size) * b.src_len * config.dim_ffn * esize);
  const std::size_t tgt_hidden =
      per_block * StepMemory::align(std::size_t(b.size) * b.tgt_len * config.dim_ffn * esize);
  const std::size_t hidden_total = config.enc_depth * src_hidden + config.dec_depth * tgt_hidden;
  const std::size_t kept_bytes = kept.step_bytes(b, true), recomputed_bytes = recomputed.step_bytes(b, true);
  ASSERT_LT(recomputed_bytes, kept_bytes);
  EXPECT_GE(kept_bytes - recomputed_bytes, hidden_total - std::max(src_hidden, tgt_hidden));
  EXPECT_LE(kept_bytes - recomputed_bytes, hidden_total);
  EXPECT_EQ(kept.step_bytes(b, false), recomputed.step_bytes(b, false)) << "forward-only steps keep nothing anyway";

  kernels::Workspace ws(backend, 0, "test workspace");
  std::vector<float> want, got;
  const StepLoss want_loss = training_step(backend, kept, b, ws, want);
  const StepLoss got_loss = training_step(backend, recomputed, b, ws, got);
  EXPECT_EQ(got_loss.loss_sum, want_loss.loss_sum);
  expect_same_gradient_bits(got, want);
}

}  // namespace lseq::test

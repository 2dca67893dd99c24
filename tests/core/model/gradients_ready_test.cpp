// The gradients-ready hook of data parallelism (EncoderDecoderModel::set_gradients_ready): the offsets come in
// decreasing order, several per step (one per residual block at least), the last 0; the gradients from a reported
// offset up already hold their final values when it is reported (with the model's own buffer and with gradients in
// step memory, untied and tied embeddings); and the hook changes nothing in the step.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "kernels/workspace.h"
#include "model_test_util.h"

namespace lseq::test {
namespace {

ModelConfig hook_config(TiedEmbeddings tied) {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 13;
  c.dim_emb = 8;
  c.enc_depth = 2;
  c.dec_depth = 3;
  c.heads = 2;
  c.dim_ffn = 16;
  c.dropout = c.dropout_attention = c.dropout_ffn = 0.1f;
  c.tied = tied;
  c.max_length = 16;
  c.label_smoothing = 0.1f;
  return c;
}

void check_hook(TiedEmbeddings tied, bool step_memory) {
  SCOPED_TRACE(step_memory ? "gradients in step memory" : "own gradient buffer");
  auto backend = kernels::make_cpu_backend(1);
  const ModelConfig config = hook_config(tied);
  EncoderDecoderModel model(config, *backend), plain(config, *backend);
  randomize_params(*backend, model.param_store(), 21, 0.1);
  std::vector<float> params(model.num_params());
  backend->copy_to_host(params.data(), model.master(), params.size() * sizeof(float));
  plain.load_params(params);
  model.set_gradients_in_step_memory(step_memory);
  plain.set_gradients_in_step_memory(step_memory);
  std::mt19937_64 rng(5);
  const data::Batch batch = random_batch(rng, 3, 2, 7, 13);
  kernels::Workspace ws(*backend, 0, "test"), plain_ws(*backend, 0, "test");

  struct Report {
    std::size_t first;
    std::vector<float> values;  // grads[first..end) when reported
  };
  std::vector<Report> reports;
  model.set_gradients_ready([&](std::size_t first) {
    Report r{first, std::vector<float>(model.num_params() - first)};
    backend->copy_to_host(r.values.data(), model.grads() + first, r.values.size() * sizeof(float));
    reports.push_back(std::move(r));
  });
  model.zero_grads();
  plain.zero_grads();
  const StepLoss loss = model.forward_backward(batch, 9, 4, 1.0f, ws);
  const StepLoss plain_loss = plain.forward_backward(batch, 9, 4, 1.0f, plain_ws);
  std::vector<float> final_grads(model.num_params()), plain_grads(plain.num_params());
  backend->copy_to_host(final_grads.data(), model.grads(), final_grads.size() * sizeof(float));
  backend->copy_to_host(plain_grads.data(), plain.grads(), plain_grads.size() * sizeof(float));

  EXPECT_EQ(loss.loss_sum, plain_loss.loss_sum);
  expect_same_gradient_bits(final_grads, plain_grads);
  // Blocks: 2 per encoder layer, 3 per decoder layer, the final norms, the output layer.
  EXPECT_GE(reports.size(), static_cast<std::size_t>(2 * config.enc_depth + 3 * config.dec_depth));
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().first, 0u);
  for (std::size_t i = 0; i < reports.size(); ++i) {
    if (i > 0) EXPECT_LT(reports[i].first, reports[i - 1].first) << "report " << i;
    const std::vector<float> want(final_grads.begin() + static_cast<std::ptrdiff_t>(reports[i].first),
                                  final_grads.end());
    EXPECT_EQ(reports[i].values, want) << "gradients from offset " << reports[i].first
                                       << " changed after they were reported final";
  }
  EXPECT_LT(reports[reports.size() / 2].first, model.num_params() / 2 + model.num_params() / 4)
      << "reports come through backward, not only at its end";

  // Off again: no calls.
  model.set_gradients_ready(nullptr);
  const std::size_t before = reports.size();
  model.forward_backward(batch, 9, 5, 1.0f, ws);
  EXPECT_EQ(reports.size(), before);
}

TEST(GradientsReady, UntiedOwnBuffer) { check_hook(TiedEmbeddings::none, false); }
TEST(GradientsReady, UntiedStepMemory) { check_hook(TiedEmbeddings::none, true); }
TEST(GradientsReady, TiedAllOwnBuffer) { check_hook(TiedEmbeddings::all, false); }
TEST(GradientsReady, TiedAllStepMemory) { check_hook(TiedEmbeddings::all, true); }

}  // namespace
}  // namespace lseq::test

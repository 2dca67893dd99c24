// The whole encoder-decoder model: gradients against finite differences for each norm placement and embedding tying,
// padding invariance, dropout reproducibility, workspace planning, --recompute-ffn.
#include <gtest/gtest.h>

#include "core/model/encoder_decoder_model.h"
#include "ffn_recompute_check.h"
#include "kernels/workspace.h"
#include "model_test_util.h"
#include "packed_source_check.h"
#include "step_gradients_check.h"
#include "util/error.h"

namespace lseq {
namespace {

ModelConfig tiny_config(NormPlacement norm, TiedEmbeddings tied, float dropout = 0.0f,
                        kernels::Activation act = kernels::Activation::gelu) {
  ModelConfig c;
  c.src_vocab = tied == TiedEmbeddings::all || tied == TiedEmbeddings::source ? 13 : 11;
  c.tgt_vocab = 13;
  c.dim_emb = 8;
  c.enc_depth = 2;
  c.dec_depth = 2;
  c.heads = 2;
  c.dim_ffn = 16;
  c.activation = act;
  c.dropout = c.dropout_attention = c.dropout_ffn = dropout;
  c.norm = norm;
  c.tied = tied;
  c.max_length = 16;
  c.label_smoothing = 0.1f;
  return c;
}

void check_model(const ModelConfig& config) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(config, *backend);
  test::randomize_params(*backend, model.param_store(), 21, 0.1);
  std::mt19937_64 rng(5);
  const data::Batch batch = test::random_batch(rng, 3, 1, 5, config.src_vocab);
  kernels::Workspace ws(*backend, model.workspace_bytes(64, 8), "raise --mini-batch-words");
  const bool dropout = config.dropout > 0;
  auto loss = [&](const float*, bool backward, float*) {
    // With dropout the finite differences go through the training step too: same key, same masks.
    if (backward || dropout) return model.forward_backward(batch, 17, 3, 1.0f, ws).loss_sum;
    return model.forward_loss(batch, ws).loss_sum;
  };
  test::GradCheckOptions opt;
  test::check_gradients(*backend, model.param_store(), {}, loss, opt);
}

TEST(ModelGradients, PostNormUntied) { check_model(tiny_config(NormPlacement::post, TiedEmbeddings::none)); }
TEST(ModelGradients, PreNormTiedTarget) { check_model(tiny_config(NormPlacement::pre, TiedEmbeddings::target)); }
TEST(ModelGradients, PostNormTiedAll) { check_model(tiny_config(NormPlacement::post, TiedEmbeddings::all)); }
TEST(ModelGradients, PreNormTiedSource) { check_model(tiny_config(NormPlacement::pre, TiedEmbeddings::source)); }
TEST(ModelGradients, PreNormTiedAllWithDropout) {
  check_model(tiny_config(NormPlacement::pre, TiedEmbeddings::all, 0.2f));
}
TEST(ModelGradients, PostNormTiedTargetWithDropout) {
  check_model(tiny_config(NormPlacement::post, TiedEmbeddings::target, 0.2f));
}
// ReLU without FFN dropout: the feed-forward blocks take the fused path (bias and ReLU inside the GEMMs); the tests
// above (GELU) take the other. ReLU with dropout is checked per layer (layer_gradients_test.cpp): here its
// kinks are too close to the finite differences' steps.
TEST(ModelGradients, PreNormReluFusedFeedForward) {
  check_model(tiny_config(NormPlacement::pre, TiedEmbeddings::none, 0.0f, kernels::Activation::relu));
}
TEST(ModelGradients, PostNormTiedAllReluFusedFeedForward) {
  check_model(tiny_config(NormPlacement::post, TiedEmbeddings::all, 0.0f, kernels::Activation::relu));
}

TEST(ModelParams, TableFollowsTheDocumentedOrderAndTying) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel untied(tiny_config(NormPlacement::post, TiedEmbeddings::none), *backend);
  const auto& p = untied.params();
  EXPECT_EQ(p.front().name, "embeddings.src.weight");
  EXPECT_EQ(p[1].name, "embeddings.tgt.weight");
  EXPECT_EQ(p[2].name, "encoder.l1.self_attn.qkv.weight");
  EXPECT_EQ(p[2].shape, (std::vector<int64_t>{24, 8}));
  EXPECT_EQ(p.back().name, "output.bias");
  EXPECT_EQ(p[p.size() - 2].name, "output.weight");
  for (const ParamInfo& info : p) EXPECT_EQ(info.offset % kParamAlignment, 0u) << info.name;
  EXPECT_THROW(untied.param_store().table().find("encoder.final_norm.weight"), Error);

  EncoderDecoderModel pre_tied(tiny_config(NormPlacement::pre, TiedEmbeddings::target), *backend);
  EXPECT_NO_THROW(pre_tied.param_store().table().find("encoder.final_norm.weight"));
  EXPECT_NO_THROW(pre_tied.param_store().table().find("decoder.final_norm.bias"));
  EXPECT_THROW(pre_tied.param_store().table().find("output.weight"), Error);

  EncoderDecoderModel all(tiny_config(NormPlacement::post, TiedEmbeddings::all), *backend);
  EXPECT_EQ(all.params().front().name, "embeddings.shared.weight");
  EXPECT_THROW(all.param_store().table().find("embeddings.src.weight"), Error);
  // Untied has two more [13, 8]-ish tables than tied-all: src [11, 8] and output [13, 8].
  EXPECT_EQ(untied.num_weights() - all.num_weights(), 11u * 8 + 13u * 8);

  EncoderDecoderModel source(tiny_config(NormPlacement::post, TiedEmbeddings::source), *backend);
  EXPECT_EQ(source.params().front().name, "embeddings.shared.weight");
  EXPECT_NO_THROW(source.param_store().table().find("output.weight"));
}

TEST(ModelParams, InitIsSeededAndFollowsTheScheme) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(tiny_config(NormPlacement::pre, TiedEmbeddings::none), *backend);
  auto host = [&] {
    std::vector<float> v(model.num_params());
    backend->copy_to_host(v.data(), model.master(), v.size() * sizeof(float));
    return v;
  };
  model.init_params(3);
  const std::vector<float> a = host();
  model.init_params(3);
  EXPECT_EQ(a, host());
  model.init_params(4);
  EXPECT_NE(a, host());
  const ParamTable& table = model.param_store().table();
  const ParamInfo& gamma = table.find("encoder.l1.ffn_norm.weight");
  const ParamInfo& bias = table.find("decoder.l2.cross_attn.kv.bias");
  const ParamInfo& w = table.find("encoder.l2.ffn.in.weight");  // [16, 8]: limit sqrt(6 / 24) = 0.5
  for (std::size_t i = 0; i < gamma.count; ++i) EXPECT_EQ(a[gamma.offset + i], 1.0f);
  for (std::size_t i = 0; i < bias.count; ++i) EXPECT_EQ(a[bias.offset + i], 0.0f);
  float max_abs = 0;
  for (std::size_t i = 0; i < w.count; ++i) max_abs = std::max(max_abs, std::fabs(a[w.offset + i]));
  EXPECT_LE(max_abs, 0.5f);
  EXPECT_GT(max_abs, 0.3f);
}

// Appending padding columns and more sentences leaves every real sentence's nll unchanged.
TEST(ModelPadding, PaddingDoesNotChangeTheLossOfRealTokens) {
  for (NormPlacement norm : {NormPlacement::post, NormPlacement::pre}) {
    const ModelConfig config = tiny_config(norm, TiedEmbeddings::none);
    auto backend = kernels::make_cpu_backend(1);
    EncoderDecoderModel model(config, *backend);
    test::randomize_params(*backend, model.param_store(), 8, 0.1);
    kernels::Workspace ws(*backend, model.workspace_bytes(64, 12), "raise --mini-batch-words");
    std::mt19937_64 rng(9);
    const data::Batch small = test::random_batch(rng, 3, 1, 5, config.src_vocab);
    const data::Batch extra = test::random_batch(rng, 2, 2, 6, config.src_vocab);
    data::Batch big;
    big.size = small.size + extra.size;
    big.src_len = std::max(small.src_len, extra.src_len) + 2;
    big.tgt_len = std::max(small.tgt_len, extra.tgt_len) + 3;
    big.src.assign(static_cast<std::size_t>(big.size) * big.src_len, 0);
    big.tgt_in.assign(static_cast<std::size_t>(big.size) * big.tgt_len, 0);
    big.tgt_out.assign(static_cast<std::size_t>(big.size) * big.tgt_len, 0);
    int row = 0;
    for (const data::Batch* part : {&small, &extra}) {
      for (int s = 0; s < part->size; ++s, ++row) {
        for (int t = 0; t < part->src_len; ++t) big.src[row * big.src_len + t] = part->src[s * part->src_len + t];
        for (int t = 0; t < part->tgt_len; ++t) {
          big.tgt_in[row * big.tgt_len + t] = part->tgt_in[s * part->tgt_len + t];
          big.tgt_out[row * big.tgt_len + t] = part->tgt_out[s * part->tgt_len + t];
        }
        big.src_lengths.push_back(part->src_lengths[s]);
        big.tgt_lengths.push_back(part->tgt_lengths[s]);
      }
    }
    std::vector<double> nll_small, nll_big;
    const StepLoss a = model.forward_loss(small, ws, &nll_small);
    model.forward_loss(big, ws, &nll_big);
    ASSERT_EQ(nll_small.size(), 3u);
    ASSERT_EQ(nll_big.size(), 5u);
    double sum = 0;
    for (int s = 0; s < 3; ++s) {
      EXPECT_GT(nll_small[s], 0.1);
      EXPECT_NEAR(nll_big[s], nll_small[s], 1e-5 * nll_small[s]) << "sentence " << s;
      sum += nll_small[s];
    }
    EXPECT_NEAR(a.nll_sum, sum, 1e-5 * sum);
    EXPECT_EQ(a.target_tokens, small.tgt_lengths[0] + small.tgt_lengths[1] + small.tgt_lengths[2]);
    // Label smoothing spreads mass away from the reference, so the smoothed loss exceeds nothing in particular,
    // but it differs from the nll.
    EXPECT_NE(a.loss_sum, a.nll_sum);
  }
}

TEST(ModelDropout, MasksAreFixedBySeedAndStep) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(tiny_config(NormPlacement::post, TiedEmbeddings::none, 0.3f), *backend);
  model.init_params(1);
  kernels::Workspace ws(*backend, model.workspace_bytes(64, 8), "raise --mini-batch-words");
  std::mt19937_64 rng(2);
  const data::Batch batch = test::random_batch(rng, 3, 2, 6, 11);
  const double a = model.forward_backward(batch, 7, 10, 1.0f, ws).loss_sum;
  const double b = model.forward_backward(batch, 7, 10, 1.0f, ws).loss_sum;
  const double c = model.forward_backward(batch, 7, 11, 1.0f, ws).loss_sum;
  const double d = model.forward_backward(batch, 8, 10, 1.0f, ws).loss_sum;
  const double eval1 = model.forward_loss(batch, ws).loss_sum;
  const double eval2 = model.forward_loss(batch, ws).loss_sum;
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  EXPECT_NE(a, eval1);
  EXPECT_EQ(eval1, eval2);
}

TEST(ModelWorkspace, GrowsFromEmptyToWhatEachBatchNeeds) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(tiny_config(NormPlacement::post, TiedEmbeddings::none), *backend);
  model.init_params(1);
  std::mt19937_64 rng(4);
  const data::Batch small = test::random_batch(rng, 2, 2, 3, 11);
  const data::Batch large = test::random_batch(rng, 6, 5, 8, 11);
  // The planned workspace and one that starts empty and grows give the same losses.
  kernels::Workspace planned(*backend, model.workspace_bytes(64, 12), "raise --mini-batch-words");
  kernels::Workspace grown(*backend, 0, "lower --mini-batch-words");
  const double expect_small = model.forward_backward(small, 3, 1, 1.0f, planned).loss_sum;
  const double expect_large = model.forward_backward(large, 3, 2, 1.0f, planned).loss_sum;
  EXPECT_EQ(model.forward_backward(small, 3, 1, 1.0f, grown).loss_sum, expect_small);
  const std::size_t after_small = grown.capacity();
  EXPECT_GE(after_small, model.step_bytes(small, true));
  EXPECT_EQ(model.forward_backward(large, 3, 2, 1.0f, grown).loss_sum, expect_large);
  EXPECT_GE(grown.capacity(), model.step_bytes(large, true));
  EXPECT_GT(model.step_bytes(large, true), model.step_bytes(small, true));
  EXPECT_GE(grown.peak(), model.step_bytes(large, true));
  // Forward-only needs no more than training for the same shape, and never exceeds the plan for the limits.
  EXPECT_LE(model.step_bytes(large, false), model.step_bytes(large, true));
  EXPECT_LE(model.step_bytes(large, true), model.workspace_bytes(64, 12));
}

TEST(ModelGradients, AccumulateAndScale) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(tiny_config(NormPlacement::pre, TiedEmbeddings::target), *backend);
  model.init_params(1);
  kernels::Workspace ws(*backend, model.workspace_bytes(64, 8), "raise --mini-batch-words");
  std::mt19937_64 rng(2);
  const data::Batch batch = test::random_batch(rng, 3, 2, 6, 11);
  auto grads = [&] {
    std::vector<float> v(model.num_params());
    backend->copy_to_host(v.data(), model.grads(), v.size() * sizeof(float));
    return v;
  };
  model.zero_grads();
  model.forward_backward(batch, 1, 1, 1.0f, ws);
  const std::vector<float> once = grads();
  model.forward_backward(batch, 1, 1, 0.5f, ws);
  const std::vector<float> sum = grads();
  double norm = 0;
  for (std::size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(sum[i], 1.5f * once[i], 1e-5f + 1e-4f * std::fabs(once[i]));
    norm += static_cast<double>(once[i]) * once[i];
  }
  EXPECT_GT(norm, 1e-3);
}

// --recompute-ffn on the fused ReLU path and on the unfused one (GELU with dropout: the recomputed hidden layer
// goes through the same dropout masks).
void check_recompute_ffn(const ModelConfig& config) {
  auto backend = kernels::make_cpu_backend(2);
  EncoderDecoderModel source(config, *backend);
  test::randomize_params(*backend, source.param_store(), 8, 0.1);
  std::vector<float> params(source.num_params());
  backend->copy_to_host(params.data(), source.master(), params.size() * sizeof(float));
  std::mt19937_64 rng(6);
  const data::Batch batch = test::random_batch(rng, 4, 3, 9, config.src_vocab);
  test::expect_recompute_ffn_matches(*backend, config, kernels::DType::f32, params, batch);
}

// Source packing: the encoder over padding-free rows gives the padded step's loss and gradients, post-norm with the
// fused ReLU path and pre-norm with all embeddings tied; attention dropout keeps a batch padded.
void check_packed_source(const ModelConfig& config) {
  auto backend = kernels::make_cpu_backend(2);
  EncoderDecoderModel source(config, *backend);
  test::randomize_params(*backend, source.param_store(), 8, 0.1);
  std::vector<float> params(source.num_params());
  backend->copy_to_host(params.data(), source.master(), params.size() * sizeof(float));
  std::mt19937_64 rng(9);
  const data::Batch batch = test::random_batch(rng, 5, 2, 12, config.src_vocab);
  test::expect_packed_source_matches(*backend, config, kernels::DType::f32, params, batch, 1e-5);
}

TEST(ModelPackedSource, PostNormReluMatchesThePaddedStep) {
  check_packed_source(tiny_config(NormPlacement::post, TiedEmbeddings::none, 0.0f, kernels::Activation::relu));
}
TEST(ModelPackedSource, PreNormTiedMatchesThePaddedStep) {
  check_packed_source(tiny_config(NormPlacement::pre, TiedEmbeddings::all, 0.0f));
}
TEST(ModelPackedSource, OnlyBatchesWithSourcePaddingAndNoAttentionDropoutPack) {
  auto backend = kernels::make_cpu_backend(1);
  std::mt19937_64 rng(10);
  data::Batch b = test::random_batch(rng, 5, 2, 12, 11);
  const EncoderDecoderModel plain(tiny_config(NormPlacement::post, TiedEmbeddings::none), *backend);
  EXPECT_TRUE(plain.packs_source(b, true));
  EncoderDecoderModel with_dropout(tiny_config(NormPlacement::post, TiedEmbeddings::none, 0.1f), *backend);
  EXPECT_FALSE(with_dropout.packs_source(b, true)) << "attention dropout needs the composed core";
  b.src_lengths.assign(b.size, b.src_len);
  EXPECT_FALSE(plain.packs_source(b, true)) << "no padding to skip";
}

TEST(ModelRecomputeFfn, FusedReluPathGivesTheSameGradientsInLessWorkspace) {
  check_recompute_ffn(tiny_config(NormPlacement::post, TiedEmbeddings::none, 0.0f, kernels::Activation::relu));
}
TEST(ModelRecomputeFfn, GeluWithDropoutGivesTheSameGradientsInLessWorkspace) {
  check_recompute_ffn(tiny_config(NormPlacement::pre, TiedEmbeddings::all, 0.2f));
}

// Gradients in step memory: bit-identical to the own buffer's over two batches, in less memory. Post-norm with all
// embeddings tied and the fused ReLU path; pre-norm untied (two tables in the side buffer) with dropout everywhere,
// so that attention runs the composed core, whose probabilities backward recomputes.
void check_step_gradients(const ModelConfig& config) {
  auto backend = kernels::make_cpu_backend(2);
  EncoderDecoderModel source(config, *backend);
  test::randomize_params(*backend, source.param_store(), 8, 0.1);
  std::vector<float> params(source.num_params());
  backend->copy_to_host(params.data(), source.master(), params.size() * sizeof(float));
  std::mt19937_64 rng(7);
  const std::vector<data::Batch> batches{test::random_batch(rng, 4, 3, 9, config.src_vocab),
                                         test::random_batch(rng, 6, 2, 7, config.src_vocab)};
  test::expect_step_memory_gradients_match(*backend, config, kernels::DType::f32, params, batches);
  test::expect_summed_steps_are_the_sum_of_steps(*backend, config, kernels::DType::f32, params, batches);
}

TEST(ModelStepGradients, PostNormTiedAllFusedReluMatchesTheOwnBuffer) {
  check_step_gradients(tiny_config(NormPlacement::post, TiedEmbeddings::all, 0.0f, kernels::Activation::relu));
}
TEST(ModelStepGradients, PreNormUntiedWithDropoutMatchesTheOwnBuffer) {
  check_step_gradients(tiny_config(NormPlacement::pre, TiedEmbeddings::none, 0.2f));
}

// Switching back gives the model its own zeroed buffer, into which steps accumulate again.
TEST(ModelStepGradients, SwitchingBackRestoresAnOwnAccumulatingBuffer) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(tiny_config(NormPlacement::post, TiedEmbeddings::target), *backend);
  model.init_params(4);
  std::mt19937_64 rng(3);
  const data::Batch batch = test::random_batch(rng, 3, 2, 6, 11);
  kernels::Workspace ws(*backend, 0, "test workspace");
  model.set_gradients_in_step_memory(true);
  model.forward_backward(batch, 1, 1, 1.0f, ws);
  std::vector<float> once(model.num_params()), twice(model.num_params());
  backend->copy_to_host(once.data(), model.grads(), once.size() * sizeof(float));
  model.forward_backward(batch, 1, 1, 1.0f, ws);  // replaces, does not add
  backend->copy_to_host(twice.data(), model.grads(), twice.size() * sizeof(float));
  EXPECT_EQ(once, twice);
  model.set_gradients_in_step_memory(false);
  EXPECT_FALSE(model.gradients_in_step_memory());
  EXPECT_EQ(model.param_store().side_end(), 0u);
  std::vector<float> zeros(model.num_params());
  backend->copy_to_host(zeros.data(), model.grads(), zeros.size() * sizeof(float));
  EXPECT_EQ(zeros, std::vector<float>(model.num_params(), 0.0f));
  model.forward_backward(batch, 1, 1, 1.0f, ws);
  model.forward_backward(batch, 1, 1, 1.0f, ws);
  backend->copy_to_host(twice.data(), model.grads(), twice.size() * sizeof(float));
  double norm = 0;
  for (std::size_t i = 0; i < once.size(); ++i) {
    EXPECT_NEAR(twice[i], 2.0f * once[i], 1e-5f + 1e-5f * std::fabs(once[i]));
    norm += static_cast<double>(once[i]) * once[i];
  }
  EXPECT_GT(norm, 1e-3);
}

// Random weights for `model`, and its flat fp32 parameters (the master) on the host.
std::vector<float> random_params(kernels::Backend& backend, EncoderDecoderModel& model, uint64_t seed, double noise) {
  test::randomize_params(backend, model.param_store(), seed, noise);
  std::vector<float> params(model.num_params());
  backend.copy_to_host(params.data(), model.master(), params.size() * sizeof(float));
  return params;
}

// A model loaded for inference (lstranslate, lsscore) has no gradients; in fp32 its master is what the layers read.
TEST(ModelInference, NoGradientsSameLossAndTrainingIsRefused) {
  auto backend = kernels::make_cpu_backend(1);
  const ModelConfig config = tiny_config(NormPlacement::post, TiedEmbeddings::all);
  EncoderDecoderModel trained(config, *backend);
  const std::vector<float> params = random_params(*backend, trained, 12, 0.1);
  EncoderDecoderModel loaded(config, *backend, kernels::DType::f32, ParamUse::inference);
  loaded.load_params(params);
  EXPECT_TRUE(trained.param_store().trainable());
  EXPECT_FALSE(loaded.param_store().trainable());
  EXPECT_EQ(loaded.grads(), nullptr);
  EXPECT_NE(loaded.master(), nullptr) << "fp32 layers read the master";
  std::mt19937_64 rng(3);
  const data::Batch batch = test::random_batch(rng, 3, 2, 7, config.src_vocab);
  kernels::Workspace ws(*backend, 0, "test workspace");
  const double want = trained.forward_loss(batch, ws).loss_sum;
  EXPECT_EQ(loaded.forward_loss(batch, ws).loss_sum, want);
  EXPECT_THROW(loaded.forward_backward(batch, 1, 1, 1.0f, ws), Error);
}

// lstranslate loads each tensor from where it lies in the mapped weights file, not from one flat host copy: the same
// weights, with the alignment gaps between tensors zero.
TEST(ModelInference, LoadingTensorByTensorPlacesWhatTheFlatLoadPlaces) {
  auto backend = kernels::make_cpu_backend(1);
  const ModelConfig config = tiny_config(NormPlacement::pre, TiedEmbeddings::none);
  EncoderDecoderModel trained(config, *backend);
  std::vector<float> params = random_params(*backend, trained, 21, 0.5);
  const ParamTable& table = trained.param_store().table();
  std::vector<bool> in_tensor(params.size(), false);
  for (const ParamInfo& p : table.list())
    std::fill_n(in_tensor.begin() + static_cast<std::ptrdiff_t>(p.offset), p.count, true);
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!in_tensor[i]) params[i] = 7.0f;  // what a flat copy would carry in the gaps, and the tensors do not
  // Each tensor in a buffer of its own, given in reverse order; the flat reference has zeros in the gaps.
  std::vector<std::vector<float>> pieces;
  std::vector<HostTensor> tensors;
  std::vector<float> flat(params.size(), 0.0f);
  for (auto p = table.list().rbegin(); p != table.list().rend(); ++p) {
    const auto first = params.begin() + static_cast<std::ptrdiff_t>(p->offset);
    pieces.emplace_back(first, first + static_cast<std::ptrdiff_t>(p->count));
    std::copy(first, first + static_cast<std::ptrdiff_t>(p->count), flat.begin() + static_cast<std::ptrdiff_t>(p->offset));
  }
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const ParamInfo& p = table.list()[table.list().size() - 1 - i];
    tensors.push_back({p.offset, pieces[i].data(), p.count});
  }
  ASSERT_NE(flat, params) << "the test needs gaps whose values the flat copy leaves out";
  EncoderDecoderModel by_tensor(config, *backend, kernels::DType::f32, ParamUse::inference);
  by_tensor.load_params(params);  // what the store held before: the gaps' 7s must not survive
  by_tensor.load_params(tensors);
  std::vector<float> placed(params.size());
  backend->copy_to_host(placed.data(), by_tensor.master(), placed.size() * sizeof(float));
  EXPECT_EQ(placed, flat);
  EncoderDecoderModel out_of_range(config, *backend, kernels::DType::f32, ParamUse::inference);
  EXPECT_THROW(out_of_range.load_params(std::vector<HostTensor>{{params.size() - 1, params.data(), 2}}), Error);
}

TEST(ModelWorkspace, PlannedOnceCoversEveryBatchUpToTheLimits) {
  auto backend = kernels::make_cpu_backend(1);
  const ModelConfig config = tiny_config(NormPlacement::pre, TiedEmbeddings::none, 0.1f);
  EncoderDecoderModel model(config, *backend);
  model.init_params(1);
  const int64_t max_tokens = 40;
  const int max_len = 8;
  const std::size_t planned = model.workspace_bytes(max_tokens, max_len);
  kernels::Workspace ws(*backend, planned, "raise --mini-batch-words or --max-length");
  std::mt19937_64 rng(3);
  // The largest batch the limits allow, then many shapes below them, including many one-token sentences.
  for (const auto& [size, min_len, max_len_b] :
       std::vector<std::tuple<int, int, int>>{{5, 8, 8}, {40, 1, 1}, {20, 2, 2}, {6, 1, 6}, {13, 3, 3}}) {
    const data::Batch b = test::random_batch(rng, size, min_len, max_len_b, config.src_vocab);
    ASSERT_LE(static_cast<int64_t>(b.size) * std::max(b.src_len, b.tgt_len), max_tokens);
    // Every batch within the limits fits the plan, so the planned workspace never has to grow.
    EXPECT_LE(model.step_bytes(b, true), planned);
    EXPECT_NO_THROW(model.forward_backward(b, 1, 1, 1.0f, ws));
    EXPECT_NO_THROW(model.forward_loss(b, ws));
    EXPECT_EQ(ws.capacity(), kernels::Workspace(*backend, planned, "").capacity());
  }
  // Forward-only plans are smaller (no backward buffers) and enough for forward_loss.
  const std::size_t inference = model.workspace_bytes(max_tokens, max_len, false);
  EXPECT_LT(inference, planned);
  const data::Batch largest = test::random_batch(rng, 5, 8, 8, config.src_vocab);
  EXPECT_LE(model.step_bytes(largest, false), inference);
  EXPECT_GT(model.step_bytes(largest, true), model.step_bytes(largest, false));
  // The plan is tight: the largest batch needs more than 80% of it.
  EXPECT_GT(model.step_bytes(largest, true), planned * 8 / 10);
  // A batch beyond the plan grows the workspace instead of failing.
  const data::Batch too_big = test::random_batch(rng, 8, 8, 8, config.src_vocab);
  EXPECT_GT(model.step_bytes(too_big, true), planned);
  EXPECT_NO_THROW(model.forward_backward(too_big, 1, 1, 1.0f, ws));
  EXPECT_GE(ws.capacity(), model.step_bytes(too_big, true));
}

TEST(ModelBatchChecks, LongSentencesAndForeignIdsAreClearErrors) {
  auto backend = kernels::make_cpu_backend(1);
  ModelConfig config = tiny_config(NormPlacement::post, TiedEmbeddings::none);
  config.max_length = 4;
  EncoderDecoderModel model(config, *backend);
  kernels::Workspace ws(*backend, model.workspace_bytes(64, 4), "raise --mini-batch-words");
  std::mt19937_64 rng(3);
  const data::Batch longer = test::random_batch(rng, 2, 6, 6, config.src_vocab);
  try {
    model.forward_loss(longer, ws);
    FAIL() << "expected an lseq::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-length"), std::string::npos) << e.what();
  }
  data::Batch foreign = test::random_batch(rng, 2, 2, 3, config.src_vocab);
  foreign.src[0] = 11;  // == src_vocab
  EXPECT_THROW(model.forward_loss(foreign, ws), Error);
}

}  // namespace
}  // namespace lseq

namespace lseq {
namespace {

// The CPU backend's sums are deterministic, so a step's loss and gradients do not depend on its thread count.
TEST(ModelDeterminism, ThreadCountDoesNotChangeTheStep) {
  std::mt19937_64 rng(4);
  const data::Batch batch = test::random_batch(rng, 6, 2, 9, 11);
  std::vector<float> grads[2];
  double losses[2];
  for (int i = 0; i < 2; ++i) {
    auto backend = kernels::make_cpu_backend(i + 1);
    EncoderDecoderModel model(tiny_config(NormPlacement::pre, TiedEmbeddings::none, 0.1f), *backend);
    model.init_params(5);
    kernels::Workspace ws(*backend, model.workspace_bytes(64, 10), "raise --mini-batch-words");
    losses[i] = model.forward_backward(batch, 3, 4, 1.0f, ws).loss_sum;
    grads[i].resize(model.num_params());
    backend->copy_to_host(grads[i].data(), model.grads(), grads[i].size() * sizeof(float));
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(grads[0], grads[1]);
}

}  // namespace
}  // namespace lseq

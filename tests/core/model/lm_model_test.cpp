// The decoder-only language model: gradients against finite differences (norm placements, learned positions,
// dropout, document masks, beyond the fused core's 128 positions), its tensor table, causal and document masks
// (a packed block of two documents gives each the log-probabilities it gets alone, on the fused and composed
// attention paths), gradients in step memory and --recompute-ffn, workspace planning, and its batch checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/model/lm/decoder_only_model.h"
#include "ffn_recompute_check.h"
#include "kernels/workspace.h"
#include "lm_test_util.h"
#include "model_test_util.h"
#include "step_gradients_check.h"
#include "util/error.h"

namespace lseq {
namespace {

using test::lines_batch;
using test::packed_batch;
using test::random_lines;
using test::tiny_lm_config;

void check_lm_gradients(const ModelConfig& config, const data::Batch& batch) {
  auto backend = kernels::make_cpu_backend(1);
  DecoderOnlyModel model(config, *backend);
  test::randomize_params(*backend, model.param_store(), 21, 0.1);
  kernels::Workspace ws(*backend, 0, "test workspace");
  const bool dropout = config.dropout > 0;
  auto loss = [&](const float*, bool backward, float*) {
    if (backward || dropout) return model.forward_backward(batch, 17, 3, 1.0f, ws).loss_sum;
    return model.forward_loss(batch, ws).loss_sum;
  };
  const test::GradCheckStats stats = test::check_gradients(*backend, model.param_store(), {}, loss);
  EXPECT_GT(stats.checks, 20);
}

data::Batch some_lines(uint64_t seed, int count = 3, int min_words = 0, int max_words = 6) {
  std::mt19937_64 rng(seed);
  return lines_batch(random_lines(rng, count, min_words, max_words, 13));
}

TEST(LmGradients, PreNormSinusoidalGelu) { check_lm_gradients(tiny_lm_config(), some_lines(1)); }
TEST(LmGradients, PostNormLearnedPositionsRelu) {
  check_lm_gradients(tiny_lm_config(NormPlacement::post, true, kernels::Activation::relu), some_lines(2));
}
TEST(LmGradients, PreNormLearnedPositionsWithDropout) {
  check_lm_gradients(tiny_lm_config(NormPlacement::pre, true, kernels::Activation::swish, 0.2f), some_lines(3));
}

// Document masks: the composed attention with key starts, and positions by id (learned: their gradient by id).
TEST(LmGradients, PackedBlocksWithDocumentMasks) {
  std::mt19937_64 rng(4);
  const auto lines = random_lines(rng, 5, 1, 5, 13);
  const data::Batch block = packed_batch({{lines[0], lines[1]}, {lines[2], lines[3], lines[4]}}, true);
  check_lm_gradients(tiny_lm_config(NormPlacement::post, true), block);
  check_lm_gradients(tiny_lm_config(NormPlacement::pre, false, kernels::Activation::gelu, 0.2f), block);
}

// Past the fused attention core's 128 positions: the composed path, with causal masks, on its own.
TEST(LmGradients, LongerThanTheFusedCore) {
  std::mt19937_64 rng(5);
  check_lm_gradients(tiny_lm_config(NormPlacement::pre, true, kernels::Activation::gelu, 0.0f, 150),
                     lines_batch(random_lines(rng, 1, 140, 140, 13)));
}

TEST(LmParams, TableFollowsTheDocumentedOrder) {
  auto backend = kernels::make_cpu_backend(1);
  DecoderOnlyModel sinusoidal(tiny_lm_config(NormPlacement::pre, false), *backend);
  const auto& p = sinusoidal.params();
  EXPECT_EQ(p.front().name, "embeddings.tgt.weight");
  EXPECT_EQ(p.front().shape, (std::vector<int64_t>{13, 8}));
  EXPECT_EQ(p[1].name, "decoder.l1.self_attn.qkv.weight");
  EXPECT_EQ(p[p.size() - 3].name, "decoder.final_norm.weight");
  EXPECT_EQ(p.back().name, "output.bias");
  for (const char* absent : {"output.weight", "embeddings.positions.weight", "decoder.l1.cross_attn.q.weight",
                             "encoder.l1.self_attn.qkv.weight"})
    EXPECT_THROW(sinusoidal.param_store().table().find(absent), Error) << absent;

  DecoderOnlyModel learned(tiny_lm_config(NormPlacement::post, true), *backend);
  EXPECT_EQ(learned.params()[1].name, "embeddings.positions.weight");
  EXPECT_EQ(learned.params()[1].shape, (std::vector<int64_t>{41, 8}));  // max-length + 1 positions
  EXPECT_THROW(learned.param_store().table().find("decoder.final_norm.weight"), Error) << "post-norm has none";
  EXPECT_EQ(learned.num_weights() + 2 * 8, sinusoidal.num_weights() + 41 * 8);
  EXPECT_NE(learned.positions(), nullptr);
  EXPECT_NE(sinusoidal.positions(), nullptr);
}

// Row r's logits [len, vocab] of a forward_logits result.
std::vector<float> row_logits(const std::vector<float>& logits, const data::Batch& b, int r, int from, int count) {
  const std::size_t vocab = logits.size() / (static_cast<std::size_t>(b.size) * b.tgt_len);
  const auto begin = logits.begin() + static_cast<std::ptrdiff_t>((static_cast<std::size_t>(r) * b.tgt_len + from) *
                                                                   vocab);
  return std::vector<float>(begin, begin + static_cast<std::ptrdiff_t>(count * vocab));
}

::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want, double tol) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

// A block of two documents with document masks gives each document exactly the logits it gets alone (positions
// restart at the second document's first token, attention stays inside each); without masks the second document
// sees the first. Short documents (alone: the fused core; in the block: composed) and long ones (composed).
TEST(LmDocumentMasks, ABlockOfTwoDocumentsGivesEachItsOwnLogProbs) {
  auto backend = kernels::make_cpu_backend(2);
  for (bool learned : {false, true})
    for (auto [first, second] : std::vector<std::pair<int, int>>{{5, 7}, {90, 70}}) {
      SCOPED_TRACE(std::to_string(first) + " + " + std::to_string(second) + (learned ? " learned" : " sinusoidal"));
      DecoderOnlyModel model(tiny_lm_config(NormPlacement::pre, learned, kernels::Activation::gelu, 0.0f, 200),
                             *backend);
      test::randomize_params(*backend, model.param_store(), 31, 0.3);
      std::mt19937_64 rng(first);
      const auto a = random_lines(rng, 1, first, first, 13)[0], b = random_lines(rng, 1, second, second, 13)[0];
      kernels::Workspace ws(*backend, 0, "test workspace");
      const data::Batch alone_a = lines_batch({a}), alone_b = lines_batch({b});
      const data::Batch block = packed_batch({{a, b}}, true), unmasked = packed_batch({{a, b}}, false);
      const auto logits_a = model.forward_logits(alone_a, ws), logits_b = model.forward_logits(alone_b, ws);
      const auto logits_block = model.forward_logits(block, ws), logits_unmasked = model.forward_logits(unmasked, ws);
      const int na = first + 1, nb = second + 1;
      EXPECT_TRUE(close(row_logits(logits_block, block, 0, 0, na), logits_a, 1e-5));
      EXPECT_TRUE(close(row_logits(logits_block, block, 0, na, nb), logits_b, 1e-5));
      EXPECT_FALSE(close(row_logits(logits_unmasked, unmasked, 0, na, nb), logits_b, 1e-3))
          << "without masks the second document attends to the first";
      // The block's nll is the sum of the documents'.
      std::vector<double> nll_block, nll_a, nll_b;
      model.forward_loss(block, ws, &nll_block);
      model.forward_loss(alone_a, ws, &nll_a);
      model.forward_loss(alone_b, ws, &nll_b);
      EXPECT_NEAR(nll_block[0], nll_a[0] + nll_b[0], 1e-4 * (1 + nll_block[0]));
    }
}

// One document over the whole row takes the composed path (masks), which must give what the fused core gives
// without masks: causal masking is the same on both paths.
TEST(LmDocumentMasks, ComposedAndFusedCausalAttentionAgree) {
  auto backend = kernels::make_cpu_backend(2);
  DecoderOnlyModel model(tiny_lm_config(NormPlacement::post, false, kernels::Activation::relu), *backend);
  test::randomize_params(*backend, model.param_store(), 41, 0.3);
  std::mt19937_64 rng(6);
  const auto lines = random_lines(rng, 3, 2, 30, 13);
  const data::Batch plain = lines_batch(lines);  // the fused core: lengths up to 128, no masks
  data::Batch masked = plain;
  masked.doc_starts.assign(plain.tgt_in.size(), 0);
  kernels::Workspace ws(*backend, 0, "test workspace");
  EXPECT_TRUE(close(model.forward_logits(masked, ws), model.forward_logits(plain, ws), 1e-5));
}

// Changing a later token never changes an earlier position's logits, on both attention paths.
TEST(LmDocumentMasks, AttentionIsCausal) {
  auto backend = kernels::make_cpu_backend(2);
  DecoderOnlyModel model(tiny_lm_config(NormPlacement::pre, true, kernels::Activation::gelu, 0.0f, 200), *backend);
  test::randomize_params(*backend, model.param_store(), 51, 0.3);
  kernels::Workspace ws(*backend, 0, "test workspace");
  for (int words : {30, 150}) {
    std::mt19937_64 rng(words);
    auto line = random_lines(rng, 1, words, words, 13)[0];
    const auto before = model.forward_logits(lines_batch({line}), ws);
    const int changed = words / 2;
    line[changed] = line[changed] == 4 ? 5 : 4;  // input position changed + 1
    const data::Batch after_batch = lines_batch({line});
    const auto after = model.forward_logits(after_batch, ws);
    const std::size_t vocab = 13, keep = static_cast<std::size_t>(changed + 1) * vocab;
    EXPECT_EQ(std::vector<float>(after.begin(), after.begin() + keep),
              std::vector<float>(before.begin(), before.begin() + keep))
        << words << " words";
    EXPECT_NE(after, before);
  }
}

TEST(LmTraining, GradientsInStepMemoryAndRecomputedFeedForward) {
  auto backend = kernels::make_cpu_backend(2);
  for (bool learned : {false, true}) {
    const ModelConfig config = tiny_lm_config(NormPlacement::pre, learned, kernels::Activation::gelu, 0.1f);
    DecoderOnlyModel source(config, *backend);
    test::randomize_params(*backend, source.param_store(), 61, 0.2);
    std::vector<float> params(source.num_params());
    backend->copy_to_host(params.data(), source.master(), params.size() * sizeof(float));
    std::mt19937_64 rng(7);
    const auto lines = random_lines(rng, 6, 1, 9, 13);
    const data::Batch masked = packed_batch({{lines[0], lines[1]}, {lines[2], lines[3]}}, true);
    test::expect_step_memory_gradients_match(*backend, config, kernels::DType::f32, params,
                                             {lines_batch(lines), masked});
    test::expect_recompute_ffn_matches(*backend, config, kernels::DType::f32, params, masked);
  }
}

TEST(LmTraining, WorkspacePlanCoversLinesAndBlocks) {
  auto backend = kernels::make_cpu_backend(1);
  DecoderOnlyModel model(tiny_lm_config(NormPlacement::pre, false, kernels::Activation::gelu, 0.0f, 140), *backend);
  const std::size_t plan = model.workspace_bytes(300, 141);
  std::mt19937_64 rng(8);
  const auto lines = random_lines(rng, 4, 50, 70, 13);
  for (const data::Batch& b : {lines_batch({lines[0], lines[1]}), packed_batch({{lines[0], lines[1]}}, true),
                               packed_batch({{lines[2], lines[3]}}, false)}) {
    EXPECT_LE(model.step_bytes(b, true), plan) << b.size << " x " << b.tgt_len;
    EXPECT_LE(model.step_bytes(b, false), model.step_bytes(b, true));
  }
}

TEST(LmBatches, BadBatchesAreRefused) {
  auto backend = kernels::make_cpu_backend(1);
  DecoderOnlyModel model(tiny_lm_config(), *backend);
  kernels::Workspace ws(*backend, 0, "test workspace");
  std::mt19937_64 rng(9);
  data::Batch with_source = lines_batch(random_lines(rng, 2, 1, 3, 13));
  with_source.src_len = 1;
  with_source.src = {5, 5};
  with_source.src_lengths = {1, 1};
  EXPECT_THROW(model.forward_loss(with_source, ws), Error);
  data::Batch late_start = packed_batch({{{4, 5}, {6}}}, true);
  late_start.doc_starts[0] = 1;  // a document that starts after its first token
  EXPECT_THROW(model.forward_loss(late_start, ws), Error);
  try {
    model.forward_loss(lines_batch(random_lines(rng, 1, 45, 45, 13)), ws);
    ADD_FAILURE() << "a sequence longer than the model's positions was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--max-length"), std::string::npos) << e.what();
  }
  ModelConfig translation = tiny_lm_config();
  translation.type = ModelType::transformer;
  translation.enc_depth = 1;
  EXPECT_THROW(DecoderOnlyModel(translation, *backend), Error);
}

// Training learns: plain gradient steps over the flat buffers lower the loss of a batch of lines (the model's own
// forward_backward, gradients read from grads(), the master weights written back with load_params).
TEST(LmTraining, LossDecreasesUnderGradientSteps) {
  auto backend = kernels::make_cpu_backend(1);
  DecoderOnlyModel model(tiny_lm_config(NormPlacement::pre, true), *backend);
  model.init_params(5);
  kernels::Workspace ws(*backend, 0, "test workspace");
  std::mt19937_64 rng(10);
  const data::Batch b = lines_batch(random_lines(rng, 6, 4, 12, 13));
  std::vector<float> params(model.num_params()), grads(model.num_params());
  const StepLoss before = model.forward_loss(b, ws);
  std::vector<double> losses;
  for (int step = 0; step < 30; ++step) {
    model.zero_grads();
    const StepLoss loss = model.forward_backward(b, 1, static_cast<uint64_t>(step), 1.0f, ws);
    losses.push_back(loss.nll_sum / static_cast<double>(loss.target_tokens));
    backend->copy_to_host(params.data(), model.master(), params.size() * sizeof(float));
    backend->copy_to_host(grads.data(), model.grads(), grads.size() * sizeof(float));
    for (std::size_t i = 0; i < params.size(); ++i) params[i] -= 0.5f * grads[i] / loss.target_tokens;
    model.load_params(params);
  }
  // No dropout: the training step's loss is the forward loss of the same weights.
  EXPECT_NEAR(losses.front(), before.nll_sum / before.target_tokens, 1e-5);
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << losses.front() << " -> " << losses.back();
  const StepLoss after = model.forward_loss(b, ws);
  EXPECT_LT(after.nll_sum / after.target_tokens, 0.7 * losses.front());
}

// A language model runs its attention composed exactly where the fused core cannot: past its positions or head
// size, with attention dropout, or with document masks; lstrain's log line names the reason.
TEST(LmBatches, AttentionIsComposedWhereTheFusedCoreCannotRun) {
  constexpr int kFused = kernels::Backend::kMaxFusedAttentionLen;
  ModelConfig c = test::tiny_lm_config(NormPlacement::pre, true, kernels::Activation::gelu, 0.0f, 1023);
  c.dim_emb = 64, c.heads = 1;
  EXPECT_EQ(lm_composed_attention_reason(c, false), "");
  EXPECT_TRUE(kernels::Backend::fused_attention_fits(1024, 1024, 64));
  EXPECT_NE(lm_composed_attention_reason(c, true).find("--lm-document-masks"), std::string::npos);
  c.max_length = kFused;
  EXPECT_NE(lm_composed_attention_reason(c, false).find("--max-length"), std::string::npos);
  c.max_length = kFused - 1, c.dim_emb = 128, c.heads = 2;
  EXPECT_EQ(lm_composed_attention_reason(c, false), "");
  c.heads = 1;  // heads of 128
  EXPECT_NE(lm_composed_attention_reason(c, false).find("heads of 128"), std::string::npos);
  c.heads = 2, c.dropout_attention = 0.1f;  // the fused core drops out past 128 positions
  EXPECT_EQ(lm_composed_attention_reason(c, false), "");
  c.max_length = 100;
  EXPECT_NE(lm_composed_attention_reason(c, false).find("--transformer-dropout-attention"), std::string::npos);
}

}  // namespace
}  // namespace lseq

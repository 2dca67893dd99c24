// The language model on the GPU against the CPU oracle, as gpu_model_test.cpp does for the encoder-decoder model:
// one training step (loss and gradient norm) over lines (the fused attention core) and over packed blocks with
// document masks (the composed core with key starts), in fp32, bf16 and fp16; incremental decoding of prompts of
// different lengths (per-step log-probabilities, greedy search); recorded steps against op-by-op steps; contexts
// longer than the fused attention core's (the composed core). The same random parameters on both sides. Skips
// where no GPU is present; LSEQ_TEST_GPU_WITH_CPU=1 runs the fp32 parts against a second CPU backend instead (that
// checks the tests themselves, not the CUDA code).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/model/lm/decoder_only_model.h"
#include "core/model/lm/decoder_only_step_model.h"
#include "core/search/beam_search.h"
#include "core/search/sampling.h"
#include "data/translation_input.h"
#include "gpu_model_test_util.h"
#include "kernels/workspace.h"
#include "lm_test_util.h"
#include "model_test_util.h"
#include "util/error.h"

namespace lseq {
namespace {

using kernels::DType;
using test::cpu_stands_in;
using test::on_cuda;
using test::rel;
using test::sixteen_bits;
using test::StepResult;

constexpr int kLmVocab = 500;
// Positions up to which the GPU stages a whole attention slice (longer ones go tile by tile).
constexpr int kWholeSlice = 128;

ModelConfig small_lm(bool learned, int max_length = kWholeSlice - 1, float attention_dropout = 0.0f) {
  ModelConfig c = test::tiny_lm_config(NormPlacement::pre, learned, kernels::Activation::gelu, 0.0f, max_length);
  c.dropout_attention = attention_dropout;
  c.src_vocab = c.tgt_vocab = kLmVocab;
  c.dim_emb = 64;
  c.heads = 4;
  c.dim_ffn = 256;
  return c;
}

struct LmOracle {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend(2);
  DecoderOnlyModel model;
  std::vector<float> params;
  LmOracle(bool learned, uint64_t seed, double noise, int max_length = kWholeSlice - 1, float attention_dropout = 0.0f)
      : model(small_lm(learned, max_length, attention_dropout), *backend) {
    test::randomize_params(*backend, model.param_store(), seed, noise);
    params.resize(model.num_params());
    backend->copy_to_host(params.data(), model.master(), params.size() * sizeof(float));
  }
};

struct LmOnGpu {
  std::unique_ptr<kernels::Backend> backend = on_cuda() ? kernels::make_cuda_backend(0) : kernels::make_cpu_backend(3);
  std::unique_ptr<DecoderOnlyModel> model;
  LmOnGpu(bool learned, const std::vector<float>& params, DType dt, int max_length = kWholeSlice - 1,
          float attention_dropout = 0.0f) {
    model = std::make_unique<DecoderOnlyModel>(small_lm(learned, max_length, attention_dropout), *backend, dt);
    model->load_params(params);
  }
};

StepResult one_step(DecoderOnlyModel& model, const data::Batch& b, float loss_scale) {
  kernels::Workspace ws(model.backend(), 0, "test workspace");
  model.zero_grads();
  const StepLoss loss = model.forward_backward(b, 7, 1, loss_scale, ws);
  std::vector<float> grads(model.num_params());
  model.backend().copy_to_host(grads.data(), model.grads(), grads.size() * sizeof(float));
  double sq = 0;
  for (float g : grads) sq += double(g) * g;
  const double tokens = static_cast<double>(loss.target_tokens);
  return {loss.loss_sum / tokens, std::sqrt(sq) / (loss_scale * tokens)};
}

TEST(GpuLm, OneTrainingStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(3);
  const auto lines = test::random_lines(rng, 40, 3, 40, kLmVocab);
  const auto long_lines = test::random_lines(rng, 6, 40, 60, kLmVocab);
  // Lines (fused core), and blocks of documents with masks (composed core, key starts). Longer contexts:
  // GpuLm.LongContextMatchesTheCpu.
  const std::vector<data::Batch> batches = {
      test::lines_batch(lines),
      test::packed_batch({{long_lines[0], long_lines[1]}, {long_lines[2], long_lines[3]}, {long_lines[4]}}, true)};
  for (bool learned : {false, true})
    for (const data::Batch& b : batches) {
      SCOPED_TRACE(std::string(learned ? "learned" : "sinusoidal") + (b.doc_starts.empty() ? " lines" : " blocks"));
      LmOracle cpu(learned, 11, 0.1);
      const StepResult want = one_step(cpu.model, b, 1.0f);
      ASSERT_TRUE(std::isfinite(want.loss) && want.grad_norm > 0);
      LmOnGpu fp32(learned, cpu.params, DType::f32);
      const StepResult got = one_step(*fp32.model, b, 1.0f);
      EXPECT_LT(rel(got.loss, want.loss), 1e-5) << got.loss << " vs " << want.loss;
      EXPECT_LT(rel(got.grad_norm, want.grad_norm), 1e-4) << got.grad_norm << " vs " << want.grad_norm;
      for (DType dt : sixteen_bits()) {
        const float scale = dt == DType::f16 ? 1024.0f : 1.0f;
        LmOnGpu half(learned, cpu.params, dt);
        const StepResult h = one_step(*half.model, b, scale);
        EXPECT_LT(rel(h.loss, want.loss), 2e-2) << kernels::dtype_name(dt) << ": " << h.loss << " vs " << want.loss;
        EXPECT_LT(rel(h.grad_norm, want.grad_norm), 5e-2)
            << kernels::dtype_name(dt) << ": " << h.grad_norm << " vs " << want.grad_norm;
      }
    }
}

data::Batch prompts(uint64_t seed, const std::vector<int>& words) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> lines;
  for (int n : words) lines.push_back(test::random_lines(rng, 1, n, n, kLmVocab)[0]);
  return data::make_source_batch(lines, {});
}

// Per-step log-probabilities of prompts of different lengths (one near the model's limit), fed the CPU's greedy tokens,
// then greedy search end to end.
// Per-step log-probabilities of the prompts of `b` on both models (fp32), fed the CPU's greedy tokens for `steps`
// steps, then greedy search end to end within max_context positions: the same continuations.
void expect_decoding_matches(const DecoderOnlyModel& cpu, const DecoderOnlyModel& gpu, const data::Batch& b, int steps,
                             int max_context) {
  DecoderOnlyStepModel want(cpu, b.size, b.src_len, steps + 1);
  DecoderOnlyStepModel got(gpu, b.size, b.src_len, steps + 1);
  for (StepModel* d : std::initializer_list<StepModel*>{&want, &got}) d->start(b.src, b.src_lengths, b.size, b.src_len);
  std::vector<int32_t> tokens(b.size, data::kBosId);
  std::vector<float> lp_want, lp_got;
  for (int t = 0; t < steps; ++t) {
    want.step(tokens, lp_want);
    got.step(tokens, lp_got);
    ASSERT_EQ(lp_got.size(), lp_want.size());
    double worst = 0;
    for (std::size_t i = 0; i < lp_want.size(); ++i) worst = std::max(worst, std::fabs(double(lp_got[i]) - lp_want[i]));
    EXPECT_LT(worst, 1e-4) << "fp32 step " << t;
    for (int s = 0; s < b.size; ++s) {
      const float* row = lp_want.data() + static_cast<std::size_t>(s) * kLmVocab;
      tokens[s] = static_cast<int32_t>(std::max_element(row + 4, row + kLmVocab) - row);
    }
  }
  BeamSearchOptions options;
  options.beam_size = 1;
  options.max_new_tokens = steps;
  options.max_context = max_context;
  DecoderOnlyStepModel cpu_search(cpu, b.size, b.src_len, steps + 1);
  DecoderOnlyStepModel gpu_search(gpu, b.size, b.src_len, steps + 1);
  const auto a = beam_search(cpu_search, b, options), c = beam_search(gpu_search, b, options);
  for (std::size_t s = 0; s < a.size(); ++s) EXPECT_EQ(c[s][0].tokens, a[s][0].tokens) << "prompt " << s;
}

TEST(GpuLm, IncrementalDecodingMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  LmOracle cpu(true, 31, 0.3);
  LmOnGpu fp32(true, cpu.params, DType::f32);
  expect_decoding_matches(cpu.model, *fp32.model, prompts(5, {7, 0, 110, 3}), 8, kWholeSlice);
}

// Recorded steps (CUDA graphs) give, bit for bit, what op-by-op steps give: beam search over two batches of prompts
// (the live count changes as continuations end), twice.
TEST(GpuLm, RecordedDecodingStepsEqualOpByOpSteps) {
  SKIP_WITHOUT_GPU();
  LmOracle cpu(false, 37, 0.3);
  LmOnGpu gpu(false, cpu.params, on_cuda() ? DType::bf16 : DType::f32);
  const std::vector<data::Batch> batches = {prompts(11, {7, 1, 12, 4, 9}), prompts(12, {3, 15, 6})};
  BeamSearchOptions options;
  options.beam_size = 4;
  options.max_new_tokens = 10;
  DecoderOnlyStepModel recorded(*gpu.model, 5 * options.beam_size, 16, 11, 5);
  DecoderOnlyStepModel plain(*gpu.model, 5 * options.beam_size, 16, 11, 5);
  plain.use_graphs(false);
  for (int round = 0; round < 2; ++round)
    for (const data::Batch& b : batches) {
      const auto want = beam_search(plain, b, options), got = beam_search(recorded, b, options);
      for (std::size_t s = 0; s < want.size(); ++s) {
        ASSERT_EQ(got[s].size(), want[s].size());
        for (std::size_t i = 0; i < want[s].size(); ++i) {
          EXPECT_EQ(got[s][i].tokens, want[s][i].tokens) << "round " << round << " prompt " << s << " hyp " << i;
          EXPECT_EQ(got[s][i].word_log_probs, want[s][i].word_log_probs) << "prompt " << s << " hyp " << i;
        }
      }
    }
  // Live rows are rounded up to buckets, so shrinking beams reuse a graph: at least one per batch's bucket
  // (20 and 12 rows here) was recorded and then replayed.
  if (on_cuda()) EXPECT_GE(recorded.recorded_graphs(), 2u);
  EXPECT_EQ(plain.recorded_graphs(), 0u);
}

// Top-k sampling drawn on the GPU with each step queued before the previous one's draws are read (the default)
// against draws on the host (queue_steps off), on the same bf16 model: the same continuations, their
// log-probabilities within rounding (a queued step may still hold rows that finished, so its products may run at
// another row count), and the same continuations again on a second run. Limits differ by prompt (max_context).
TEST(GpuLm, QueuedDrawsOnTheDeviceEqualDrawsOnTheHost) {
  SKIP_WITHOUT_GPU();
  LmOracle cpu(true, 41, 0.3);
  LmOnGpu gpu(true, cpu.params, on_cuda() ? DType::bf16 : DType::f32);
  std::vector<int> words;
  for (int i = 0; i < 40; ++i) words.push_back((i * 7) % 30);
  data::Batch batch = prompts(17, words);
  batch.line_ids.resize(words.size());
  for (std::size_t i = 0; i < words.size(); ++i) batch.line_ids[i] = static_cast<int64_t>(i);
  SamplingOptions o = parse_output_sampling({"topk", "8", "1.2"});
  o.seed = 3;
  o.max_new_tokens = 24;
  o.max_context = 40;  // prompts of more than 15 words get fewer new tokens
  DecoderOnlyStepModel queued(*gpu.model, 40, 31, 25), on_host(*gpu.model, 40, 31, 25);
  const auto first = sample(queued, batch, o), again = sample(queued, batch, o);
  o.queue_steps = false;
  const auto want = sample(on_host, batch, o);
  std::size_t tokens = 0;
  for (std::size_t s = 0; s < words.size(); ++s) {
    EXPECT_EQ(again[s][0].tokens, first[s][0].tokens) << "prompt " << s;
    ASSERT_EQ(first[s][0].tokens, want[s][0].tokens) << "prompt " << s;
    for (std::size_t i = 0; i < want[s][0].word_log_probs.size(); ++i)
      EXPECT_NEAR(first[s][0].word_log_probs[i], want[s][0].word_log_probs[i], 2e-2) << "prompt " << s << " " << i;
    tokens += want[s][0].tokens.size();
  }
  EXPECT_GT(tokens, 400u);
}

// A language model whose positions exceed the whole-slice attention kernels' (tiled kernels on the GPU; blocks with
// document masks: OneTrainingStepMatchesTheCpu's composed core): one training step
// over lines of 150-250 tokens (causal, no document masks) against the CPU in fp32 and bf16, then prompts of up to
// 200 tokens decoded past position 128 (per-step log-probabilities and greedy search, fp32).
TEST(GpuLm, LongContextMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  constexpr int kMaxLength = 300;
  std::mt19937_64 rng(41);
  const data::Batch lines = test::lines_batch(test::random_lines(rng, 5, 150, 250, kLmVocab));
  ASSERT_GT(lines.tgt_len, kWholeSlice);
  for (bool learned : {false, true}) {
    SCOPED_TRACE(learned ? "learned" : "sinusoidal");
    LmOracle cpu(learned, 43, 0.1, kMaxLength);
    const StepResult want = one_step(cpu.model, lines, 1.0f);
    ASSERT_TRUE(std::isfinite(want.loss) && want.grad_norm > 0);
    LmOnGpu fp32(learned, cpu.params, DType::f32, kMaxLength);
    const StepResult got = one_step(*fp32.model, lines, 1.0f);
    EXPECT_LT(rel(got.loss, want.loss), 1e-5) << got.loss << " vs " << want.loss;
    EXPECT_LT(rel(got.grad_norm, want.grad_norm), 1e-4) << got.grad_norm << " vs " << want.grad_norm;
    for (DType dt : sixteen_bits()) {
      const float scale = dt == DType::f16 ? 1024.0f : 1.0f;
      LmOnGpu half(learned, cpu.params, dt, kMaxLength);
      const StepResult h = one_step(*half.model, lines, scale);
      EXPECT_LT(rel(h.loss, want.loss), 2e-2) << kernels::dtype_name(dt) << ": " << h.loss << " vs " << want.loss;
      EXPECT_LT(rel(h.grad_norm, want.grad_norm), 5e-2)
          << kernels::dtype_name(dt) << ": " << h.grad_norm << " vs " << want.grad_norm;
    }
  }
  LmOracle cpu(true, 47, 0.3, kMaxLength);
  LmOnGpu fp32(true, cpu.params, DType::f32, kMaxLength);
  expect_decoding_matches(cpu.model, *fp32.model, prompts(13, {200, 9, 140}), 12, kMaxLength + 1);
}

// Attention dropout past 128 positions stays on the fused core (the tiled kernels draw the CPU's masks): one
// training step against the CPU's with the same dropout, in fp32 and the 16-bit types.
TEST(GpuLm, LongContextWithAttentionDropoutMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  constexpr int kMaxLength = 300;
  constexpr float kDropout = 0.2f;
  std::mt19937_64 rng(53);
  const data::Batch lines = test::lines_batch(test::random_lines(rng, 5, 150, 250, kLmVocab));
  ASSERT_GT(lines.tgt_len, kWholeSlice);
  LmOracle cpu(false, 59, 0.1, kMaxLength, kDropout);
  const StepResult want = one_step(cpu.model, lines, 1.0f);
  LmOracle undropped(false, 59, 0.1, kMaxLength);
  const StepResult plain = one_step(undropped.model, lines, 1.0f);
  ASSERT_GT(rel(want.loss, plain.loss), 1e-4) << "the dropout changed nothing";
  LmOnGpu fp32(false, cpu.params, DType::f32, kMaxLength, kDropout);
  const StepResult got = one_step(*fp32.model, lines, 1.0f);
  EXPECT_LT(rel(got.loss, want.loss), 1e-5) << got.loss << " vs " << want.loss;
  EXPECT_LT(rel(got.grad_norm, want.grad_norm), 1e-4) << got.grad_norm << " vs " << want.grad_norm;
  for (DType dt : sixteen_bits()) {
    const float scale = dt == DType::f16 ? 1024.0f : 1.0f;
    LmOnGpu half(false, cpu.params, dt, kMaxLength, kDropout);
    const StepResult h = one_step(*half.model, lines, scale);
    EXPECT_LT(rel(h.loss, want.loss), 2e-2) << kernels::dtype_name(dt) << ": " << h.loss << " vs " << want.loss;
    EXPECT_LT(rel(h.grad_norm, want.grad_norm), 5e-2)
        << kernels::dtype_name(dt) << ": " << h.grad_norm << " vs " << want.grad_norm;
  }
}

}  // namespace
}  // namespace lseq

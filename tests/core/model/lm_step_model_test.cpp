// Incremental decoding of the language model against full recomputation: the log-probabilities of every step
// (prompts of different lengths prefilled together, an empty prompt, prefill in pieces, past the fused core's 128
// positions) equal the full forward pass's; select() re-indexing; greedy generation equals the argmax of full
// recomputation at every step; forced scoring (lsscore) equals the forward loss; the planned limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/model/lm/decoder_only_model.h"
#include "core/model/lm/decoder_only_step_model.h"
#include "core/search/beam_search.h"
#include "core/search/forced_scoring.h"
#include "core/search/sampling.h"
#include "data/translation_input.h"
#include "kernels/workspace.h"
#include "lm_test_util.h"
#include "model_test_util.h"
#include "util/error.h"

namespace lseq {
namespace {

using test::lines_batch;
using test::random_lines;
using test::tiny_lm_config;
constexpr int kLmStepVocab = 13;

struct Lm {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend(2);
  std::unique_ptr<DecoderOnlyModel> model;
  kernels::Workspace ws{*backend, 0, "test workspace"};
  explicit Lm(const ModelConfig& config, uint64_t seed = 21) {
    model = std::make_unique<DecoderOnlyModel>(config, *backend);
    test::randomize_params(*backend, model->param_store(), seed, 0.3);
  }
  // log p(. | bos sequence[0..i]) for every i, from the full forward pass: [len][vocab].
  std::vector<std::vector<double>> full(const std::vector<int32_t>& sequence) {
    const std::vector<float> logits = model->forward_logits(lines_batch({sequence}), ws);
    std::vector<std::vector<double>> rows;
    for (std::size_t i = 0; i <= sequence.size(); ++i)
      rows.push_back(test::log_softmax_row(&logits[i * kLmStepVocab], kLmStepVocab));
    return rows;
  }
};

::testing::AssertionResult rows_close(const float* got, const std::vector<double>& want, double tol) {
  for (std::size_t v = 0; v < want.size(); ++v)
    if (!(std::abs(got[v] - want[v]) <= tol * (1 + std::abs(want[v]))))
      return ::testing::AssertionFailure() << "entry " << v << ": " << got[v] << " vs " << want[v];
  return ::testing::AssertionSuccess();
}

// Prompts as start() takes them: ids + eos, padded with 0.
data::Batch prompts_batch(const std::vector<std::vector<int32_t>>& prompts) {
  return data::make_source_batch(prompts, {});
}

// Feeds prompt + continuation step by step (the first step feeds the prompt's last token: search passes bos) and
// compares every step's distribution with the full forward pass over the whole sequence.
void expect_incremental_equals_full(Lm& lm, const std::vector<std::vector<int32_t>>& prompts,
                                    const std::vector<std::vector<int32_t>>& continuations, int chunk = 0) {
  const int n = static_cast<int>(prompts.size());
  int longest_prompt = 1, steps = 0;
  for (int s = 0; s < n; ++s) {
    longest_prompt = std::max(longest_prompt, static_cast<int>(prompts[s].size()) + 1);
    steps = std::max(steps, static_cast<int>(continuations[s].size()) + 1);
  }
  DecoderOnlyStepModel dec(*lm.model, n, longest_prompt, steps);
  if (chunk > 0) dec.set_prefill_chunk(chunk);
  const data::Batch b = prompts_batch(prompts);
  dec.start(b.src, b.src_lengths, n, b.src_len);
  std::vector<std::vector<std::vector<double>>> want(n);
  for (int s = 0; s < n; ++s) {
    std::vector<int32_t> sequence = prompts[s];
    sequence.insert(sequence.end(), continuations[s].begin(), continuations[s].end());
    want[s] = lm.full(sequence);
  }
  std::vector<float> log_probs;
  for (int t = 0; t < steps; ++t) {
    std::vector<int32_t> tokens;
    for (int s = 0; s < n; ++s)
      tokens.push_back(t == 0 ? data::kBosId : continuations[s][std::min<std::size_t>(t - 1, continuations[s].size() - 1)]);
    dec.step(tokens, log_probs);
    for (int s = 0; s < n; ++s) {
      if (t > static_cast<int>(continuations[s].size())) continue;  // this row's sequence has ended
      const std::size_t position = prompts[s].size() + t;
      EXPECT_TRUE(rows_close(&log_probs[static_cast<std::size_t>(s) * kLmStepVocab], want[s][position], 2e-5))
          << "prompt " << s << " step " << t;
    }
  }
}

// Steps run the feed-forward activation inside the first product (ReLU, GELU) or after it (swish), and a pre-norm
// stack's residual adds fused with the next LayerNorm: the full pass runs neither.
TEST(LmStepModel, IncrementalEqualsFullForwardForPromptsOfDifferentLengths) {
  for (auto act : {kernels::Activation::gelu, kernels::Activation::swish})
    for (bool learned : {false, true})
      for (NormPlacement norm : {NormPlacement::pre, NormPlacement::post}) {
        SCOPED_TRACE(std::string(learned ? "learned" : "sinusoidal") + (norm == NormPlacement::pre ? " pre" : " post") +
                     (act == kernels::Activation::gelu ? " gelu" : " swish"));
        Lm lm(tiny_lm_config(norm, learned, act, 0.3f));  // dropout must not apply
        std::mt19937_64 rng(3);
        auto prompts = random_lines(rng, 4, 1, 9, kLmStepVocab);
        prompts[2].clear();  // an empty prompt: the first step feeds bos
        const auto continuations = random_lines(rng, 4, 1, 6, kLmStepVocab);
        expect_incremental_equals_full(lm, prompts, continuations);
      }
}

TEST(LmStepModel, PrefillInPiecesEqualsOnePiece) {
  Lm lm(tiny_lm_config());
  std::mt19937_64 rng(4);
  const auto prompts = random_lines(rng, 3, 5, 12, kLmStepVocab);
  const auto continuations = random_lines(rng, 3, 2, 4, kLmStepVocab);
  expect_incremental_equals_full(lm, prompts, continuations, 3);
}

// Prompts and continuations past 128 positions: the full pass runs attention composed, the steps attention_step.
TEST(LmStepModel, LongContextBeyondTheFusedCore) {
  Lm lm(tiny_lm_config(NormPlacement::pre, true, kernels::Activation::relu, 0.0f, 200));
  std::mt19937_64 rng(5);
  const std::vector<std::vector<int32_t>> prompts = {random_lines(rng, 1, 140, 140, kLmStepVocab)[0],
                                                     random_lines(rng, 1, 20, 20, kLmStepVocab)[0]};
  const auto continuations = random_lines(rng, 2, 6, 6, kLmStepVocab);
  expect_incremental_equals_full(lm, prompts, continuations, 64);
}

// select(): hypotheses that continue other rows (beam search's reordering) read their parents' histories.
TEST(LmStepModel, SelectReindexesTheCaches) {
  Lm lm(tiny_lm_config());
  std::mt19937_64 rng(6);
  const auto prompts = random_lines(rng, 2, 2, 5, kLmStepVocab);
  DecoderOnlyStepModel dec(*lm.model, 6, 6, 6);
  const data::Batch b = prompts_batch(prompts);
  dec.start(b.src, b.src_lengths, 2, b.src_len);
  std::vector<float> lp;
  dec.step({data::kBosId, data::kBosId}, lp);
  // Three hypotheses from prompt 1 (rows 0..2), one from prompt 0, in that order; then they continue differently.
  dec.select({1, 1, 1, 0}, {1, 1, 1, 0});
  const std::vector<int32_t> first = {4, 5, 6, 7};
  dec.step(first, lp);
  dec.select({3, 2, 0}, {0, 1, 1});
  const std::vector<int32_t> second = {8, 9, 10};
  dec.step(second, lp);
  const std::vector<std::vector<int32_t>> histories = {{7, 8}, {6, 9}, {4, 10}};
  const std::vector<int> prompt_of = {0, 1, 1};
  for (int h = 0; h < 3; ++h) {
    std::vector<int32_t> sequence = prompts[prompt_of[h]];
    sequence.insert(sequence.end(), histories[h].begin(), histories[h].end());
    EXPECT_TRUE(rows_close(&lp[static_cast<std::size_t>(h) * kLmStepVocab], lm.full(sequence).back(), 2e-5)) << h;
  }
}

// Greedy generation equals, step by step, the argmax over a full recomputation of the sequence so far.
TEST(LmStepModel, GreedyEqualsArgmaxOfFullRecomputation) {
  Lm lm(tiny_lm_config(NormPlacement::pre, false, kernels::Activation::gelu), 77);
  std::mt19937_64 rng(7);
  const auto prompts = random_lines(rng, 5, 1, 8, kLmStepVocab);
  BeamSearchOptions o;
  o.beam_size = 1;
  o.max_new_tokens = 8;
  o.max_context = 40;
  DecoderOnlyStepModel dec(*lm.model, 5, 9, 9);
  const auto lists = beam_search(dec, prompts_batch(prompts), o);
  int tokens = 0;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    std::vector<int32_t> sequence = prompts[s], expected;
    while (static_cast<int>(expected.size()) < o.max_new_tokens) {
      const std::vector<double> row = lm.full(sequence).back();
      int32_t best = data::kEosId;
      for (int32_t v = data::kEosId + 1; v < kLmStepVocab; ++v)
        if (row[v] > row[best]) best = v;
      if (best == data::kEosId) break;
      expected.push_back(best);
      sequence.push_back(best);
    }
    EXPECT_EQ(lists[s].front().tokens, expected) << "prompt " << s;
    tokens += static_cast<int>(expected.size());
  }
  EXPECT_GT(tokens, 5) << "the comparison needs continuations";
}

// Beam search and seeded sampling over the step model: each result's reported log-probability is what forced
// scoring gives for it, and sampling with one seed repeats.
TEST(LmStepModel, BeamAndSamplingScoresAreForcedScores) {
  Lm lm(tiny_lm_config(NormPlacement::post, true, kernels::Activation::relu), 8);
  std::mt19937_64 rng(8);
  const auto prompts = random_lines(rng, 4, 1, 6, kLmStepVocab);
  DecoderOnlyStepModel dec(*lm.model, 16, 7, 7, 4);
  BeamSearchOptions o;
  o.beam_size = 4;
  o.max_new_tokens = 6;
  const auto beams = beam_search(dec, prompts_batch(prompts), o);
  SamplingOptions so = parse_output_sampling({"topk", "5", "0.9"});
  so.seed = 9;
  so.max_new_tokens = 6;
  data::Batch lined = prompts_batch(prompts);
  lined.line_ids = {0, 1, 2, 3};
  const auto sampled = sample(dec, lined, so), again = sample(dec, lined, so);
  std::vector<std::vector<int32_t>> sources, targets;
  std::vector<double> reported;
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    EXPECT_EQ(sampled[s][0].tokens, again[s][0].tokens);
    for (const Hypothesis& h : beams[s]) sources.push_back(prompts[s]), targets.push_back(h.tokens),
                                          reported.push_back(h.log_prob);
    sources.push_back(prompts[s]), targets.push_back(sampled[s][0].tokens), reported.push_back(sampled[s][0].log_prob);
  }
  data::Batch forced = data::make_source_batch(sources, {});
  data::set_batch_targets(forced, targets);
  DecoderOnlyStepModel scorer(*lm.model, static_cast<int>(sources.size()), 7, 7);
  const auto scores = forced_word_log_probs(scorer, forced);
  for (std::size_t i = 0; i < scores.size(); ++i) EXPECT_NEAR(sum_log_probs(scores[i]), reported[i], 1e-4) << i;
}

// Top-k sampling drawn by the step model's backend with the next step queued before the draws are read
// (SamplingOptions::queue_steps) gives what drawing on the host gives: the same tokens, token sink calls and finished
// sentences in the same order, for prompts whose limits differ, continuations that draw eos early (a row already fed
// to the next step) and ones stopped at their limit (a row leaving before it). The log-probabilities agree to
// rounding: a queued step may still hold rows that finished, and the CPU's products round a row's last bits
// differently at another row count.
TEST(LmStepModel, QueuedDrawsEqualDrawsOnTheHost) {
  Lm lm(tiny_lm_config(NormPlacement::pre, true, kernels::Activation::gelu), 12);
  std::mt19937_64 rng(12);
  const auto prompts = random_lines(rng, 12, 0, 6, kLmStepVocab);
  struct Run {
    std::vector<NBestList> lists;
    std::vector<std::pair<int, int32_t>> tokens;
    std::vector<int> finished;
  };
  auto run = [&](DecoderOnlyStepModel& dec, const SamplingOptions& o) {
    Run r;
    data::Batch batch = prompts_batch(prompts);
    batch.line_ids.resize(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) batch.line_ids[i] = static_cast<int64_t>(40 + i);
    r.lists = sample(
        dec, batch, o,
        [&](int s, int32_t token) {
          r.tokens.push_back({s, token});
        },
        [&](int s, const NBestList&) { r.finished.push_back(s); });
    return r;
  };
  for (int k : {1, 3, 9}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    SamplingOptions o = parse_output_sampling({"topk", std::to_string(k), "0.8"});
    o.seed = 5;
    o.max_new_tokens = 6;
    o.max_context = 9;  // prompts of 4-6 words get fewer new tokens
    DecoderOnlyStepModel queued(*lm.model, 12, 7, 7), on_host(*lm.model, 12, 7, 7);
    ASSERT_TRUE(queued.can_draw());
    const Run got = run(queued, o);
    o.queue_steps = false;
    const Run want = run(on_host, o);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.finished, want.finished);
    int early = 0, at_limit = 0;
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      EXPECT_EQ(got.lists[s][0].tokens, want.lists[s][0].tokens) << "prompt " << s;
      const std::vector<float>& lps = got.lists[s][0].word_log_probs;
      ASSERT_EQ(lps.size(), want.lists[s][0].word_log_probs.size()) << "prompt " << s;
      for (std::size_t i = 0; i < lps.size(); ++i)
        EXPECT_NEAR(lps[i], want.lists[s][0].word_log_probs[i], 1e-5) << "prompt " << s << " token " << i;
      const int limit = output_limit(static_cast<int>(prompts[s].size()), 3, o.max_new_tokens, o.max_context);
      early += static_cast<int>(want.lists[s][0].tokens.size()) < limit;
      at_limit += static_cast<int>(want.lists[s][0].tokens.size()) == limit;
    }
    EXPECT_GT(early, 0) << "no continuation drew eos before its limit";
    EXPECT_GT(at_limit, 0) << "no continuation reached its limit";
    // Queued, the steps run ahead of the reading by one at most: a last step whose rows all drew eos already.
    EXPECT_GE(queued.steps(), on_host.steps());
    EXPECT_LE(queued.steps(), on_host.steps() + 1);
  }
}

// lsscore's way (an empty prompt, the line as its forced continuation) gives the forward pass's sentence nll.
TEST(LmStepModel, ForcedScoringEqualsTheForwardLoss) {
  Lm lm(tiny_lm_config(NormPlacement::pre, true));
  std::mt19937_64 rng(10);
  auto lines = random_lines(rng, 6, 0, 20, kLmStepVocab);
  data::Batch forced = data::make_source_batch(std::vector<std::vector<int32_t>>(lines.size()), {});
  data::set_batch_targets(forced, lines);
  DecoderOnlyStepModel scorer(*lm.model, 6, 1, 21);
  const auto scores = forced_word_log_probs(scorer, forced);
  std::vector<double> nll;
  lm.model->forward_loss(lines_batch(lines), lm.ws, &nll);
  for (std::size_t s = 0; s < lines.size(); ++s) {
    ASSERT_EQ(scores[s].size(), lines[s].size() + 1) << "every word and eos";
    EXPECT_NEAR(-sum_log_probs(scores[s]), nll[s], 1e-4 * (1 + nll[s])) << s;
  }
}

TEST(LmStepModel, LimitsAreChecked) {
  Lm lm(tiny_lm_config(NormPlacement::pre, false, kernels::Activation::gelu, 0.0f, 10));
  DecoderOnlyStepModel dec(*lm.model, 2, 4, 3);
  std::vector<float> lp;
  const data::Batch three = prompts_batch({{4}, {5}, {6}});
  EXPECT_THROW(dec.start(three.src, three.src_lengths, 3, three.src_len), Error);  // more prompts than planned
  const data::Batch long_prompt = prompts_batch({{4, 5, 6, 7, 8}});
  EXPECT_THROW(dec.start(long_prompt.src, long_prompt.src_lengths, 1, long_prompt.src_len), Error);
  const data::Batch ok = prompts_batch({{4, 5}, {6}});
  dec.start(ok.src, ok.src_lengths, 2, ok.src_len);
  for (int t = 0; t < 3; ++t) dec.step({4, 4}, lp);
  EXPECT_THROW(dec.step({4, 4}, lp), Error) << "more steps than planned";
  EXPECT_THROW(dec.select({2}, {0}), Error) << "a parent that is not live";
  EXPECT_THROW(DecoderOnlyStepModel(*lm.model, 0, 4, 3), Error);
  // A prompt that leaves no position for a continuation.
  DecoderOnlyStepModel wide(*lm.model, 1, 12, 2);
  std::mt19937_64 rng(11);
  const data::Batch too_long = prompts_batch({random_lines(rng, 1, 11, 11, kLmStepVocab)[0]});
  EXPECT_THROW(wide.start(too_long.src, too_long.src_lengths, 1, too_long.src_len), Error);
}

}  // namespace
}  // namespace lseq

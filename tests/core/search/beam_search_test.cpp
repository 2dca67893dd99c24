// Beam search over a toy StepModel: greedy equivalence, exhaustive optimality, batch independence, n-best
// shape, and agreement with teacher-forced scoring.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/search/beam_search.h"
#include "core/search/forced_scoring.h"
#include "search_test_util.h"
#include "util/error.h"

namespace lseq {
namespace {

using testing::enumerate_outputs;
using testing::greedy_reference;
using testing::kEos;
using testing::random_sources;
using testing::reference_score;
using testing::ToyStepModel;

std::vector<int64_t> iota_ids(size_t n) {
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(i);
  return ids;
}

TEST(BeamSearch, BeamOneIsGreedy) {
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    const double word_penalty = seed == 4 ? 0.8 : 0.0;
    ToyStepModel model(30, seed, /*eos_bias=*/-1.0);
    auto sources = random_sources(9, 30, 1, 8, seed * 7);
    BeamSearchOptions o;
    o.beam_size = 1;
    o.normalize = 0.6;
    o.max_length_factor = 1.5;
    o.word_penalty = word_penalty;
    ToyStepModel searched(30, seed, -1.0);
    auto lists = beam_search(searched, data::make_source_batch(sources, iota_ids(sources.size())), o);
    ASSERT_EQ(lists.size(), sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      auto ref = greedy_reference(model, sources[i], o.max_length_factor, word_penalty);
      ASSERT_EQ(lists[i].size(), 1u);
      EXPECT_EQ(lists[i][0].tokens, ref.tokens) << "sentence " << i;
      EXPECT_DOUBLE_EQ(lists[i][0].log_prob, ref.log_prob);
      ASSERT_EQ(lists[i][0].word_log_probs.size(), ref.word_log_probs.size());
      for (size_t k = 0; k < ref.word_log_probs.size(); ++k)
        EXPECT_EQ(static_cast<double>(lists[i][0].word_log_probs[k]), ref.word_log_probs[k]);
    }
  }
}

// With a beam as large as the number of possible outputs, nothing is pruned: the n-best list must be exactly the
// outputs ranked by exhaustive search.
void expect_exhaustive_best(double normalize, double word_penalty, uint64_t seed) {
  const int vocab = 8;  // 4 words + pad, unk, bos, eos
  ToyStepModel model(vocab, seed);
  auto sources = random_sources(4, vocab, 2, 2, seed + 100);  // 2 words, factor 2 -> at most 4 output words
  BeamSearchOptions o;
  o.beam_size = 400;  // > 1 + 4 + 16 + 64 + 256 = 341 outputs
  o.normalize = normalize;
  o.word_penalty = word_penalty;
  o.max_length_factor = 2;
  ToyStepModel searched(vocab, seed);
  auto lists = beam_search(searched, data::make_source_batch(sources, {}), o);
  for (size_t i = 0; i < sources.size(); ++i) {
    auto all = enumerate_outputs(model, sources[i], 4);
    ASSERT_EQ(all.size(), 341u);
    std::stable_sort(all.begin(), all.end(), [&](const auto& a, const auto& b) {
      return reference_score(a, normalize, word_penalty) > reference_score(b, normalize, word_penalty);
    });
    ASSERT_EQ(lists[i].size(), all.size());
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(lists[i][k].tokens, all[k].tokens) << "rank " << k << " normalize " << normalize;
      EXPECT_NEAR(lists[i][k].score, reference_score(all[k], normalize, word_penalty), 1e-12);
    }
  }
}

// The token sink (lsserve's streaming) hears a greedy search's tokens as they are chosen, eos last; a wider beam's
// tokens are final only at its end, so it hears nothing.
TEST(BeamSearch, TheTokenSinkHearsGreedyTokensOnly) {
  const auto sources = random_sources(9, 30, 1, 8, 21);
  for (const int beam : {1, 3}) {
    BeamSearchOptions o;
    o.beam_size = beam;
    ToyStepModel model(30, 2, -1.0);
    std::vector<std::vector<int32_t>> heard(sources.size());
    const TokenSink sink = [&](int s, int32_t token) { heard.at(static_cast<size_t>(s)).push_back(token); };
    const auto lists = beam_search(model, data::make_source_batch(sources, iota_ids(sources.size())), o, sink);
    for (size_t i = 0; i < sources.size(); ++i) {
      std::vector<int32_t> expected;
      if (beam == 1) {
        expected = lists[i][0].tokens;
        expected.push_back(kEos);
      }
      EXPECT_EQ(heard[i], expected) << "beam " << beam << ", sentence " << i;
    }
  }
}

TEST(BeamSearch, LargeBeamFindsExhaustiveBestPlainSum) { expect_exhaustive_best(0.0, 0.0, 11); }
TEST(BeamSearch, LargeBeamFindsExhaustiveBestNormalized) { expect_exhaustive_best(1.0, 0.0, 12); }
TEST(BeamSearch, LargeBeamFindsExhaustiveBestWithPenalty) { expect_exhaustive_best(0.6, 0.7, 13); }

TEST(BeamSearch, BatchDecodesLikeEachSentenceAlone) {
  const int vocab = 50;
  auto sources = random_sources(11, vocab, 1, 12, 5);
  BeamSearchOptions o;
  o.beam_size = 5;
  o.normalize = 0.6;
  o.word_penalty = 0.1;
  ToyStepModel batched(vocab, 21, -0.5);
  auto lists = beam_search(batched, data::make_source_batch(sources, {}), o);
  // Finished sentences left the batch: the live count was not constant.
  EXPECT_LT(batched.live_per_step.back(), batched.live_per_step.front() * o.beam_size);
  for (size_t i = 0; i < sources.size(); ++i) {
    ToyStepModel alone(vocab, 21, -0.5);
    auto single = beam_search(alone, data::make_source_batch({sources[i]}, {}), o);
    ASSERT_EQ(single[0].size(), lists[i].size());
    for (size_t k = 0; k < lists[i].size(); ++k) {
      EXPECT_EQ(single[0][k].tokens, lists[i][k].tokens) << "sentence " << i << " rank " << k;
      EXPECT_EQ(single[0][k].log_prob, lists[i][k].log_prob);
      EXPECT_EQ(single[0][k].score, lists[i][k].score);
    }
  }
}

// The sentence sink hears each sentence once, at the step its last hypothesis ends (eos after t tokens is chosen at
// step t + 1), with the list the search returns: short sentences are handed over while long ones go on.
TEST(BeamSearch, EachSentenceIsHandedOverAtTheStepItFinishes) {
  const int vocab = 30;
  const auto sources = random_sources(9, vocab, 1, 12, 8);
  BeamSearchOptions o;
  o.beam_size = 3;
  o.normalize = 1.0;
  ToyStepModel model(vocab, 17, -1.0);
  testing::HeardSentences heard(sources.size());
  const auto lists = beam_search(model, data::make_source_batch(sources, {}), o, {}, heard.sink(model));
  bool some_before_the_end = false;
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(static_cast<int>(lists[i].size()), o.beam_size);
    size_t longest = 0;
    for (size_t k = 0; k < lists[i].size(); ++k) {
      EXPECT_EQ(heard.lists[i][k].tokens, lists[i][k].tokens) << "sentence " << i << " rank " << k;
      EXPECT_EQ(heard.lists[i][k].score, lists[i][k].score);
      longest = std::max(longest, lists[i][k].tokens.size());
    }
    EXPECT_EQ(heard.at_step[i], static_cast<int>(longest) + 1) << "sentence " << i;
    some_before_the_end = some_before_the_end || heard.at_step[i] < model.steps;
  }
  EXPECT_TRUE(some_before_the_end);
}

TEST(BeamSearch, NBestListsAreSortedCompleteAndConsistent) {
  const int vocab = 40;
  auto sources = random_sources(8, vocab, 1, 10, 9);
  for (int beam : {2, 4, 7}) {
    BeamSearchOptions o;
    o.beam_size = beam;
    o.normalize = 0.8;
    o.word_penalty = 0.2;
    o.max_length_factor = 1.5;
    ToyStepModel model(vocab, 33);
    auto lists = beam_search(model, data::make_source_batch(sources, {}), o);
    for (size_t i = 0; i < sources.size(); ++i) {
      const int limit = max_output_tokens(static_cast<int>(sources[i].size()), o.max_length_factor);
      ASSERT_EQ(static_cast<int>(lists[i].size()), beam);
      for (size_t k = 0; k < lists[i].size(); ++k) {
        const Hypothesis& h = lists[i][k];
        if (k) {
          EXPECT_GE(lists[i][k - 1].score, h.score);
        }
        EXPECT_LE(static_cast<int>(h.tokens.size()), limit);
        EXPECT_EQ(h.word_log_probs.size(), h.tokens.size() + 1);
        for (int32_t t : h.tokens) EXPECT_GE(t, 4) << "no special id inside an output";
        double sum = 0;
        for (float w : h.word_log_probs) sum += w;
        EXPECT_EQ(sum, h.log_prob);
        double expected = (h.log_prob - o.word_penalty * h.tokens.size()) / std::pow(h.tokens.size() + 1.0, o.normalize);
        EXPECT_NEAR(h.score, expected, 1e-12);
        for (size_t j = 0; j < k; ++j) EXPECT_NE(lists[i][j].tokens, h.tokens) << "duplicate hypothesis";
      }
    }
  }
}

TEST(BeamSearch, EosIsForcedAtTheLengthLimit) {
  const int vocab = 20;
  auto sources = random_sources(5, vocab, 1, 6, 3);
  BeamSearchOptions o;
  o.beam_size = 3;
  o.max_length_factor = 0.5;
  ToyStepModel model(vocab, 8, /*eos_bias=*/-40.0);  // eos practically never chosen freely
  auto lists = beam_search(model, data::make_source_batch(sources, {}), o);
  for (size_t i = 0; i < sources.size(); ++i) {
    const int limit = std::max(1, static_cast<int>(sources[i].size()) / 2);
    for (const auto& h : lists[i]) EXPECT_EQ(static_cast<int>(h.tokens.size()), limit);
  }
}

// A language model's limit: a fixed number of new tokens whatever the prompt's length, within the context.
TEST(BeamSearch, NewTokensLimitIgnoresTheSourceLengthWithinTheContext) {
  const int vocab = 20;
  const auto sources = random_sources(6, vocab, 1, 9, 4);
  BeamSearchOptions o;
  o.beam_size = 2;
  o.max_length_factor = 0.5;  // ignored
  o.max_new_tokens = 5;
  ToyStepModel model(vocab, 8, -40.0);
  auto lists = beam_search(model, data::make_source_batch(sources, {}), o);
  for (const auto& list : lists)
    for (const auto& h : list) EXPECT_EQ(h.tokens.size(), 5u);
  o.max_context = 9;  // prompt + output: a prompt of 7 leaves 2
  ToyStepModel bounded(vocab, 8, -40.0);
  lists = beam_search(bounded, data::make_source_batch(sources, {}), o);
  for (size_t i = 0; i < sources.size(); ++i)
    for (const auto& h : lists[i])
      EXPECT_EQ(static_cast<int>(h.tokens.size()), std::max(1, std::min(5, 9 - static_cast<int>(sources[i].size()))));
}

TEST(BeamSearch, TeacherForcedScoreEqualsReportedScore) {
  const int vocab = 40;
  auto sources = random_sources(6, vocab, 1, 9, 17);
  BeamSearchOptions o;
  o.beam_size = 4;
  ToyStepModel model(vocab, 44, -0.3);
  auto lists = beam_search(model, data::make_source_batch(sources, {}), o);
  // Score every hypothesis of every sentence in one batch, in a different order than search produced them.
  std::vector<std::vector<int32_t>> srcs, tgts;
  std::vector<const Hypothesis*> hyps;
  for (int k = 3; k >= 0; --k)
    for (size_t i = 0; i < sources.size(); ++i) {
      srcs.push_back(sources[i]);
      tgts.push_back(lists[i][k].tokens);
      hyps.push_back(&lists[i][k]);
    }
  data::Batch batch = data::make_source_batch(srcs, {});
  data::set_batch_targets(batch, tgts);
  ToyStepModel scorer(vocab, 44, -0.3);
  auto forced = forced_word_log_probs(scorer, batch);
  ASSERT_EQ(forced.size(), hyps.size());
  for (size_t j = 0; j < hyps.size(); ++j) {
    ASSERT_EQ(forced[j].size(), hyps[j]->word_log_probs.size());
    EXPECT_EQ(forced[j], hyps[j]->word_log_probs);
    EXPECT_EQ(sum_log_probs(forced[j]), hyps[j]->log_prob);
  }
}

TEST(BeamSearch, SelectOnlyWhenHypothesesChange) {
  auto sources = random_sources(1, 30, 6, 6, 2);
  BeamSearchOptions o;
  o.beam_size = 1;
  ToyStepModel greedy(30, 2, -30.0);  // never ends early: runs to the length limit
  auto lists = beam_search(greedy, data::make_source_batch(sources, {}), o);
  EXPECT_EQ(static_cast<int>(lists[0][0].tokens.size()), max_output_tokens(6, o.max_length_factor));
  EXPECT_GT(greedy.steps, 10);
  EXPECT_EQ(greedy.selects, 0) << "greedy search of one sentence never reorders";
  o.beam_size = 3;
  ToyStepModel beam(30, 2, -30.0);
  beam_search(beam, data::make_source_batch(sources, {}), o);
  EXPECT_GT(beam.selects, 0);
}

TEST(BeamSearch, EmptyBatchAndBadBeamSize) {
  ToyStepModel model(10, 1);
  EXPECT_TRUE(beam_search(model, data::Batch{}, BeamSearchOptions{}).empty());
  BeamSearchOptions o;
  o.beam_size = 0;
  EXPECT_THROW(beam_search(model, data::make_source_batch({{5}}, {}), o), Error);
}

TEST(SearchTypes, FinalScoreAndLengthLimit) {
  EXPECT_DOUBLE_EQ(final_score(-6.0, 2, 0.0, 0.0), -6.0);
  EXPECT_DOUBLE_EQ(final_score(-6.0, 2, 1.0, 0.0), -2.0);
  EXPECT_DOUBLE_EQ(final_score(-6.0, 2, 1.0, 1.5), -3.0);
  EXPECT_EQ(max_output_tokens(0, 3.0), 1);
  EXPECT_EQ(max_output_tokens(5, 0.1), 1);
  EXPECT_EQ(max_output_tokens(5, 1.5), 7);
  EXPECT_EQ(max_output_tokens(10, 3.0), 30);
  EXPECT_EQ(output_limit(10, 3.0, 0, 0), 30);  // no new-token limit: translation's
  EXPECT_EQ(output_limit(10, 3.0, 4, 0), 4);
  EXPECT_EQ(output_limit(10, 3.0, 4, 12), 2);
  EXPECT_EQ(output_limit(10, 3.0, 4, 10), 1);  // always room for one token
}

}  // namespace
}  // namespace lseq

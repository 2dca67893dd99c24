// Sampling over the toy StepModel: reproducibility, independence from batching, top-k / top-p restrictions,
// the empirical distribution, and the --output-sampling parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/search/sampling.h"
#include "search_test_util.h"
#include "util/error.h"

namespace lseq {
namespace {

using testing::random_sources;
using testing::ToyStepModel;
using testing::with_eos;

std::vector<NBestList> run(const std::vector<std::vector<int32_t>>& sources, const std::vector<int64_t>& lines,
                           const SamplingOptions& o, int vocab = 30, uint64_t model_seed = 5) {
  ToyStepModel model(vocab, model_seed, -1.0);
  return sample(model, data::make_source_batch(sources, lines), o);
}

std::vector<int64_t> ids_from(size_t n, int64_t first = 0) {
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = first + static_cast<int64_t>(i);
  return ids;
}

TEST(Sampling, SameSeedSameOutputOtherSeedOtherOutput) {
  auto sources = random_sources(20, 30, 2, 8, 1);
  SamplingOptions o;
  o.seed = 77;
  auto a = run(sources, ids_from(20), o), b = run(sources, ids_from(20), o);
  o.seed = 78;
  auto c = run(sources, ids_from(20), o);
  int differ = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(a[i].size(), 1u);
    EXPECT_EQ(a[i][0].tokens, b[i][0].tokens);
    EXPECT_EQ(a[i][0].log_prob, b[i][0].log_prob);
    differ += a[i][0].tokens != c[i][0].tokens;
  }
  EXPECT_GT(differ, 5);
}

TEST(Sampling, NewTokensLimitForLanguageModels) {
  const auto sources = random_sources(8, 30, 1, 8, 6);
  SamplingOptions o;
  o.max_new_tokens = 3;
  o.max_context = 8;
  ToyStepModel model(30, 5, -40.0);  // eos practically never drawn: every output runs to its limit
  const auto lists = sample(model, data::make_source_batch(sources, ids_from(8)), o);
  for (size_t i = 0; i < sources.size(); ++i)
    EXPECT_EQ(static_cast<int>(lists[i][0].tokens.size()),
              std::max(1, std::min(3, 8 - static_cast<int>(sources[i].size()))));
}

// The token sink (lsserve's streaming) hears each sentence's tokens in order, eos last: exactly its output.
TEST(Sampling, TheTokenSinkHearsEveryOutputTokenThenEos) {
  const auto sources = random_sources(12, 30, 1, 8, 4);
  SamplingOptions o;
  o.mode = SamplingOptions::Mode::top_k;
  o.top_k = 5;
  ToyStepModel model(30, 5, -1.0);
  std::vector<std::vector<int32_t>> heard(sources.size());
  const TokenSink sink = [&](int sentence, int32_t token) { heard.at(static_cast<size_t>(sentence)).push_back(token); };
  const auto lists = sample(model, data::make_source_batch(sources, ids_from(12)), o, sink);
  for (size_t i = 0; i < sources.size(); ++i) EXPECT_EQ(heard[i], with_eos(lists[i][0].tokens)) << i;
}

// The sentence sink hears each sentence once, at the step that draws its eos (after t tokens: step t + 1), with
// the list sample() returns.
TEST(Sampling, EachSentenceIsHandedOverAtTheStepItDrawsEos) {
  const auto sources = random_sources(12, 30, 1, 8, 6);
  SamplingOptions o;
  ToyStepModel model(30, 5, -1.0);
  testing::HeardSentences heard(sources.size());
  const auto lists = sample(model, data::make_source_batch(sources, ids_from(12)), o, {}, heard.sink(model));
  bool some_before_the_end = false;
  for (size_t i = 0; i < sources.size(); ++i) {
    ASSERT_EQ(heard.lists[i].size(), 1u);
    EXPECT_EQ(heard.lists[i][0].tokens, lists[i][0].tokens) << i;
    EXPECT_EQ(heard.lists[i][0].score, lists[i][0].score) << i;
    EXPECT_EQ(heard.at_step[i], static_cast<int>(lists[i][0].tokens.size()) + 1) << i;
    some_before_the_end = some_before_the_end || heard.at_step[i] < model.steps;
  }
  EXPECT_TRUE(some_before_the_end);
}

TEST(Sampling, OutputOfALineDoesNotDependOnItsBatch) {
  auto sources = random_sources(10, 30, 2, 8, 2);
  SamplingOptions o = parse_output_sampling({"topk", "5", "0.8"});
  auto batched = run(sources, ids_from(10, 100), o);
  for (size_t i = 0; i < sources.size(); ++i) {
    auto alone = run({sources[i]}, {100 + static_cast<int64_t>(i)}, o);
    EXPECT_EQ(alone[0][0].tokens, batched[i][0].tokens) << "line " << i;
  }
}

TEST(Sampling, ReportedScoresAreTheModelsLogProbs) {
  const int vocab = 30;
  ToyStepModel model(vocab, 5, -1.0);
  auto sources = random_sources(10, vocab, 2, 8, 3);
  SamplingOptions o = parse_output_sampling({"full", "1.7"});
  o.normalize = 0.5;
  auto lists = run(sources, ids_from(10), o, vocab);
  for (size_t i = 0; i < sources.size(); ++i) {
    const Hypothesis& h = lists[i][0];
    ASSERT_EQ(h.word_log_probs.size(), h.tokens.size() + 1);
    std::vector<int32_t> prefix;
    double sum = 0;
    for (size_t k = 0; k <= h.tokens.size(); ++k) {
      int32_t token = k < h.tokens.size() ? h.tokens[k] : testing::kEos;
      double expected = model.row(with_eos(sources[i]), prefix)[token];
      EXPECT_EQ(static_cast<double>(h.word_log_probs[k]), expected);
      sum += expected;
      prefix.push_back(token);
    }
    EXPECT_EQ(h.log_prob, sum);
    EXPECT_NEAR(h.score, h.log_prob / std::pow(h.tokens.size() + 1.0, 0.5), 1e-12);
  }
}

// Every sampled token must be within the allowed set at its prefix.
void expect_tokens_within(const SamplingOptions& o, const std::function<bool(const std::vector<double>&, int32_t)>& ok,
                          int vocab = 40) {
  ToyStepModel model(vocab, 5, -1.0);
  auto sources = random_sources(60, vocab, 3, 10, 4);
  auto lists = run(sources, ids_from(60), o, vocab);
  int checked = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::vector<int32_t> prefix;
    for (int32_t token : lists[i][0].tokens) {
      auto row = model.row(with_eos(sources[i]), prefix);
      EXPECT_TRUE(ok(row, token)) << "line " << i << " token " << token;
      EXPECT_GE(token, 4);
      prefix.push_back(token);
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
}

// Allowed tokens (no pad/unk/bos) ranked by log-prob, best first.
std::vector<int32_t> ranked(const std::vector<double>& row) {
  std::vector<int32_t> ids;
  for (int v = 3; v < static_cast<int>(row.size()); ++v) ids.push_back(v);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  return ids;
}

TEST(Sampling, TopKNeverPicksOutsideTheTopK) {
  for (int k : {1, 3}) {
    expect_tokens_within(parse_output_sampling({"topk", std::to_string(k)}), [k](const auto& row, int32_t t) {
      auto ids = ranked(row);
      return std::find(ids.begin(), ids.begin() + k, t) != ids.begin() + k;
    });
  }
}

// Whether `t` is in the nucleus of `row`: the most probable tokens (tempered) until their mass reaches p.
bool in_nucleus(const std::vector<double>& row, int32_t t, double p, double temperature) {
  auto ids = ranked(row);
  double total = 0;
  for (int32_t v : ids) total += std::exp(row[v] / temperature);
  double mass = 0;
  for (int32_t v : ids) {
    if (v == t) return true;
    mass += std::exp(row[v] / temperature);
    if (mass >= p * total) return false;
  }
  return false;
}

// Top-k of at most kMaxTopK takes the model's step_topk (the GPU's top-k, k values a row) instead of whole rows:
// the same tokens and log-probabilities as drawing from the whole rows (step_topk_limit 0), eos included.
TEST(Sampling, TopKThroughStepTopKDrawsWhatWholeRowsDraw) {
  struct CountingModel : ToyStepModel {
    using ToyStepModel::ToyStepModel;
    int topk_steps = 0, full_steps = 0;
    void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
      ++full_steps;
      ToyStepModel::step(tokens, log_probs);
    }
    void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                   std::vector<float>& eos_log_probs) override {
      ++topk_steps;
      --full_steps;  // the default step_topk runs step() underneath
      StepModel::step_topk(tokens, k, values, ids, eos_log_probs);
    }
  };
  const auto sources = random_sources(30, 30, 2, 8, 4);
  for (int k : {1, 3, 12, 30, 40, kernels::kMaxTopK + 1}) {  // 30: more than the 27 candidates (ids 3-29)
    SCOPED_TRACE("k = " + std::to_string(k));
    SamplingOptions o = parse_output_sampling({"topk", std::to_string(k), "0.8"});
    o.seed = 11;
    CountingModel fast(30, 5, 0.5), whole(30, 5, 0.5);  // eos likely enough to be drawn and ranked among the k
    const auto a = sample(fast, data::make_source_batch(sources, ids_from(30)), o);
    o.step_topk_limit = 0;
    const auto b = sample(whole, data::make_source_batch(sources, ids_from(30)), o);
    EXPECT_EQ(fast.topk_steps > 0, k <= kernels::kMaxTopK);
    EXPECT_EQ(whole.topk_steps, 0);
    int ended_early = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
      EXPECT_EQ(a[i][0].tokens, b[i][0].tokens) << "line " << i;
      EXPECT_EQ(a[i][0].word_log_probs, b[i][0].word_log_probs) << "line " << i;
      ended_early += a[i][0].tokens.size() + 1 < static_cast<size_t>(3 * sources[i].size());
    }
    EXPECT_GT(ended_early, 0) << "no line drew eos before its length limit";
  }
}

// Whole rows of a large vocabulary are ranked on several threads: the draws are those of one thread, in every mode.
TEST(Sampling, RowsDrawnOnThreadsDrawWhatOneThreadDraws) {
  const auto sources = random_sources(40, 30, 2, 6, 8);
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{"full"}, {"topp", "0.8", "1.3"}, {"topk", "40"}}) {
    SCOPED_TRACE(mode[0]);
    SamplingOptions o = parse_output_sampling(mode);
    o.seed = 5;
    o.host_threads = 1;
    const auto one = run(sources, ids_from(40), o, 5000, 3);
    o.host_threads = 4;
    const auto four = run(sources, ids_from(40), o, 5000, 3);
    for (size_t i = 0; i < sources.size(); ++i) {
      EXPECT_EQ(four[i][0].tokens, one[i][0].tokens) << "line " << i;
      EXPECT_EQ(four[i][0].word_log_probs, one[i][0].word_log_probs) << "line " << i;
    }
  }
}

TEST(Sampling, TopPPicksOnlyFromTheNucleus) {
  expect_tokens_within(parse_output_sampling({"topp", "0.3", "0.7"}),
                       [](const auto& row, int32_t t) { return in_nucleus(row, t, 0.3, 0.7); });
}

TEST(Sampling, TopPWithANucleusLargerThanTheFirstSortedPrefix) {
  // 400 tokens, flattened by temperature 3: the nucleus holds far more than the 64 tokens sorted first.
  int beyond_64 = 0, total = 0;
  expect_tokens_within(
      parse_output_sampling({"topp", "0.9", "3"}),
      [&](const auto& row, int32_t t) {
        auto ids = ranked(row);
        beyond_64 += std::find(ids.begin(), ids.begin() + 64, t) == ids.begin() + 64;
        ++total;
        return in_nucleus(row, t, 0.9, 3.0);
      },
      400);
  EXPECT_GT(beyond_64, total / 2) << "most of this nucleus lies beyond the 64 most probable tokens";
}

TEST(Sampling, FirstTokenFrequenciesFollowTheModel) {
  const int vocab = 10, lines = 4000;
  ToyStepModel model(vocab, 9, -1.0);  // as run() builds it
  std::vector<std::vector<int32_t>> sources(lines, std::vector<int32_t>{5, 6, 7});
  SamplingOptions o;
  o.seed = 3;
  auto lists = run(sources, ids_from(lines), o, vocab, 9);
  std::vector<double> counts(vocab, 0);
  for (const auto& l : lists) counts[l[0].tokens.empty() ? testing::kEos : l[0].tokens[0]] += 1;
  auto row = model.row({5, 6, 7, testing::kEos}, {});
  double allowed = 0;
  for (int v = 3; v < vocab; ++v) allowed += std::exp(row[v]);
  for (int v = 0; v < vocab; ++v) {
    double expected = v < 3 ? 0.0 : std::exp(row[v]) / allowed;
    double sd = std::sqrt(expected * (1 - expected) / lines);
    EXPECT_NEAR(counts[v] / lines, expected, 5 * sd + 1e-9) << "token " << v;
  }
}

TEST(Sampling, ParsesOutputSamplingWords) {
  auto o = parse_output_sampling({"full"});
  EXPECT_EQ(o.mode, SamplingOptions::Mode::full);
  EXPECT_EQ(o.temperature, 1.0);
  o = parse_output_sampling({"topk", "10"});
  EXPECT_EQ(o.mode, SamplingOptions::Mode::top_k);
  EXPECT_EQ(o.top_k, 10);
  o = parse_output_sampling({"topp", "0.9", "0.7"});
  EXPECT_EQ(o.mode, SamplingOptions::Mode::top_p);
  EXPECT_DOUBLE_EQ(o.top_p, 0.9);
  EXPECT_DOUBLE_EQ(o.temperature, 0.7);
  o = parse_output_sampling({"topk", "5", "temperature", "2"});
  EXPECT_EQ(o.top_k, 5);
  EXPECT_DOUBLE_EQ(o.temperature, 2.0);
  o = parse_output_sampling({"temperature", "0.5"});
  EXPECT_EQ(o.mode, SamplingOptions::Mode::full);
  EXPECT_DOUBLE_EQ(o.temperature, 0.5);
  for (std::vector<std::string> bad : std::vector<std::vector<std::string>>{
           {}, {"topk"}, {"topk", "0"}, {"topk", "2.5"}, {"topp", "0"}, {"topp", "1.5"}, {"full", "0"},
           {"full", "-1"}, {"greedy"}, {"topk", "3", "1", "2"}, {"topp", "x"}}) {
    try {
      parse_output_sampling(bad);
      ADD_FAILURE() << "accepted a bad --output-sampling";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--output-sampling"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace lseq

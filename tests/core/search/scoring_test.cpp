// lsscore's loops over the toy model: a translation's score equals the score beam search reported for it, for
// plain pairs and for a rescored n-best list; bad pairs keep the line count; summaries add up.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "captured_log.h"
#include "core/search/beam_search.h"
#include "core/search/nbest_format.h"
#include "core/search/scorer.h"
#include "core/search/translator.h"
#include "search_test_util.h"
#include "util/error.h"

namespace lseq {
namespace {

using testing::CapturedLog;
using testing::random_sources;
using testing::ToyStepModel;

std::string as_text(const std::vector<std::vector<int32_t>>& lines) {
  std::string text;
  for (const auto& l : lines) text += ids_to_text(l) + "\n";
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

struct Translated {
  std::vector<std::vector<int32_t>> sources;
  std::vector<NBestList> lists;
};

Translated translate(int count, int beam) {
  Translated t;
  t.sources = random_sources(count, 40, 1, 9, 31);
  BeamSearchOptions o;
  o.beam_size = beam;
  ToyStepModel model(40, 12, -0.4);
  t.lists = beam_search(model, data::make_source_batch(t.sources, {}), o);
  return t;
}

TEST(Scoring, ScoreOfATranslationEqualsTheBeamSearchScore) {
  Translated t = translate(23, 4);
  std::vector<std::vector<int32_t>> targets;
  for (const auto& l : t.lists) targets.push_back(l[0].tokens);
  for (double normalize : {0.0, 0.6}) {
    std::istringstream src(as_text(t.sources)), tgt(as_text(targets));
    data::InputLineReader source(src, "src"), target(tgt, "tgt");
    ScoreSettings settings;
    settings.normalize = normalize;
    settings.batching.mini_batch = 5;
    settings.batching.maxi_batch = 2;
    ToyStepModel model(40, 12, -0.4);
    std::ostringstream out;
    ScoreTotals totals = score_pairs(model, source, target, nullptr, nullptr, settings, out);
    auto lines = split_lines(out.str());
    ASSERT_EQ(lines.size(), t.sources.size());
    double sum = 0;
    int64_t tokens = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const Hypothesis& h = t.lists[i][0];
      double expected = normalize > 0 ? final_score(h.log_prob, static_cast<int>(h.tokens.size()), normalize, 0)
                                      : h.log_prob;
      EXPECT_EQ(lines[i], format_score(expected)) << "line " << i;
      sum += h.log_prob;
      tokens += static_cast<int64_t>(h.tokens.size()) + 1;
    }
    EXPECT_EQ(totals.scored, 23);
    EXPECT_EQ(totals.target_tokens, tokens);
    EXPECT_NEAR(totals.log_prob, sum, 1e-9);
  }
}

TEST(Scoring, RescoredNBestFeatureEqualsF0) {
  Translated t = translate(9, 3);
  std::ostringstream nbest;
  {
    std::istringstream in(as_text(t.sources));
    data::InputLineReader reader(in, "src");
    data::TranslationInput input(reader, nullptr, {});
    ToyStepModel model(40, 12, -0.4);
    TranslateSettings settings;
    settings.beam.beam_size = 3;
    settings.n_best = true;
    translate_all(model, input, nullptr, settings, nbest);
  }
  std::istringstream src(as_text(t.sources)), list(nbest.str());
  data::InputLineReader source(src, "src"), entries(list, "nbest");
  ScoreSettings settings;
  settings.n_best_feature = "Rescored";
  ToyStepModel model(40, 12, -0.4);
  std::ostringstream out;
  rescore_nbest(model, source, entries, nullptr, nullptr, settings, out);
  auto lines = split_lines(out.str());
  ASSERT_EQ(lines.size(), 27u);
  for (const auto& line : lines) {
    size_t f0 = line.find("F0= "), added = line.find(" Rescored= ");
    ASSERT_NE(f0, std::string::npos);
    ASSERT_NE(added, std::string::npos) << line;
    std::string f0_value = line.substr(f0 + 4, line.find(' ', f0 + 4) - f0 - 4);
    std::string added_value = line.substr(added + 11, line.find(' ', added + 11) - added - 11);
    EXPECT_EQ(f0_value, added_value) << line;
  }
}

TEST(Scoring, RejectedPairsPrintNanAndKeepTheLineCount) {
  std::istringstream src("5 6\n7 x\n8\n\n"), tgt("9\n10\n11 999\n12\n");
  data::InputLineReader source(src, "src"), target(tgt, "tgt");
  ScoreSettings settings;
  settings.batching.vocab_size = 40;
  settings.target_vocab_size = 40;
  ToyStepModel model(40, 1);
  std::ostringstream out;
  ScoreTotals totals = score_pairs(model, source, target, nullptr, nullptr, settings, out);
  auto lines = split_lines(out.str());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0], "nan");
  EXPECT_EQ(lines[1], "nan");
  EXPECT_EQ(lines[2], "nan");
  EXPECT_NE(lines[3], "nan") << "an empty source is scored";
  EXPECT_EQ(totals.lines, 4);
  EXPECT_EQ(totals.scored, 2);
}

// Scores of (source, target) pairs given as id text, one per line, through score_pairs.
std::vector<std::string> pair_scores(const std::string& sources, const std::string& targets) {
  std::istringstream src(sources), tgt(targets);
  data::InputLineReader source(src, "src"), target(tgt, "tgt");
  ToyStepModel model(40, 12, -0.4);
  std::ostringstream out;
  score_pairs(model, source, target, nullptr, nullptr, ScoreSettings{}, out);
  return split_lines(out.str());
}

struct Rescored {
  std::vector<std::string> lines;
  ScoreTotals totals;
  std::string log;
};

Rescored rescore(const std::string& sources, const std::string& list) {
  CapturedLog log;
  std::istringstream src(sources), entries(list);
  data::InputLineReader source(src, "src.txt"), nbest(entries, "list.nbest");
  ScoreSettings settings;
  settings.batching.vocab_size = 40;
  settings.target_vocab_size = 40;
  ToyStepModel model(40, 12, -0.4);
  std::ostringstream out;
  Rescored r;
  r.totals = rescore_nbest(model, source, nbest, nullptr, nullptr, settings, out);
  r.lines = split_lines(out.str());
  r.log = log.text();
  return r;
}

TEST(Scoring, EveryNBestEntryYieldsAnOutputLineAndBadOnesAWarning) {
  const std::string sources = "5 6\n7 8\n9\n";
  const std::vector<std::string> list = {
      "0 ||| 4 5 ||| F0= -1 ||| -1",
      "garbage",
      "",
      "x ||| 4 ||| F0= -1 ||| -1",
      "99999999999999999999 ||| 4 ||| F0= -1 ||| -1",
      "1 ||| 4 12345678901 ||| F0= -1 ||| -1",  // an id past int32: that entry alone is rejected
      "1 ||| 6 ||| F0= -1 ||| -1",
      "2 ||| 7 8 ||| F0= -1 ||| -1",
  };
  std::string text;
  for (const auto& l : list) text += l + "\n";
  Rescored r = rescore(sources, text);
  ASSERT_EQ(r.lines.size(), list.size()) << r.log;
  const auto expected = pair_scores("5 6\n7 8\n9\n", "4 5\n6\n7 8\n");
  EXPECT_EQ(r.lines[0], "0 ||| 4 5 ||| F0= -1 Score= " + expected[0] + " ||| -1");
  EXPECT_EQ(r.lines[1], "garbage");
  EXPECT_EQ(r.lines[2], "");
  EXPECT_EQ(r.lines[3], "x ||| 4 ||| F0= -1 Score= nan ||| -1");
  EXPECT_EQ(r.lines[4], "99999999999999999999 ||| 4 ||| F0= -1 Score= nan ||| -1");
  EXPECT_EQ(r.lines[5], "1 ||| 4 12345678901 ||| F0= -1 Score= nan ||| -1");
  EXPECT_EQ(r.lines[6], "1 ||| 6 ||| F0= -1 Score= " + expected[1] + " ||| -1");
  EXPECT_EQ(r.lines[7], "2 ||| 7 8 ||| F0= -1 Score= " + expected[2] + " ||| -1");
  EXPECT_EQ(r.totals.lines, 8);
  EXPECT_EQ(r.totals.scored, 3);
  for (const char* warning : {"list.nbest line 2: not an n-best entry", "list.nbest line 3: not an n-best entry",
                              "list.nbest line 4: 'x' is not a line number",
                              "list.nbest line 5: '99999999999999999999' is not a line number",
                              "list.nbest line 6: token id 12345678901 is outside the vocabulary of 40"})
    EXPECT_NE(r.log.find(warning), std::string::npos) << warning << "\n" << r.log;
  EXPECT_NE(r.log.find("list.nbest line 2: not an n-best entry; expected '<line> ||| <translation> ||| <features> ||| "
                       "<score>' (an n-best list from lstranslate --n-best); writing it back unchanged"),
            std::string::npos)
      << r.log;
  EXPECT_NE(r.log.find("line 4: 'x' is not a line number; expected '<line> ||| <translation> ||| <features> ||| "
                       "<score>' (an n-best list from lstranslate --n-best); writing it back with a score of nan"),
            std::string::npos)
      << r.log;
}

TEST(Scoring, NBestEntriesOutOfSourceOrderOrPastTheSourceAreOneError) {
  const std::string sources = "5 6\n7 8\n9\n";
  for (const auto& [list, message] : std::vector<std::pair<std::string, std::string>>{
           {"1 ||| 4 ||| F0= 0 ||| 0\n0 ||| 4 ||| F0= 0 ||| 0\n",
            "list.nbest line 2: an entry for source line 0 comes after one for line 1; n-best entries must be in "
            "source order"},
           {"0 ||| 4 ||| F0= 0 ||| 0\n3 ||| 4 ||| F0= 0 ||| 0\n",
            "list.nbest line 2: names source line 3 (counted from 0) but src.txt has only 3 lines"},
           {"9223372036854775807 ||| 4 ||| F0= 0 ||| 0\n", "list.nbest line 1: names source line 9223372036854775807"},
       }) {
    try {
      rescore(sources, list);
      ADD_FAILURE() << "no error for " << list;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

TEST(Scoring, SourceLinesWithoutNBestEntriesAreScoredRightWithAWarning) {
  Rescored r = rescore("5 6\n7 8\n9\n10\n11\n12\n", "0 ||| 4 ||| F0= 0 ||| 0\n2 ||| 6 ||| F0= 0 ||| 0\n"
                                                       "4 ||| 7 ||| F0= 0 ||| 0\n");
  const auto expected = pair_scores("5 6\n9\n11\n", "4\n6\n7\n");
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_EQ(r.lines[1], "2 ||| 6 ||| F0= 0 Score= " + expected[1] + " ||| 0");
  EXPECT_EQ(r.lines[2], "4 ||| 7 ||| F0= 0 Score= " + expected[2] + " ||| 0");
  EXPECT_NE(r.log.find("list.nbest line 2: an entry for source line 2 follows one for line 0: source lines 1 to 1 have "
                       "no entries"),
            std::string::npos)
      << r.log;
  EXPECT_NE(r.log.find("2 lines of src.txt have no n-best entries"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("src.txt has lines that no n-best entry names, from line 5"), std::string::npos) << r.log;
}

TEST(Scoring, DifferentLineCountsAreAnError) {
  std::istringstream src("5\n6\n7\n"), tgt("5\n6\n");
  data::InputLineReader source(src, "a.de"), target(tgt, "a.en");
  ToyStepModel model(40, 1);
  std::ostringstream out;
  try {
    score_pairs(model, source, target, nullptr, nullptr, ScoreSettings{}, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("a.de"), std::string::npos);
    EXPECT_NE(m.find("a.en"), std::string::npos);
  }
}

TEST(Scoring, SummaryIsPerTokenCrossEntropy) {
  ScoreTotals t;
  t.log_prob = -20.0;
  t.target_tokens = 10;
  t.scored = 3;
  EXPECT_EQ(format_summary(t), fmt::format("cross-entropy 2.0000 perplexity {:.4f} (10 target tokens with eos, 3 sentences)",
                                           std::exp(2.0)));
}

}  // namespace
}  // namespace lseq

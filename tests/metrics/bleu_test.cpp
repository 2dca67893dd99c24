// BLEU and the 13a tokenizer against sacreBLEU's own results on the fixtures (see metric_fixtures.h).
#include "metrics/bleu.h"

#include <gtest/gtest.h>

#include <cmath>

#include "metric_fixtures.h"
#include "metrics/tokenizer_13a.h"
#include "util/error.h"

namespace {

using lseq_test::expected_metrics;
using lseq_test::read_fixture_lines;

// Relative tolerance for raw floating-point values: only summation order may differ from Python.
void expect_close(double ours, double theirs, const std::string& what) {
  EXPECT_NEAR(ours, theirs, 1e-12 * std::max(1.0, std::abs(theirs))) << what;
}

TEST(Bleu, FixturesMatchSacreBleu) {
  const auto& cases = expected_metrics().at("cases");
  ASSERT_GE(cases.size(), 10u);
  int compared = 0;
  for (const auto& [name, entry] : cases.items()) {
    SCOPED_TRACE(name);
    const auto hyps = read_fixture_lines(name + ".hyp.txt");
    const auto refs = read_fixture_lines(name + ".ref.txt");
    ASSERT_EQ(hyps.size(), entry.at("lines").get<std::size_t>());
    ASSERT_EQ(refs.size(), hyps.size());
    if (!entry.contains("bleu")) continue;  // the empty corpus, tested below
    const auto& want = entry.at("bleu");
    const lseq::metrics::BleuScore got = lseq::metrics::corpus_bleu(hyps, refs);
    EXPECT_EQ(got.hyp_len, want.at("hyp_len").get<std::int64_t>());
    EXPECT_EQ(got.ref_len, want.at("ref_len").get<std::int64_t>());
    for (int n = 0; n < 4; ++n) {
      EXPECT_EQ(got.counts[n], want.at("counts")[n].get<std::int64_t>()) << "order " << n + 1;
      EXPECT_EQ(got.totals[n], want.at("totals")[n].get<std::int64_t>()) << "order " << n + 1;
      expect_close(got.precisions[n], want.at("precisions")[n].get<double>(), "precision " + std::to_string(n + 1));
    }
    expect_close(got.bp, want.at("bp").get<double>(), "BP");
    expect_close(got.ratio, want.at("ratio").get<double>(), "ratio");
    expect_close(got.score, want.at("score").get<double>(), "score");
    EXPECT_EQ(fmt::format("{:.2f}", got.score), fmt::format("{:.2f}", want.at("score").get<double>()));
    EXPECT_EQ(got.format(), want.at("formatted").get<std::string>());
    ++compared;
  }
  EXPECT_EQ(compared + 1, static_cast<int>(cases.size()));
}

TEST(Bleu, FixtureScoresSpanLowToHigh) {
  // Guards the fixtures themselves: they must exercise the whole range, exp smoothing and the 100 case.
  const auto& cases = expected_metrics().at("cases");
  double low = 100, high = 0;
  for (const auto& [name, entry] : cases.items()) {
    if (!entry.contains("bleu") || entry.at("bleu").at("score").get<double>() == 0.0) continue;
    low = std::min(low, entry.at("bleu").at("score").get<double>());
    high = std::max(high, entry.at("bleu").at("score").get<double>());
  }
  EXPECT_LT(low, 15.0);
  EXPECT_NEAR(high, 100.0, 1e-9);
  EXPECT_EQ(cases.at("no-4gram-match").at("bleu").at("counts")[3], 0);
}

TEST(Bleu, EmptyCorpusScoresZero) {
  // sacreBLEU raises an error for zero lines; lseq defines the result as that of an empty match: all zero.
  const auto s = lseq::metrics::corpus_bleu({}, {});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.hyp_len, 0);
  EXPECT_EQ(s.ref_len, 0);
  EXPECT_EQ(s.ratio, 0.0);
  EXPECT_EQ(s.format(), "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
}

TEST(Bleu, SignatureIsSacreBleusWithOurVersion) {
  EXPECT_EQ(lseq::metrics::BleuScore::signature(),
            lseq_test::with_our_version(expected_metrics().at("bleu_signature").get<std::string>(), lseq::metrics::kMetricsVersion));
  EXPECT_EQ(lseq::metrics::BleuScore::signature(), "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:lseq-0.1.0");
}

TEST(Bleu, DifferentLineCountsNameBothCounts) {
  try {
    lseq::metrics::corpus_bleu({"a", "b", "c"}, {"a", "b"});
    FAIL() << "expected lseq::Error";
  } catch (const lseq::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("3 hypothesis lines"), std::string::npos) << msg;
    EXPECT_NE(msg.find("2 reference lines"), std::string::npos) << msg;
  }
}

TEST(Bleu, InvalidUtf8IsScoredNotFatal) {
  const std::string bad = "caf\xc3 \xff\xfe ok \x85 end";
  const auto s = lseq::metrics::corpus_bleu({bad}, {bad});
  EXPECT_NEAR(s.score, 100.0, 1e-9);  // exp(log(100)) is not exactly 100, in Python neither
  EXPECT_EQ(s.hyp_len, 5) << "a lone 0x85 byte is not U+0085 whitespace";
}

TEST(Tokenizer13a, MatchesSacreBleu) {
  const auto& pairs = expected_metrics().at("tokenizer_13a");
  ASSERT_GE(pairs.size(), 100u);
  for (const auto& pair : pairs) {
    const auto line = pair.at(0).get<std::string>(), want = pair.at(1).get<std::string>();
    EXPECT_EQ(lseq::metrics::tokenize_13a(line), want) << line;
  }
}

TEST(Tokenizer13a, PythonWhitespaceSplit) {
  const auto words = lseq::metrics::split_python_whitespace("\u00a0a\u2028b\u200bc\u3000\x1c d \t");
  ASSERT_EQ(words.size(), 3u);
  EXPECT_EQ(words[0], "a");
  EXPECT_EQ(words[1], "b\u200bc");  // zero-width space is not whitespace in Python
  EXPECT_EQ(words[2], "d");
}

}  // namespace

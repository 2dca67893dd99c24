// chrF2 against sacreBLEU's own results on the fixtures (see metric_fixtures.h).
#include "metrics/chrf.h"

#include <gtest/gtest.h>

#include <cmath>

#include "metric_fixtures.h"
#include "metrics/bleu.h"
#include "util/error.h"

namespace {

using lseq_test::expected_metrics;
using lseq_test::read_fixture_lines;

TEST(Chrf, FixturesMatchSacreBleu) {
  const auto& cases = expected_metrics().at("cases");
  int compared = 0;
  for (const auto& [name, entry] : cases.items()) {
    SCOPED_TRACE(name);
    if (!entry.contains("chrf")) continue;
    const auto& want = entry.at("chrf");
    const auto got = lseq::metrics::corpus_chrf(read_fixture_lines(name + ".hyp.txt"), read_fixture_lines(name + ".ref.txt"));
    for (int n = 0; n < lseq::metrics::ChrfScore::kCharOrder; ++n) {
      EXPECT_EQ(got.hyp_ngrams[n], want.at("hyp_ngrams")[n].get<std::int64_t>()) << "order " << n + 1;
      EXPECT_EQ(got.ref_ngrams[n], want.at("ref_ngrams")[n].get<std::int64_t>()) << "order " << n + 1;
      EXPECT_EQ(got.matches[n], want.at("matches")[n].get<std::int64_t>()) << "order " << n + 1;
    }
    const double score = want.at("score").get<double>();
    EXPECT_NEAR(got.score, score, 1e-12 * std::max(1.0, score));
    EXPECT_EQ(fmt::format("{:.2f}", got.score), fmt::format("{:.2f}", score));
    EXPECT_EQ(got.format(), want.at("formatted").get<std::string>());
    ++compared;
  }
  EXPECT_GE(compared, 10);
}

TEST(Chrf, EmptyCorpusScoresZero) {
  const auto s = lseq::metrics::corpus_chrf({}, {});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.format(), "chrF2 = 0.00");
}

TEST(Chrf, CountsCodePointsNotBytes) {
  // "äöü" is 3 characters (6 bytes): 3 unigrams, 2 bigrams, 1 trigram, nothing longer.
  const auto s = lseq::metrics::corpus_chrf({"ä ö ü"}, {"äöü"});
  EXPECT_EQ(s.hyp_ngrams[0], 3);
  EXPECT_EQ(s.hyp_ngrams[1], 2);
  EXPECT_EQ(s.hyp_ngrams[2], 1);
  EXPECT_EQ(s.hyp_ngrams[3], 0);
  EXPECT_EQ(s.score, 100.0);
  // One character differs: ä vs a.
  EXPECT_LT(lseq::metrics::corpus_chrf({"a ö ü"}, {"äöü"}).score, 100.0);
}

TEST(Chrf, SignatureIsSacreBleusWithOurVersion) {
  EXPECT_EQ(lseq::metrics::ChrfScore::signature(),
            lseq_test::with_our_version(expected_metrics().at("chrf_signature").get<std::string>(), lseq::metrics::kMetricsVersion));
}

TEST(Chrf, DifferentLineCountsNameBothCounts) {
  try {
    lseq::metrics::corpus_chrf({"a"}, {"a", "b", "c", "d"});
    FAIL() << "expected lseq::Error";
  } catch (const lseq::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("1 hypothesis lines"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4 reference lines"), std::string::npos) << msg;
  }
}

TEST(Chrf, InvalidUtf8BytesAreCharactersOfTheirOwn) {
  const auto s = lseq::metrics::corpus_chrf({"\xff\xfe\x85x"}, {"\xff\xfe\x85x"});
  EXPECT_EQ(s.hyp_ngrams[0], 4);
  EXPECT_EQ(s.score, 100.0);
}

}  // namespace

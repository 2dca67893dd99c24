#pragma once
// Corpus chrF2 computed exactly as sacreBLEU 2.x's CHRF does by default: character n-grams of orders 1..6 over
// the text with all whitespace removed, no word n-grams, beta 2, case-sensitive, and the average precision and
// recall taken over the orders that occur in both hypothesis and reference ("eff:yes", sacreBLEU's default; its
// eps_smoothing option is off). Characters are Unicode code points of the UTF-8 text.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace lseq::metrics {

struct ChrfScore {
  static constexpr int kCharOrder = 6;
  static constexpr int kBeta = 2;

  double score = 0.0;  // 0..100
  // Corpus sums per order n = 1..6 (index n-1), as sacreBLEU's statistics: hypothesis n-grams (counted only for
  // lines whose reference has n-grams of that order), reference n-grams, and matches (clipped).
  std::array<std::int64_t, kCharOrder> hyp_ngrams{};
  std::array<std::int64_t, kCharOrder> ref_ngrams{};
  std::array<std::int64_t, kCharOrder> matches{};

  // "chrF2 = 59.75"
  std::string format() const;
  // "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:lseq-0.1.0"
  static std::string signature();
};

// hyps[i] is scored against refs[i]. Throws lseq::Error naming both counts when they differ. An empty corpus
// scores 0.
ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

}  // namespace lseq::metrics

#pragma once
// Corpus BLEU computed exactly as sacreBLEU 2.x does by default: 13a tokenization, n-grams up to 4, exponential
// ("exp", mteval-v13a) smoothing, brevity penalty, case-sensitive, no effective order, one reference per line.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace lseq::metrics {

// Stands in for sacreBLEU's version in the signatures, so scores say which implementation made them.
inline constexpr const char* kMetricsVersion = "lseq-0.1.0";

struct BleuScore {
  double score = 0.0;                          // 0..100
  std::array<double, 4> precisions{};          // n-gram precisions in percent, after smoothing
  std::array<std::int64_t, 4> counts{};        // matching n-grams (clipped by the reference counts)
  std::array<std::int64_t, 4> totals{};        // hypothesis n-grams
  double bp = 0.0;                             // brevity penalty
  double ratio = 0.0;                          // hyp_len / ref_len (0 when ref_len is 0)
  std::int64_t hyp_len = 0;                    // tokens in all hypotheses
  std::int64_t ref_len = 0;                    // tokens in all references

  // "BLEU = 24.31 57.1/30.2/18.0/11.4 (BP = 1.000 ratio = 1.012 hyp_len = 1234 ref_len = 1219)"
  std::string format() const;
  // "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:lseq-0.1.0"
  static std::string signature();
};

// hyps[i] is scored against refs[i]. Throws lseq::Error naming both counts when they differ. An empty corpus
// scores 0 with all counts 0 (sacreBLEU cannot score one at all).
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

}  // namespace lseq::metrics

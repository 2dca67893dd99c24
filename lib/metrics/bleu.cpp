#include "metrics/bleu.h"

#include <fmt/format.h>

#include <cmath>
#include <string_view>
#include <unordered_map>

#include "metrics/tokenizer_13a.h"
#include "util/error.h"

namespace lseq::metrics {
namespace {

constexpr int kMaxOrder = 4;

// The tokens of a 13a-tokenized line (single spaces between tokens, none inside one).
std::vector<std::string_view> split_tokens(std::string_view tokenized) {
  std::vector<std::string_view> tokens;
  std::size_t start = 0;
  while (start < tokenized.size()) {
    std::size_t end = tokenized.find(' ', start);
    if (end == std::string_view::npos) end = tokenized.size();
    tokens.push_back(tokenized.substr(start, end - start));
    start = end + 1;
  }
  return tokens;
}

// Counts of all n-grams of one order; an n-gram is the byte range from its first to its last token, which is the
// tokens joined by single spaces, so equal strings mean equal n-grams.
std::unordered_map<std::string_view, std::int64_t> count_ngrams(const std::vector<std::string_view>& tokens, int n) {
  std::unordered_map<std::string_view, std::int64_t> counts;
  for (std::size_t i = 0; i + n <= tokens.size(); ++i) {
    const std::string_view& first = tokens[i];
    const std::string_view& last = tokens[i + n - 1];
    counts[std::string_view(first.data(), static_cast<std::size_t>(last.data() + last.size() - first.data()))]++;
  }
  return counts;
}

// sacreBLEU's my_log: log, with log(0) floored at -9999999999.
double floored_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size())
    fail("cannot compute BLEU: {} hypothesis lines but {} reference lines; give one hypothesis per reference line",
         hyps.size(), refs.size());
  BleuScore s;
  for (std::size_t line = 0; line < hyps.size(); ++line) {
    const std::string hyp = tokenize_13a(hyps[line]);
    const std::string ref = tokenize_13a(refs[line]);
    const auto hyp_tokens = split_tokens(hyp);
    const auto ref_tokens = split_tokens(ref);
    s.hyp_len += static_cast<std::int64_t>(hyp_tokens.size());
    s.ref_len += static_cast<std::int64_t>(ref_tokens.size());
    for (int n = 1; n <= kMaxOrder; ++n) {
      const auto ref_counts = count_ngrams(ref_tokens, n);
      for (const auto& [ngram, count] : count_ngrams(hyp_tokens, n)) {
        s.totals[n - 1] += count;
        const auto it = ref_counts.find(ngram);
        if (it != ref_counts.end()) s.counts[n - 1] += std::min(count, it->second);
      }
    }
  }

  // sacreBLEU's compute_bleu with smooth_method "exp".
  s.bp = 1.0;
  if (s.hyp_len < s.ref_len)
    s.bp = s.hyp_len > 0 ? std::exp(1.0 - static_cast<double>(s.ref_len) / static_cast<double>(s.hyp_len)) : 0.0;
  s.ratio = s.ref_len > 0 ? static_cast<double>(s.hyp_len) / static_cast<double>(s.ref_len) : 0.0;
  bool any_match = false;
  for (const auto c : s.counts) any_match = any_match || c > 0;
  if (!any_match) return s;  // score and precisions 0
  double smooth = 1.0;
  for (int n = 0; n < kMaxOrder; ++n) {
    if (s.totals[n] == 0) break;  // no n-grams this long: this and higher precisions stay 0
    if (s.counts[n] == 0) {
      smooth *= 2;  // each order without a match gets half the previous one's pseudo-count
      s.precisions[n] = 100.0 / (smooth * static_cast<double>(s.totals[n]));
    } else {
      s.precisions[n] = 100.0 * static_cast<double>(s.counts[n]) / static_cast<double>(s.totals[n]);
    }
  }
  double log_sum = 0.0;
  for (const double p : s.precisions) log_sum += floored_log(p);
  s.score = s.bp * std::exp(log_sum / kMaxOrder);
  return s;
}

std::string BleuScore::format() const {
  return fmt::format("BLEU = {:.2f} {:.1f}/{:.1f}/{:.1f}/{:.1f} (BP = {:.3f} ratio = {:.3f} hyp_len = {} ref_len = {})",
                     score, precisions[0], precisions[1], precisions[2], precisions[3], bp, ratio, hyp_len, ref_len);
}

std::string BleuScore::signature() {
  return std::string("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:") + kMetricsVersion;
}

}  // namespace lseq::metrics

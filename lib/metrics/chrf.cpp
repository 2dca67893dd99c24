#include "metrics/chrf.h"

#include <fmt/format.h>

#include <string_view>
#include <unordered_map>

#include "metrics/bleu.h"
#include "metrics/tokenizer_13a.h"
#include "util/error.h"

namespace lseq::metrics {
namespace {

// The line without any (Unicode) whitespace, and the byte offset where each character starts (plus the end).
struct Characters {
  std::string text;
  std::vector<std::size_t> starts;
};

Characters characters_without_whitespace(std::string_view line) {
  Characters chars;
  for (const auto word : split_python_whitespace(line)) chars.text.append(word);
  for (std::size_t pos = 0; pos < chars.text.size();) {
    chars.starts.push_back(pos);
    char32_t c;
    pos += decode_utf8_char(chars.text, pos, c);
  }
  chars.starts.push_back(chars.text.size());
  return chars;
}

std::unordered_map<std::string_view, std::int64_t> count_char_ngrams(const Characters& chars, std::size_t n) {
  std::unordered_map<std::string_view, std::int64_t> counts;
  const std::size_t length = chars.starts.size() - 1;
  const std::string_view text(chars.text);
  for (std::size_t i = 0; i + n <= length; ++i) counts[text.substr(chars.starts[i], chars.starts[i + n] - chars.starts[i])]++;
  return counts;
}

}  // namespace

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (hyps.size() != refs.size())
    fail("cannot compute chrF: {} hypothesis lines but {} reference lines; give one hypothesis per reference line",
         hyps.size(), refs.size());
  ChrfScore s;
  for (std::size_t line = 0; line < hyps.size(); ++line) {
    const Characters hyp = characters_without_whitespace(hyps[line]);
    const Characters ref = characters_without_whitespace(refs[line]);
    for (std::size_t n = 1; n <= ChrfScore::kCharOrder; ++n) {
      const auto ref_counts = count_char_ngrams(ref, n);
      std::int64_t hyp_total = 0, ref_total = 0, matched = 0;
      for (const auto& [ngram, count] : count_char_ngrams(hyp, n)) {
        hyp_total += count;
        const auto it = ref_counts.find(ngram);
        if (it != ref_counts.end()) matched += std::min(count, it->second);
      }
      for (const auto& entry : ref_counts) ref_total += entry.second;
      // As sacreBLEU: hypothesis n-grams count only where the reference has n-grams of this order.
      s.hyp_ngrams[n - 1] += ref_counts.empty() ? 0 : hyp_total;
      s.ref_ngrams[n - 1] += ref_total;
      s.matches[n - 1] += matched;
    }
  }

  // sacreBLEU's _compute_f_score without eps smoothing: average precision and recall over the effective orders.
  const double factor = ChrfScore::kBeta * ChrfScore::kBeta;
  double avg_precision = 0.0, avg_recall = 0.0;
  int effective_order = 0;
  for (int i = 0; i < ChrfScore::kCharOrder; ++i) {
    if (s.hyp_ngrams[i] > 0 && s.ref_ngrams[i] > 0) {
      avg_precision += static_cast<double>(s.matches[i]) / static_cast<double>(s.hyp_ngrams[i]);
      avg_recall += static_cast<double>(s.matches[i]) / static_cast<double>(s.ref_ngrams[i]);
      ++effective_order;
    }
  }
  if (effective_order == 0) return s;
  avg_precision /= effective_order;
  avg_recall /= effective_order;
  if (avg_precision + avg_recall == 0.0) return s;
  s.score = 100.0 * ((1 + factor) * avg_precision * avg_recall / ((factor * avg_precision) + avg_recall));
  return s;
}

std::string ChrfScore::format() const { return fmt::format("chrF{} = {:.2f}", kBeta, score); }

std::string ChrfScore::signature() {
  return fmt::format("nrefs:1|case:mixed|eff:yes|nc:{}|nw:0|space:no|version:{}", kCharOrder, kMetricsVersion);
}

}  // namespace lseq::metrics

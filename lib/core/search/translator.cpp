#include "core/search/translator.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "core/search/nbest_format.h"
#include "data/ordered_output.h"

namespace lseq {

std::string ids_to_text(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out;
}

namespace {

// Line breaks in a text become spaces: one input line, one output line. Returns whether there were any.
bool replace_line_breaks(std::string& text) {
  bool replaced = false;
  for (char& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
      replaced = true;
    }
  }
  return replaced;
}

std::string render(int64_t line, const NBestList& list, const Detokenizer& detokenize,
                   const TranslateSettings& settings, TranslationTotals& totals) {
  static const Hypothesis kEmpty;  // an empty translation with scores 0
  auto text_of = [&](const Hypothesis& h) {
    if (!detokenize) return ids_to_text(h.tokens);
    std::string text = detokenize(h.tokens);
    totals.line_breaks_replaced += replace_line_breaks(text) ? 1 : 0;
    return text;
  };
  if (!settings.n_best) {
    const Hypothesis& best = list.empty() ? kEmpty : list.front();
    return format_best(list.empty() ? std::string() : text_of(best), best, settings.word_scores);
  }
  if (list.empty()) return format_nbest_entry(line, "", kEmpty, settings.word_scores);
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += '\n';
    out += format_nbest_entry(line, text_of(list[i]), list[i], settings.word_scores);
  }
  return out;
}

}  // namespace

TranslationTotals translate_all(StepModel& model, data::TranslationInput& input, const Detokenizer& detokenize,
                                const TranslateSettings& settings, std::ostream& out, double progress_seconds) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point begin = Clock::now();
  Clock::time_point next_report = begin + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(progress_seconds));
  data::OrderedOutput output(out);
  data::InputWindow window;
  TranslationTotals totals;
  while (input.next(window)) {
    for (int64_t line : window.empty_lines) output.put(line, render(line, {}, detokenize, settings, totals));
    for (const auto& batch : window.batches) {
      std::vector<NBestList> lists =
          settings.sample ? sample(model, batch, settings.sampling) : beam_search(model, batch, settings.beam);
      for (int i = 0; i < batch.size; ++i) {
        if (!lists[i].empty()) totals.target_tokens += static_cast<int64_t>(lists[i].front().tokens.size());
        output.put(batch.line_ids[i], render(batch.line_ids[i], lists[i], detokenize, settings, totals));
      }
    }
    totals.lines = window.end_line;
    const Clock::time_point now = Clock::now();
    if (progress_seconds > 0 && now >= next_report) {
      const double seconds = std::chrono::duration<double>(now - begin).count();
      spdlog::info("translated {} lines: {:.1f} lines/s, {:.0f} target tokens/s", totals.lines,
                   totals.lines / seconds, totals.target_tokens / seconds);
      next_report = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(progress_seconds));
    }
  }
  output.finish(totals.lines);
  return totals;
}

}  // namespace lseq

#include "core/serve/translate_response.h"

#include <nlohmann/json.hpp>

#include "core/search/nbest_format.h"

namespace lseq::serve {

namespace {

using json = nlohmann::json;

// Text that is not valid UTF-8 (a vocabulary's piece cut in the middle, say) is written with U+FFFD instead of
// failing the whole answer.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string render_translations(const std::vector<PendingRequest::Entry>& entries, const TranslateSettings& settings,
                                const Detokenizer& detokenize, const std::string& not_done, const std::string& error) {
  static const Hypothesis kEmpty;  // an empty translation with scores 0, as lstranslate writes for an empty line
  auto text_of = [&](const Hypothesis& h) { return detokenize ? detokenize(h.tokens) : ids_to_text(h.tokens); };
  json translations = json::array(), errors = json::array();
  for (size_t i = 0; i < entries.size(); ++i) {
    const PendingRequest::Entry& entry = entries[i];
    if (!entry.done || !entry.error.empty()) {
      translations.push_back(nullptr);
      errors.push_back({{"index", i}, {"error", entry.done ? entry.error : not_done}});
      continue;
    }
    const NBestList& list = entry.list;
    if (!settings.n_best) {
      const Hypothesis& best = list.empty() ? kEmpty : list.front();
      translations.push_back(format_best(list.empty() ? std::string() : text_of(best), best, settings.word_scores));
      continue;
    }
    json lines = json::array();
    if (list.empty()) lines.push_back(format_nbest_entry(static_cast<int64_t>(i), "", kEmpty, settings.word_scores));
    for (const Hypothesis& h : list)
      lines.push_back(format_nbest_entry(static_cast<int64_t>(i), text_of(h), h, settings.word_scores));
    translations.push_back(std::move(lines));
  }
  json answer = {{"translations", std::move(translations)}};
  if (!errors.empty()) answer["errors"] = std::move(errors);
  if (!error.empty()) answer["error"] = error;
  return dump(answer) + "\n";
}

std::string render_error(const std::string& message) { return dump(json{{"error", message}}) + "\n"; }

}  // namespace lseq::serve

#include "core/serve/stream_events.h"

#include <nlohmann/json.hpp>

namespace lseq::serve {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD: what an incomplete UTF-8 character decodes to

std::string event(const nlohmann::json& data) { return "data: " + data.dump() + "\n\n"; }

}  // namespace

StreamEvents::StreamEvents(int sentences, Detokenizer detokenize)
    : detokenize_(std::move(detokenize)), sent_(static_cast<size_t>(sentences)) {}

std::string StreamEvents::events_for(const PendingRequest::Progress& progress) {
  std::string out;
  for (size_t i = 0; i < sent_.size() && i < progress.tokens.size(); ++i) {
    const std::vector<int32_t>& tokens = progress.tokens[i];
    std::string text = detokenize_ ? detokenize_(tokens) : ids_to_text(tokens);
    const bool done = i < progress.done.size() && progress.done[i];
    if (!done) {
      while (text.size() >= kReplacement.size() &&
             text.compare(text.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0)
        text.resize(text.size() - kReplacement.size());
    }
    // Text already sent is never taken back: a decoding that changed it (no tokenizer of lseq's does) sends
    // nothing more, and the closing answer has the whole text.
    if (text.size() <= sent_[i].size() || text.compare(0, sent_[i].size(), sent_[i]) != 0) continue;
    out += event({{"index", i}, {"text", text.substr(sent_[i].size())}});
    sent_[i] = std::move(text);
  }
  return out;
}

std::string StreamEvents::closing(const std::string& answer) {
  std::string json = answer;
  while (!json.empty() && json.back() == '\n') json.pop_back();  // an event's data is one line
  return "data: " + json + "\n\ndata: [DONE]\n\n";
}

}  // namespace lseq::serve

#pragma once
// A streaming request's answer (a language model's "stream": true) as server-sent events: while its sentences are
// decoded, one event per sentence whose text grew, carrying what was added,
//   data: {"index": 0, "text": " there was"}
// then the whole answer as the non-streamed request gets it, and the end:
//   data: {"translations": [...]}
//   data: [DONE]
// The added texts of a sentence add up to its translation in the closing answer. While a sentence goes on, a last
// incomplete UTF-8 character (a byte-level BPE token can end inside one) is held back until it is whole.
#include <string>
#include <vector>

#include "core/search/translator.h"
#include "core/serve/pending_request.h"

namespace lseq::serve {

class StreamEvents {
 public:
  StreamEvents(int sentences, Detokenizer detokenize);

  // The events for what `progress` holds beyond what earlier calls sent; empty when nothing grew.
  std::string events_for(const PendingRequest::Progress& progress);
  // The closing events around the whole answer (render_translations' JSON).
  static std::string closing(const std::string& answer);

 private:
  Detokenizer detokenize_;
  std::vector<std::string> sent_;  // per sentence, its text as sent so far
};

}  // namespace lseq::serve

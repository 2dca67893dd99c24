#pragma once
// The answer to POST /translate, one entry per sentence in request order, each what lstranslate writes for that
// sentence as line i of its input (the same formatting functions, core/search/nbest_format.h):
//   {"translations": ["best translation", ...]}
//   with word-scores: "best translation ||| WordScores= -0.1 ..."
//   with n-best: each entry is the list of Marian n-best lines "i ||| text ||| F0= ... ||| score", best first
// A sentence without a translation (too long, bad token ids, not done by the time-out, a decoding failure) has null
// there and an entry {"index": i, "error": "..."} in "errors"; "error" (one line) says why a request ended early.
#include <string>
#include <vector>

#include "core/search/translator.h"
#include "core/serve/pending_request.h"

namespace lseq::serve {

// `not_done`: the error of entries that got no result (why the request ended before them); `error`: empty or the
// request-level message.
std::string render_translations(const std::vector<PendingRequest::Entry>& entries, const TranslateSettings& settings,
                                const Detokenizer& detokenize, const std::string& not_done, const std::string& error);

// {"error": "message"}: how every refused request is answered.
std::string render_error(const std::string& message);

}  // namespace lseq::serve

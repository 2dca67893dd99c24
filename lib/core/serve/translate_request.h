#pragma once
// The body of POST /translate, read and checked before anything is queued, and its sentences turned into ids.
//   ["sentence", ...]                                    the server's default search
//   {"text": ["sentence", ...], "beam-size": 2, ...}     with options named as lstranslate's:
//       beam-size (1 to the server's --beam-size), normalize, word-penalty, n-best, word-scores,
//       output-sampling ("topk 10", ["topp", 0.9], "full 0.7"; false or [] for beam search), seed
// ("text" may also be one string.) A language model's server reads prompts from "text" (or "prompt") and also takes
// max-new-tokens (1 to the server's --max-length) and "stream": true (the continuations as server-sent events, token
// by token; greedy or sampling, without n-best). Everything else is refused with 400 naming it.
#include <optional>
#include <string>
#include <vector>

#include "core/search/translator.h"
#include "core/serve/scheduler.h"
#include "data/translation_input.h"

namespace lseq::serve {

// A request refused as a whole: the HTTP status (400 or 413) and why, in one line.
struct RequestError {
  int status = 400;
  std::string message;
};

struct RequestLimits {
  int max_sentences = 1024;  // --max-request-sentences (413 above)
  int max_beam_size = 4;     // --beam-size: the decoder's memory is planned for it
  int max_queue = 4096;      // --max-queue: a request of more sentences could never be queued (413)
  bool language_model = false;  // the server's model continues prompts
  int max_new_tokens = 0;       // a language model's --max-length: the most a request's max-new-tokens may ask
};

struct TranslateRequest {
  std::vector<std::string> sentences;
  TranslateSettings settings;
  bool stream = false;  // a language model's continuations as server-sent events, token by token
};

// Reads `body` over the server's defaults. Invalid UTF-8 and malformed JSON (or JSON nested deeper than a request
// ever is) are 400 naming the byte or the place; too many sentences are 413.
std::optional<RequestError> parse_translate_request(const std::string& body, const TranslateSettings& defaults,
                                                    const RequestLimits& limits, TranslateRequest& out);

// How sentences become ids, as lstranslate encodes its lines (data/translation_input.h).
struct SentenceEncoding {
  data::TextEncoder encoder;  // empty: sentences are token ids (--no-spm-encode), below vocab_size
  int vocab_size = 0;
  int max_length = 256;       // --max-length (a language model's prompts: its positions less one new token)
  bool crop = false;          // --max-length-crop: crop longer sentences instead of refusing them
  bool prompts = false;       // the sentences are a language model's prompts (what max_length means in messages)
};

// What becomes of a request's sentences: those to decode, and those answered at once (empty ones get an empty
// translation; too long ones and bad token ids an error naming the sentence).
struct EncodedSentences {
  std::vector<SentenceToDecode> to_decode;
  std::vector<int> empty;                                  // indices
  std::vector<std::pair<int, std::string>> errors;         // index, message
};
EncodedSentences encode_sentences(const std::vector<std::string>& sentences, const SentenceEncoding& encoding);

}  // namespace lseq::serve

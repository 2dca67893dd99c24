#include "core/serve/translate_request.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "data/token_ids.h"
#include "data/utf8.h"
#include "util/error.h"

namespace lseq::serve {

namespace {

using json = nlohmann::json;

// A request is a list of strings, or an object of such a list and scalars: nothing deeper than 3 levels. Deeper
// JSON is refused while it is read, before it costs memory.
constexpr int kMaxDepth = 4;

const char* kAccepted = "text, beam-size, normalize, word-penalty, n-best, word-scores, output-sampling, seed";
const char* kAcceptedLm =
    "text (or prompt), max-new-tokens, stream, beam-size, normalize, word-penalty, n-best, word-scores, "
    "output-sampling, seed";

struct TooDeep {};

const char* type_name(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "a list";
    case json::value_t::object: return "an object";
    case json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

RequestError bad(std::string message) { return RequestError{400, std::move(message)}; }

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 4: ..." without the bracket part.
std::string parse_problem(const std::string& what) {
  const size_t bracket = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos ? what.substr(bracket + 2) : what;
}

std::optional<RequestError> read_sentences(const json& text, std::vector<std::string>& out,
                                           const char* key = "text") {
  if (text.is_string()) {
    out.push_back(text.get<std::string>());
    return std::nullopt;
  }
  if (!text.is_array()) return bad(fmt::format("'{}' must be a list of strings, not {}", key, type_name(text)));
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (!text[i].is_string())
      return bad(fmt::format("sentence {} of '{}' is {}, not a string", i, key, type_name(text[i])));
    out.push_back(text[i].get<std::string>());
  }
  return std::nullopt;
}

std::optional<RequestError> read_number(const json& value, const char* key, double& out) {
  if (!value.is_number()) return bad(fmt::format("'{}' must be a number, not {}", key, type_name(value)));
  out = value.get<double>();
  if (!std::isfinite(out)) return bad(fmt::format("'{}' must be a finite number", key));
  return std::nullopt;
}

std::optional<RequestError> read_bool(const json& value, const char* key, bool& out) {
  if (!value.is_boolean()) return bad(fmt::format("'{}' must be true or false, not {}", key, type_name(value)));
  out = value.get<bool>();
  return std::nullopt;
}

// "topk 10", ["topk", 10], ["topk", "10"]: the words of --output-sampling. false, "" or []: beam search.
std::optional<RequestError> read_sampling(const json& value, std::vector<std::string>& words, bool& off) {
  off = false;
  words.clear();
  auto split = [&](const std::string& text) {
    size_t begin = 0;
    while ((begin = text.find_first_not_of(" \t", begin)) != std::string::npos) {
      const size_t end = text.find_first_of(" \t", begin);
      words.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
      begin = end;
    }
  };
  if (value.is_boolean() && !value.get<bool>()) {
    off = true;
  } else if (value.is_string()) {
    split(value.get<std::string>());
  } else if (value.is_array()) {
    for (const json& word : value) {
      if (word.is_string()) {
        split(word.get<std::string>());
      } else if (word.is_number()) {
        words.push_back(word.dump());
      } else {
        return bad(fmt::format("'output-sampling' words must be strings or numbers, not {}", type_name(word)));
      }
    }
  } else {
    return bad(fmt::format("'output-sampling' must be a string such as \"topk 10\", a list of words, or false; not {}",
                           type_name(value)));
  }
  if (words.empty()) off = true;
  return std::nullopt;
}

std::optional<RequestError> read_options(const json& object, const TranslateSettings& defaults,
                                         const RequestLimits& limits, TranslateRequest& out) {
  TranslateSettings& s = out.settings;
  std::optional<std::vector<std::string>> sampling_words;
  bool sampling_off = false;
  std::optional<uint64_t> seed;
  bool has_text = false;
  const char* accepted = limits.language_model ? kAcceptedLm : kAccepted;
  for (const auto& [key, value] : object.items()) {
    std::optional<RequestError> error;
    if (key == "text" || (key == "prompt" && limits.language_model)) {
      if (has_text) return bad("give the prompts once, as 'text' or as 'prompt'");
      has_text = true;
      error = read_sentences(value, out.sentences, key == "text" ? "text" : "prompt");
    } else if (key == "max-new-tokens" && limits.language_model) {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > limits.max_new_tokens)
        return bad(fmt::format("'max-new-tokens' must be a whole number from 1 to {} (the server's --max-length), "
                               "not {}",
                               limits.max_new_tokens, value.dump()));
      s.beam.max_new_tokens = static_cast<int>(value.get<int64_t>());
    } else if (key == "stream" && limits.language_model) {
      error = read_bool(value, "stream", out.stream);
    } else if (key == "beam-size") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > limits.max_beam_size)
        return bad(fmt::format("'beam-size' must be a whole number from 1 to {} (the server's --beam-size, for which "
                               "its memory is planned), not {}",
                               limits.max_beam_size, value.dump()));
      s.beam.beam_size = static_cast<int>(value.get<int64_t>());
    } else if (key == "normalize") {
      error = read_number(value, "normalize", s.beam.normalize);
      if (!error && s.beam.normalize < 0) return bad("'normalize' must not be negative");
    } else if (key == "word-penalty") {
      error = read_number(value, "word-penalty", s.beam.word_penalty);
    } else if (key == "n-best") {
      error = read_bool(value, "n-best", s.n_best);
    } else if (key == "word-scores") {
      error = read_bool(value, "word-scores", s.word_scores);
    } else if (key == "output-sampling") {
      sampling_words.emplace();
      error = read_sampling(value, *sampling_words, sampling_off);
    } else if (key == "seed") {
      if (!value.is_number_unsigned()) return bad(fmt::format("'seed' must be a whole number >= 0, not {}", value.dump()));
      seed = value.get<uint64_t>();
    } else if (!limits.language_model &&
               (key == "prompt" || key == "prompts" || key == "stream" || key == "max-new-tokens")) {
      return bad(fmt::format("'{}' asks for generation from prompts, which a language model does; this server's "
                             "model translates: send {{\"text\": [sentences]}}",
                             key));
    } else {
      return bad(fmt::format("unknown field '{}' in the request (accepted: {})", data::excerpt_for_message(key),
                             accepted));
    }
    if (error) return error;
  }
  if (!has_text)
    return bad(fmt::format("the request has no 'text' (a list of {}); accepted: {}",
                           limits.language_model ? "prompts" : "sentences", accepted));
  // The sampling words replace the mode; the scores of samples use the request's normalisation and penalty.
  if (sampling_words) s.sample = !sampling_off;
  if (out.stream && (s.n_best || (!s.sample && s.beam.beam_size > 1)))
    return bad("'stream' sends each token as it is chosen, which greedy search (beam-size 1) and sampling do; a wider "
               "beam's tokens are final only when it ends: ask for beam-size 1 or output-sampling, without n-best");
  if (s.sample) {
    SamplingOptions base = defaults.sampling;
    base.normalize = s.beam.normalize;
    base.word_penalty = s.beam.word_penalty;
    base.max_length_factor = s.beam.max_length_factor;
    base.max_new_tokens = s.beam.max_new_tokens;
    base.max_context = s.beam.max_context;
    if (seed) base.seed = *seed;
    try {
      s.sampling = sampling_words && !sampling_off ? parse_output_sampling(*sampling_words, base) : base;
    } catch (const Error& e) {
      std::string message = e.what();
      const size_t option = message.find("--output-sampling");
      if (option != std::string::npos) message.replace(option, 17, "'output-sampling'");
      return bad(message);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> parse_translate_request(const std::string& body, const TranslateSettings& defaults,
                                                    const RequestLimits& limits, TranslateRequest& out) {
  out = TranslateRequest{};
  out.settings = defaults;
  const size_t invalid = data::find_invalid_utf8(body);
  if (invalid != std::string::npos)
    return bad(fmt::format("the request body is not valid UTF-8: invalid byte 0x{:02X} at offset {}",
                           static_cast<unsigned char>(body[invalid]), invalid));
  json root;
  try {
    root = json::parse(body, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth) throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    return bad(fmt::format("malformed request: JSON nested deeper than {} levels", kMaxDepth));
  } catch (const json::exception& e) {
    return bad("malformed JSON: " + parse_problem(e.what()));
  }
  std::optional<RequestError> error;
  if (root.is_array()) {
    error = read_sentences(root, out.sentences);
  } else if (root.is_object()) {
    error = read_options(root, defaults, limits, out);
  } else {
    error = bad(fmt::format("the request must be a list of sentences or an object with 'text', not {}",
                            type_name(root)));
  }
  if (error) return error;
  const int64_t count = static_cast<int64_t>(out.sentences.size());
  if (count > limits.max_sentences)
    return RequestError{413, fmt::format("{} sentences in one request, more than --max-request-sentences {}", count,
                                         limits.max_sentences)};
  if (count > limits.max_queue)
    return RequestError{413, fmt::format("{} sentences in one request, more than the whole queue holds "
                                         "(--max-queue {})", count, limits.max_queue)};
  return std::nullopt;
}

EncodedSentences encode_sentences(const std::vector<std::string>& sentences, const SentenceEncoding& encoding) {
  EncodedSentences out;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const int index = static_cast<int>(i);
    const std::string& text = sentences[i];
    std::vector<int32_t> ids;
    bool whole = true;
    if (encoding.encoder) {
      ids = data::encode_text_until(text, encoding.encoder, encoding.max_length, whole);
    } else {
      const std::string why = data::parse_token_ids(text, encoding.vocab_size, ids);
      if (!why.empty()) {
        out.errors.emplace_back(index, fmt::format("sentence {} is not token ids: {}", index, why));
        continue;
      }
    }
    if (static_cast<int64_t>(ids.size()) > encoding.max_length) {
      if (encoding.crop) {
        ids.resize(static_cast<size_t>(encoding.max_length));
      } else {
        // A prompt's limit is the model's positions, not --max-length (the new tokens).
        const std::string limit = encoding.prompts ? fmt::format("the {} a prompt of this model may have",
                                                                 encoding.max_length)
                                                   : fmt::format("--max-length {}", encoding.max_length);
        out.errors.emplace_back(
            index, whole ? fmt::format("sentence {} has {} tokens, more than {}", index, ids.size(), limit)
                         : fmt::format("sentence {} has more tokens than {} ({} bytes)", index, limit, text.size()));
        continue;
      }
    }
    if (ids.empty()) {
      out.empty.push_back(index);
    } else {
      out.to_decode.push_back(SentenceToDecode{index, std::move(ids)});
    }
  }
  return out;
}

}  // namespace lseq::serve

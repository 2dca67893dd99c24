// POST /translate bodies: the accepted forms and options, and a one-line refusal (400 or 413) for everything else;
// sentences to ids with lstranslate's encoding, too long ones refused or cropped.
#include <gtest/gtest.h>

#include <sstream>

#include "core/serve/translate_request.h"

namespace lseq::serve {
namespace {

TranslateSettings defaults() {
  TranslateSettings s;
  s.beam.beam_size = 4;
  s.sampling.seed = 1234;
  return s;
}

RequestLimits limits(int max_sentences = 100, int max_beam = 4) {
  RequestLimits l;
  l.max_sentences = max_sentences;
  l.max_beam_size = max_beam;
  l.max_queue = 1000;
  return l;
}

// The refusal of `body`, or "" when it is accepted.
std::string refusal(const std::string& body, int* status = nullptr, RequestLimits l = limits()) {
  TranslateRequest out;
  const auto error = parse_translate_request(body, defaults(), l, out);
  if (status) *status = error ? error->status : 200;
  return error ? error->message : "";
}

TEST(TranslateRequest, AListOrAnObjectWithOptions) {
  TranslateRequest r;
  ASSERT_FALSE(parse_translate_request(R"(["Hallo Welt.", "", "Grüße"])", defaults(), limits(), r));
  EXPECT_EQ(r.sentences, (std::vector<std::string>{"Hallo Welt.", "", "Grüße"}));
  EXPECT_EQ(r.settings.beam.beam_size, 4);
  EXPECT_FALSE(r.settings.sample);

  ASSERT_FALSE(parse_translate_request(
      R"({"text": ["a"], "beam-size": 2, "n-best": true, "word-scores": true, "normalize": 1, "word-penalty": 0.5})",
      defaults(), limits(), r));
  EXPECT_EQ(r.settings.beam.beam_size, 2);
  EXPECT_TRUE(r.settings.n_best);
  EXPECT_TRUE(r.settings.word_scores);
  EXPECT_EQ(r.settings.beam.normalize, 1);
  EXPECT_EQ(r.settings.beam.word_penalty, 0.5);

  ASSERT_FALSE(parse_translate_request(R"({"text": "one", "output-sampling": "topk 10 0.5", "seed": 7})", defaults(),
                                       limits(), r));
  EXPECT_EQ(r.sentences, std::vector<std::string>{"one"});
  EXPECT_TRUE(r.settings.sample);
  EXPECT_EQ(r.settings.sampling.mode, SamplingOptions::Mode::top_k);
  EXPECT_EQ(r.settings.sampling.top_k, 10);
  EXPECT_EQ(r.settings.sampling.temperature, 0.5);
  EXPECT_EQ(r.settings.sampling.seed, 7u);
  ASSERT_FALSE(
      parse_translate_request(R"({"text": [], "output-sampling": ["topp", 0.9]})", defaults(), limits(), r));
  EXPECT_EQ(r.settings.sampling.mode, SamplingOptions::Mode::top_p);
  EXPECT_EQ(r.settings.sampling.seed, 1234u) << "the server's seed when the request gives none";

  TranslateSettings sampling_server = defaults();
  sampling_server.sample = true;
  ASSERT_FALSE(parse_translate_request(R"({"text": ["x"], "output-sampling": false})", sampling_server, limits(), r));
  EXPECT_FALSE(r.settings.sample) << "false turns a server's default sampling off";
}

TEST(TranslateRequest, MalformedBodiesAre400NamingTheProblem) {
  int status = 0;
  EXPECT_NE(refusal("[\"Das ist \xff kaputt\"]", &status).find("not valid UTF-8: invalid byte 0xFF at offset 10"),
            std::string::npos);
  EXPECT_EQ(status, 400);
  EXPECT_NE(refusal("[\"a\", ", &status).find("malformed JSON: "), std::string::npos);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(refusal("[\"a\"] x").find("[json.exception"), std::string::npos) << "nlohmann's prefix is dropped";
  EXPECT_NE(refusal(std::string(100000, '[') + std::string(100000, ']')).find("nested deeper"), std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\", 3]}").find("sentence 1 of 'text' is a number"), std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"beam\": 2}").find("unknown field 'beam'"), std::string::npos);
  EXPECT_NE(refusal("{\"beam-size\": 2}").find("no 'text'"), std::string::npos);
  EXPECT_NE(refusal("\"just a string\"").find("a list of sentences or an object"), std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"beam-size\": 5}").find("from 1 to 4"), std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"beam-size\": 1.5}").find("from 1 to 4"), std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"n-best\": 1}").find("'n-best' must be true or false"), std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"seed\": -1}").find("'seed'"), std::string::npos);
  const std::string sampling = refusal("{\"text\": [\"a\"], \"output-sampling\": \"topk 0\"}");
  EXPECT_NE(sampling.find("'output-sampling'"), std::string::npos) << sampling;
  EXPECT_EQ(sampling.find("--output-sampling"), std::string::npos) << sampling;
}

// A translation model's server refuses what only a language model does, naming the field.
TEST(TranslateRequest, PromptFieldsAreRefusedByATranslationServer) {
  for (const char* key : {"prompt", "stream", "max-new-tokens"}) {
    const std::string message = refusal(std::string("{\"text\": [\"a\"], \"") + key + "\": 3}");
    EXPECT_NE(message.find(std::string("'") + key + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("language model"), std::string::npos) << message;
  }
}

// A language model's server: prompts as 'text' or 'prompt', max-new-tokens within the server's --max-length (also
// for sampling), and 'stream' where each token is final as it is chosen (greedy or sampling, no n-best).
TEST(TranslateRequest, LanguageModelRequestsTakePromptsAndMaxNewTokens) {
  RequestLimits lm = limits();
  lm.language_model = true;
  lm.max_new_tokens = 20;
  TranslateSettings base = defaults();
  base.beam.max_new_tokens = 20;
  base.beam.max_context = 40;
  TranslateRequest out;
  ASSERT_FALSE(parse_translate_request("{\"prompt\": [\"Once upon\", \"\"], \"max-new-tokens\": 5}", base, lm, out));
  EXPECT_EQ(out.sentences, (std::vector<std::string>{"Once upon", ""}));
  EXPECT_EQ(out.settings.beam.max_new_tokens, 5);
  EXPECT_EQ(out.settings.beam.max_context, 40);
  ASSERT_FALSE(parse_translate_request("{\"text\": \"a\", \"max-new-tokens\": 7, \"output-sampling\": \"topk 3\"}",
                                       base, lm, out));
  EXPECT_TRUE(out.settings.sample);
  EXPECT_EQ(out.settings.sampling.max_new_tokens, 7) << "sampling keeps the request's limit";
  EXPECT_EQ(out.settings.sampling.max_context, 40);
  ASSERT_FALSE(parse_translate_request("[\"a\"]", base, lm, out));
  EXPECT_EQ(out.settings.beam.max_new_tokens, 20) << "the server's default";
  for (const char* body : {"{\"text\": [\"a\"], \"max-new-tokens\": 21}", "{\"text\": [\"a\"], \"max-new-tokens\": 0}",
                           "{\"text\": [\"a\"], \"max-new-tokens\": \"5\"}"}) {
    EXPECT_NE(refusal(body, nullptr, lm).find("'max-new-tokens' must be a whole number from 1 to 20"),
              std::string::npos)
        << body;
  }
  // Streaming: greedy (beam-size 1) or sampling, without n-best; the server's default beam here is 4.
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"stream\": true}", nullptr, lm).find("beam-size 1 or output-sampling"),
            std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"stream\": true, \"beam-size\": 1, \"n-best\": true}", nullptr, lm)
                .find("without n-best"),
            std::string::npos);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"stream\": 1}", nullptr, lm).find("'stream' must be true or false"),
            std::string::npos);
  ASSERT_FALSE(parse_translate_request("{\"text\": [\"a\"], \"stream\": true, \"beam-size\": 1}", base, lm, out));
  EXPECT_TRUE(out.stream);
  ASSERT_FALSE(parse_translate_request("{\"text\": [\"a\"], \"stream\": true, \"output-sampling\": \"topk 5\"}", base,
                                       lm, out));
  EXPECT_TRUE(out.stream);
  ASSERT_FALSE(parse_translate_request("{\"text\": [\"a\"], \"stream\": false}", base, lm, out));
  EXPECT_FALSE(out.stream);
  EXPECT_NE(refusal("{\"text\": [\"a\"], \"prompt\": [\"b\"]}", nullptr, lm).find("once"), std::string::npos);
  EXPECT_NE(refusal("{\"max-new-tokens\": 3}", nullptr, lm).find("list of prompts"), std::string::npos);
}

TEST(TranslateRequest, TooManySentencesAre413) {
  int status = 0;
  EXPECT_NE(refusal("[\"a\", \"b\", \"c\"]", &status, limits(2)).find("--max-request-sentences 2"),
            std::string::npos);
  EXPECT_EQ(status, 413);
  RequestLimits small_queue = limits(100);
  small_queue.max_queue = 2;
  EXPECT_NE(refusal("[\"a\", \"b\", \"c\"]", &status, small_queue).find("--max-queue 2"), std::string::npos);
  EXPECT_EQ(status, 413);
}

// A stand-in for SentencePiece: one id per word, 4 + its length.
std::vector<int32_t> toy_encode(std::string_view text) {
  std::vector<int32_t> ids;
  std::istringstream words{std::string(text)};
  std::string w;
  while (words >> w) ids.push_back(4 + static_cast<int32_t>(w.size()));
  return ids;
}

TEST(TranslateRequest, EncodingAnswersEmptyAndTooLongSentencesAtOnce) {
  SentenceEncoding encoding;
  encoding.encoder = toy_encode;
  encoding.max_length = 3;
  const EncodedSentences e = encode_sentences({"a bb", "", "a b c d", "  ", "x y z"}, encoding);
  ASSERT_EQ(e.to_decode.size(), 2u);
  EXPECT_EQ(e.to_decode[0].index, 0);
  EXPECT_EQ(e.to_decode[0].ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(e.to_decode[1].index, 4);
  EXPECT_EQ(e.empty, (std::vector<int>{1, 3}));
  ASSERT_EQ(e.errors.size(), 1u);
  EXPECT_EQ(e.errors[0].first, 2);
  EXPECT_NE(e.errors[0].second.find("sentence 2 has 4 tokens, more than --max-length 3"), std::string::npos);

  encoding.prompts = true;  // a language model's: the limit is its positions, not --max-length
  const EncodedSentences prompt = encode_sentences({"a b c d"}, encoding);
  ASSERT_EQ(prompt.errors.size(), 1u);
  EXPECT_NE(prompt.errors[0].second.find("4 tokens, more than the 3 a prompt of this model may have"),
            std::string::npos)
      << prompt.errors[0].second;

  encoding.crop = true;
  const EncodedSentences cropped = encode_sentences({"a b c d"}, encoding);
  ASSERT_EQ(cropped.to_decode.size(), 1u);
  EXPECT_EQ(cropped.to_decode[0].ids.size(), 3u);
}

TEST(TranslateRequest, TokenIdsAreCheckedAgainstTheVocabulary) {
  SentenceEncoding ids;
  ids.vocab_size = 50;
  ids.max_length = 10;
  const EncodedSentences e = encode_sentences({"4 5 6", "4 99", "x"}, ids);
  ASSERT_EQ(e.to_decode.size(), 1u);
  EXPECT_EQ(e.to_decode[0].ids, (std::vector<int32_t>{4, 5, 6}));
  ASSERT_EQ(e.errors.size(), 2u);
  EXPECT_NE(e.errors[0].second.find("sentence 1 is not token ids"), std::string::npos);
}

}  // namespace
}  // namespace lseq::serve

// The answer's JSON: one entry per sentence in order, lstranslate's formatting, nulls and "errors" for sentences
// without a translation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/search/nbest_format.h"
#include "core/serve/translate_response.h"

namespace lseq::serve {
namespace {

using json = nlohmann::json;

PendingRequest::Entry translated(std::vector<std::vector<int32_t>> hypotheses) {
  PendingRequest::Entry e;
  e.done = true;
  double score = -1;
  for (auto& tokens : hypotheses) {
    Hypothesis h;
    h.word_log_probs.assign(tokens.size() + 1, -0.5f);
    h.tokens = std::move(tokens);
    h.log_prob = -0.5 * static_cast<double>(h.word_log_probs.size());
    h.score = score--;
    e.list.push_back(h);
  }
  return e;
}

Detokenizer letters() {
  return [](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += static_cast<char>('a' + id - 4);
    return s;
  };
}

TEST(TranslateResponse, BestTranslationsInOrderWithErrorsBeside) {
  std::vector<PendingRequest::Entry> entries;
  entries.push_back(translated({{4, 5}, {6}}));
  entries.push_back(translated({}));  // an empty sentence
  PendingRequest::Entry failed;
  failed.done = true;
  failed.error = "sentence 2 has 9 tokens, more than --max-length 8";
  entries.push_back(failed);
  entries.push_back(PendingRequest::Entry{});  // not done
  const json answer = json::parse(render_translations(entries, TranslateSettings{}, letters(), "timed out", "late"));
  EXPECT_EQ(answer["translations"], json::parse(R"(["ab", "", null, null])"));
  EXPECT_EQ(answer["errors"], json::parse(R"([{"index": 2, "error": "sentence 2 has 9 tokens, more than --max-length 8"},
                                              {"index": 3, "error": "timed out"}])"));
  EXPECT_EQ(answer["error"], "late");
  const json clean = json::parse(render_translations({translated({{4}})}, TranslateSettings{}, nullptr, "", ""));
  EXPECT_EQ(clean, json::parse(R"({"translations": ["4"]})")) << "no detokenizer: ids; no errors: no keys";
}

TEST(TranslateResponse, NBestAndWordScoresAreLstranslatesLines) {
  TranslateSettings settings;
  settings.n_best = true;
  settings.word_scores = true;
  std::vector<PendingRequest::Entry> entries = {translated({}), translated({{4, 5}, {6}})};
  const json answer = json::parse(render_translations(entries, settings, letters(), "", ""));
  ASSERT_EQ(answer["translations"].size(), 2u);
  EXPECT_EQ(answer["translations"][0], json::array({format_nbest_entry(0, "", Hypothesis{}, true)}));
  EXPECT_EQ(answer["translations"][1],
            json::array({format_nbest_entry(1, "ab", entries[1].list[0], true),
                         format_nbest_entry(1, "c", entries[1].list[1], true)}));
  settings.n_best = false;
  const json best = json::parse(render_translations(entries, settings, letters(), "", ""));
  EXPECT_EQ(best["translations"][1], format_best("ab", entries[1].list[0], true));
}

TEST(TranslateResponse, InvalidUtf8InATranslationIsReplacedNotFatal) {
  const Detokenizer broken = [](const std::vector<int32_t>&) { return std::string("a\xff"); };
  const json answer = json::parse(render_translations({translated({{4}})}, TranslateSettings{}, broken, "", ""));
  EXPECT_EQ(answer["translations"][0], "a\xEF\xBF\xBD");
  EXPECT_EQ(json::parse(render_error("bad \xff"))["error"], "bad \xEF\xBF\xBD");
}

}  // namespace
}  // namespace lseq::serve

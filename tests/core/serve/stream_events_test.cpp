// A streaming request's server-sent events: each sentence's added text once, an incomplete last UTF-8 character
// held back until it is whole, and the closing answer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "core/serve/stream_events.h"

namespace lseq::serve {
namespace {

using json = nlohmann::json;

// A detokenizer over bytes: token t is the byte t (so a multi-byte character takes several tokens).
std::string bytes_of(const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += static_cast<char>(id);
  // As lossy UTF-8 decoding does: a last incomplete character (here: a lone lead byte) becomes U+FFFD.
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) {
    text.pop_back();
    text += "\xEF\xBF\xBD";
  }
  return text;
}

// The (index, text) pairs of the events in `stream`.
std::vector<std::pair<int, std::string>> parse(const std::string& stream) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream lines(stream);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    EXPECT_EQ(line.rfind("data: ", 0), 0u) << line;
    const json data = json::parse(line.substr(6));
    out.emplace_back(data["index"].get<int>(), data["text"].get<std::string>());
  }
  return out;
}

TEST(StreamEvents, EachSentenceSendsWhatItAddedOnce) {
  StreamEvents events(2, [](const std::vector<int32_t>& ids) {
    std::string text;
    for (int32_t id : ids) text += " w" + std::to_string(id);
    return text;
  });
  PendingRequest::Progress p;
  p.tokens = {{5}, {}};
  p.done = {false, false};
  EXPECT_EQ(parse(events.events_for(p)), (std::vector<std::pair<int, std::string>>{{0, " w5"}}));
  EXPECT_EQ(events.events_for(p), "") << "nothing new";
  p.tokens = {{5, 6}, {7}};
  EXPECT_EQ(parse(events.events_for(p)), (std::vector<std::pair<int, std::string>>{{0, " w6"}, {1, " w7"}}));
  p.done = {true, true};
  EXPECT_EQ(events.events_for(p), "");
}

TEST(StreamEvents, AnIncompleteCharacterWaitsUntilItIsWhole) {
  StreamEvents events(1, bytes_of);
  PendingRequest::Progress p;
  p.done = {false};
  p.tokens = {{'a', 0xC3}};  // "a" then the first byte of "\xC3\xA4" (ä)
  EXPECT_EQ(parse(events.events_for(p)), (std::vector<std::pair<int, std::string>>{{0, "a"}}));
  p.tokens = {{'a', 0xC3, 0xA4}};
  EXPECT_EQ(parse(events.events_for(p)), (std::vector<std::pair<int, std::string>>{{0, "\xC3\xA4"}}));
  p.tokens = {{'a', 0xC3, 0xA4, 0xC3}};  // done: an incomplete end stays as the decoding gives it
  p.done = {true};
  EXPECT_EQ(parse(events.events_for(p)), (std::vector<std::pair<int, std::string>>{{0, "\xEF\xBF\xBD"}}));
}

TEST(StreamEvents, TheAddedTextsAddUpToTheText) {
  const auto words = [](const std::vector<int32_t>& ids) {
    std::string text;
    for (int32_t id : ids) text += (text.empty() ? "" : " ") + std::string(static_cast<size_t>(id % 3 + 1), 'x');
    return text;
  };
  StreamEvents events(1, words);
  PendingRequest::Progress p;
  p.done = {false};
  std::string joined;
  for (int32_t id = 4; id < 20; ++id) {
    p.tokens.assign(1, {});
    for (int32_t t = 4; t <= id; ++t) p.tokens[0].push_back(t);
    for (const auto& [index, text] : parse(events.events_for(p))) joined += text;
  }
  EXPECT_EQ(joined, words(p.tokens[0]));
}

TEST(StreamEvents, ClosingSendsTheAnswerAsOneEventThenDone) {
  EXPECT_EQ(StreamEvents::closing("{\"translations\":[\"a\"]}\n"),
            "data: {\"translations\":[\"a\"]}\n\ndata: [DONE]\n\n");
}

}  // namespace
}  // namespace lseq::serve

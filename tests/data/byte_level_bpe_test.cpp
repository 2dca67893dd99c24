// GPT-2's byte-level BPE against Hugging Face `tokenizers`: the fixtures (tests/data/fixtures/bpe-*, written by
// make_bpe_fixture.py) hold a 500-entry tokenizer trained there and its ids and decodings of 240 lines.
#include "data/byte_level_bpe.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/vocab.h"
#include "data_test_support.h"
#include "util/error.h"

namespace lseq::data::test {
namespace {

std::string fixture(const std::string& name) { return std::string(LSEQ_SOURCE_DIR) + "/tests/data/fixtures/" + name; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const ByteLevelBpe& fixture_bpe() {
  static const ByteLevelBpe bpe = ByteLevelBpe::load(fixture("bpe-vocab.json"), fixture("bpe-merges.txt"));
  return bpe;
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// What ByteLevelBpe::parse throws for these files (empty when it does not throw).
std::string parse_error(const std::string& vocab, const std::string& merges) {
  try {
    ByteLevelBpe::parse(vocab, merges, "v.json", "m.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ByteLevelBpe, EncodesEveryFixtureLineToTheIdsOfHuggingFaceTokenizers) {
  if (!ByteLevelBpe::available()) GTEST_SKIP() << "built without PCRE2 (LSEQ_BPE)";
  const ByteLevelBpe& bpe = fixture_bpe();
  EXPECT_EQ(bpe.size(), 500);
  EXPECT_EQ(bpe.end_of_text_id(), 0);
  const auto expected = nlohmann::json::parse(slurp(fixture("bpe-expected.json")));
  ASSERT_EQ(expected.size(), 240u);
  int round_trips = 0;
  for (const auto& entry : expected) {
    const std::string text = entry["text"];
    const std::vector<int32_t> ids = bpe.encode(text);
    EXPECT_EQ(ids, entry["ids"].get<std::vector<int32_t>>()) << "text: " << text;
    EXPECT_EQ(bpe.decode(ids), entry["decoded"].get<std::string>()) << "text: " << text;
    if (text.find(ByteLevelBpe::kEndOfText) == std::string::npos) {
      EXPECT_EQ(bpe.decode(ids), text);
      ++round_trips;
    }
  }
  EXPECT_EQ(round_trips, 239);
}

TEST(ByteLevelBpe, DecodesBrokenUtf8AsReplacementCharactersAndSkipsUnknownIds) {
  if (!ByteLevelBpe::available()) GTEST_SKIP() << "built without PCRE2 (LSEQ_BPE)";
  const ByteLevelBpe& bpe = fixture_bpe();
  const std::vector<int32_t> ids = bpe.encode("\u2603");  // three byte tokens: no merge has seen a snowman
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(bpe.decode({ids[0]}), "\xEF\xBF\xBD");
  EXPECT_EQ(bpe.decode({ids[0], ids[1]}), "\xEF\xBF\xBD");  // a cut sequence is one U+FFFD, as from_utf8_lossy
  EXPECT_EQ(bpe.decode({ids[1], ids[0]}), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(bpe.decode({-1, ids[0], 0, ids[1], 500, ids[2], 1 << 30}), "\u2603");
}

TEST(ByteLevelBpe, RefusesTextThatIsNotUtf8) {
  if (!ByteLevelBpe::available()) GTEST_SKIP() << "built without PCRE2 (LSEQ_BPE)";
  try {
    fixture_bpe().encode("caf\xE9");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not UTF-8"), std::string::npos) << e.what();
  }
}

TEST(ByteLevelBpe, RefusesMalformedFilesInOneLineNamingTheFileAndLine) {
  if (!ByteLevelBpe::available()) GTEST_SKIP() << "built without PCRE2 (LSEQ_BPE)";
  const std::string vocab = slurp(fixture("bpe-vocab.json")), merges = slurp(fixture("bpe-merges.txt"));
  ASSERT_EQ(parse_error(vocab, merges), "");
  const auto expect = [](const std::string& message, const std::vector<std::string>& words) {
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const auto& w : words) EXPECT_NE(message.find(w), std::string::npos) << "'" << w << "' in: " << message;
  };
  expect(parse_error("{\"a\": 0,", merges), {"v.json", "not valid JSON"});
  expect(parse_error("[1, 2]", merges), {"v.json", "object"});
  expect(parse_error("{\"a\": \"x\"}", merges), {"v.json", "not an integer"});
  expect(parse_error("{\"a\": 5}", merges), {"v.json", "outside"});
  expect(parse_error("{\"a\": 0}", merges), {"v.json", "lacks the token", "256 bytes"});
  expect(parse_error(vocab, "#version: 0.2\ne r\nzz q\n"), {"m.txt", "line 3", "'zz'", "not in 'v.json'"});
  expect(parse_error(vocab, "#version: 0.2\ne r\ner\n"), {"m.txt", "line 3", "two tokens"});
  expect(parse_error(vocab, "Q Z\n"), {"m.txt", "line 1", "'QZ'"});  // the merged token is not in the vocabulary
}

TEST(ByteLevelBpe, VocabLoadsItBehindLseqsSpecialIds) {
  if (!ByteLevelBpe::available()) GTEST_SKIP() << "built without PCRE2 (LSEQ_BPE)";
  TempDir dir;
  const std::string json = dir.path() + "/vocab.json";
  put(json, slurp(fixture("bpe-vocab.json")));
  try {
    Vocab::load(json);
    FAIL() << "no error without merges.txt";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("merges.txt"), std::string::npos) << e.what();
  }
  put(dir.path() + "/merges.txt", slurp(fixture("bpe-merges.txt")));
  const Vocab vocab = Vocab::load(json);
  const ByteLevelBpe& bpe = fixture_bpe();
  EXPECT_TRUE(vocab.byte_level_bpe());
  EXPECT_EQ(vocab.size(), bpe.size() + kBpeIdOffset);
  const std::string text = "Grüße, it's 2024!  Wie geht's?<|endoftext|>";
  const std::vector<int32_t> ours = vocab.encode(text), theirs = bpe.encode(text);
  ASSERT_EQ(ours.size(), theirs.size());
  for (std::size_t i = 0; i < ours.size(); ++i)
    EXPECT_EQ(ours[i], theirs[i] == bpe.end_of_text_id() ? kEosId : theirs[i] + kBpeIdOffset);
  std::vector<int32_t> with_specials = {kBosId};
  with_specials.insert(with_specials.end(), ours.begin(), ours.end());
  with_specials.push_back(kPadId);
  with_specials.push_back(kUnkId);
  EXPECT_EQ(vocab.decode(with_specials), "Grüße, it's 2024!  Wie geht's?");
  EXPECT_NE(vocab.serialized().find("#version"), std::string::npos);  // the merges are part of its identity
}

}  // namespace
}  // namespace lseq::data::test

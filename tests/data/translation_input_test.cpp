// Encoding an input line with the real SentencePiece vocabulary: a line far over --max-length is encoded only as
// far as needed (a line of 10 MB once took 18 s and 1.2 GB), in pieces that never cut a word.
#include "data/translation_input.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "data/utf8.h"
#include "data_test_support.h"

namespace lseq::data::test {
namespace {

TextEncoder joint_encoder() {
  return [](std::string_view text) { return vocabs().joint.encode(text); };
}

// Sample sentences joined by spaces until the line has at least `bytes` bytes.
std::string long_line(std::size_t bytes) {
  const auto sentences = read_lines(sample("train.de"));
  std::string line;
  for (std::size_t i = 0; line.size() < bytes; ++i) line += sentences[i % sentences.size()] + " ";
  return line;
}

TEST(TranslationInputLongLines, ACroppedLongLineGivesTheFirstIdsOfTheWholeLine) {
  CapturedLog log;
  const std::string line = long_line(100 << 10);
  TranslationInputOptions o;
  o.max_length = 1000;
  const EncodedLine cropped = encode_input_line(line, "in.txt line 1", joint_encoder(), o);
  const std::vector<int32_t> whole = vocabs().joint.encode(line);
  ASSERT_GT(whole.size(), 1000u);
  EXPECT_EQ(cropped.ids, std::vector<int32_t>(whole.begin(), whole.begin() + 1000));
  EXPECT_TRUE(cropped.decode);
  EXPECT_NE(log.text().find(fmt::format("in.txt line 1: more than 1000 tokens (a line of {} bytes), cropped to "
                                        "--max-length 1000",
                                        line.size())),
            std::string::npos)
      << log.text();
}

TEST(TranslationInputLongLines, ALongLineIsEncodedInPiecesThatEndAtSpaces) {
  const std::string line = long_line(300 << 10);
  std::vector<std::string_view> pieces;
  std::vector<int32_t> expected;
  TextEncoder recording = [&](std::string_view text) {
    pieces.push_back(text);
    const auto ids = vocabs().joint.encode(text);
    expected.insert(expected.end(), ids.begin(), ids.end());
    return ids;
  };
  TranslationInputOptions o;
  o.max_length = 0;  // no limit: all of it
  const EncodedLine e = encode_input_line(line, "in.txt line 1", recording, o);
  ASSERT_GT(pieces.size(), 10u);
  std::string joined;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    EXPECT_LE(pieces[i].size(), std::size_t{16} << 10);
    if (i + 1 < pieces.size()) EXPECT_EQ(pieces[i].back(), ' ') << "piece " << i << " cuts a word";
    joined += pieces[i];
  }
  EXPECT_EQ(joined, line);
  EXPECT_EQ(e.ids, expected);
}

TEST(TranslationInputLongLines, OnlyAsMuchOfALongLineIsEncodedAsTheCropNeeds) {
  std::size_t encoded_bytes = 0;
  TextEncoder counting = [&](std::string_view text) {
    encoded_bytes += text.size();
    return vocabs().joint.encode(text);
  };
  TranslationInputOptions o;
  o.max_length = 100;
  const std::string line = long_line(10 << 20);
  const EncodedLine e = encode_input_line(line, "in.txt line 1", counting, o);
  EXPECT_EQ(e.ids.size(), 100u);
  EXPECT_LT(encoded_bytes, std::size_t{64} << 10) << "not the 10 MB";
}

TEST(TranslationInputLongLines, ALongLineWithoutSpacesIsCutBetweenCharacters) {
  std::string line;
  while (line.size() < (200 << 10)) line += "Größenwahnsinnigkeitsüberprüfung";
  std::vector<std::string_view> pieces;
  TextEncoder recording = [&](std::string_view text) {
    pieces.push_back(text);
    return vocabs().joint.encode(text);
  };
  TranslationInputOptions o;
  o.max_length = 0;  // no limit: every piece
  const EncodedLine e = encode_input_line(line, "in.txt line 1", recording, o);
  ASSERT_GT(pieces.size(), 1u);
  std::string joined;
  for (auto piece : pieces) {
    EXPECT_TRUE(is_valid_utf8(piece)) << "no character is cut in half";
    joined += piece;
  }
  EXPECT_EQ(joined, line);
  EXPECT_FALSE(e.ids.empty());
}

}  // namespace
}  // namespace lseq::data::test

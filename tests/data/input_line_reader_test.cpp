// Input lines as lstranslate and lsscore read them: whatever a file holds (no final newline, CRLF, NUL bytes, lines
// longer than the read block or than the limit), one line read is one line of the file, numbered right.
#include "data/input_line_reader.h"

#include <gtest/gtest.h>

#include <sstream>

#include "data_test_support.h"

namespace lseq::data::test {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::istringstream in(text);
  InputLineReader reader(in, "in.txt");
  std::vector<std::string> lines;
  for (std::string line; reader.next(line);) {
    lines.push_back(line);
    EXPECT_EQ(reader.index() + 1, static_cast<int64_t>(lines.size()));
  }
  return lines;
}

using Lines = std::vector<std::string>;

TEST(InputLineReader, LineEndsOfEveryKind) {
  EXPECT_EQ(lines_of(""), Lines{});
  EXPECT_EQ(lines_of("\n"), Lines{""});
  EXPECT_EQ(lines_of("a\nb"), (Lines{"a", "b"})) << "a last line without newline is a line";
  EXPECT_EQ(lines_of("a\r\nb\r\n\r\n"), (Lines{"a", "b", ""}));
  EXPECT_EQ(lines_of("\r"), Lines{""});
  EXPECT_EQ(lines_of("a\r\r\nb\r\r"), (Lines{"a", "b"})) << "a file converted to CRLF twice";
  EXPECT_EQ(lines_of("a\rb\n"), Lines{"a\rb"}) << "only a trailing CR is a line end";
  EXPECT_EQ(lines_of(std::string("a\0b\n\0\n", 6)), (Lines{std::string("a\0b", 3), std::string("\0", 1)}));
  EXPECT_EQ(lines_of("\n\n\nx"), (Lines{"", "", "", "x"}));
}

TEST(InputLineReader, LinesAroundTheReadBlockSizeStayWhole) {
  for (std::size_t length : {65534u, 65535u, 65536u, 65537u, 3 * 65536u + 5}) {
    const std::string long_line(length, 'x');
    EXPECT_EQ(lines_of(long_line + "\nnext\n"), (Lines{long_line, "next"})) << length;
    EXPECT_EQ(lines_of(long_line), Lines{long_line}) << length;
    EXPECT_EQ(lines_of("first\n" + long_line + "\r\n"), (Lines{"first", long_line})) << length;
  }
}

TEST(InputLineReader, ALineOverTheLimitKeepsItsFirstBytesAndTheNextLineFollows) {
  CapturedLog log;
  std::string text = "short\n";
  text += std::string(InputLineReader::kMaxLineBytes - 3, 'a') + "bcdefg\nafter\n";
  const Lines lines = lines_of(text);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].size(), InputLineReader::kMaxLineBytes);
  EXPECT_EQ(lines[1].substr(lines[1].size() - 4), "abcd");
  EXPECT_EQ(lines[2], "after");
  EXPECT_NE(log.text().find("in.txt line 2: the line is longer than 16 MiB; only its first 16 MiB are read"),
            std::string::npos)
      << log.text();
  EXPECT_EQ(log.text().find("line 3"), std::string::npos) << log.text();
}

TEST(InputLineReader, NumberingContinuesAcrossFilesThatLackAFinalNewline) {
  TempDir dir;
  write_file(dir.file("a.txt"), "one\ntwo");
  write_file(dir.file("b.txt"), "");
  write_file(dir.file("c.txt"), "three\r\n");
  InputLineReader reader({dir.file("a.txt"), dir.file("b.txt"), dir.file("c.txt")});
  std::string line;
  Lines lines, where;
  while (reader.next(line)) {
    lines.push_back(line);
    where.push_back(reader.where());
  }
  EXPECT_EQ(lines, (Lines{"one", "two", "three"}));
  EXPECT_EQ(where,
            (Lines{dir.file("a.txt") + " line 1", dir.file("a.txt") + " line 2", dir.file("c.txt") + " line 1"}));
  EXPECT_EQ(reader.index(), 2);
}

}  // namespace
}  // namespace lseq::data::test

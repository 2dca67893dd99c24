#include "data/corpus_reader.h"

#include <gtest/gtest.h>

#include "data_test_support.h"
#include "util/error.h"

namespace lseq::data::test {
namespace {

std::vector<std::vector<std::string>> read_all(CorpusReader& r, std::vector<int64_t>* lines = nullptr) {
  std::vector<std::vector<std::string>> pairs;
  std::vector<std::string_view> sides;
  while (r.next(sides)) {
    pairs.emplace_back(sides.begin(), sides.end());
    if (lines) lines->push_back(r.line_index());
  }
  return pairs;
}

std::string error_of(const std::vector<std::string>& files) {
  try {
    CorpusReader r(files);
    read_all(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CorpusReader, ReadsPairsStripsCarriageReturnsAndAcceptsAMissingFinalNewline) {
  TempDir d;
  write_file(d.file("a"), "eins\r\nzwei\ndrei");
  write_file(d.file("b"), "one\ntwo\r\r\nthree\n");  // converted to CRLF twice
  CorpusReader r({d.file("a"), d.file("b")});
  const auto pairs = read_all(r);
  const std::vector<std::vector<std::string>> expected = {{"eins", "one"}, {"zwei", "two"}, {"drei", "three"}};
  EXPECT_EQ(pairs, expected);
}

TEST(CorpusReader, GzipInputEqualsPlainInput) {
  TempDir d;
  CorpusReader plain({sample("train.de"), sample("train.en")});
  write_gzip(d.file("de.gz"), read_file(sample("train.de")));
  write_file(d.file("en.txt"), read_file(sample("train.en")));
  CorpusReader mixed({d.file("de.gz"), d.file("en.txt")});
  const auto a = read_all(plain), b = read_all(mixed);
  EXPECT_EQ(a.size(), 6000u);
  EXPECT_EQ(a, b);
}

TEST(CorpusReader, LinesLongerThanTheReadBufferSurvive) {
  TempDir d;
  const std::string long_line(3 << 20, 'x');
  write_file(d.file("a"), "kurz\n" + long_line + "\nnoch eine\n");
  CorpusReader r({d.file("a")});
  const auto pairs = read_all(r);
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[1][0], long_line);
  EXPECT_EQ(pairs[2][0], "noch eine");
}

TEST(CorpusReader, DifferentLineCountsNameBothFilesAndTheLine) {
  TempDir d;
  write_file(d.file("short.de"), "a\nb\n");
  write_file(d.file("long.en"), "a\nb\nc\nd\n");
  for (const auto& order : {std::vector<std::string>{d.file("short.de"), d.file("long.en")},
                            std::vector<std::string>{d.file("long.en"), d.file("short.de")}}) {
    const std::string e = error_of(order);
    EXPECT_TRUE(contains(e, "short.de") && contains(e, "long.en")) << e;
    EXPECT_TRUE(contains(e, "after line 2")) << e;
  }
}

TEST(CorpusReader, PairsWithAnEmptySideAreSkippedAndCounted) {
  TempDir d;
  write_file(d.file("a"), "eins\n\ndrei\nvier\n\n");
  write_file(d.file("b"), "one\ntwo\n\nfour\n\n");
  CorpusReader r({d.file("a"), d.file("b")});
  std::vector<int64_t> lines;
  const auto pairs = read_all(r, &lines);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[1][1], "four");
  EXPECT_EQ(lines, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(r.skipped_empty(), 3);
}

TEST(CorpusReader, InvalidUtf8NamesTheFileAndLine) {
  TempDir d;
  write_file(d.file("good"), "a\nb\nc\n");
  write_file(d.file("bad"), "a\nb\nc \xC3\x28 d\n");
  const std::string e = error_of({d.file("good"), d.file("bad")});
  EXPECT_TRUE(contains(e, d.file("bad")) && contains(e, "line 3") && contains(e, "UTF-8")) << e;
  // The same inside a gzip file.
  write_gzip(d.file("bad.gz"), "\xFF\n");
  const std::string g = error_of({d.file("bad.gz")});
  EXPECT_TRUE(contains(g, "bad.gz") && contains(g, "line 1")) << g;
}

TEST(CorpusReader, MissingFileNamesThePath) {
  const std::string e = error_of({sample("train.de"), "/no/such/corpus.en"});
  EXPECT_TRUE(contains(e, "/no/such/corpus.en")) << e;
}

TEST(CorpusReader, TruncatedGzipIsAnErrorNamingTheFile) {
  TempDir d;
  write_gzip(d.file("full.gz"), read_file(sample("train.de")));
  const std::string bytes = read_file(d.file("full.gz"));
  write_file(d.file("cut.gz"), bytes.substr(0, bytes.size() / 2));
  const std::string e = error_of({d.file("cut.gz")});
  EXPECT_TRUE(contains(e, "cut.gz")) << e;
}

}  // namespace
}  // namespace lseq::data::test

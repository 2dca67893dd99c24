#include "data/corpus_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>

#include "data_test_support.h"
#include "util/error.h"

namespace lseq::data::test {
namespace {

namespace fs = std::filesystem;

// A parallel corpus of the sample's first `n` lines, copied into the temp dir (so the cache goes there).
struct SmallCorpus {
  TempDir dir;
  std::string de = dir.file("c.de"), en = dir.file("c.en");
  std::vector<std::string> de_lines, en_lines;
  explicit SmallCorpus(std::size_t n) {
    de_lines = read_lines(sample("train.de"));
    en_lines = read_lines(sample("train.en"));
    de_lines.resize(n);
    en_lines.resize(n);
    write(de, de_lines);
    write(en, en_lines);
  }
  static void write(const std::string& path, const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    write_file(path, text);
  }
  CorpusOptions options() const {
    CorpusOptions o;
    o.files = {de, en};
    return o;
  }
};

std::vector<const Vocab*> joint2() { return {&vocabs().joint, &vocabs().joint}; }

// Every kept pair's tokens equal a fresh encoding of its original line.
void expect_matches_text(const EncodedCorpus& c, const std::vector<std::vector<std::string>>& sides,
                         const std::vector<const Vocab*>& v) {
  for (int64_t i = 0; i < c.size(); ++i)
    for (int s = 0; s < c.streams(); ++s) {
      const auto expected = v[s]->encode(sides[s][static_cast<std::size_t>(c.line(i))]);
      ASSERT_EQ(c.tokens(s, i), expected) << "pair " << i << " side " << s;
      ASSERT_EQ(c.length(s, i), expected.size());
    }
}

TEST(CorpusCache, SecondOpenReadsTheCacheWithTheSameContent) {
  SmallCorpus corpus(500);
  auto first = EncodedCorpus::open_or_build(corpus.options(), joint2());
  EXPECT_FALSE(first->from_cache());
  EXPECT_EQ(first->cache_path(), corpus.dir.file("c.de+c.en.lseq-cache"));
  EXPECT_TRUE(fs::exists(first->cache_path()));
  EXPECT_EQ(first->size(), 500);
  EXPECT_EQ(first->token_bytes(), 2);
  auto second = EncodedCorpus::open_or_build(corpus.options(), joint2());
  EXPECT_TRUE(second->from_cache());
  ASSERT_EQ(second->size(), first->size());
  expect_matches_text(*second, {corpus.de_lines, corpus.en_lines}, joint2());
  int64_t tokens = 0;
  for (int64_t i = 0; i < second->size(); ++i) tokens += second->length(1, i);
  EXPECT_EQ(tokens, second->total_tokens(1));
}

TEST(CorpusCache, TouchingOrChangingTheCorpusOrVocabRebuilds) {
  SmallCorpus corpus(200);
  EXPECT_FALSE(EncodedCorpus::open_or_build(corpus.options(), joint2())->from_cache());
  EXPECT_TRUE(EncodedCorpus::open_or_build(corpus.options(), joint2())->from_cache());

  struct utimbuf times {1000000000, 1000000000};  // touch: only the modification time changes
  ASSERT_EQ(utime(corpus.en.c_str(), &times), 0);
  EXPECT_FALSE(EncodedCorpus::open_or_build(corpus.options(), joint2())->from_cache());
  EXPECT_TRUE(EncodedCorpus::open_or_build(corpus.options(), joint2())->from_cache());

  corpus.en_lines[7] = "A completely different sentence.";
  SmallCorpus::write(corpus.en, corpus.en_lines);
  auto changed = EncodedCorpus::open_or_build(corpus.options(), joint2());
  EXPECT_FALSE(changed->from_cache());
  expect_matches_text(*changed, {corpus.de_lines, corpus.en_lines}, joint2());

  const std::vector<const Vocab*> other = {&vocabs().other, &vocabs().joint};
  auto revocab = EncodedCorpus::open_or_build(corpus.options(), other);
  EXPECT_FALSE(revocab->from_cache());
  expect_matches_text(*revocab, {corpus.de_lines, corpus.en_lines}, other);

  auto limited = corpus.options();
  limited.max_length = 10;
  EXPECT_FALSE(EncodedCorpus::open_or_build(limited, other)->from_cache());
  EXPECT_TRUE(EncodedCorpus::open_or_build(limited, other)->from_cache());
}

TEST(CorpusCache, DamagedCacheIsRebuilt) {
  SmallCorpus corpus(100);
  auto first = EncodedCorpus::open_or_build(corpus.options(), joint2());
  const std::string path = first->cache_path();
  first.reset();
  const std::string bytes = read_file(path);
  write_file(path, bytes.substr(0, bytes.size() - 10));
  auto rebuilt = EncodedCorpus::open_or_build(corpus.options(), joint2());
  EXPECT_FALSE(rebuilt->from_cache());
  EXPECT_EQ(rebuilt->size(), 100);
}

TEST(CorpusCache, MaxLengthSkipsOrCropsLongPairsAndKeepsLineNumbers) {
  SmallCorpus corpus(1000);
  auto full = corpus.options();
  full.use_cache = false;
  auto all = EncodedCorpus::open_or_build(full, joint2());
  const int max_length = 12;
  int64_t too_long = 0;
  for (int64_t i = 0; i < all->size(); ++i)
    too_long += (all->length(0, i) > max_length || all->length(1, i) > max_length) ? 1 : 0;
  ASSERT_GT(too_long, 10);  // the sample has long sentences: the test means something

  auto skip = full;
  skip.max_length = max_length;
  auto skipped = EncodedCorpus::open_or_build(skip, joint2());
  EXPECT_EQ(skipped->skipped_long(), too_long);
  EXPECT_EQ(skipped->size(), all->size() - too_long);
  for (int64_t i = 0; i < skipped->size(); ++i) {
    EXPECT_LE(skipped->length(0, i), static_cast<uint32_t>(max_length));
    EXPECT_LE(skipped->length(1, i), static_cast<uint32_t>(max_length));
  }
  expect_matches_text(*skipped, {corpus.de_lines, corpus.en_lines}, joint2());

  auto crop = skip;
  crop.crop = true;
  auto cropped = EncodedCorpus::open_or_build(crop, joint2());
  EXPECT_EQ(cropped->cropped(), too_long);
  ASSERT_EQ(cropped->size(), all->size());
  for (int64_t i = 0; i < cropped->size(); ++i)
    for (int s = 0; s < 2; ++s) {
      auto expected = all->tokens(s, i);
      if (expected.size() > static_cast<std::size_t>(max_length)) expected.resize(max_length);
      ASSERT_EQ(cropped->tokens(s, i), expected);
      ASSERT_EQ(cropped->line(i), all->line(i));
    }
}

TEST(CorpusCache, EmptySidesAreSkippedAndTheRestKeepTheirLineNumbers) {
  TempDir d;
  write_file(d.file("a"), "Hallo Welt\n\nDas Haus\n   \nEin Hund\n");
  write_file(d.file("b"), "Hello world\nnothing\n\nspaces\nA dog\n");
  CorpusOptions o;
  o.files = {d.file("a"), d.file("b")};
  auto c = EncodedCorpus::open_or_build(o, joint2());
  EXPECT_EQ(c->size(), 2);
  EXPECT_EQ(c->line(0), 0);
  EXPECT_EQ(c->line(1), 4);
  EXPECT_EQ(c->skipped_empty(), 3);  // two empty lines and one line of spaces only
  EXPECT_EQ(c->lines_read(), 5);
  EXPECT_TRUE(EncodedCorpus::open_or_build(o, joint2())->skipped_empty() == 3);
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(CorpusCache, SkippedPairsAndRebuildsAreLoggedOnce) {
  TempDir d;
  write_file(d.file("a"), "Hallo Welt\n\nDas Haus\n\n");
  write_file(d.file("b"), "Hello world\nnothing\nThe house\n\n");
  CorpusOptions o;
  o.files = {d.file("a"), d.file("b")};
  {
    CapturedLog log;
    EncodedCorpus::open_or_build(o, joint2());
    EXPECT_EQ(count_of(log.text(), "skipped 2 pairs with an empty side"), 1u) << log.text();
  }
  write_file(d.file("b"), "Hello world\nnothing\nThe home\n\n");
  CapturedLog log;
  EXPECT_FALSE(EncodedCorpus::open_or_build(o, joint2())->from_cache());
  EXPECT_EQ(count_of(log.text(), "rebuilding"), 1u) << log.text();
}

TEST(CorpusCache, GzipCorpusEncodesLikeThePlainOne) {
  SmallCorpus corpus(300);
  write_gzip(corpus.dir.file("z.de.gz"), read_file(corpus.de));
  write_gzip(corpus.dir.file("z.en.gz"), read_file(corpus.en));
  CorpusOptions gz;
  gz.files = {corpus.dir.file("z.de.gz"), corpus.dir.file("z.en.gz")};
  auto a = EncodedCorpus::open_or_build(corpus.options(), joint2());
  auto b = EncodedCorpus::open_or_build(gz, joint2());
  ASSERT_EQ(a->size(), b->size());
  for (int64_t i = 0; i < a->size(); ++i) {
    ASSERT_EQ(a->tokens(0, i), b->tokens(0, i));
    ASSERT_EQ(a->tokens(1, i), b->tokens(1, i));
    ASSERT_EQ(a->line(i), b->line(i));
  }
}

TEST(CorpusCache, CacheDirectoryAndInMemoryCorpora) {
  SmallCorpus corpus(50);
  TempDir cache;
  auto o = corpus.options();
  o.cache_dir = cache.file("sub");
  {
    CapturedLog log;  // a directory the user named but that did not exist is created, and the log says so
    auto c = EncodedCorpus::open_or_build(o, joint2());
    EXPECT_EQ(fs::path(c->cache_path()).parent_path().string(), o.cache_dir);
    EXPECT_NE(log.text().find("created the cache directory '" + o.cache_dir + "'"), std::string::npos) << log.text();
  }
  EXPECT_TRUE(EncodedCorpus::open_or_build(o, joint2())->from_cache());

  auto memory = corpus.options();
  memory.use_cache = false;
  auto m = EncodedCorpus::open_or_build(memory, joint2());
  EXPECT_TRUE(m->cache_path().empty());
  EXPECT_FALSE(fs::exists(corpus.dir.file("c.de+c.en.lseq-cache")));
  expect_matches_text(*m, {corpus.de_lines, corpus.en_lines}, joint2());
}

TEST(CorpusCache, ReadOnlyCorpusDirectoryFallsBackToTheTempDirectory) {
  SmallCorpus corpus(40);
  fs::permissions(corpus.dir.path(), fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  auto c = EncodedCorpus::open_or_build(corpus.options(), joint2());
  fs::permissions(corpus.dir.path(), fs::perms::owner_write, fs::perm_options::add);
  EXPECT_FALSE(fs::exists(corpus.dir.file("c.de+c.en.lseq-cache")));
  EXPECT_EQ(fs::path(c->cache_path()).parent_path(), fs::temp_directory_path() / "lseq-cache");
  auto again = EncodedCorpus::open_or_build(corpus.options(), joint2());
  EXPECT_TRUE(again->from_cache());
  EXPECT_EQ(again->cache_path(), c->cache_path());
  fs::remove(c->cache_path());
}

TEST(CorpusCache, Int32TokensReadBackLikeUint16Tokens) {
  SmallCorpus corpus(300);
  auto narrow = EncodedCorpus::open_or_build(corpus.options(), joint2());
  auto o = corpus.options();
  o.token_bytes = 4;
  auto wide = EncodedCorpus::open_or_build(o, joint2());
  EXPECT_FALSE(wide->from_cache());  // a different width is a different cache
  EXPECT_EQ(narrow->token_bytes(), 2);
  EXPECT_EQ(wide->token_bytes(), 4);
  ASSERT_EQ(wide->size(), narrow->size());
  for (int64_t i = 0; i < wide->size(); ++i)
    for (int s = 0; s < 2; ++s) ASSERT_EQ(wide->tokens(s, i), narrow->tokens(s, i));
  EXPECT_TRUE(EncodedCorpus::open_or_build(o, joint2())->from_cache());
}

TEST(CorpusCache, MonolingualCorpus) {
  SmallCorpus corpus(80);
  CorpusOptions o;
  o.files = {corpus.en};
  const std::vector<const Vocab*> v = {&vocabs().joint};
  auto c = EncodedCorpus::open_or_build(o, v);
  EXPECT_EQ(c->streams(), 1);
  EXPECT_EQ(c->size(), 80);
  expect_matches_text(*c, {corpus.en_lines}, v);
  EXPECT_TRUE(EncodedCorpus::open_or_build(o, v)->from_cache());
}

TEST(CorpusCache, BadInputDeepInALargeCorpusFailsCleanly) {
  // Past the first chunk of pairs, lines are read while other threads encode: errors must still surface as
  // lseq::Error naming the file and line, and leave no cache or temporary file behind.
  TempDir d;
  std::string good, bad;
  for (int i = 0; i < 20000; ++i) {
    good += "Satz " + std::to_string(i) + "\n";
    bad += i == 18999 ? std::string("kaputt \xC0\x80\n") : "sentence " + std::to_string(i) + "\n";
  }
  write_file(d.file("good.de"), good);
  write_file(d.file("bad.en"), bad);
  write_file(d.file("short.en"), good.substr(0, good.size() / 2));
  CorpusOptions o;
  o.files = {d.file("good.de"), d.file("bad.en")};
  try {
    EncodedCorpus::open_or_build(o, joint2());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("bad.en") != std::string::npos && m.find("line 19000") != std::string::npos) << m;
  }
  o.files = {d.file("good.de"), d.file("short.en")};
  try {
    EncodedCorpus::open_or_build(o, joint2());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_TRUE(m.find("short.en") != std::string::npos && m.find("good.de") != std::string::npos) << m;
  }
  int files = 0;
  for (const auto& entry : fs::directory_iterator(d.path())) {
    (void)entry;
    ++files;
  }
  EXPECT_EQ(files, 3);
}

TEST(CorpusCache, BadArgumentsAreErrors) {
  SmallCorpus corpus(10);
  auto o = corpus.options();
  EXPECT_THROW(EncodedCorpus::open_or_build(o, {&vocabs().joint}), Error);  // one vocab for two files
  o.files[1] = "/missing/corpus.en";
  try {
    EncodedCorpus::open_or_build(o, joint2());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/missing/corpus.en"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lseq::data::test

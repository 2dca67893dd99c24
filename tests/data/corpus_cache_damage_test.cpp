// A damaged corpus cache is never read as if it were whole: a changed body (header intact) used to reach the
// batcher, whose offsets then pointed anywhere (a segfault in its thread) or whose ids blamed the vocabularies.
// Now the cache is verified when opened and rebuilt with a warning naming it, or refused naming it when it cannot
// be rebuilt.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>

#include "data/batcher.h"
#include "data/corpus_cache.h"
#include "data_test_support.h"
#include "util/error.h"

namespace lseq::data::test {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kHeaderBytes = 256;  // corpus_cache.h's layout

uint32_t body_crc(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(bytes.data()) + kHeaderBytes,
              bytes.size() - kHeaderBytes));
}

// A cache of the first `n` sample pairs, built once; the tests damage copies of its bytes.
struct BuiltCache {
  TempDir dir;
  std::vector<std::string> de, en;
  CorpusOptions options;
  std::string path, bytes;
  int64_t pairs = 0;
  std::vector<int32_t> first_source;

  explicit BuiltCache(std::size_t n) {
    de = read_lines(sample("train.de"));
    en = read_lines(sample("train.en"));
    de.resize(n);
    en.resize(n);
    write_lines(dir.file("c.de"), de);
    write_lines(dir.file("c.en"), en);
    options.files = {dir.file("c.de"), dir.file("c.en")};
    auto corpus = EncodedCorpus::open_or_build(options, vocabs2());
    path = corpus->cache_path();
    pairs = corpus->size();
    first_source = corpus->tokens(0, 0);
    corpus.reset();
    bytes = read_file(path);
  }
  static void write_lines(const std::string& file, const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& l : lines) text += l + "\n";
    write_file(file, text);
  }
  static std::vector<const Vocab*> vocabs2() { return {&vocabs().joint, &vocabs().joint}; }

  // Byte offset of the first pair's stored offset (offsets and line numbers are the last 16 * pairs bytes).
  std::size_t offsets_at() const { return bytes.size() - 16 * static_cast<std::size_t>(pairs); }
  // Writes `changed` and, when asked, a header checksum that matches it: damage the checksum cannot see.
  void install(std::string changed, bool fix_checksum) const {
    if (fix_checksum) {
      const uint32_t old_crc = body_crc(bytes), new_crc = body_crc(changed);
      const auto at = changed.find(std::string(reinterpret_cast<const char*>(&old_crc), 4));
      ASSERT_LT(at, kHeaderBytes) << "the header holds the body's CRC-32";
      std::memcpy(changed.data() + at, &new_crc, 4);
    }
    write_file(path, changed);
    ASSERT_EQ(fs::file_size(path), bytes.size());
  }
  // Opens the corpus again: it must be rebuilt (with a warning naming the cache and `why`) and match the text.
  void expect_rebuilt(const std::string& why) const {
    CapturedLog log;
    auto corpus = EncodedCorpus::open_or_build(options, vocabs2());
    EXPECT_FALSE(corpus->from_cache());
    EXPECT_NE(log.text().find("[warning] the corpus cache " + path + " cannot be used ("), std::string::npos)
        << log.text();
    EXPECT_NE(log.text().find(why), std::string::npos) << log.text();
    EXPECT_NE(log.text().find("it is damaged, rebuilding it"), std::string::npos) << log.text();
    ASSERT_EQ(corpus->size(), pairs);
    for (int64_t i = 0; i < corpus->size(); ++i) {
      ASSERT_EQ(corpus->tokens(0, i), vocabs().joint.encode(de[static_cast<std::size_t>(corpus->line(i))]));
      ASSERT_EQ(corpus->tokens(1, i), vocabs().joint.encode(en[static_cast<std::size_t>(corpus->line(i))]));
    }
    // The batcher reads every pair of the rebuilt cache (it crashed on the damaged one).
    BatcherOptions o;
    o.mini_batch_words = 200;
    o.prefetch = 2;
    Batcher batcher(corpus, o);
    int64_t seen = 0;
    do seen += batcher.next().size;
    while (!batcher.epoch_finished());
    EXPECT_EQ(seen, pairs);
    EXPECT_TRUE(EncodedCorpus::open_or_build(options, vocabs2())->from_cache()) << "the rebuilt cache is whole";
  }
};

TEST(CorpusCacheDamage, ChangedTokensAreCaughtByTheChecksum) {
  BuiltCache cache(300);
  std::string changed = cache.bytes;
  for (std::size_t i = 0; i < 64; ++i) changed[kHeaderBytes + 100 + i] = '\x5a';
  cache.install(changed, false);
  cache.expect_rebuilt("its contents do not match the checksum in its header");
}

TEST(CorpusCacheDamage, ChangedOffsetsAreCaughtByTheChecksum) {
  BuiltCache cache(300);
  std::string changed = cache.bytes;
  const int64_t far = int64_t{1} << 40;
  std::memcpy(changed.data() + cache.offsets_at() + 8 * 7, &far, 8);
  cache.install(changed, false);
  cache.expect_rebuilt("its contents do not match the checksum");
}

TEST(CorpusCacheDamage, OffsetsPastTheTokensAreCaughtEvenWithAMatchingChecksum) {
  BuiltCache cache(300);
  std::string changed = cache.bytes;
  const int64_t far = int64_t{1} << 40;
  std::memcpy(changed.data() + cache.offsets_at() + 8 * 7, &far, 8);
  cache.install(changed, true);
  cache.expect_rebuilt("pair 7 starts at token 1099511627776");
}

TEST(CorpusCacheDamage, IdsOutsideTheVocabularyAreCaughtEvenWithAMatchingChecksum) {
  BuiltCache cache(300);
  std::string first(cache.first_source.size() * 2, '\0');
  for (std::size_t i = 0; i < cache.first_source.size(); ++i) {
    const auto id = static_cast<uint16_t>(cache.first_source[i]);
    std::memcpy(first.data() + 2 * i, &id, 2);
  }
  ASSERT_EQ(cache.bytes.find(first), kHeaderBytes) << "pair 0's source tokens come first";
  std::string changed = cache.bytes;
  changed[kHeaderBytes + 2] = '\xff', changed[kHeaderBytes + 3] = '\xff';
  cache.install(changed, true);
  cache.expect_rebuilt("pair 0 holds token id 65535, outside the vocabulary of 500 entries of side 0");
}

TEST(CorpusCacheDamage, LineNumbersOutOfOrderAreCaughtEvenWithAMatchingChecksum) {
  BuiltCache cache(300);
  std::string changed = cache.bytes;
  const std::size_t lines_at = cache.offsets_at() + 8 * static_cast<std::size_t>(cache.pairs);
  const int64_t line = 0;
  std::memcpy(changed.data() + lines_at + 8 * 20, &line, 8);
  cache.install(changed, true);
  cache.expect_rebuilt("pair 20 names line 0, out of order");
}

TEST(CorpusCacheDamage, ACacheOfTheOldFormatIsRebuiltSayingWhy) {
  BuiltCache cache(50);
  std::string old = cache.bytes;
  ASSERT_EQ(old.substr(0, 8), "LSEQCORP");
  const uint32_t version = 1;
  std::memcpy(old.data() + 8, &version, 4);  // the version follows the magic
  cache.install(old, false);
  CapturedLog log;
  EXPECT_FALSE(EncodedCorpus::open_or_build(cache.options, BuiltCache::vocabs2())->from_cache());
  EXPECT_NE(log.text().find("[info] the corpus cache " + cache.path + " cannot be used (it has the cache format "
                            "version 1, and this lseq reads version 3): rebuilding it"),
            std::string::npos)
      << log.text();
  EXPECT_EQ(log.text().find("[warning]"), std::string::npos) << "an old cache is not damaged: " << log.text();
}

TEST(CorpusCacheDamage, ADamagedCacheThatCannotBeRebuiltIsAnErrorNamingIt) {
  BuiltCache cache(50);
  TempDir cache_dir;
  CorpusOptions o = cache.options;
  o.cache_dir = cache_dir.file("ro");
  const std::string path = EncodedCorpus::open_or_build(o, BuiltCache::vocabs2())->cache_path();
  std::string changed = read_file(path);
  changed[kHeaderBytes + 10] ^= 0x40;
  write_file(path, changed);
  fs::permissions(o.cache_dir, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                  fs::perm_options::remove);
  try {
    EncodedCorpus::open_or_build(o, BuiltCache::vocabs2());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the corpus cache " + path + " cannot be used (its contents do not match the checksum"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("cannot be rebuilt: the cache directory '" + o.cache_dir + "' is not writable"),
              std::string::npos)
        << m;
  }
  fs::permissions(o.cache_dir, fs::perms::owner_write, fs::perm_options::add);
}

}  // namespace
}  // namespace lseq::data::test

// The binary corpus cache (data/corpus_cache.h) that lstrain maps instead of re-encoding its corpus: the input is
// written over the cache file of a small corpus built at start-up, and EncodedCorpus::open_or_build must either
// reject it (and rebuild) or give a corpus whose every pair can be read. The cache's 16-byte key (a hash of the
// corpus files' paths, sizes and times, which no seed file can know) is copied into the input, and the header's
// CRC-32 of the body is made to match the input's body, and its format version is the built cache's (the seeds
// stay readable across format changes), so that the fuzzer's work reaches the checks of the body
// itself rather than stopping at the checksum.
// Promises checked: every pair's tokens of every side lie inside the file (ASan) and are ids of the vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <zlib.h>

#include "data/corpus_cache.h"
#include "data/vocab.h"
#include "fuzz_support.h"

namespace {

// Where the header keeps the format version and the key (corpus_cache.cpp's Header: magic[8], four uint32 of which
// the first is the version, then uint64 key[2]), and its size (the body's CRC-32 covers every byte after it).
constexpr size_t kVersionOffset = 8, kVersionBytes = 4, kKeyOffset = 24, kKeyBytes = 16, kHeaderBytes = 256;

std::unique_ptr<lseq::data::Vocab> vocab;
lseq::data::CorpusOptions options;
std::string cache_path, version, key;
size_t crc_offset = 0;  // where the header holds the CRC (found at start-up: the built cache's CRC's position)

uint32_t body_crc(const std::string& bytes) {
  const Bytef* body = reinterpret_cast<const Bytef*>(bytes.data()) + kHeaderBytes;
  return static_cast<uint32_t>(crc32_z(crc32_z(0, nullptr, 0), body, bytes.size() - kHeaderBytes));
}

std::shared_ptr<const lseq::data::EncodedCorpus> open() {
  return lseq::data::EncodedCorpus::open_or_build(options, {vocab.get(), vocab.get()});
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  vocab = std::make_unique<lseq::data::Vocab>(lseq::data::Vocab::load(LSEQ_SOURCE_DIR "/fuzz/tiny.spm"));
  options.files = {lseq::fuzz::scratch_file("corpus.de"), lseq::fuzz::scratch_file("corpus.en")};
  lseq::fuzz::write_bytes(options.files[0], "Guten Morgen.\nDas Haus ist alt.\n\nWie geht es dir?\n");
  lseq::fuzz::write_bytes(options.files[1], "Good morning.\nThe house is old.\nEmpty.\nHow are you?\n");
  options.cache_dir = lseq::fuzz::scratch_file("cache");
  options.threads = 1;
  const auto corpus = open();
  cache_path = corpus->cache_path();
  std::ifstream in(cache_path, std::ios::binary);
  const std::string built((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LSEQ_FUZZ_EXPECT(built.size() > kHeaderBytes && built.compare(0, 8, "LSEQCORP") == 0,
                   "the start-up cache has no lseq header");
  version = built.substr(kVersionOffset, kVersionBytes);
  key = built.substr(kKeyOffset, kKeyBytes);
  const uint32_t crc = body_crc(built);
  crc_offset = built.find(std::string(reinterpret_cast<const char*>(&crc), sizeof(crc)), kKeyOffset + kKeyBytes);
  LSEQ_FUZZ_EXPECT(crc_offset + sizeof(crc) <= kHeaderBytes, "the start-up cache's header holds no CRC of its body");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() >= kKeyOffset + kKeyBytes) {
    bytes.replace(kVersionOffset, kVersionBytes, version);
    bytes.replace(kKeyOffset, kKeyBytes, key);
  }
  if (bytes.size() > kHeaderBytes) {
    const uint32_t crc = body_crc(bytes);
    std::memcpy(bytes.data() + crc_offset, &crc, sizeof(crc));
  }
  lseq::fuzz::write_bytes(cache_path, bytes);
  std::shared_ptr<const lseq::data::EncodedCorpus> corpus;
  if (!lseq::fuzz::guarded([&] { corpus = open(); })) return 0;
  LSEQ_FUZZ_EXPECT(corpus->streams() == 2, "a cache of two corpus files has another number of sides");
  for (int64_t pair = 0; pair < corpus->size(); ++pair) {
    corpus->prefetch_meta(pair);
    corpus->prefetch_tokens(pair);
    for (int side = 0; side < corpus->streams(); ++side) {
      for (int32_t id : corpus->tokens(side, pair))
        LSEQ_FUZZ_EXPECT(id >= 0 && id < vocab->size(), "the cache gave a token id outside the vocabulary");
    }
    (void)corpus->line(pair);
  }
  return 0;
}

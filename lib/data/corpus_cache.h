#pragma once
// An encoded corpus: every kept sentence pair as token ids, with per-sentence lengths and the original line
// numbers. Training corpora are encoded once into a binary cache file (written atomically, memory-mapped
// afterwards) that is rebuilt only when the corpus files, the vocabularies or the length options change.
// Validation sets use the same class, usually encoded in memory.
//
// Cache file layout (little-endian; see corpus_cache.cpp for the header):
//   header (256 bytes) | tokens of pair 0 (side 0, side 1, ...), pair 1, ... | per side: lengths uint32[n] |
//   offsets int64[n] (token offset of each pair) | line numbers int64[n]; each array starts at a multiple of 8.
// Tokens are uint16 when every vocabulary has fewer than 65536 pieces, else int32. No bos/eos is stored.
// The header holds a CRC-32 of everything after it. Opening a cache checks it and then the body itself (offsets,
// lengths, line numbers, ids inside the vocabularies): one pass over the file, cheap next to training on it. A
// damaged cache is rebuilt with a warning naming it (it is derived data); one that cannot be rebuilt is an error
// naming it.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace lseq::data {

class Vocab;

struct CorpusOptions {
  std::vector<std::string> files;  // 1 (monolingual) or more (parallel: source, target) text files, plain or .gz
  int max_length = 0;    // --max-length: pairs with a side longer than this (tokens, eos excluded) ...
  bool crop = false;     // ... are skipped (false) or cut to max_length (true: --max-length-crop); 0: no limit
  bool use_cache = true; // false: encode in memory and write nothing (small sets such as validation sets)
  std::string cache_dir; // where the cache goes; empty: beside the first corpus file (or the temp dir when that
                         // directory is not writable)
  int threads = 0;       // encoding threads; 0: all cores
  int token_bytes = 0;   // stored token width: 0 picks the smallest that fits the vocabularies (2 below 65536
                         // pieces, else 4); 4 forces int32 (to test that path)
};

class EncodedCorpus {
 public:
  // The corpus encoded with one vocabulary per file (vocabs[i] encodes files[i]; the same Vocab may be given
  // twice). Reads a valid cache, or encodes the files and writes one (logging progress).
  static std::shared_ptr<const EncodedCorpus> open_or_build(const CorpusOptions& options,
                                                            const std::vector<const Vocab*>& vocabs);
  ~EncodedCorpus();
  EncodedCorpus(const EncodedCorpus&) = delete;
  EncodedCorpus& operator=(const EncodedCorpus&) = delete;

  int streams() const { return streams_; }       // sides per pair
  int64_t size() const { return pairs_; }         // kept pairs
  uint32_t length(int side, int64_t pair) const { return lengths_[side][pair]; }  // tokens, no eos
  const uint32_t* lengths(int side) const { return lengths_[side]; }
  int64_t line(int64_t pair) const { return lines_[pair]; }  // 0-based line in the corpus files
  // Copies the tokens of one side of a pair to out[0 .. length(side, pair)).
  void copy_tokens(int side, int64_t pair, int32_t* out) const {
    int64_t offset = offsets_[pair];
    for (int s = 0; s < side; ++s) offset += lengths_[s][pair];
    const uint32_t n = lengths_[side][pair];
    if (token_bytes_ == 2) {
      const uint16_t* in = reinterpret_cast<const uint16_t*>(tokens_) + offset;
      for (uint32_t i = 0; i < n; ++i) out[i] = in[i];
    } else {
      std::memcpy(out, reinterpret_cast<const int32_t*>(tokens_) + offset, n * sizeof(int32_t));
    }
  }
  std::vector<int32_t> tokens(int side, int64_t pair) const;
  // Cache hints for the batcher, which reads pairs in random order: first the offset and line number, then (once
  // the offset is cached) the tokens of all sides.
  void prefetch_meta(int64_t pair) const {
    __builtin_prefetch(offsets_ + pair);
    __builtin_prefetch(lines_ + pair);
  }
  void prefetch_tokens(int64_t pair) const {
    const unsigned char* p = tokens_ + static_cast<std::size_t>(offsets_[pair]) * token_bytes_;
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
  }
  int64_t total_tokens(int side) const { return side_tokens_[side]; }
  int token_bytes() const { return token_bytes_; }  // 2 or 4 bytes per stored token

  // What happened while encoding (stored in the cache, so they are the same when it is read back).
  int64_t lines_read() const { return lines_read_; }
  int64_t skipped_empty() const { return skipped_empty_; }
  int64_t skipped_long() const { return skipped_long_; }
  int64_t cropped() const { return cropped_; }

  bool from_cache() const { return from_cache_; }  // true when this object was read from an existing cache
  const std::string& cache_path() const { return cache_path_; }  // empty when encoded in memory

  struct Storage;  // the bytes: a memory-mapped cache file or an in-memory buffer (corpus_cache.cpp)

 private:
  EncodedCorpus() = default;
  void attach(std::unique_ptr<Storage> storage);  // points the views into the storage (checks the layout)

  std::unique_ptr<Storage> storage_;
  int streams_ = 0;
  int64_t pairs_ = 0;
  int token_bytes_ = 4;
  const unsigned char* tokens_ = nullptr;
  const uint32_t* lengths_[8] = {};
  const int64_t* offsets_ = nullptr;
  const int64_t* lines_ = nullptr;
  int64_t side_tokens_[8] = {};
  int64_t lines_read_ = 0, skipped_empty_ = 0, skipped_long_ = 0, cropped_ = 0;
  bool from_cache_ = false;
  std::string cache_path_;
};

}  // namespace lseq::data

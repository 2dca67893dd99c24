#pragma once
// Vocabularies are SentencePiece models with fixed special ids (the same for every vocab lseq trains):
//   0 <pad>   1 <unk>   2 <s> (bos)   3 </s> (eos)
// or GPT-2 byte-level BPE tokenizers (vocab.json with merges.txt beside it; byte_level_bpe.h), read but never
// trained by lseq. Their ids sit behind the same special ids: lseq's id = the tokenizer's id + 4, and the
// tokenizer's <|endoftext|> is both bos and eos (2 and 3; <|endoftext|> in a text encodes to eos).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace lseq::data {

class ByteLevelBpe;

constexpr int32_t kPadId = 0;
constexpr int32_t kUnkId = 1;
constexpr int32_t kBosId = 2;
constexpr int32_t kEosId = 3;
constexpr int32_t kBpeIdOffset = 4;  // a byte-level BPE's ids in lseq: the tokenizer's id + this

struct VocabTrainOptions {
  int vocab_size = 8000;            // --dim-vocabs
  int64_t max_lines = 2000000;      // --sentencepiece-max-lines: sample at most this many lines
  uint64_t seed = 1234;             // which lines are sampled
  std::string extra_options;        // --sentencepiece-options, passed to the SentencePiece trainer verbatim
};

class Vocab {
 public:
  // Loads a SentencePiece model, or a byte-level BPE when the path ends in .json (merges.txt beside it: see
  // bpe_merges_path); a missing, unreadable or malformed file throws lseq::Error naming it.
  static Vocab load(const std::string& path);
  // The merges.txt that belongs to a vocab.json: the file 'merges.txt' in its directory.
  static std::string bpe_merges_path(const std::string& vocab_json_path);
  static bool is_bpe_path(const std::string& path);  // ends in .json
  // Trains a model from a sample of the lines of `corpus_files` (plain or .gz) and writes it to `path`
  // atomically; reports progress through spdlog.
  static void train(const std::vector<std::string>& corpus_files, const std::string& path,
                    const VocabTrainOptions& options);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  std::vector<int32_t> encode(std::string_view text) const;  // no bos/eos added
  std::string decode(const std::vector<int32_t>& ids) const; // special ids are skipped
  int size() const;
  const std::string& path() const { return path_; }
  std::string serialized() const;  // the model's bytes (part of the cache key); a BPE's vocab.json and merges.txt
  // "fnv1a64:<16 hex digits>" of serialized(): tells two vocabularies apart. Checkpoints record it (progress.yml),
  // and lstranslate, lsscore and lsserve compare it; a guard against mistakes, not against forgery.
  std::string fingerprint() const;
  bool byte_level_bpe() const { return bpe_ != nullptr; }

 private:
  Vocab() = default;
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::unique_ptr<ByteLevelBpe> bpe_;  // instead of processor_
  std::string bpe_bytes_;              // vocab.json, a NUL, merges.txt
};

}  // namespace lseq::data

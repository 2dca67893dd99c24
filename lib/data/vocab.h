#pragma once
// Vocabularies are SentencePiece models with fixed special ids (the same for every vocab lseq trains):
//   0 <pad>   1 <unk>   2 <s> (bos)   3 </s> (eos)
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace lseq::data {

constexpr int32_t kPadId = 0;
constexpr int32_t kUnkId = 1;
constexpr int32_t kBosId = 2;
constexpr int32_t kEosId = 3;

struct VocabTrainOptions {
  int vocab_size = 8000;            // --dim-vocabs
  int64_t max_lines = 2000000;      // --sentencepiece-max-lines: sample at most this many lines
  uint64_t seed = 1234;             // which lines are sampled
  std::string extra_options;        // --sentencepiece-options, passed to the SentencePiece trainer verbatim
};

class Vocab {
 public:
  // Loads a SentencePiece model; a missing or unreadable file throws lseq::Error naming it.
  static Vocab load(const std::string& path);
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
  std::string serialized() const;  // the model's bytes (part of the cache key)

 private:
  Vocab() = default;
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace lseq::data

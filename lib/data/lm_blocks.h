#pragma once
// A language model's corpus as one stream cut into blocks (--lm-pack-blocks, GPT style): every line contributes the
// pairs (input, target) that line mode trains it on, (bos, w1), (w1, w2), ..., (wn, eos), and the pairs of all lines,
// in corpus order, are cut into blocks of `length` pairs (the last block may be shorter). A block starts where the one
// before it ended, so a line may be split between two blocks; nothing is padded but the last block.
// Documents: lines separated by one or more blank lines (the corpus keeps each kept line's number, so a gap in the
// numbers is a blank line, or a line of spaces only; lines are never skipped for length in block mode). With
// document masks each pair carries where its document starts in its block's row (data::Batch::doc_starts): the
// model lets it attend to its own document only and counts its positions from there, so a document that lies
// inside one block gets exactly the log-probabilities it would get alone.
#include <cstdint>
#include <vector>

namespace lseq::data {

class EncodedCorpus;

class LmBlocks {
 public:
  // The corpus must have one stream (monolingual); length >= 1.
  LmBlocks(const EncodedCorpus& corpus, int length);

  int length() const { return length_; }
  int64_t pairs() const { return starts_.back(); }  // in the whole stream
  int64_t count() const { return (pairs() + length_ - 1) / length_; }

  // Block b into one batch row of `row_len` >= its size cells: in[i] and out[i] the pairs' input and target ids,
  // doc_starts[i] (if not null) the row position where pair i's document starts (0 when it started in an earlier
  // block); cells past the block's size are padding (ids 0, doc starts those of the last pair). Returns the block's
  // size; *line the corpus line of its first pair.
  int fill(int64_t block, int row_len, int32_t* in, int32_t* out, int32_t* doc_starts, int64_t* line) const;

 private:
  const EncodedCorpus& corpus_;
  int length_ = 0;
  std::vector<int64_t> starts_;  // [pairs of the corpus + 1]: stream offset of each corpus pair's first pair
};

}  // namespace lseq::data

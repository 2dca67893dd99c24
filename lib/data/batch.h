#pragma once
// One mini-batch of sentence pairs, padded to the longest sentence on each side (pad id 0).
//   src     [size x src_len]  source ids + eos
//   tgt_in  [size x tgt_len]  bos + target ids     (decoder input)
//   tgt_out [size x tgt_len]  target ids + eos     (what the decoder must predict)
// A monolingual corpus (decoder-only models) fills only the target side: src and src_lengths are empty, src_len 0.
// A language model's packed blocks (BatcherOptions::block_length) are rows of tgt_len tokens cut from the corpus'
// lines end to end; with document masks each token also carries where its document starts in its row:
//   doc_starts [size x tgt_len]  the row position of the token's document's first token (empty: no documents)
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lseq::data {

struct Batch {
  int size = 0;     // sentences
  int src_len = 0;  // padded lengths, eos/bos included
  int tgt_len = 0;
  std::vector<int32_t> src, tgt_in, tgt_out;
  std::vector<int32_t> src_lengths, tgt_lengths;  // real lengths per sentence, eos/bos included
  std::vector<int32_t> doc_starts;                // see above; empty unless documents are masked
  std::vector<int64_t> line_ids;                  // 0-based line numbers in the corpus (for decoding order)

  int64_t src_tokens() const;  // sum of src_lengths (real, without padding)
  int64_t tgt_tokens() const;  // sum of tgt_lengths = number of predicted target tokens
};

}  // namespace lseq::data

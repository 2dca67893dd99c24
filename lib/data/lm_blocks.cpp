#include "data/lm_blocks.h"

#include <algorithm>

#include "data/corpus_cache.h"
#include "data/vocab.h"
#include "util/error.h"

namespace lseq::data {

LmBlocks::LmBlocks(const EncodedCorpus& corpus, int length) : corpus_(corpus), length_(length) {
  if (corpus.streams() != 1)
    fail("language-model blocks need one monolingual corpus file, got {} parallel files", corpus.streams());
  if (length < 1) fail("language-model blocks need a block length of at least 1 (--max-length), got {}", length);
  const int64_t n = corpus.size();
  starts_.resize(static_cast<std::size_t>(n) + 1);
  starts_[0] = 0;
  for (int64_t k = 0; k < n; ++k) starts_[k + 1] = starts_[k] + corpus.length(0, k) + 1;  // words + eos
}

int LmBlocks::fill(int64_t block, int row_len, int32_t* in, int32_t* out, int32_t* doc_starts, int64_t* line) const {
  if (block < 0 || block >= count()) fail("internal error: block {} of {}", block, count());
  const int64_t first = block * length_;
  const int size = static_cast<int>(std::min<int64_t>(length_, pairs() - first));
  if (size > row_len) fail("internal error: a block of {} pairs in a row of {}", size, row_len);
  // The corpus pair holding the block's first pair: the last one starting at or before it.
  int64_t k = std::upper_bound(starts_.begin(), starts_.end(), first) - starts_.begin() - 1;
  *line = corpus_.line(k);
  std::vector<int32_t> words;
  int32_t doc_start = 0;
  for (int i = 0; i < size; ++k) {
    words.resize(corpus_.length(0, k));
    corpus_.copy_tokens(0, k, words.data());
    const int n = static_cast<int>(words.size());
    // A new document where the line numbers jump (a blank line between); the corpus' first line starts one.
    const bool starts_document = k == 0 || corpus_.line(k) != corpus_.line(k - 1) + 1;
    for (int o = static_cast<int>(first + i - starts_[k]); o <= n && i < size; ++o, ++i) {
      if (o == 0 && starts_document) doc_start = i;
      in[i] = o == 0 ? kBosId : words[o - 1];
      out[i] = o < n ? words[o] : kEosId;
      if (doc_starts) doc_starts[i] = doc_start;
    }
  }
  for (int i = size; i < row_len; ++i) {
    in[i] = out[i] = kPadId;
    if (doc_starts) doc_starts[i] = doc_start;
  }
  return size;
}

}  // namespace lseq::data

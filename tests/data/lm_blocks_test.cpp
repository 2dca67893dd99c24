// A language model's corpus in blocks (--lm-pack-blocks): the blocks are the line-mode pairs of every line end to
// end, documents (blank lines) start where they should in each row, and the batcher hands out every block once an
// epoch, a budget's worth a batch, reproducibly, with document starts only when asked.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/batcher.h"
#include "data/corpus_cache.h"
#include "data/lm_blocks.h"
#include "data_test_support.h"
#include "util/error.h"

namespace lseq::data::test {
namespace {

// Lines of the sample with blank lines between documents of 1 to 4 lines (and two blank lines once).
struct Documents {
  TempDir dir;
  std::string path = dir.file("docs.txt");
  std::shared_ptr<const EncodedCorpus> corpus;
  std::vector<int> document_of;  // per kept line

  Documents() {
    const std::vector<std::string> lines = read_lines(sample("train.en"));
    std::string text;
    int document = 0;
    for (int i = 0, in_doc = 0; i < 60; ++i) {
      text += lines[i] + "\n";
      document_of.push_back(document);
      if (++in_doc == 1 + i % 4) {
        text += i == 20 ? "\n\n" : "\n";
        in_doc = 0, ++document;
      }
    }
    write_file(path, text);
    CorpusOptions o;
    o.files = {path};
    o.use_cache = false;
    corpus = EncodedCorpus::open_or_build(o, {&vocabs().joint});
  }
};

// Every line's pairs as line mode has them, end to end, with the document of each pair.
struct Stream {
  std::vector<int32_t> in, out;
  std::vector<int> document;
};

Stream line_mode_stream(const Documents& d) {
  Stream s;
  for (int64_t k = 0; k < d.corpus->size(); ++k) {
    const std::vector<int32_t> words = d.corpus->tokens(0, k);
    for (std::size_t o = 0; o <= words.size(); ++o) {
      s.in.push_back(o == 0 ? kBosId : words[o - 1]);
      s.out.push_back(o < words.size() ? words[o] : kEosId);
      s.document.push_back(d.document_of[static_cast<std::size_t>(k)]);
    }
  }
  return s;
}

TEST(LmBlocks, BlocksAreTheLinesPairsEndToEndWithTheirDocuments) {
  const Documents d;
  ASSERT_EQ(d.corpus->size(), 60);
  const Stream stream = line_mode_stream(d);
  for (int length : {1, 7, 64, 100000}) {
    SCOPED_TRACE("block length " + std::to_string(length));
    const LmBlocks blocks(*d.corpus, length);
    EXPECT_EQ(blocks.pairs(), static_cast<int64_t>(stream.in.size()));
    Stream joined;
    for (int64_t b = 0; b < blocks.count(); ++b) {
      std::vector<int32_t> in(length + 2, -1), out(length + 2, -1), starts(length + 2, -1);
      int64_t line = -1;
      const int size = blocks.fill(b, length + 2, in.data(), out.data(), starts.data(), &line);
      EXPECT_EQ(size, b + 1 < blocks.count() ? length : static_cast<int>(stream.in.size() - b * int64_t(length)));
      EXPECT_GE(line, 0);
      for (int i = size; i < length + 2; ++i) {
        EXPECT_EQ(in[i], kPadId);
        EXPECT_EQ(out[i], kPadId);
        EXPECT_LE(starts[i], i);
      }
      for (int i = 0; i < size; ++i) {
        const std::size_t at = static_cast<std::size_t>(b) * length + i;
        // The document starts where its first pair is in this row, or at 0 when it began in an earlier block.
        int first = i;
        while (first > 0 && stream.document[at - (i - first) - 1] == stream.document[at]) --first;
        EXPECT_EQ(starts[i], first) << "pair " << i << " of block " << b;
      }
      joined.in.insert(joined.in.end(), in.begin(), in.begin() + size);
      joined.out.insert(joined.out.end(), out.begin(), out.begin() + size);
    }
    EXPECT_EQ(joined.in, stream.in);
    EXPECT_EQ(joined.out, stream.out);
  }
}

BatcherOptions block_options(int length, bool masks) {
  BatcherOptions o;
  o.block_length = length;
  o.document_masks = masks;
  o.mini_batch_words = 3 * length + 5;  // three whole blocks
  o.seed = 5;
  o.prefetch = 0;
  return o;
}

TEST(LmBlocks, TheBatcherHandsOutEveryBlockOncePerEpoch) {
  const Documents d;
  const LmBlocks blocks(*d.corpus, 16);
  for (bool masks : {false, true}) {
    Batcher batcher(d.corpus, block_options(16, masks));
    std::multiset<std::vector<int32_t>> seen;
    int batches = 0;
    do {
      const Batch b = batcher.next();
      ++batches;
      EXPECT_LE(b.size, 3);
      EXPECT_EQ(b.src_len, 0);
      EXPECT_TRUE(b.src.empty());
      EXPECT_EQ(b.doc_starts.size(), masks ? b.tgt_in.size() : 0u);
      for (int r = 0; r < b.size; ++r) {
        EXPECT_LE(b.tgt_lengths[r], 16);
        seen.insert(std::vector<int32_t>(b.tgt_in.begin() + r * b.tgt_len,
                                         b.tgt_in.begin() + r * b.tgt_len + b.tgt_lengths[r]));
      }
    } while (!batcher.epoch_finished());
    EXPECT_EQ(batches, (blocks.count() + 2) / 3);
    std::multiset<std::vector<int32_t>> expected;
    for (int64_t k = 0; k < blocks.count(); ++k) {
      std::vector<int32_t> in(16), out(16);
      int64_t line = 0;
      const int size = blocks.fill(k, 16, in.data(), out.data(), nullptr, &line);
      expected.insert(std::vector<int32_t>(in.begin(), in.begin() + size));
    }
    EXPECT_EQ(seen, expected);
  }
}

TEST(LmBlocks, BlockOrderIsSeededAndRestorable) {
  const Documents d;
  auto epoch = [&](uint64_t seed) {
    BatcherOptions o = block_options(16, true);
    o.seed = seed;
    Batcher batcher(d.corpus, o);
    std::vector<int64_t> lines;
    do {
      const Batch b = batcher.next();
      lines.insert(lines.end(), b.line_ids.begin(), b.line_ids.end());
    } while (!batcher.epoch_finished());
    return lines;
  };
  EXPECT_EQ(epoch(5), epoch(5));
  EXPECT_NE(epoch(5), epoch(6));
  Batcher first(d.corpus, block_options(16, true));
  first.next();
  const BatcherState state = first.state();
  const Batch want = first.next();
  Batcher resumed(d.corpus, block_options(16, true));
  resumed.restore(state);
  const Batch got = resumed.next();
  EXPECT_EQ(got.tgt_in, want.tgt_in);
  EXPECT_EQ(got.doc_starts, want.doc_starts);
}

TEST(LmBlocks, BadUsesAreErrors) {
  const Documents d;
  EXPECT_THROW(LmBlocks(*d.corpus, 0), Error);
  CorpusOptions o;
  o.files = {sample("train.de"), sample("train.en")};
  o.use_cache = false;
  const auto parallel = EncodedCorpus::open_or_build(o, {&vocabs().joint, &vocabs().joint});
  EXPECT_THROW(Batcher(parallel, block_options(16, false)), Error);
  BatcherOptions masks_only;
  masks_only.document_masks = true;
  EXPECT_THROW(Batcher(d.corpus, masks_only), Error);
}

}  // namespace
}  // namespace lseq::data::test

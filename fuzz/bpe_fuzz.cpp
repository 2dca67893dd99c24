// GPT-2 byte-level BPE tokenizer files (--vocabs vocab.json with merges.txt beside it): the input is vocab.json, a
// NUL byte, then merges.txt (no NUL: all of it is vocab.json and merges.txt is empty). ByteLevelBpe::parse reads
// them, then what the programs do with one: encode sentences, decode ids (out-of-range ids included).
// Promises checked: an accepted tokenizer has a token for every byte, encodes to ids inside it, and decodes the ids
// of any UTF-8 text without <|endoftext|> back to that text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/byte_level_bpe.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  const std::string_view vocab = input.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  lseq::fuzz::guarded([&] {
    const auto bpe = lseq::data::ByteLevelBpe::parse(vocab, merges, "vocab.json", "merges.txt");
    LSEQ_FUZZ_EXPECT(bpe.size() >= 256, "an accepted tokenizer lacks byte tokens");
    for (const std::string_view text : {"Das Haus ist alt, aber schön. 42 ✓", "  it's\t\n 漢字 😀 x  ", ""}) {
      const std::vector<int32_t> ids = bpe.encode(text);
      for (int32_t id : ids) LSEQ_FUZZ_EXPECT(id >= 0 && id < bpe.size(), "encode gave an id outside the vocabulary");
      LSEQ_FUZZ_EXPECT(bpe.decode(ids) == text, "decode(encode(text)) is not the text");
    }
    bpe.encode("a<|endoftext|>b<|endoftext|>");
    bpe.decode({-7, 0, 1, 2, 3, bpe.size(), bpe.size() + 1000000, 5});
  });
  return 0;
}

// Vocabulary files (--vocabs, a model directory's vocab*.spm): Vocab::load of the input as a SentencePiece model,
// then what the programs do with one: encode a sentence, decode ids (out-of-range ids included).
// SentencePiece itself is not instrumented, so the fuzzer is blind inside it; crashes there still show.
// Promises checked: an accepted vocabulary has lseq's special ids, encodes to ids inside it, and decodes any ids.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lseq::fuzz::scratch_file("vocab.spm");
  lseq::fuzz::write_bytes(path, {reinterpret_cast<const char*>(data), size});
  lseq::fuzz::guarded([&] {
    const lseq::data::Vocab vocab = lseq::data::Vocab::load(path);
    LSEQ_FUZZ_EXPECT(vocab.size() > lseq::data::kEosId, "an accepted vocabulary lacks lseq's special ids");
    const std::vector<int32_t> ids = vocab.encode("Das Haus ist alt, aber schön. 42 ✓");
    for (int32_t id : ids) LSEQ_FUZZ_EXPECT(id >= 0 && id < vocab.size(), "encode gave an id outside the vocabulary");
    vocab.decode(ids);
    vocab.decode({-7, 0, 1, 2, 3, vocab.size(), vocab.size() + 1000000, 5});
  });
  return 0;
}

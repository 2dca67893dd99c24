// lstranslate's input (and lsscore's source side): TranslationInput over the input's lines, encoded twice: as text
// with a real SentencePiece vocabulary (fuzz/tiny.spm) and as ids (--no-spm-encode). The batch options come from
// the input's bytes, so the fuzzer explores them too.
// Promises checked: every input line comes out exactly once, in a batch or as an empty output line, windows follow
// each other; batches are padded rows of ids + eos within the vocabulary, at most --mini-batch rows and
// --mini-batch-words padded tokens (one longer line may stand alone), no line longer than --max-length + eos.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/input_line_reader.h"
#include "data/translation_input.h"
#include "data/vocab.h"
#include "fuzz_support.h"

namespace {

std::unique_ptr<lseq::data::Vocab> vocab;

lseq::data::TranslationInputOptions options_from(const uint8_t* data, size_t size) {
  uint32_t sum = 0;
  for (size_t i = 0; i < size; ++i) sum = sum * 31 + data[i];
  lseq::data::TranslationInputOptions options;
  options.mini_batch = static_cast<int>(sum % 5);                     // 0 (no limit) .. 4 sentences
  options.mini_batch_words = static_cast<int64_t>((sum >> 3) % 4) * 12;  // 0 (no limit), 12, 24, 36 tokens
  if (options.mini_batch == 0 && options.mini_batch_words == 0) options.mini_batch = 3;
  options.maxi_batch = 1 + static_cast<int>((sum >> 5) % 3);
  options.max_length = 1 + static_cast<int>((sum >> 7) % 40);
  options.vocab_size = vocab->size();
  return options;
}

void check_windows(const std::string& text, const lseq::data::TextEncoder& encoder,
                   const lseq::data::TranslationInputOptions& options) {
  std::istringstream in(text);
  lseq::data::InputLineReader reader(in, "input");
  lseq::data::TranslationInput input(reader, encoder, options);
  lseq::data::InputWindow window;
  std::vector<int> seen;
  int64_t next_line = 0;
  while (input.next(window)) {
    LSEQ_FUZZ_EXPECT(window.first_line == next_line && window.end_line > window.first_line,
                     "windows do not follow each other");
    next_line = window.end_line;
    seen.resize(static_cast<size_t>(window.end_line), 0);
    auto mark = [&](int64_t line) {
      LSEQ_FUZZ_EXPECT(line >= window.first_line && line < window.end_line, "a line outside its window");
      ++seen[static_cast<size_t>(line)];
    };
    for (int64_t line : window.empty_lines) mark(line);
    for (const auto& batch : window.batches) {
      LSEQ_FUZZ_EXPECT(batch.size > 0 && batch.line_ids.size() == static_cast<size_t>(batch.size) &&
                           batch.src_lengths.size() == static_cast<size_t>(batch.size) &&
                           batch.src.size() == static_cast<size_t>(batch.size) * batch.src_len,
                       "a batch's sizes disagree");
      LSEQ_FUZZ_EXPECT(options.mini_batch == 0 || batch.size <= options.mini_batch, "too many rows in a batch");
      LSEQ_FUZZ_EXPECT(options.mini_batch_words == 0 || batch.size == 1 ||
                           static_cast<int64_t>(batch.size) * batch.src_len <= options.mini_batch_words,
                       "too many padded tokens in a batch");
      LSEQ_FUZZ_EXPECT(batch.src_len <= options.max_length + 1, "a row longer than --max-length + eos");
      for (int row = 0; row < batch.size; ++row) {
        mark(batch.line_ids[static_cast<size_t>(row)]);
        const int length = batch.src_lengths[static_cast<size_t>(row)];
        LSEQ_FUZZ_EXPECT(length >= 2 && length <= batch.src_len, "a row's length is outside the batch");
        const int32_t* ids = batch.src.data() + static_cast<size_t>(row) * batch.src_len;
        LSEQ_FUZZ_EXPECT(ids[length - 1] == lseq::data::kEosId, "a row does not end in eos");
        for (int k = 0; k < batch.src_len; ++k) {
          LSEQ_FUZZ_EXPECT(ids[k] >= 0 && ids[k] < options.vocab_size,
                           "id " + std::to_string(ids[k]) + " outside the vocabulary of " +
                               std::to_string(options.vocab_size) + (encoder ? " (SentencePiece)" : " (ids)"));
          if (k >= length) LSEQ_FUZZ_EXPECT(ids[k] == lseq::data::kPadId, "padding is not pad");
        }
      }
    }
  }
  size_t lines = 0;
  std::istringstream count(text);
  for (std::string line; std::getline(count, line);) ++lines;
  LSEQ_FUZZ_EXPECT(static_cast<size_t>(next_line) == lines, "input lines were lost or invented");
  for (int n : seen) LSEQ_FUZZ_EXPECT(n == 1, "an input line came out twice or never");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  vocab = std::make_unique<lseq::data::Vocab>(lseq::data::Vocab::load(LSEQ_SOURCE_DIR "/fuzz/tiny.spm"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const lseq::data::TranslationInputOptions options = options_from(data, size);
  const lseq::data::TextEncoder spm = [](std::string_view line) { return vocab->encode(line); };
  lseq::fuzz::guarded([&] { check_windows(text, spm, options); });
  lseq::fuzz::guarded([&] { check_windows(text, nullptr, options); });
  return 0;
}

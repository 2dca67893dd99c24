#pragma once
// What lstranslate (and lsscore for its source side) does with input lines before decoding: encode each line,
// deal with bad lines, and cut the input into padded batches of similar length, streaming one maxi-batch window
// at a time so that input of any size is never read whole.
//
// Per line:
//   - an empty line (or one that encodes to no tokens) is not decoded; it yields an empty output line;
//   - invalid UTF-8, or with --no-spm-encode a word that is not an id of the vocabulary (not a number, negative,
//     or too large, however many digits: data/token_ids.h), is reported by a warning naming the file and line,
//     and the line yields an empty output line;
//   - more than max_length tokens (eos not counted): cropped to max_length with a warning, then decoded; a line
//     of more than 64 KiB is encoded in pieces cut at spaces, only until the crop (translation_input.cpp).
// A window holds maxi_batch * mini_batch lines (or, with only mini_batch_words set, lines up to maxi_batch *
// mini_batch_words tokens); inside it lines are sorted by length (longest first) and cut into mini-batches of at
// most mini_batch sentences and at most mini_batch_words padded source tokens (rows * longest row, eos
// included; a longer single line gets a batch of its own). Each batch's line_ids name its input lines, so
// callers restore input order (data/ordered_output.h).
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/batch.h"
#include "data/input_line_reader.h"

namespace lseq::data {

struct TranslationInputOptions {
  int mini_batch = 16;           // --mini-batch: sentences per batch (0: no limit)
  int64_t mini_batch_words = 0;  // --mini-batch-words: padded source tokens per batch (0: no limit)
  int maxi_batch = 100;          // --maxi-batch: window size in mini-batches
  // The first window's size in mini-batches (0: maxi_batch). Continuous decoding takes windows one after another
  // without draining between them, so a small first one only lets it start sooner (lstranslate: 2 per decoder).
  int first_maxi_batch = 0;
  int max_length = 1000;         // --max-length: longer lines are cropped (eos not counted)
  int vocab_size = 0;            // with ids input, ids must be below this (0: below 2^31)
  std::string rejected_note = "writing an empty output line for it";  // ends the warning about a rejected line
};

// Text to ids (a SentencePiece vocabulary's encode, without eos). Empty: the input is ids already
// (--no-spm-encode): whitespace-separated non-negative integers.
using TextEncoder = std::function<std::vector<int32_t>(std::string_view)>;

// An encoded line, or why it yields an empty output.
struct EncodedLine {
  std::vector<int32_t> ids;  // without eos; cropped to max_length
  bool decode = false;       // false: write an empty output line for it (empty or rejected)
  bool rejected = false;     // invalid UTF-8 or a bad id (a warning was logged)
};

// The ids of `text` (no eos), encoded until there are more than max_length of them (max_length 0: no limit): a text
// of more than 64 KiB is encoded in pieces cut at spaces and stops once past max_length, so that a huge line costs
// no more than its cropped part (translation_input.cpp says why the ids are the whole text's). `whole` tells
// whether all of the text was encoded. Nothing is cropped, checked or logged here (lsserve reports over-long
// sentences to its client itself).
std::vector<int32_t> encode_text_until(std::string_view text, const TextEncoder& encoder, int max_length, bool& whole);

// Encodes one line as described above; warnings go to spdlog and name `where` ("file line N").
EncodedLine encode_input_line(const std::string& line, const std::string& where, const TextEncoder& encoder,
                              const TranslationInputOptions& options);

// One window of the input: everything from input line first_line up to (not including) end_line.
struct InputWindow {
  int64_t first_line = 0, end_line = 0;
  std::vector<Batch> batches;        // source side only (tgt fields empty)
  std::vector<int64_t> empty_lines;  // lines that yield an empty output without decoding
};

class TranslationInput {
 public:
  // Throws lseq::Error when both mini_batch and mini_batch_words are 0 or maxi_batch < 1.
  TranslationInput(InputLineReader& reader, TextEncoder encoder, TranslationInputOptions options);
  bool next(InputWindow& window);  // false when the input is exhausted (window then is empty)

 private:
  InputLineReader& reader_;
  TextEncoder encoder_;
  TranslationInputOptions options_;
  bool first_ = true;
};

// Sorts `lines` (ids without eos, with their line numbers) longest first (stable) and cuts them into batches as
// described above.
std::vector<Batch> make_source_batches(std::vector<std::pair<int64_t, std::vector<int32_t>>> lines,
                                       int mini_batch, int64_t mini_batch_words);

// One padded source batch: each sentence + eos, padded with 0 to the longest.
Batch make_source_batch(const std::vector<std::vector<int32_t>>& sentences, const std::vector<int64_t>& line_ids);

// Fills the target side (tgt_in = bos + ids, tgt_out = ids + eos, padded; tgt_lengths) for teacher forcing.
void set_batch_targets(Batch& batch, const std::vector<std::vector<int32_t>>& targets);

}  // namespace lseq::data

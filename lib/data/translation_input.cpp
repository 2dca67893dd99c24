#include "data/translation_input.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "data/token_ids.h"
#include "data/utf8.h"
#include "data/vocab.h"
#include "util/error.h"

namespace lseq::data {

namespace {

// SentencePiece's time and memory grow with the line (a line of 10 MB took 18 s and 1.2 GB), while tokens past
// max_length are cropped anyway. So a line longer than kLongLineBytes is encoded in pieces of at most kPieceBytes
// until it has more than max_length tokens. A piece ends after a space, which SentencePiece's pieces never span
// (its default whitespace splitting), so no word is cut and the first piece's ids are the whole line's (later
// ones can differ from a whole-line encoding only where its path scores, summed in float over the whole line, tie);
// a piece without a space ends between two UTF-8 characters.
constexpr std::size_t kLongLineBytes = std::size_t{64} << 10, kPieceBytes = std::size_t{16} << 10;

// Encodes `line`, stopping once it has more than max_length tokens (max_length 0: no limit); `whole` tells whether
// all of it was encoded.
std::vector<int32_t> encode_in_pieces(std::string_view line, const TextEncoder& encoder, int max_length, bool& whole) {
  std::vector<int32_t> ids;
  std::size_t begin = 0;
  while (begin < line.size() && (max_length <= 0 || ids.size() <= static_cast<std::size_t>(max_length))) {
    std::size_t end = std::min(line.size(), begin + kPieceBytes);
    if (end < line.size()) {
      const std::size_t space = line.find_last_of(' ', end - 1);
      if (space != std::string_view::npos && space > begin) {
        end = space + 1;
      } else {
        while (end > begin + 1 && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;
      }
    }
    const std::vector<int32_t> piece = encoder(line.substr(begin, end - begin));
    ids.insert(ids.end(), piece.begin(), piece.end());
    begin = end;
  }
  whole = begin >= line.size();
  return ids;
}

}  // namespace

std::vector<int32_t> encode_text_until(std::string_view text, const TextEncoder& encoder, int max_length, bool& whole) {
  whole = true;
  if (text.size() > kLongLineBytes) return encode_in_pieces(text, encoder, max_length, whole);
  return encoder(text);
}

EncodedLine encode_input_line(const std::string& line, const std::string& where, const TextEncoder& encoder,
                              const TranslationInputOptions& options) {
  EncodedLine out;
  if (line.empty()) return out;
  size_t bad = find_invalid_utf8(line);
  if (bad != std::string::npos) {
    spdlog::warn("{}: invalid UTF-8 at byte {}; {}", where, bad + 1, options.rejected_note);
    out.rejected = true;
    return out;
  }
  bool whole = true;
  if (encoder) {
    out.ids = encode_text_until(line, encoder, options.max_length, whole);
  } else {
    const std::string why = parse_token_ids(line, options.vocab_size, out.ids);
    if (!why.empty()) {
      spdlog::warn("{}: {}; {}", where, why, options.rejected_note);
      out.ids.clear();
      out.rejected = true;
      return out;
    }
  }
  if (options.max_length > 0 && static_cast<int64_t>(out.ids.size()) > options.max_length) {
    if (whole)
      spdlog::warn("{}: {} tokens, cropped to --max-length {}", where, out.ids.size(), options.max_length);
    else
      spdlog::warn("{}: more than {} tokens (a line of {} bytes), cropped to --max-length {}", where,
                   options.max_length, line.size(), options.max_length);
    out.ids.resize(options.max_length);
  }
  out.decode = !out.ids.empty();
  return out;
}

TranslationInput::TranslationInput(InputLineReader& reader, TextEncoder encoder, TranslationInputOptions options)
    : reader_(reader), encoder_(std::move(encoder)), options_(options) {
  if (options_.mini_batch < 0 || options_.mini_batch_words < 0)
    fail("--mini-batch and --mini-batch-words must not be negative");
  if (options_.mini_batch == 0 && options_.mini_batch_words == 0)
    fail("--mini-batch and --mini-batch-words are both 0; set at least one of them");
  if (options_.maxi_batch < 1) fail("--maxi-batch must be at least 1 (it is {})", options_.maxi_batch);
}

bool TranslationInput::next(InputWindow& window) {
  window = InputWindow();
  window.first_line = reader_.index() + 1;
  window.end_line = window.first_line;
  int64_t maxi_batch = options_.maxi_batch;
  if (first_ && options_.first_maxi_batch > 0) maxi_batch = std::min(options_.first_maxi_batch, options_.maxi_batch);
  first_ = false;
  const int64_t max_lines = options_.mini_batch > 0 ? options_.mini_batch * maxi_batch : INT64_MAX;
  const int64_t max_tokens = options_.mini_batch > 0 ? INT64_MAX : options_.mini_batch_words * maxi_batch;
  std::vector<std::pair<int64_t, std::vector<int32_t>>> lines;
  int64_t tokens = 0, count = 0;
  std::string text;
  while (count < max_lines && tokens < max_tokens && reader_.next(text)) {
    ++count;
    window.end_line = reader_.index() + 1;
    EncodedLine encoded = encode_input_line(text, reader_.where(), encoder_, options_);
    if (!encoded.decode) {
      window.empty_lines.push_back(reader_.index());
      continue;
    }
    tokens += static_cast<int64_t>(encoded.ids.size()) + 1;
    lines.emplace_back(reader_.index(), std::move(encoded.ids));
  }
  if (count == 0) return false;
  window.batches = make_source_batches(std::move(lines), options_.mini_batch, options_.mini_batch_words);
  return true;
}

std::vector<Batch> make_source_batches(std::vector<std::pair<int64_t, std::vector<int32_t>>> lines,
                                       int mini_batch, int64_t mini_batch_words) {
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  std::vector<Batch> batches;
  std::vector<std::vector<int32_t>> sentences;
  std::vector<int64_t> ids;
  int64_t longest = 0;
  auto flush = [&]() {
    if (sentences.empty()) return;
    batches.push_back(make_source_batch(sentences, ids));
    sentences.clear();
    ids.clear();
    longest = 0;
  };
  for (auto& line : lines) {
    const int64_t length = static_cast<int64_t>(line.second.size()) + 1;
    const int64_t rows = static_cast<int64_t>(sentences.size()) + 1;
    const bool too_many = mini_batch > 0 && rows > mini_batch;
    const bool too_big = mini_batch_words > 0 && rows * std::max(longest, length) > mini_batch_words;
    if (!sentences.empty() && (too_many || too_big)) flush();
    longest = std::max(longest, length);
    sentences.push_back(std::move(line.second));
    ids.push_back(line.first);
  }
  flush();
  return batches;
}

Batch make_source_batch(const std::vector<std::vector<int32_t>>& sentences, const std::vector<int64_t>& line_ids) {
  Batch b;
  b.size = static_cast<int>(sentences.size());
  for (const auto& s : sentences) b.src_len = std::max(b.src_len, static_cast<int>(s.size()) + 1);
  b.src.assign(static_cast<size_t>(b.size) * b.src_len, kPadId);
  for (int i = 0; i < b.size; ++i) {
    std::copy(sentences[i].begin(), sentences[i].end(), b.src.begin() + static_cast<size_t>(i) * b.src_len);
    b.src[static_cast<size_t>(i) * b.src_len + sentences[i].size()] = kEosId;
    b.src_lengths.push_back(static_cast<int32_t>(sentences[i].size()) + 1);
  }
  b.line_ids = line_ids;
  if (b.line_ids.empty())
    for (int i = 0; i < b.size; ++i) b.line_ids.push_back(i);
  return b;
}

void set_batch_targets(Batch& batch, const std::vector<std::vector<int32_t>>& targets) {
  if (static_cast<int>(targets.size()) != batch.size)
    fail("internal: {} targets for a batch of {} sentences", targets.size(), batch.size);
  batch.tgt_len = 0;
  for (const auto& t : targets) batch.tgt_len = std::max(batch.tgt_len, static_cast<int>(t.size()) + 1);
  const size_t cells = static_cast<size_t>(batch.size) * batch.tgt_len;
  batch.tgt_in.assign(cells, kPadId);
  batch.tgt_out.assign(cells, kPadId);
  batch.tgt_lengths.clear();
  for (int i = 0; i < batch.size; ++i) {
    const auto& t = targets[i];
    const size_t row = static_cast<size_t>(i) * batch.tgt_len;
    batch.tgt_in[row] = kBosId;
    std::copy(t.begin(), t.end(), batch.tgt_in.begin() + row + 1);
    std::copy(t.begin(), t.end(), batch.tgt_out.begin() + row);
    batch.tgt_out[row + t.size()] = kEosId;
    batch.tgt_lengths.push_back(static_cast<int32_t>(t.size()) + 1);
  }
}

}  // namespace lseq::data

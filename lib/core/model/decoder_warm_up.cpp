#include "core/model/decoder_warm_up.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/model/step_sharing.h"
#include "data/vocab.h"

namespace lseq {

namespace {

// Encodings are warmed for sources of up to this many tokens: batches of longer sentences are rare in translation
// and meet their few extra kernels when they come, while warming every class up to --max-length's (128 x 257 rows
// at --mini-batch 128) cost more time than a 2,000-line file at 32 sentences a batch saved (H100).
constexpr int kWarmedSourceTokens = 64;

class WarmUp {
 public:
  WarmUp(StepModel& model, const WarmUpLimits& limits) : model_(model) {
    sentences_ = std::max(1, limits.sentences);
    hypotheses_ = std::max(sentences_, limits.hypotheses);
    max_len_ = std::max(1, limits.source_tokens);
    prefill_piece_ = std::max(0, limits.prefill_piece);
    growth_ = std::max(2, limits.row_class_growth);
  }

  int run() {
    if (prefill_piece_ > 0)
      prefills();
    else
      encodings();
    steps();
    return calls_;
  }

 private:
  // Every class of rows that a batch of up to `sentences` sources of up to 64 tokens is encoded at, once each (the
  // decoder pads counts and lengths to step_rows: rows = padded count x padded length), and every class that an
  // admission of as many into the places such a start left is encoded at.
  void encodings() {
    const int longest = std::min(max_len_, kWarmedSourceTokens);
    std::map<int64_t, std::pair<int, int>> starts, admissions;  // class -> a (count, length) that meets it
    for (int count = 1; count <= sentences_; ++count) {
      for (int len = 1; len <= longest; ++len) {
        const int64_t padded_len = step_rows(len, max_len_);
        starts.emplace(row_class(step_rows(count, sentences_) * padded_len), std::make_pair(count, len));
        if (model_.can_admit() && 2 * count <= sentences_)
          admissions.emplace(row_class(step_rows(count, sentences_ - count) * padded_len), std::make_pair(count, len));
      }
    }
    for (const auto& entry : starts) encode(entry.second.first, entry.second.second, false);
    for (const auto& entry : admissions) {
      encode(entry.second.first, entry.second.second, false);
      encode(entry.second.first, entry.second.second, true);
    }
  }

  // A language model's: a start of n prompt tokens in all is prefilled in pieces of min(n, prefill_piece_) rows and
  // a last piece of the rest, so each class up to the largest piece is met by a start of exactly its rows (c
  // prompts of one token, or all the prompts a start may hold, of equal length).
  void prefills() {
    const int64_t most = std::min<int64_t>(prefill_piece_, int64_t{sentences_} * (max_len_ - 1));
    for (int64_t c = 8; most > 0; c *= growth_) {
      const int rows = static_cast<int>(std::min(c, most));
      const int count = std::min(sentences_, rows);
      encode(count, rows / count + 1, false);  // + 1: a prompt's last token is fed by the first step
      if (rows == most) break;
    }
  }

  // The class (at least 8) whose GEMM algorithm serves a product of `rows` rows.
  int64_t row_class(int64_t rows) const {
    int64_t c = 8;
    while (c < rows) c *= growth_;
    return c;
  }

  // Every class of step rows (live hypotheses padded to step_rows), once each, in the search the last encoding
  // began, narrowed or widened by select(); a new search where none began or the caches run out.
  void steps() {
    std::map<int64_t, int> classes;  // class -> live hypotheses that meet it
    for (int live = 1; live <= hypotheses_; ++live) classes.emplace(row_class(step_rows(live, hypotheses_)), live);
    for (const auto& entry : classes) {
      const int n = entry.second;
      if (sentence_of_.empty() || model_.steps_left() < 1) {
        encode(std::min(n, sentences_), 1, false);
        if (model_.steps_left() < 1) return;  // a decoder planned for no step, or one that does not say
      }
      if (model_.live() != n) select(n);
      model_.step_topk(std::vector<int32_t>(static_cast<std::size_t>(n), data::kBosId), 1, values_, ids_, eos_);
      ++calls_;
    }
  }

  // `sentences` placeholder sources of `len` tokens (eos everywhere: a valid id in every vocabulary).
  void encode(int sentences, int len, bool admit) {
    const std::vector<int32_t> src(static_cast<std::size_t>(sentences) * static_cast<std::size_t>(len), data::kEosId);
    const std::vector<int32_t> lengths(static_cast<std::size_t>(sentences), len);
    if (admit)
      model_.admit(src, lengths, sentences, len);
    else
      model_.start(src, lengths, sentences, len);
    // Each new sentence has one hypothesis, after the live ones, numbered on from the last (from 0 after start()).
    const int first = admit ? static_cast<int>(sentence_of_.size()) : 0;
    sentence_of_.resize(static_cast<std::size_t>(first + sentences));
    for (int s = 0; s < sentences; ++s) sentence_of_[first + s] = first + s;
    ++calls_;
  }

  // n live hypotheses continuing the live ones in order, each in its parent's sentence.
  void select(int n) {
    const int live = model_.live();
    std::vector<int32_t> parents(static_cast<std::size_t>(n)), sentence_of(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      parents[j] = static_cast<int32_t>(int64_t{j} * live / n);
      sentence_of[j] = sentence_of_[parents[j]];
    }
    model_.select(parents, sentence_of);
    sentence_of_.swap(sentence_of);
    ++calls_;
  }

  StepModel& model_;
  int sentences_ = 1, hypotheses_ = 1, max_len_ = 1, prefill_piece_ = 0, growth_ = 2;
  int calls_ = 0;
  std::vector<int32_t> sentence_of_;  // the sentence of each live hypothesis
  std::vector<float> values_, eos_;
  std::vector<int32_t> ids_;
};

}  // namespace

int warm_up_decoding(StepModel& model, const WarmUpLimits& limits) { return WarmUp(model, limits).run(); }

}  // namespace lseq

#pragma once
// lsscore's loops, free of files, vocabularies and models (tests run them with a toy StepModel). Scores come
// from teacher forcing (core/forced_scoring.h), so they equal what beam search reports for the same output.
//
// Per pair, one output line: the summed log-probability of the target tokens and eos (6 significant digits),
// divided by (target tokens + 1)^normalize when normalize > 0; with word_scores followed by
// " ||| WordScores= ..." (core/nbest_format.h). A pair whose source or target line was rejected (invalid UTF-8, or
// a bad id with --no-spm-encode; a warning names the line) prints "nan" and is left out of the totals.
// Empty lines are scored (an empty target is just eos). Lines longer than max_length are cropped with a warning.
// With summary, nothing is printed per line; format_summary() gives the corpus line.
#include <cstdint>
#include <ostream>
#include <string>

#include "core/search/step_model.h"
#include "data/input_line_reader.h"
#include "data/translation_input.h"

namespace lseq {

struct ScoreSettings {
  double normalize = 0;  // --normalize
  bool summary = false;  // --summary
  bool word_scores = false;
  std::string n_best_feature = "Score";  // --n-best-feature
  // Batching and cropping, as for translation (vocab_size: source ids are checked with --no-spm-encode).
  data::TranslationInputOptions batching;
  int target_vocab_size = 0;  // target ids are checked with --no-spm-encode
};

struct ScoreTotals {
  int64_t lines = 0;          // outputs written (or that would be, with summary)
  int64_t scored = 0;         // pairs that entered the totals
  int64_t target_tokens = 0;  // eos included
  double log_prob = 0;        // summed over scored pairs
};

// Scores each pair (line i of source, line i of target); different line counts throw lseq::Error naming both.
ScoreTotals score_pairs(StepModel& model, data::InputLineReader& source, data::InputLineReader& target,
                        const data::TextEncoder& encode_source, const data::TextEncoder& encode_target,
                        const ScoreSettings& settings, std::ostream& out);

// Rescores an n-best list (lsscore --n-best): each entry's translation is scored with the source line its number
// names, and the entry is written back with " <feature>= <score>" added to its feature field: one output line per
// entry. An entry that cannot be read (too few fields, no line number) is reported by a warning naming its line and
// written back with a score of nan (unchanged when it has no feature field), like a rejected pair. Entries must
// come in source order (as lstranslate writes them); an entry naming an earlier source line than the one before
// it, or a line past the source's end, throws lseq::Error naming the entry's file and line, since no entry after it
// could be matched with its source line. Source lines without entries are allowed (a filtered list), with a
// warning.
ScoreTotals rescore_nbest(StepModel& model, data::InputLineReader& source, data::InputLineReader& nbest,
                          const data::TextEncoder& encode_source, const data::TextEncoder& encode_target,
                          const ScoreSettings& settings, std::ostream& out);

// A language model's lines (lsscore with one file and a language model): each line is scored as the continuation of
// an empty prompt, bos w1 .. wn -> w1 .. wn eos, so its score is log p(w1 .. wn eos), eos included, summed as for a
// translation; the summary is the corpus' cross-entropy and perplexity per token. One output line per input line.
ScoreTotals score_lines(StepModel& model, data::InputLineReader& lines, const data::TextEncoder& encode,
                        const ScoreSettings& settings, std::ostream& out);

// "cross-entropy 2.3456 perplexity 10.4432 (1234 target tokens with eos, 100 sentences)": per-token cross-entropy
// in nats (-log_prob / target_tokens) and its exponential.
std::string format_summary(const ScoreTotals& totals);

}  // namespace lseq

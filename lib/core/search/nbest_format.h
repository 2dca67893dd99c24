#pragma once
// Output formats of lstranslate and lsscore, as Marian writes them.
//   n-best entry:   "<line> ||| <text> ||| F0= <log_prob> ||| <score>"
//   + word scores:  "<line> ||| <text> ||| WordScores= <w1> <w2> ... ||| F0= <log_prob> ||| <score>"
//   1-best + word scores: "<text> ||| WordScores= <w1> ..."
// <line> is the 0-based input line; F0 is the model's summed log-probability (eos included) and the last field the
// final score that ranks the list (length-normalised, word penalty applied). Scores print with 6 significant
// digits (C++ stream default, as Marian prints them); word scores (one per output token, then one for eos) with
// 5 decimals, each preceded by a space.
// Rescoring (lsscore --n-best) appends " <feature>= <score> " to the feature field (the one holding F0=) of each
// entry, keeping the rest of the line as it was (Marian appends to the third field; here the feature field is
// found by name so that a WordScores field before it stays intact).
#include <cstdint>
#include <string>
#include <vector>

#include "core/search/search_types.h"

namespace lseq {

std::string format_score(double score);                              // 6 significant digits
std::string format_word_scores(const std::vector<float>& scores);    // "WordScores= -0.12345 -1.00000"
std::string format_nbest_entry(int64_t line, const std::string& text, const Hypothesis& hypothesis,
                               bool word_scores);
std::string format_best(const std::string& text, const Hypothesis& hypothesis, bool word_scores);

// One entry of an n-best list as lsscore --n-best reads it.
struct NBestEntry {
  int64_t line = 0;  // the source line it translates (0-based)
  std::string text;  // the translation, spaces around it trimmed
};
// Reads `entry` into `parsed` and returns an empty string, or returns why it is not "<number> ||| <text> ||| ..."
// (fewer than three fields, or a first field that is not a number from 0 to 2^63-1).
std::string parse_nbest_entry(const std::string& entry, NBestEntry& parsed);
// The entry with " <feature>= <score>" added to its feature field; an entry with fewer than three fields has none
// (has_feature_field is false) and is returned as it is.
std::string add_nbest_feature(const std::string& entry, const std::string& feature, double score);
bool has_feature_field(const std::string& entry);

}  // namespace lseq

#pragma once
// "Did you mean ...?" for mistyped option names.
#include <string>
#include <vector>

namespace lseq {

// Levenshtein distance (insertions, deletions, substitutions each cost 1).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate closest to `name` when it is close enough to be a plausible typo (or contains `name` as a
// word-part, e.g. "heads" -> "transformer-heads"); empty when none is.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace lseq

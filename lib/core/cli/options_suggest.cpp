#include "core/cli/options_suggest.h"

#include <algorithm>
#include <numeric>

namespace lseq {

size_t edit_distance(const std::string& a, const std::string& b) {
  // One row of the dynamic-programming table at a time.
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates) {
  // A typo changes a few characters: allow about one edit per three characters, at least two.
  size_t limit = std::max<size_t>(2, name.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& candidate : candidates) {
    size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) best = candidate, best_distance = distance;
  }
  if (!best.empty() || name.size() < 3) return best;
  // A shortened name ("heads", "dropout-ffn"): the shortest option that contains it.
  for (const auto& candidate : candidates)
    if (candidate.find(name) != std::string::npos && (best.empty() || candidate.size() < best.size()))
      best = candidate;
  return best;
}

}  // namespace lseq

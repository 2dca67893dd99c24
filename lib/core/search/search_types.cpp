#include "core/search/search_types.h"

#include <algorithm>
#include <cmath>

namespace lseq {

double final_score(double log_prob, int tokens, double normalize, double word_penalty) {
  double penalised = log_prob - word_penalty * tokens;
  if (normalize == 0) return penalised;
  return penalised / std::pow(static_cast<double>(tokens + 1), normalize);
}

int max_output_tokens(int source_tokens, double max_length_factor) {
  double limit = std::floor(max_length_factor * std::max(source_tokens, 0));
  if (limit > 1e9) limit = 1e9;  // a silly factor must not overflow int
  return std::max(1, static_cast<int>(limit));
}

}  // namespace lseq

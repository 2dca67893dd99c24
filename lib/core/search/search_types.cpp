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

int output_limit(int source_tokens, double max_length_factor, int max_new_tokens, int max_context) {
  if (max_new_tokens <= 0) return max_output_tokens(source_tokens, max_length_factor);
  int limit = max_new_tokens;
  if (max_context > 0) limit = std::min(limit, max_context - std::max(source_tokens, 0));
  return std::max(1, limit);
}

}  // namespace lseq

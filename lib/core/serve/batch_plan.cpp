#include "core/serve/batch_plan.h"

#include <limits>

#include "util/error.h"

namespace lseq::serve {

double batch_cost(int longest, int sentences, double fixed_cost) {
  return static_cast<double>(longest) * (static_cast<double>(sentences) + fixed_cost);
}

std::vector<int> plan_batches(const std::vector<int>& sorted_lengths, const BatchLimits& limits) {
  const int count = static_cast<int>(sorted_lengths.size());
  for (int i = 1; i < count; ++i)
    if (sorted_lengths[i] < sorted_lengths[i - 1]) fail("internal: plan_batches needs lengths in ascending order");
  // best[i]: the least cost of batching the first i sentences; start[i]: where the last of those batches starts.
  std::vector<double> best(count + 1, std::numeric_limits<double>::infinity());
  std::vector<int> start(count + 1, 0);
  best[0] = 0;
  for (int end = 1; end <= count; ++end) {
    const int longest = sorted_lengths[end - 1];
    for (int begin = end - 1; begin >= 0; --begin) {
      const int sentences = end - begin;
      if (limits.max_sentences > 0 && sentences > limits.max_sentences) break;
      if (sentences > 1 && limits.max_tokens > 0 && static_cast<int64_t>(sentences) * longest > limits.max_tokens)
        break;
      // On equal cost the longer last batch wins (fewer batches).
      const double cost = best[begin] + batch_cost(longest, sentences, limits.fixed_cost);
      if (cost <= best[end]) {
        best[end] = cost;
        start[end] = begin;
      }
    }
  }
  std::vector<int> ends;
  for (int end = count; end > 0; end = start[end]) ends.push_back(end);
  return std::vector<int>(ends.rbegin(), ends.rend());
}

}  // namespace lseq::serve

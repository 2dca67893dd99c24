#include "core/search/forced_scoring.h"

#include "core/search/search_types.h"
#include "data/vocab.h"
#include "util/error.h"

namespace lseq {

std::vector<std::vector<float>> forced_word_log_probs(StepModel& model, const data::Batch& batch) {
  const int sentences = batch.size;
  std::vector<std::vector<float>> result(sentences);
  if (sentences == 0) return result;
  for (int s = 0; s < sentences; ++s)
    if (batch.tgt_lengths[s] < 1 || batch.tgt_lengths[s] > batch.tgt_len)
      fail("internal: target length {} of sentence {} is outside 1..{}", batch.tgt_lengths[s], s, batch.tgt_len);
  model.start(batch.src, batch.src_lengths, sentences, batch.src_len);
  const int vocab = model.vocab_size();

  std::vector<int32_t> live(sentences), next_live, parents;
  for (int s = 0; s < sentences; ++s) live[s] = s;
  std::vector<int32_t> tokens(sentences, data::kBosId), next_tokens, expected;
  std::vector<float> log_probs;
  for (int t = 0; !live.empty(); ++t) {
    expected.clear();
    for (const int s : live) {
      const int32_t id = batch.tgt_out[static_cast<size_t>(s) * batch.tgt_len + t];
      if (id < 0 || id >= vocab) fail("target id {} is outside the model's vocabulary of {} entries", id, vocab);
      expected.push_back(id);
    }
    model.step_scores(tokens, expected, log_probs);
    next_live.clear();
    next_tokens.clear();
    parents.clear();
    for (size_t h = 0; h < live.size(); ++h) {
      const int s = live[h];
      result[s].push_back(log_probs[h]);
      if (t + 1 < batch.tgt_lengths[s]) {
        next_live.push_back(s);
        next_tokens.push_back(expected[h]);
        parents.push_back(static_cast<int32_t>(h));
      }
    }
    if (next_live.empty()) break;
    if (!keeps_all(parents, static_cast<int>(live.size()))) model.select(parents, next_live);
    live.swap(next_live);
    tokens.swap(next_tokens);
  }
  return result;
}

double sum_log_probs(const std::vector<float>& word_log_probs) {
  double sum = 0;
  for (float lp : word_log_probs) sum += lp;
  return sum;
}

}  // namespace lseq

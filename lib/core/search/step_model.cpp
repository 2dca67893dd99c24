#include "core/search/step_model.h"

#include <limits>

#include "core/search/search_types.h"
#include "kernels/topk_order.h"
#include "util/error.h"

namespace lseq {

void StepModel::step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values,
                            std::vector<int32_t>& ids, std::vector<float>& eos_log_probs) {
  if (k < 1) fail("internal error: step_topk() needs k >= 1, got {}", k);
  step(tokens, topk_scratch_);
  const std::size_t rows = tokens.size(), vocab = static_cast<std::size_t>(vocab_size()), kk = k;
  values.assign(rows * kk, std::numeric_limits<float>::quiet_NaN());
  ids.assign(rows * kk, kernels::kNoTopKId);
  eos_log_probs.resize(rows);
  for (std::size_t h = 0; h < rows; ++h) {
    const float* row = topk_scratch_.data() + h * vocab;
    float* val = values.data() + h * kk;
    int32_t* id = ids.data() + h * kk;
    for (std::size_t v = kFirstWordId; v < vocab; ++v) kernels::topk_insert(val, id, k, row[v], static_cast<int32_t>(v));
    for (std::size_t i = 0; i < kk; ++i)
      if (id[i] == kernels::kNoTopKId) val[i] = -std::numeric_limits<float>::infinity(), id[i] = -1;
    eos_log_probs[h] = row[data::kEosId];
  }
}

void StepModel::admit(const std::vector<int32_t>&, const std::vector<int32_t>&, int, int) {
  fail("internal error: this model cannot admit sentences into a running search");
}

void StepModel::begin_draws(const std::vector<uint64_t>&, const std::vector<int32_t>&, int, double) {
  fail("internal error: this model cannot draw its steps' tokens itself");
}

void StepModel::queue_drawn_step(const std::vector<int32_t>*) {
  fail("internal error: this model cannot draw its steps' tokens itself");
}

void StepModel::take_draws(std::vector<int32_t>&, std::vector<float>&) {
  fail("internal error: this model cannot draw its steps' tokens itself");
}

void StepModel::step_scores(const std::vector<int32_t>& tokens, const std::vector<int32_t>& next,
                            std::vector<float>& log_probs) {
  if (next.size() != tokens.size())
    fail("internal error: step_scores() got {} next tokens for {} hypotheses", next.size(), tokens.size());
  step(tokens, topk_scratch_);
  const std::size_t vocab = static_cast<std::size_t>(vocab_size());
  log_probs.resize(next.size());
  for (std::size_t h = 0; h < next.size(); ++h) {
    if (next[h] < 0 || static_cast<std::size_t>(next[h]) >= vocab)
      fail("target id {} is outside the model's vocabulary of {} entries", next[h], vocab);
    log_probs[h] = topk_scratch_[h * vocab + static_cast<std::size_t>(next[h])];
  }
}

}  // namespace lseq

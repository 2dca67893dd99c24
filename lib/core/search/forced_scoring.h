#pragma once
// Teacher forcing over a StepModel: feeds each reference target token in turn and records the model's
// log-probability of the next reference token. lsscore scores through this, so the score it reports for a
// translation is by construction the log_prob beam search reported for it (same steps, same sum order).
#include <vector>

#include "core/search/step_model.h"
#include "data/batch.h"

namespace lseq {

// For each sentence of `batch`, the log-probability of each token of its tgt_out row (target ids then eos,
// tgt_lengths[i] values). src, src_lengths, size, src_len, tgt_out, tgt_len and tgt_lengths are used.
std::vector<std::vector<float>> forced_word_log_probs(StepModel& model, const data::Batch& batch);

// The sum of the values, in order, in double (how Hypothesis::log_prob is summed).
double sum_log_probs(const std::vector<float>& word_log_probs);

}  // namespace lseq

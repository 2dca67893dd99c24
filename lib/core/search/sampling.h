#pragma once
// Sampling instead of beam search (--output-sampling): one output per sentence, each token drawn from the model's
// distribution, optionally sharpened or flattened by a temperature and restricted to the k most probable tokens
// (top-k) or to the smallest set of most probable tokens whose probability reaches p (nucleus, top-p).
// Reproducible: sentence i draws from its own random stream seeded by (--seed, its input line number), so the
// output of a line does not depend on batching, sorting or the other lines.
#include <cstdint>
#include <string>
#include <vector>

#include "core/search/search_types.h"
#include "core/search/step_model.h"
#include "data/batch.h"
#include "kernels/topk_order.h"

namespace lseq {

struct SamplingOptions {
  enum class Mode { full, top_k, top_p };
  Mode mode = Mode::full;
  int top_k = 0;                 // top_k mode: keep this many tokens (>= 1)
  double top_p = 1;              // top_p mode: keep tokens until their probability reaches this (0 < p <= 1)
  double temperature = 1;        // log-probs are divided by this before sampling (> 0); applied before top-p
  uint64_t seed = 1234;          // --seed
  double normalize = 0.6;        // only for the reported score (final_score)
  double word_penalty = 0;       // only for the reported score
  double max_length_factor = 3;  // see max_output_tokens()
  int max_new_tokens = 0;        // a language model's continuations: see output_limit() (0: max_length_factor)
  int max_context = 0;
  // Top-k up to this k takes the model's step_topk (on the GPU only k log-probabilities a row come back, instead
  // of the whole distribution that full, top-p and larger k read on the host). The same draws either way; tests
  // set 0 to compare the two.
  int step_topk_limit = kernels::kMaxTopK;
  // Top-k through step_topk is drawn where the steps run when the model can (StepModel::can_draw), the next step
  // queued before this one's tokens are read. The same tokens either way (a queued step may still hold finished
  // rows, so a log-probability's last bits may differ); tests set false to compare the two.
  bool queue_steps = true;
  // Threads that rank whole rows on the host (0: one for vocabularies below 4096, else the machine's cores up to
  // 16). The draws do not depend on it.
  int host_threads = 0;
};

// Parses --output-sampling words. Accepted forms (Marian's, plus an explicit temperature keyword):
//   full [T]        sample from the whole distribution
//   topk K [T]      top-k with K >= 1
//   topp P [T]      top-p with 0 < P <= 1
// where an optional trailing number T is the temperature, and "temperature T" may also be given after the mode
// (or alone, meaning full). Throws lseq::Error naming --output-sampling for anything else. The mode, top_k, top_p
// and temperature of `base` are replaced; the other fields are kept.
SamplingOptions parse_output_sampling(const std::vector<std::string>& words, SamplingOptions base = {});

// Samples one hypothesis per sentence of `batch` (src, src_lengths, size, src_len, line_ids are used; when
// line_ids is empty, sentence i uses stream i). The token never comes from pad, bos or unk. `sink` (when set) is
// told each token as it is drawn, `done` (when set) each sentence's list at the step its eos is drawn.
std::vector<NBestList> sample(StepModel& model, const data::Batch& batch, const SamplingOptions& options,
                              const TokenSink& sink = {}, const SentenceSink& done = {});

}  // namespace lseq

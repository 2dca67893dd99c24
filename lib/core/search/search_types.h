#pragma once
// What every search strategy (beam search, greedy, sampling) returns, and the rules they share: which tokens may
// be produced, how long an output may get, and how a finished hypothesis is scored.
#include <cstdint>
#include <functional>
#include <vector>

#include "data/batch.h"
#include "data/vocab.h"

namespace lseq {

// One finished output sentence.
struct Hypothesis {
  std::vector<int32_t> tokens;        // the output ids, without eos
  std::vector<float> word_log_probs;  // the model's log-probability of each token, then of eos (tokens + 1 values)
  double log_prob = 0;                // sum of word_log_probs, summed in order in double (n-best "F0=")
  double score = 0;                   // final score: see final_score() (n-best last column; ranks the n-best list)
};

using NBestList = std::vector<Hypothesis>;  // best first

// Told each token as soon as it is final: (sentence of the batch, token), eos last. Sampling calls it for every
// token; beam search only at beam size 1 (greedy), since a wider beam's tokens are final only when it ends.
// lsserve streams a language model's continuations through it.
using TokenSink = std::function<void(int sentence, int32_t token)>;

// Told each sentence's n-best list as soon as the sentence is finished, while the rest of its batch goes on (a batch
// runs until its longest output ends): lsserve answers a request whose sentences are all done without waiting for
// the batch's other sentences. Each sentence exactly once, with the list the search then returns for it.
using SentenceSink = std::function<void(int sentence, const NBestList& list)>;

// Marian's length normalisation and word penalty: the penalty is subtracted once per output token (eos not
// counted), then the sum is divided by length^normalize where the length counts eos. normalize 0: plain sum.
double final_score(double log_prob, int tokens, double normalize, double word_penalty);

// The most tokens (eos not counted) an output for a source of `source_tokens` tokens (eos not counted) may have:
// floor(max_length_factor * source_tokens), but at least 1 so that a one-word output is always possible; once a
// hypothesis has that many tokens, eos is forced.
int max_output_tokens(int source_tokens, double max_length_factor);

// The length limit of an output when a language model continues its "source" (a prompt, DecoderOnlyStepModel):
// with max_new_tokens > 0 every output may have that many tokens (--max-length new tokens) whatever the prompt's
// length, but no more than max_context (when > 0: the model's positions) leaves after the prompt, and at least 1.
// With max_new_tokens 0 it is max_output_tokens(source_tokens, max_length_factor): translation's limit.
int output_limit(int source_tokens, double max_length_factor, int max_new_tokens, int max_context);

// Tokens search never produces: pad, bos and unk (Marian's default, --allow-unk off). Every other id, eos
// included, may be chosen.
inline bool is_blocked_output(int32_t id) { return id == 0 || id == 1 || id == 2; }

// The first id of an ordinary word: every id search may produce is eos or an id >= kFirstWordId (StepModel::
// step_topk's candidates). Holds because the blocked ids are exactly the ids below eos.
constexpr int32_t kFirstWordId = data::kEosId + 1;
static_assert(data::kPadId == 0 && data::kUnkId == 1 && data::kBosId == 2 && data::kEosId == 3,
              "is_blocked_output and kFirstWordId assume pad, unk, bos, eos = 0, 1, 2, 3");

// The source part of a batch that search needs: ids + eos padded to src_len, real lengths (eos included).
inline int source_tokens_without_eos(const data::Batch& batch, int sentence) {
  return batch.src_lengths[sentence] > 0 ? batch.src_lengths[sentence] - 1 : 0;
}

// True when `parents` keeps every live hypothesis where it is (0, 1, ..., live-1): then StepModel::select would
// change nothing and search skips it (greedy decoding never reorders caches until a sentence finishes).
inline bool keeps_all(const std::vector<int32_t>& parents, int live) {
  if (static_cast<int>(parents.size()) != live) return false;
  for (int j = 0; j < live; ++j)
    if (parents[j] != j) return false;
  return true;
}

}  // namespace lseq

#pragma once
// Batched beam search over a StepModel (Marian's scheme): every sentence of the batch advances one token per
// step; a sentence with f finished hypotheses keeps the best beam_size - f of its candidates (live hypothesis x
// next token, ranked by the penalised sum of log-probs, equal within a step up to length normalisation);
// candidates ending in eos become finished, the others stay live. A sentence is done when it has beam_size finished
// hypotheses (its live beam is then empty) and leaves the batch through StepModel::select; the search ends when
// no sentence is live. Finished hypotheses are then ranked by final_score() (length normalisation and word
// penalty). Once a hypothesis has output_limit() tokens, only eos may follow.
// StepModel::select is called only when the live hypotheses change (never while greedy search continues every
// sentence). beam_size 1 is exactly greedy search: the most probable allowed next token at every step.
// Each step reads only StepModel::step_topk with k = beam_size (each hypothesis' best beam_size words plus eos),
// which gives exactly the n-best lists of ranking the whole distribution: docs/decoding.md says why.
#include <cstdint>
#include <functional>
#include <vector>

#include "core/search/search_types.h"
#include "core/search/step_model.h"
#include "data/batch.h"

namespace lseq {

struct BeamSearchOptions {
  int beam_size = 4;             // --beam-size
  double normalize = 0.6;        // --normalize: final score divided by length^normalize (length counts eos)
  double word_penalty = 0;       // --word-penalty: subtracted per output token
  double max_length_factor = 3;  // --max-length-factor: see max_output_tokens()
  // A language model's continuations instead (output_limit(), search_types.h): at most this many new tokens
  // (--max-length) within max_context tokens of prompt and output; 0: translation's limit above.
  int max_new_tokens = 0;
  int max_context = 0;
};

// Decodes the sentences of `batch` (src, src_lengths, size, src_len are used). Returns one n-best list per
// sentence, best first, with at most beam_size hypotheses (fewer only if the model allows fewer outputs). At beam
// size 1 `sink` (when set) is told each token as it is chosen; `done` (when set) each sentence's list at the step
// the sentence finishes.
std::vector<NBestList> beam_search(StepModel& model, const data::Batch& batch, const BeamSearchOptions& options,
                                   const TokenSink& sink = {}, const SentenceSink& done = {});

// ---- continuous batching ----
// Where a continuous search takes its sentences from: fills `chunk` (a source batch with line_ids) with up to
// max_sentences of the next sentences that fits(source tokens without eos) accepts; fits is empty when a new search
// starts (every sentence fits then). Returns false when no sentence was waiting (chunk empty); true otherwise,
// chunk empty only when fits refused every waiting one. Called from the searching thread only.
using SentenceFeed =
    std::function<bool(int max_sentences, const std::function<bool(int source_tokens)>& fits, data::Batch& chunk)>;
// Told each sentence's n-best list by its line id, once, when it finishes.
using LineSink = std::function<void(int64_t line_id, const NBestList& list)>;
// Told each token of a sentence, by its line id, as soon as it is final (beam size 1 only, as TokenSink).
using LineTokenSink = std::function<void(int64_t line_id, int32_t token)>;

// Beam search with continuous batching over a model that can admit sentences (StepModel::can_admit): starts with
// up to max_sentences() of the feed's sentences and, whenever admission_batch() places are free, admits more of
// them while the others run, so that the batch stays full instead of running on with the few sentences whose outputs
// are longest (a batch of 128 short sentences ran about three times as many steps as its average output has
// tokens). A place is free when a sentence place is (max_live_sentences()) and a full beam fits in the model's
// hypotheses (max_hypotheses()) beside what the live sentences may still need: each at most beam_size less its
// finished hypotheses. So where the model has more sentence places than one batch, beams that narrowed make room
// for more sentences. A sentence is admitted only while the caches have room for its longest output
// (StepModel::steps_left); when none fits, the search runs out and a new one starts. Returns when no search is
// running and the feed has nothing. Every sentence gets the n-best list beam_search gives it: rows never read each
// other's state, so a list does not depend on the sentences beside it (up to rounding: a GEMM's last bits may
// depend on its row count).
void beam_search_continuous(StepModel& model, const SentenceFeed& feed, const BeamSearchOptions& options,
                            const LineSink& done, const LineTokenSink& tokens = {});
// Free sentence places that make an admission worth its encoder run: an eighth of the batch, at least one.
int admission_batch(int max_sentences);

}  // namespace lseq

#pragma once
// What search (beam, greedy, sampling) needs from a model: encode a batch of source sentences once, then score
// one next token for every live hypothesis at a time, with the model's caches (encoder output, cross-attention
// keys/values, self-attention keys/values) kept inside. The EncoderDecoderModel implements it; tests implement it with
// small hand-made models whose best hypothesis can be found by exhaustive search.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lseq {

class StepModel {
 public:
  virtual ~StepModel() = default;

  virtual int vocab_size() const = 0;

  // Encodes `sentences` source sentences (ids + eos, padded with 0 to src_len, row-major) and resets the
  // hypotheses: afterwards there is one live hypothesis per sentence (hypothesis i belongs to sentence i), with
  // only bos decoded.
  virtual void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
                     int src_len) = 0;

  // Rearranges the live hypotheses: afterwards hypothesis j continues old hypothesis parents[j] (its cached
  // state is copied or re-indexed), and hypotheses not named are dropped (finished sentences leave the batch).
  // Each new hypothesis j belongs to sentence sentence_of[j] (an index into the sentences given to start).
  virtual void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) = 0;

  // Feeds one token to each live hypothesis (tokens.size() == live hypotheses; at the first step after start,
  // callers pass bos) and writes log-probabilities of the next token: log_probs[h * vocab_size() + v].
  virtual void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) = 0;

  // Beam search's step: like step(), but returns per live hypothesis h only the k most probable next tokens
  // among the words search may produce (ids > data::kEosId, see kFirstWordId in core/search_types.h), best first,
  // as values[h * k + i] (log-probability) and ids[h * k + i]; equal values in increasing id order, NaN last
  // (kernels/topk_order.h); where fewer than k such ids exist the rest have value -inf and id -1. eos, which search
  // ranks without the word penalty, comes separately: eos_log_probs[h]. The default runs step() and selects on the
  // host; the EncoderDecoderModel selects on the device and copies back only these values. k >= 1.
  virtual void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values,
                         std::vector<int32_t>& ids, std::vector<float>& eos_log_probs);

  // Teacher forcing's step (lsscore): like step(), but returns per live hypothesis h only the log-probability of
  // the given next token, log_probs[h] = log p(next[h]). The default runs step() and picks on the host; the
  // EncoderDecoderModel picks on the device and copies back only these values (the same numbers step() gives).
  virtual void step_scores(const std::vector<int32_t>& tokens, const std::vector<int32_t>& next,
                           std::vector<float>& log_probs);

  virtual int live() const = 0;  // live hypotheses

  // Recorded steps (CUDA graphs) held now and made so far: what the decoder keeps to replay (lsserve's /metrics
  // shows them beside its resident memory). Safe to read from another thread while this one decodes; zero where
  // nothing is recorded.
  struct RecordedSteps {
    std::size_t held = 0, made = 0;
  };
  virtual RecordedSteps recorded_steps() const { return {}; }
  // How the steps and encodings ran (lstranslate --log-level debug): replayed recordings, recordings made and the
  // host seconds they took, runs op by op and the host seconds spent issuing them; and the decoding steps, with the
  // live hypotheses and the rows computed (live ones padded to a bucket) summed over them, so that live_rows / steps
  // says how full the steps ran. Read only once this decoder's thread has stopped decoding.
  struct RunCounts {
    std::size_t replays = 0, recordings = 0, op_by_op = 0;
    double recording_seconds = 0, op_by_op_seconds = 0;
    std::size_t steps = 0, live_rows = 0, computed_rows = 0;
  };
  virtual RunCounts run_counts() const { return {}; }

  // ---- continuous batching (beam_search_continuous) ----
  // Whether admit() works; models that cannot admit decode one batch per start().
  virtual bool can_admit() const { return false; }
  // Adds `sentences` new sentences (as in start) to the running search: they get the next sentence numbers and one
  // live hypothesis each, appended after the live ones, with only bos decoded (their first step is the next step).
  // At most max_live_sentences() sentences may be live after it; each must finish within steps_left() steps.
  virtual void admit(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
                     int src_len);
  // Sentences one start() or one admit() may bring (one encoding's batch).
  virtual int max_sentences() const { return 0; }
  // Sentences that may be live at once, admitted ones beside the others: at least max_sentences(). More than it lets
  // a search fill the rows of beams that narrowed as their hypotheses finished (beam_search_continuous).
  virtual int max_live_sentences() const { return max_sentences(); }
  // Live hypotheses a step may hold; 0: no limit beyond max_live_sentences() full beams.
  virtual int max_hypotheses() const { return 0; }
  // Steps the caches have room for from the current one on: a sentence admitted now whose outputs may have n
  // tokens needs n + 1 (bos included). (Also what the decoders' warm-up asks; 0: unknown.)
  virtual int steps_left() const { return 0; }

  // ---- top-k sampling drawn where the steps run (sample()'s queued loop) ----
  // Whether the three calls below work. Then each step's tokens are drawn by Backend::draw_topk on the step's own
  // backend and fed from there to the next step, so the search queues step t + 1 before it reads step t's tokens:
  // a GPU does not wait for the host between steps, and the tokens reach the host a step behind.
  virtual bool can_draw() const { return false; }
  // After start(): per live hypothesis its line's random stream (a SplitMix64 state) and how many tokens it may
  // still draw before eos is forced (Backend::draw_topk's remaining); every draw until the next start() keeps the k
  // best and divides log-probabilities by `temperature`.
  virtual void begin_draws(const std::vector<uint64_t>& streams, const std::vector<int32_t>& remaining, int k,
                           double temperature);
  // Queues one step over the live hypotheses and its draw, and returns without waiting for them: fed `tokens` (the
  // first step after start()) or, when null, the tokens the previous queued step drew. select() between two queued
  // steps takes the drawn tokens and streams along with the hypotheses.
  virtual void queue_drawn_step(const std::vector<int32_t>* tokens);
  // Waits for the oldest queued step whose draws were not taken yet; per hypothesis live when it was queued, the
  // token drawn and its log-probability.
  virtual void take_draws(std::vector<int32_t>& tokens, std::vector<float>& log_probs);

 private:
  std::vector<float> topk_scratch_;  // the default step_topk's and step_scores' full distribution
};

}  // namespace lseq

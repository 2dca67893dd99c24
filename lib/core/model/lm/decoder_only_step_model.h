#pragma once
// Incremental decoding for the decoder-only language model: the StepModel that search (beam, greedy, sampling) and
// forced scoring run over, where each "source" sentence is a prompt (its ids + eos, the eos ignored) and the
// hypotheses are its continuations (docs/decoding.md, "Language models").
//
// The sequence of a prompt w1..wk is bos w1 .. wk: start() runs bos w1 .. w(k-1) through the stack in one prefill
// that computes only their keys and values, the prompts of the batch packed one after the other (no padding rows:
// each token's attention reads its own prompt's keys, Backend::attention_step with per-token lengths), and the first
// step() feeds each prompt's last token wk (bos for an empty prompt) in place of the bos search passes. From there
// on steps are the encoder-decoder's: one token per live hypothesis, keys and values appended to per-row caches,
// select() re-indexing them through the position-origin table, finished hypotheses leaving the batch.
//
// Cache layout: as the encoder-decoder's self-attention caches, [max_hyps*heads][2][C][hd] per layer with C =
// max_prompt + max_steps columns, but right-aligned: prompt s of length k_s fills columns P - k_s .. P - 1 with P
// the batch's longest, so that every row appends at the same column P + t at step t (the ops of a step do not depend
// on t or on the prompts) and reads columns key_start .. P + t with key_start = P - k_s (Backend::attention_step's
// key_starts). Its position embedding is k_s + t, gathered per row. Memory: the prompt columns are held for every
// row, not only each prompt's first (a larger cache for a simpler layout).
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "core/model/lm/decoder_only_model.h"
#include "core/model/step_memory.h"
#include "core/model/step_sharing.h"
#include "core/search/step_model.h"
#include "kernels/workspace.h"

namespace lseq {

class DecoderOnlyStepModel : public StepModel {
 public:
  // Limits: at most max_hypotheses live hypotheses (prompts x beam size), prompts of at most max_prompt tokens as
  // start() gets them (eos included), at most max_steps steps after each start (the first, which feeds the prompt's
  // last token, included: a search that allows n new tokens before eos needs n + 1), at most max_sentences prompts
  // per start (0: max_hypotheses). Each sequence's positions (its prompt's tokens and steps) must stay within the
  // model's max_positions() (search's max_context sees to it; a step past them throws). All device memory is
  // planned here; going past a limit throws lseq::Error. The model must outlive this. runs_on: the backend its ops
  // run on (as EncoderDecoderStepModel's); by default the model's.
  DecoderOnlyStepModel(const DecoderOnlyModel& model, int max_hypotheses, int max_prompt, int max_steps,
                       int max_sentences = 0, kernels::Backend* runs_on = nullptr);
  ~DecoderOnlyStepModel() override;
  DecoderOnlyStepModel(const DecoderOnlyStepModel&) = delete;
  DecoderOnlyStepModel& operator=(const DecoderOnlyStepModel&) = delete;

  int vocab_size() const override { return vocab_; }
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override;
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override;
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override;
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override;
  int live() const override { return live_; }
  // Top-k sampling's draws on the decoder's backend, the next step fed from them (StepModel::can_draw).
  bool can_draw() const override;
  void begin_draws(const std::vector<uint64_t>& streams, const std::vector<int32_t>& remaining, int k,
                   double temperature) override;
  void queue_drawn_step(const std::vector<int32_t>* tokens) override;
  void take_draws(std::vector<int32_t>& tokens, std::vector<float>& log_probs) override;
  // Steps left before the planned limit (or the cache's last column after this search's prompts).
  int steps_left() const override {
    return started_ ? std::min(max_steps_ - t_, columns_ - prompt_columns_ - t_) : max_steps_;
  }

  int steps() const { return t_; }
  // Recorded steps (on by default where the backend can record); off runs every step op by op.
  void use_graphs(bool on) { recorder_.use(on); }
  void limit_recorded_steps(std::size_t max_graphs) { recorder_.limit(max_graphs); }  // --max-recorded-steps
  std::size_t recorded_graphs() const { return recorder_.graphs(); }
  RecordedSteps recorded_steps() const override { return {recorder_.graphs(), recorder_.recordings()}; }
  RunCounts run_counts() const override { return recorder_.run_counts(); }
  // Prompt tokens run per prefill pass (a long prefill runs in pieces of this many tokens; tests lower it).
  void set_prefill_chunk(int rows);
  std::size_t state_bytes() const { return state_->capacity(); }
  std::size_t scratch_bytes() const { return scratch_->capacity(); }

  static constexpr int kPrefillChunk = 2048;

 private:
  template <typename Take>
  void lay_out_state(Take&& take);
  // The keys and values of `rows` packed prompt tokens from `first` on (their inputs uploaded by start()).
  void prefill(kernels::Backend& backend, StepMemory& memory, int first, int rows);
  // One step of `rows` rows: the logits [rows][ld] in the step's scratch.
  OutputLayer::StepLogits forward_step(kernels::Backend& backend, StepMemory& memory, int rows);
  void begin_step(const std::vector<int32_t>& tokens);
  using FinishStep = std::function<void(const OutputLayer::StepLogits& logits)>;
  void run_step_ops(int k, const FinishStep& finish);
  // The step's ops and its top-k (topk_log_softmax) into dev_topk_: values | ids | eos of the computed rows.
  struct StepTopK {
    float* values;
    int32_t* ids;
    float* eos;
    std::size_t computed;  // rows x k
  };
  StepTopK run_step_topk(int k);

  const DecoderOnlyModel& model_;
  kernels::Backend& backend_;
  kernels::DType dt_;
  int max_hyps_ = 0, max_prompt_ = 0, max_steps_ = 0, max_sent_ = 0, columns_ = 0;
  int heads_ = 0, vocab_ = 0, prefill_chunk_ = kPrefillChunk;

  std::unique_ptr<kernels::Workspace> state_;    // caches, tables, inputs, log-probs
  std::unique_ptr<kernels::Workspace> scratch_;  // activations of one prefill piece or step
  std::vector<void*> caches_;                    // per layer: [max_hyps*heads][2][columns][hd]
  OriginTables origins_;                         // [max_hyps][columns]
  // Prefill inputs for up to max_sent * (max_prompt - 1) tokens, one upload per start: tokens | position ids |
  // lengths (column + 1) | key starts | kv_index [heads per token] | append_dst [2*heads per token, laid out per
  // piece of prefill_chunk_ tokens: keys then values].
  int32_t* dev_prompt_ = nullptr;
  // The step's inputs at fixed addresses, one upload per step: [max_hyps] tokens | [max_hyps] position ids |
  // [max_hyps] lengths | [max_hyps] key starts | [2*max_hyps*heads] cache rows to append to.
  int32_t* dev_step_ = nullptr;
  int32_t* dev_parents_ = nullptr;  // [max_hyps] select's parents
  float* dev_log_probs_ = nullptr;  // [max_hyps, vocab]
  float* dev_topk_ = nullptr;       // values | ids | eos [max_hyps*(2*32+1)]
  // The draws' per-row state, two of each so that select() gathers one into the other: the line's stream, the
  // tokens it may still draw, and the last draw's tokens [max_hyps] then their log-probabilities (at [live]).
  uint64_t* dev_streams_[2] = {};
  int32_t* dev_remaining_[2] = {};
  int32_t* dev_drawn_[2] = {};
  int draws_ = 0;  // which of the two holds the current state
  int draw_k_ = 0;
  double draw_temperature_ = 1;
  struct QueuedDraws {
    int slot, rows;  // Backend::download_async's slot; the rows drawn
  };
  std::deque<QueuedDraws> queued_draws_;
  std::vector<int32_t> unused_tokens_;  // begin_step's tokens for a step fed from the draws
  std::vector<int32_t> draws_staging_;
  std::vector<int32_t> staging_, step_staging_;
  std::vector<float> topk_staging_;
  StepRecorder recorder_;

  bool started_ = false;
  int sentences_ = 0, live_ = 0, t_ = 0, prompt_columns_ = 0;  // prompt_columns_: P, the longest prefill
  int prefill_total_ = 0;                                        // prompt tokens of this start's prefill
  std::vector<int32_t> prompt_tokens_, first_tokens_, sentence_of_;  // prompt_tokens_: k_s per sentence
};

// A DecoderOnlyStepModel with these limits (tests and benchmarks; the programs load theirs with load_step_model).
std::unique_ptr<StepModel> make_decoder_only_step_model(const DecoderOnlyModel& model, int max_hypotheses,
                                                        int max_prompt, int max_steps, int max_sentences = 0);

}  // namespace lseq

#pragma once
// Incremental decoding for the encoder-decoder Transformer: the StepModel that search (beam, greedy, sampling)
// runs over. start() encodes the sources and projects every decoder layer's cross-attention keys/values once per
// sentence; step() feeds one token per live hypothesis through the decoder with q_len 1, appending its
// self-attention keys/values to per-row caches; select() re-indexes them through a position-origin table and moves
// no keys or values (docs/decoding.md). All device memory is planned and allocated at construction from the limits;
// start/select/step allocate nothing. Cache layout: docs/decoding.md.
//
// A step's ops get its position and tokens only through device memory at fixed addresses, so on a backend that can
// record (CUDA graphs) the ops of a step shape (live hypotheses bucketed, and k) are recorded once and replayed at
// every later step of that shape, in any batch: the host then issues one graph launch per step instead of ~60 ops.
//
// Continuous batching (admit): sentences join a running search into free sentence slots of the cross-attention
// memory; their hypotheses write their keys and values from the current cache position on and attend from there
// (DecoderStep::key_starts), so nothing already cached moves and every (row, position) of a self-attention cache is
// still written once per search.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "core/model/decoder.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/step_memory.h"
#include "core/model/step_sharing.h"
#include "core/search/step_model.h"
#include "kernels/workspace.h"

namespace lseq {

class EncoderDecoderStepModel : public StepModel {
 public:
  // Limits: at most max_hypotheses live hypotheses (sentences x beam size), source batches of at most
  // max_src_len tokens per sentence (eos included), at most max_tgt_len steps after each start (bos included: a
  // search that allows n output tokens before eos needs n + 1), at most max_sentences sentences per start or
  // admission (0: max_hypotheses), and at most max_live_sentences live at once (0: max_sentences; each takes a
  // sentence place of the cross-attention memory). Reads the model's parameters through its ParamStore views; the model
  // must outlive the decoder. Computes in the model's compute dtype (EncoderDecoderModel::compute_dtype). Going past a
  // limit throws lseq::Error. runs_on: the backend its ops run on (its own stream beside other decoders that share the
  // model's weights, on the same device); by default the model's.
  EncoderDecoderStepModel(const EncoderDecoderModel& model, int max_hypotheses, int max_src_len, int max_tgt_len,
                          int max_sentences = 0, kernels::Backend* runs_on = nullptr, int max_live_sentences = 0);
  ~EncoderDecoderStepModel() override;
  EncoderDecoderStepModel(const EncoderDecoderStepModel&) = delete;
  EncoderDecoderStepModel& operator=(const EncoderDecoderStepModel&) = delete;

  int vocab_size() const override { return vocab_; }
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override;
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override;
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override;
  // The top-k on the device (Backend::topk_log_softmax): only live x (2k + 1) values return to the host. k above
  // kernels::kMaxTopK falls back to step() and the host.
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override;
  // The given next tokens' log-probabilities gathered on the device: only live values return to the host.
  void step_scores(const std::vector<int32_t>& tokens, const std::vector<int32_t>& next,
                   std::vector<float>& log_probs) override;
  int live() const override { return live_; }
  bool can_admit() const override { return true; }
  void admit(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override;
  int max_sentences() const override { return max_sent_; }
  int max_live_sentences() const override { return max_live_; }
  int max_hypotheses() const override { return max_hyps_; }
  int steps_left() const override { return started_ ? max_tgt_ - t_ : max_tgt_; }

  int steps() const { return t_; }  // tokens fed since start (the position of the next one)
  // Recorded steps (on by default; a backend that cannot record runs every step's ops as they are issued). Off
  // runs every step op by op: what tests compare against.
  void use_graphs(bool on) { recorder_.use(on); }
  void limit_recorded_steps(std::size_t max_graphs) { recorder_.limit(max_graphs); }  // --max-recorded-steps
  std::size_t recorded_graphs() const { return recorder_.graphs(); }
  RecordedSteps recorded_steps() const override { return {recorder_.graphs(), recorder_.recordings()}; }
  RunCounts run_counts() const override { return recorder_.run_counts(); }
  const StepRecorder& recorder() const { return recorder_; }
  // Device bytes planned at construction: caches and other state, and the scratch of start/step.
  std::size_t state_bytes() const { return state_->capacity(); }
  std::size_t scratch_bytes() const { return scratch_->capacity(); }

 private:
  // Lays out the persistent state through take(bytes) (a counting pass returns nullptr, then the real one).
  template <typename Take>
  void lay_out_state(Take&& take);
  // The encoder and the cross-attention projections of `sentences` x `src_len` sources already on the device, into
  // slots 0.. (start) or, with to_slots, where the uploaded slot slices say (admit).
  void encode_sources(kernels::Backend& backend, StepMemory& memory, int sentences, int src_len,
                      bool to_slots = false);
  // Checks a start's or an admission's sources against the limits.
  void check_sources(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
                     int src_len) const;
  // One step of `rows` hypotheses at the position in the step inputs: returns the logits [rows][ld] (in the
  // step's scratch).
  OutputLayer::StepLogits forward_step(kernels::Backend& backend, StepMemory& memory, int rows);
  // Checks the tokens and uploads the step's inputs (tokens, self-attention lengths, key starts, positions, cache
  // rows to append to) in one copy: what step and step_topk share.
  void begin_step(const std::vector<int32_t>& tokens);
  // The ops of a step of shape (live bucketed, k): forward_step, then finish(logits), through the
  // recorder; recorded when the same shape ran at the previous step too (shapes that repeat are worth recording).
  using FinishStep = std::function<void(const OutputLayer::StepLogits& logits)>;
  void run_step_ops(int k, const FinishStep& finish);
  // Uploads the per-hypothesis indices of sentence_of (and, with parents, the origin table's gather index).
  void upload_rows(const std::vector<int32_t>* parents, const std::vector<int32_t>& sentence_of);
  // Sentences numbered from `first` begin at the current position in their slots (marked in use).
  void place_sentences(int first, const std::vector<int32_t>& src_lengths, const std::vector<int32_t>& slots);

  const EncoderDecoderModel& model_;
  kernels::Backend& backend_;
  kernels::DType dt_;  // the model's compute dtype: activations, caches, positions (log-probs are fp32)
  int max_hyps_ = 0, max_src_ = 0, max_tgt_ = 0, max_sent_ = 0, max_live_ = 0;  // max_sent_: one encoding's
  int dim_ = 0, heads_ = 0, head_dim_ = 0, vocab_ = 0, src_vocab_ = 0;

  std::unique_ptr<kernels::Workspace> state_;    // positions, caches, indices, log-probs (lives with the decoder)
  std::unique_ptr<kernels::Workspace> scratch_;  // activations of one start or step (reset by each)
  void* positions_ = nullptr;                    // sinusoidal [max(max_src, max_tgt), dim]
  std::vector<DecoderLayerCache> caches_;        // per decoder layer
  OriginTables origins_;                         // [max_hyps][max_tgt] DecoderStep::origin, shared by all layers
  // Source ids [sentences*src_len], then lengths [sentences], then (admit) the slot slices [2*sentences*heads]
  int32_t* dev_src_ = nullptr;
  // The step's inputs, one upload per step at fixed addresses: [max_hyps] tokens | [max_hyps] self-attention
  // lengths t + 1 | [max_hyps] key starts | [max_hyps] positions | [2*max_hyps*heads] cache rows to append to
  // (DecoderStep).
  int32_t* dev_step_ = nullptr;
  int32_t* dev_tokens_ = nullptr;
  int32_t* dev_self_lengths_ = nullptr;
  int32_t* dev_key_starts_ = nullptr;
  int32_t* dev_positions_ = nullptr;
  int32_t* dev_append_dst_ = nullptr;
  int32_t* dev_rows_ = nullptr;                  // per-hypothesis indices, see upload_rows
  const int32_t* dev_parents_ = nullptr;         // [live] select's parents: the origin table's gather index
  const int32_t* dev_cross_slices_ = nullptr;    // [live*heads] sentence slices of the cross-attention memory
  const int32_t* dev_row_src_lengths_ = nullptr; // [live] source length of each hypothesis' sentence
  float* dev_log_probs_ = nullptr;               // [max_hyps, vocab]
  float* dev_topk_ = nullptr;                    // step_topk's results, packed: values | ids | eos [max_hyps*(2*32+1)]
  std::vector<float> topk_staging_;              // their host copy (reserved at construction)
  std::vector<int32_t> staging_;                 // host side of the uploads (reserved at construction)
  std::vector<int32_t> step_staging_;            // host side of the step inputs (sized at construction)

  // Recorded steps by shape: (rows, 0, 0, k) for a step (k = 0: step's log-softmax), (0, sentences, src_len, -1)
  // for start()'s encoding (both bucketed), recorded when its shape comes again.
  using StepShape = StepRecorder::Shape;
  StepRecorder recorder_;

  bool started_ = false;
  int live_ = 0, t_ = 0;
  std::vector<int32_t> sentence_of_;  // per live hypothesis: its sentence's number
  // Per sentence number of this search: source length, memory slot, the position its bos was written at.
  std::vector<int32_t> src_lengths_, slot_of_, start_of_;
  std::vector<char> slot_used_;  // [max_live]
  std::vector<int32_t> slots_;   // admit's slots (reserved)
};

// An EncoderDecoderStepModel with these limits (tests and benchmarks; the programs load theirs with
// load_step_model, core/cli/model_loader.h).
std::unique_ptr<StepModel> make_encoder_decoder_step_model(const EncoderDecoderModel& model, int max_hypotheses,
                                                           int max_src_len, int max_tgt_len, int max_sentences = 0,
                                                           int max_live_sentences = 0);

}  // namespace lseq

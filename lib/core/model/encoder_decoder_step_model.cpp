#include "core/model/encoder_decoder_step_model.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "core/model/layers/embedding_layer.h"
#include "core/model/layers/layer_context.h"
#include "core/model/step_inputs.h"
#include "core/search/search_types.h"
#include "data/vocab.h"
#include "kernels/planning/planning_backend.h"
#include "util/error.h"

namespace lseq {

EncoderDecoderStepModel::EncoderDecoderStepModel(const EncoderDecoderModel& model, int max_hypotheses, int max_src_len,
                                                 int max_tgt_len, int max_sentences, kernels::Backend* runs_on,
                                                 int max_live_sentences)
    : model_(model), backend_(runs_on ? *runs_on : model.backend()), dt_(model.compute_dtype()), recorder_(backend_) {
  const int batch = max_sentences > 0 ? max_sentences : max_hypotheses;
  const int live = max_live_sentences > 0 ? max_live_sentences : batch;
  if (max_hypotheses < 1 || max_src_len < 1 || max_tgt_len < 1 || max_sentences < 0 || max_live_sentences < 0 ||
      batch > live || live > max_hypotheses) {
    fail(
        "cannot plan decoding for {} hypotheses, {} sentences a batch, {} live, sources of {} and targets of {} "
        "tokens; every limit must be positive and sentences a batch at most those live, at most hypotheses (check "
        "--mini-batch, --beam-size and --max-length)",
        max_hypotheses, max_sentences, max_live_sentences, max_src_len, max_tgt_len);
  }
  const ModelConfig& config = model.config();
  max_hyps_ = max_hypotheses, max_src_ = max_src_len, max_tgt_ = max_tgt_len;
  max_sent_ = batch, max_live_ = live;
  dim_ = config.dim_emb, heads_ = config.heads, head_dim_ = config.head_dim();
  vocab_ = config.tgt_vocab, src_vocab_ = config.src_vocab;

  // Persistent state: count the bytes, allocate one block, lay it out again for real.
  caches_.resize(model.decoder().depth());
  std::size_t state_bytes = 0;
  lay_out_state([&](std::size_t bytes) -> void* {
    state_bytes += StepMemory::align(bytes);
    return nullptr;
  });
  state_ = std::make_unique<kernels::Workspace>(backend_, state_bytes,
                                                "internal error: the decoder's state outgrew its plan");
  lay_out_state([&](std::size_t bytes) { return state_->take(bytes); });
  upload_as(backend_, sinusoidal_positions(std::max(max_src_, max_tgt_), dim_, config.positions), dt_, positions_);
  origins_.upload_identity(backend_);

  // Scratch: run start and step at their largest shapes over the planning backend, counting what they take.
  auto planning = kernels::make_planning_backend();
  StepMemory start_plan(nullptr), admit_plan(nullptr), step_plan(nullptr);
  encode_sources(*planning, start_plan, max_sent_, max_src_);
  encode_sources(*planning, admit_plan, max_sent_, max_src_, true);
  forward_step(*planning, step_plan, max_hyps_);
  scratch_ = std::make_unique<kernels::Workspace>(
      backend_, std::max({start_plan.needed(), admit_plan.needed(), step_plan.needed()}),
      "internal error: a decoding step outgrew its plan");

  staging_.reserve(
      std::max({elems(max_sent_, max_src_) + elems(max_sent_, 2 * heads_ + 1), elems(max_hyps_, heads_ + 2)}));
  step_staging_.assign(step_input_count(max_hyps_, heads_, max_hyps_), 0);
  topk_staging_.reserve(elems(max_hyps_, 2 * kernels::kMaxTopK + 1));
  sentence_of_.reserve(max_hyps_);
  slot_used_.assign(max_live_, 0);
  slots_.reserve(max_sent_);
}

EncoderDecoderStepModel::~EncoderDecoderStepModel() = default;

template <typename Take>
void EncoderDecoderStepModel::lay_out_state(Take&& take) {
  const std::size_t f = kernels::dtype_size(dt_), i32 = sizeof(int32_t);
  positions_ = take(elems(std::max(max_src_, max_tgt_), dim_) * f);
  // Self-attention caches: K and V of every layer in one buffer each, never moved; the origin tables (one shared
  // by all layers, one spare that select() gathers into: gathering in place would overwrite entries still to be
  // read, and the identity that start() restores).
  for (DecoderLayerCache& cache : caches_) {
    cache.self_kv = take(2 * elems(max_hyps_, heads_, max_tgt_, head_dim_) * f);
    cache.cross_kv = take(2 * elems(max_live_, max_src_, dim_) * f);
  }
  origins_.lay_out(take, max_hyps_, max_tgt_);
  dev_src_ = static_cast<int32_t*>(take((elems(max_sent_, max_src_) + elems(max_sent_, 2 * heads_ + 1)) * i32));
  dev_step_ = static_cast<int32_t*>(take(step_input_count(max_hyps_, heads_, max_hyps_) * i32));
  if (dev_step_) {
    dev_tokens_ = dev_step_;
    dev_self_lengths_ = dev_tokens_ + max_hyps_;
    dev_key_starts_ = dev_self_lengths_ + max_hyps_;
    dev_positions_ = dev_key_starts_ + max_hyps_;
    dev_append_dst_ = dev_positions_ + max_hyps_;
  }
  dev_rows_ = static_cast<int32_t*>(take(elems(max_hyps_, heads_ + 2) * i32));
  dev_log_probs_ = static_cast<float*>(take(elems(max_hyps_, vocab_) * sizeof(float)));
  dev_topk_ = static_cast<float*>(take(elems(max_hyps_, 2 * kernels::kMaxTopK + 1) * sizeof(float)));
}

void EncoderDecoderStepModel::encode_sources(kernels::Backend& backend, StepMemory& memory, int sentences,
                                            int src_len, bool to_slots) {
  const LayerContext ctx{backend, memory, model_.param_store(), dt_, false, 0, 0};
  // The encoder output lives in the scratch only until the cross-attention keys/values are projected from it.
  void* encoded = ctx.keep(elems(sentences, src_len, dim_));
  const int32_t* lengths = dev_src_ + elems(sentences, src_len);
  model_.encoder().encode(ctx, dev_src_, lengths, sentences, src_len, positions_, encoded);
  if (to_slots) {
    model_.decoder().project_memory_to_slots(ctx, encoded, sentences, src_len, lengths + sentences, max_src_,
                                             caches_);
    return;
  }
  // Slices max_src_ rows apart, values max_live_ sentences after the keys, whatever this batch's size: the steps
  // then have one shape for every batch.
  model_.decoder().project_memory(ctx, encoded, sentences, src_len, max_live_, max_src_, caches_);
}

OutputLayer::StepLogits EncoderDecoderStepModel::forward_step(kernels::Backend& backend, StepMemory& memory, int rows) {
  const LayerContext ctx{backend, memory, model_.param_store(), dt_, false, 0, 0};
  DecoderStep st;
  st.rows = rows, st.max_len = max_tgt_;
  st.memory_sentences = max_live_, st.src_len = max_src_;
  st.cross_slices = dev_cross_slices_;
  st.src_lengths = dev_row_src_lengths_;
  st.self_lengths = dev_self_lengths_;
  st.key_starts = dev_key_starts_;
  st.positions = dev_positions_;
  st.append_dst = dev_append_dst_;
  st.origin = origins_.origin;
  const void* states = model_.decoder().step(ctx, dev_tokens_, positions_, st, caches_);
  return model_.output_layer().step_logits(ctx, states, rows);
}

void EncoderDecoderStepModel::upload_rows(const std::vector<int32_t>* parents,
                                          const std::vector<int32_t>& sentence_of) {
  // One upload, packed for the current count n (slice i = j*heads + h):
  // [n] parents | [n*heads] sentence slices | [n] source lengths.
  // Rows from n up to the step's bucket are computed and ignored: they read sentence_of[0]'s memory.
  const int n = static_cast<int>(sentence_of.size());
  const int rows = recorder_.rows(n, max_hyps_);
  const int slices = rows * heads_;
  auto sentence = [&](int j) { return sentence_of[j < n ? j : 0]; };
  staging_.clear();
  for (int j = 0; j < rows; ++j) staging_.push_back(parents && j < n ? (*parents)[j] : j);
  for (int j = 0; j < rows; ++j)
    for (int h = 0; h < heads_; ++h) staging_.push_back(slot_of_[sentence(j)] * heads_ + h);
  for (int j = 0; j < rows; ++j) staging_.push_back(src_lengths_[sentence(j)]);
  backend_.copy_to_device(dev_rows_, staging_.data(), staging_.size() * sizeof(int32_t));
  dev_parents_ = dev_rows_;
  dev_cross_slices_ = dev_rows_ + rows;
  dev_row_src_lengths_ = dev_rows_ + rows + elems(slices);
}

void EncoderDecoderStepModel::check_sources(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths,
                                            int sentences, int src_len) const {
  if (sentences < 1 || src_len < 1)
    fail("internal error: start() and admit() need sentences, got {} x {}", sentences, src_len);
  if (sentences > max_sent_) {
    fail(
        "decoding was planned for at most {} sentences at a time but got {}; lower --mini-batch or build the "
        "decoder with a larger limit",
        max_sent_, sentences);
  }
  if (src_len > max_src_) {
    fail(
        "a source sentence of {} tokens (eos included) is longer than the {} the decoder was planned for; filter "
        "or split longer inputs, or raise --max-length",
        src_len, max_src_);
  }
  if (src.size() != elems(sentences, src_len) || src_lengths.size() != static_cast<std::size_t>(sentences)) {
    fail("internal error: start() or admit() got {} ids and {} lengths for {} sentences of {} tokens", src.size(),
         src_lengths.size(), sentences, src_len);
  }
  for (int s = 0; s < sentences; ++s) {
    if (src_lengths[s] < 1 || src_lengths[s] > src_len) {
      fail("internal error: source sentence {} has length {} outside 1..{}", s, src_lengths[s], src_len);
    }
  }
  for (int32_t id : src) {
    if (id < 0 || id >= src_vocab_) {
      fail("source token id {} is outside the model's source vocabulary ({} entries); the vocabulary files do not "
           "match the model",
           id, src_vocab_);
    }
  }
}

void EncoderDecoderStepModel::place_sentences(int first, const std::vector<int32_t>& src_lengths,
                                              const std::vector<int32_t>& slots) {
  src_lengths_.resize(first);
  slot_of_.resize(first);
  start_of_.resize(first);
  for (std::size_t b = 0; b < slots.size(); ++b) {
    src_lengths_.push_back(src_lengths[b]);
    slot_of_.push_back(slots[b]);
    start_of_.push_back(t_);
    slot_used_[slots[b]] = 1;
    sentence_of_.push_back(first + static_cast<int32_t>(b));
  }
  live_ = static_cast<int>(sentence_of_.size());
}

void EncoderDecoderStepModel::start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths,
                                   int sentences, int src_len) {
  check_sources(src, src_lengths, sentences, src_len);
  // Sources padded to the bucketed length (masked like any padding), and the batch to the bucketed sentence count
  // (sentences of one eos each, encoded and never read), so that encodings of batches whose longest sentence or
  // size differs a little share their recordings.
  const int padded_len = recorder_.rows(src_len, max_src_);
  const int padded_sentences = recorder_.rows(sentences, max_sent_);
  staging_.assign(elems(padded_sentences, padded_len), data::kPadId);
  for (int s = 0; s < sentences; ++s)
    std::copy_n(src.begin() + elems(s, src_len), src_len, staging_.begin() + elems(s, padded_len));
  for (int s = sentences; s < padded_sentences; ++s) staging_[elems(s, padded_len)] = data::kEosId;
  staging_.insert(staging_.end(), src_lengths.begin(), src_lengths.end());
  staging_.resize(staging_.size() + static_cast<std::size_t>(padded_sentences - sentences), 1);
  backend_.copy_to_device(dev_src_, staging_.data(), staging_.size() * sizeof(int32_t));
  // Recorded from a shape's second batch on: at a few dozen sentences the encoder's ~80 launches cost the host
  // more time than the GPU needs for them.
  const StepShape shape{0, padded_sentences, padded_len, -1};
  recorder_.run(shape, recorder_.seen_before(shape), [&] {
    scratch_->reset();
    StepMemory memory(scratch_.get());
    encode_sources(backend_, memory, padded_sentences, padded_len);
  });
  // Every row reads its own slices again (select() of the last batch rewrote the first positions of both tables).
  origins_.reset(backend_);

  started_ = true;
  t_ = 0;
  std::fill(slot_used_.begin(), slot_used_.end(), 0);
  sentence_of_.clear();
  slots_.clear();
  for (int s = 0; s < sentences; ++s) slots_.push_back(s);
  place_sentences(0, src_lengths, slots_);
  upload_rows(nullptr, sentence_of_);
}

void EncoderDecoderStepModel::admit(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths,
                                   int sentences, int src_len) {
  if (!started_) fail("internal error: admit() before start()");
  check_sources(src, src_lengths, sentences, src_len);
  if (t_ >= max_tgt_) fail("internal error: admit() at step {}, past the {} the caches hold", t_, max_tgt_);
  // Free slots in order: the first `sentences` take the new sentences; on a backend that records, the count is
  // padded (step_rows, at most the free slots) with sentences of one eos each, encoded into free slots that stay
  // free, so that admissions of a server's every count repeat a few shapes and replay (issue 27: each count
  // recorded its own encoding).
  std::vector<int> free_slots;
  for (int slot = 0; slot < max_live_; ++slot)
    if (!slot_used_[slot]) free_slots.push_back(slot);
  const int free_count = static_cast<int>(free_slots.size());
  if (free_count < sentences) {
    fail("internal error: admit() of {} sentences with {} of {} sentence places free", sentences, free_count,
         max_live_);
  }
  // Padded no further than one encoding's planned batch.
  const int padded_sentences = recorder_.rows(sentences, std::min(free_count, max_sent_));
  slots_.assign(free_slots.begin(), free_slots.begin() + sentences);
  const int padded_len = recorder_.rows(src_len, max_src_);
  staging_.assign(elems(padded_sentences, padded_len), data::kPadId);
  for (int s = 0; s < sentences; ++s)
    std::copy_n(src.begin() + elems(s, src_len), src_len, staging_.begin() + elems(s, padded_len));
  for (int s = sentences; s < padded_sentences; ++s) staging_[elems(s, padded_len)] = data::kEosId;
  staging_.insert(staging_.end(), src_lengths.begin(), src_lengths.end());
  staging_.resize(staging_.size() + static_cast<std::size_t>(padded_sentences - sentences), 1);
  for (int p = 0; p < 2; ++p)
    for (int s = 0; s < padded_sentences; ++s)
      for (int h = 0; h < heads_; ++h) staging_.push_back((p * max_live_ + free_slots[s]) * heads_ + h);
  backend_.copy_to_device(dev_src_, staging_.data(), staging_.size() * sizeof(int32_t));
  const StepShape shape{0, padded_sentences, padded_len, -2};
  recorder_.run(shape, recorder_.seen_before(shape), [&] {
    scratch_->reset();
    StepMemory memory(scratch_.get());
    encode_sources(backend_, memory, padded_sentences, padded_len, true);
  });
  // Their rows read their own slices from this position on: origin entries at and past the current position are
  // every row's own (select() rewrites only earlier ones), and earlier ones lie before the rows' key starts.
  place_sentences(static_cast<int>(slot_of_.size()), src_lengths, slots_);
  upload_rows(nullptr, sentence_of_);
}

void EncoderDecoderStepModel::select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) {
  if (!started_) fail("internal error: select() before start()");
  if (parents.size() != sentence_of.size()) {
    fail("internal error: select() got {} parents but {} sentence indices", parents.size(), sentence_of.size());
  }
  const int n = static_cast<int>(parents.size());
  if (n > max_hyps_) {
    fail(
        "the search asks for {} hypotheses but decoding was planned for at most {} (sentences x beam size); lower "
        "--beam-size or --mini-batch, or build the decoder with a larger limit",
        n, max_hyps_);
  }
  bool identity = true;  // every hypothesis continues its own row (greedy, beams that keep their order)
  for (int j = 0; j < n; ++j) {
    identity = identity && parents[j] == j;
    if (parents[j] < 0 || parents[j] >= live_) {
      fail("internal error: select() names parent {} of {} live hypotheses", parents[j], live_);
    }
    if (sentence_of[j] != sentence_of_[parents[j]]) {
      fail("internal error: select() puts hypothesis {} into sentence {} but its parent belongs to sentence {}", j,
           sentence_of[j], sentence_of_[parents[j]]);
    }
  }
  upload_rows(&parents, sentence_of);
  // Slots of sentences without live hypotheses are free for admit().
  std::fill(slot_used_.begin(), slot_used_.end(), 0);
  for (int32_t s : sentence_of) slot_used_[slot_of_[s]] = 1;
  if (t_ > 0 && n > 0 && !identity) {
    // Hypothesis j continues parents[j]: its history is where its parent's is, origin_new[j][p] =
    // origin[parents[j]][p] for p < t, one gather of int32 rows (4-byte elements: f32 copies them bit for bit)
    // into the spare table, swapped in; the table given up becomes the next spare. No key or value moves: each
    // (slice, position) was written once, at step p by the row that had that index then, and stays valid however
    // rows are renumbered later. Positions t.. keep the identity that start() set: each row appends its own. With
    // identity parents (rows past n are simply no longer read) the table is already right.
    // The gathered rows are copied back rather than the tables swapped: recorded steps read the origin table at its
    // address.
    origins_.reorder(backend_, dev_parents_, n, t_);
  }
  live_ = n;
  sentence_of_.assign(sentence_of.begin(), sentence_of.end());
}

void EncoderDecoderStepModel::begin_step(const std::vector<int32_t>& tokens) {
  if (!started_) fail("internal error: step() before start()");
  if (tokens.size() != static_cast<std::size_t>(live_)) {
    fail("internal error: step() got {} tokens for {} live hypotheses", tokens.size(), live_);
  }
  if (t_ >= max_tgt_) {
    fail(
        "decoding step {} goes past the {} target tokens (bos included) the decoder was planned for; the search "
        "must stop at its maximum output length (--max-length)",
        t_ + 1, max_tgt_);
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= vocab_) fail("internal error: step() got token id {} outside the target vocabulary", id);
  }
  if (live_ == 0) return;
  // Laid out as dev_step_ (see the header); every row appends at cache position t_, at its own position in its
  // output. The rows past live_ (up to the bucket) feed eos and append to cache rows no live hypothesis reads.
  const int rows = recorder_.rows(live_, max_hyps_);
  int32_t* in = step_staging_.data();
  std::copy(tokens.begin(), tokens.end(), in);
  std::fill(in + live_, in + rows, data::kEosId);
  std::fill_n(in + max_hyps_, rows, t_ + 1);
  int32_t* key_starts = in + 2 * max_hyps_;
  int32_t* positions = in + 3 * max_hyps_;
  for (int j = 0; j < rows; ++j) {
    const int start = j < live_ ? start_of_[sentence_of_[j]] : 0;
    key_starts[j] = start;
    positions[j] = t_ - start;
  }
  // Projected row q = p*slices + i (key p = 0 or value p = 1 of slice i) goes to cache row (2i + p)*T + t. (Two
  // loops rather than q / slices and q % slices: 8192 integer divisions a step at beam 4 x 128 took about 10 us of
  // host time on this project's 2-core box, time the GPU waits.)
  int32_t* append_dst = in + 4 * max_hyps_;
  const int slices = rows * heads_;
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < slices; ++i) append_dst[p * slices + i] = (2 * i + p) * max_tgt_ + t_;
  backend_.copy_to_device(dev_step_, in, step_input_count(max_hyps_, heads_, rows) * sizeof(int32_t));
}

void EncoderDecoderStepModel::run_step_ops(int k, const FinishStep& finish) {
  const int rows = recorder_.rows(live_, max_hyps_);
  const auto ops = [&] {
    scratch_->reset();
    StepMemory memory(scratch_.get());
    finish(forward_step(backend_, memory, rows));
  };
  // The cross-attention memory is laid out for max_live_ sentences of max_src_ tokens whatever the batch
  // (encode_sources), and the step reads each row's sentence and real length from the device: the shape depends
  // on neither the source length nor the sentence count (a server's batches vary in both).
  recorder_.run_step(live_, max_hyps_, k, ops);
}

void EncoderDecoderStepModel::step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) {
  begin_step(tokens);
  log_probs.resize(elems(live_, vocab_));
  if (live_ > 0) {
    const int rows = recorder_.rows(live_, max_hyps_);
    run_step_ops(0, [&](const OutputLayer::StepLogits& logits) {
      backend_.log_softmax(dt_, logits.logits, rows, vocab_, dev_log_probs_, logits.ld);
    });
    backend_.copy_to_host(log_probs.data(), dev_log_probs_, log_probs.size() * sizeof(float));
  }
  ++t_;
}

void EncoderDecoderStepModel::step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values,
                                       std::vector<int32_t>& ids, std::vector<float>& eos_log_probs) {
  if (k < 1) fail("internal error: step_topk() needs k >= 1, got {}", k);
  if (k > kernels::kMaxTopK) return StepModel::step_topk(tokens, k, values, ids, eos_log_probs);
  begin_step(tokens);
  const std::size_t n = elems(live_, k);
  values.resize(n);
  ids.resize(n);
  eos_log_probs.resize(live_);
  if (live_ > 0) {
    // Packed for this step's rows and k, so that one copy (one synchronisation) brings everything back; the first
    // live_ rows of each part are the live hypotheses'.
    const int rows = recorder_.rows(live_, max_hyps_);
    const std::size_t computed = elems(rows, k);
    float* dev_values = dev_topk_;
    int32_t* dev_ids = reinterpret_cast<int32_t*>(dev_topk_ + computed);
    float* dev_eos = dev_topk_ + 2 * computed;
    run_step_ops(k, [&](const OutputLayer::StepLogits& logits) {
      backend_.topk_log_softmax(dt_, logits.logits, rows, vocab_, k, kFirstWordId, data::kEosId, dev_values, dev_ids,
                                dev_eos, logits.ld);
    });
    topk_staging_.resize(2 * computed + live_);
    backend_.copy_to_host(topk_staging_.data(), dev_topk_, topk_staging_.size() * sizeof(float));
    std::memcpy(values.data(), topk_staging_.data(), n * sizeof(float));
    std::memcpy(ids.data(), topk_staging_.data() + computed, n * sizeof(int32_t));
    std::memcpy(eos_log_probs.data(), topk_staging_.data() + 2 * computed, live_ * sizeof(float));
  }
  ++t_;
}

void EncoderDecoderStepModel::step_scores(const std::vector<int32_t>& tokens, const std::vector<int32_t>& next,
                                          std::vector<float>& log_probs) {
  if (next.size() != tokens.size())
    fail("internal error: step_scores() got {} next tokens for {} hypotheses", next.size(), tokens.size());
  if (elems(max_hyps_, vocab_) > static_cast<std::size_t>(INT32_MAX))
    return StepModel::step_scores(tokens, next, log_probs);  // offsets past 32 bits: pick on the host
  // Each (row, next id) as an offset into the log-prob rows.
  staging_.clear();
  for (std::size_t h = 0; h < next.size(); ++h) {
    if (next[h] < 0 || next[h] >= vocab_)
      fail("target id {} is outside the model's vocabulary of {} entries", next[h], vocab_);
    staging_.push_back(static_cast<int32_t>(elems(static_cast<int>(h), vocab_) + static_cast<std::size_t>(next[h])));
  }
  begin_step(tokens);
  log_probs.resize(live_);
  if (live_ > 0) {
    // The step's log-softmax rows as step() computes them (the same recording), then one value per row gathered
    // on the device: copying whole rows to the host (4 MB a step at 128 x 4 rows of 8k) was what teacher forcing
    // spent its time on.
    const int rows = recorder_.rows(live_, max_hyps_);
    run_step_ops(0, [&](const OutputLayer::StepLogits& logits) {
      backend_.log_softmax(dt_, logits.logits, rows, vocab_, dev_log_probs_, logits.ld);
    });
    auto* dev_offsets = reinterpret_cast<int32_t*>(dev_topk_);
    float* dev_values = dev_topk_ + max_hyps_;
    backend_.copy_to_device(dev_offsets, staging_.data(), staging_.size() * sizeof(int32_t));
    backend_.gather_rows(kernels::DType::f32, dev_log_probs_, 1, dev_offsets, live_, 1, dev_values, 1, nullptr);
    backend_.copy_to_host(log_probs.data(), dev_values, log_probs.size() * sizeof(float));
  }
  ++t_;
}

std::unique_ptr<StepModel> make_encoder_decoder_step_model(const EncoderDecoderModel& model, int max_hypotheses,
                                                           int max_src_len, int max_tgt_len, int max_sentences,
                                                           int max_live_sentences) {
  return std::make_unique<EncoderDecoderStepModel>(model, max_hypotheses, max_src_len, max_tgt_len, max_sentences,
                                                   nullptr, max_live_sentences);
}

}  // namespace lseq

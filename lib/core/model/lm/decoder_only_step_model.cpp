#include "core/model/lm/decoder_only_step_model.h"

#include <algorithm>
#include <cstring>

#include "core/model/layers/layer_context.h"
#include "core/model/step_inputs.h"
#include "core/search/search_types.h"
#include "data/vocab.h"
#include "kernels/planning/planning_backend.h"
#include "util/error.h"

namespace lseq {

namespace {

// int32 entries of the prefill inputs for n tokens (see the header).
std::size_t prefill_input_count(int n, int heads) { return 4 * elems(n) + 3 * elems(n, heads); }

}  // namespace

DecoderOnlyStepModel::DecoderOnlyStepModel(const DecoderOnlyModel& model, int max_hypotheses, int max_prompt,
                                           int max_steps, int max_sentences, kernels::Backend* runs_on)
    : model_(model), backend_(runs_on ? *runs_on : model.backend()), dt_(model.compute_dtype()), recorder_(backend_) {
  if (max_hypotheses < 1 || max_prompt < 1 || max_steps < 1 || max_sentences < 0 || max_sentences > max_hypotheses) {
    fail("cannot plan a language model's decoding for {} hypotheses, {} prompts of {} tokens and {} steps; every "
         "limit must be positive and prompts at most hypotheses (check --mini-batch, --beam-size and --max-length)",
         max_hypotheses, max_sentences, max_prompt, max_steps);
  }
  const ModelConfig& config = model.config();
  max_hyps_ = max_hypotheses, max_prompt_ = max_prompt, max_steps_ = max_steps;
  max_sent_ = max_sentences > 0 ? max_sentences : max_hypotheses;
  columns_ = (max_prompt_ - 1) + max_steps_;  // a prompt's prefill (its eos and last token not), then the steps
  heads_ = config.heads, vocab_ = config.tgt_vocab;

  caches_.resize(model.stack().depth());
  std::size_t state_bytes = 0;
  lay_out_state([&](std::size_t bytes) -> void* {
    state_bytes += StepMemory::align(bytes);
    return nullptr;
  });
  state_ = std::make_unique<kernels::Workspace>(backend_, state_bytes,
                                                "internal error: the decoder's state outgrew its plan");
  lay_out_state([&](std::size_t bytes) { return state_->take(bytes); });
  origins_.upload_identity(backend_);

  // Scratch: a prefill piece and a step at their largest shapes over the planning backend.
  auto planning = kernels::make_planning_backend();
  StepMemory prefill_plan(nullptr), step_plan(nullptr);
  const int prompt_tokens = max_sent_ * (max_prompt_ - 1);
  if (prompt_tokens > 0) prefill(*planning, prefill_plan, 0, std::min(prompt_tokens, prefill_chunk_));
  forward_step(*planning, step_plan, max_hyps_);
  scratch_ = std::make_unique<kernels::Workspace>(backend_, std::max(prefill_plan.needed(), step_plan.needed()),
                                                  "internal error: a decoding step outgrew its plan");

  staging_.reserve(prefill_input_count(prompt_tokens, heads_));
  step_staging_.assign(step_input_count(max_hyps_, heads_, max_hyps_), 0);
  topk_staging_.reserve(elems(max_hyps_, 2 * kernels::kMaxTopK + 1));
  sentence_of_.reserve(max_hyps_);
}

DecoderOnlyStepModel::~DecoderOnlyStepModel() = default;

void DecoderOnlyStepModel::set_prefill_chunk(int rows) {
  if (rows < 1 || rows > kPrefillChunk) fail("internal error: prefill pieces of {} tokens", rows);
  prefill_chunk_ = rows;  // smaller pieces never need more scratch than the planned ones
}

template <typename Take>
void DecoderOnlyStepModel::lay_out_state(Take&& take) {
  const std::size_t f = kernels::dtype_size(dt_), i32 = sizeof(int32_t);
  const int hd = model_.config().head_dim();
  for (void*& cache : caches_) cache = take(2 * elems(max_hyps_, heads_, columns_, hd) * f);
  origins_.lay_out(take, max_hyps_, columns_);
  dev_prompt_ = static_cast<int32_t*>(take(std::max<std::size_t>(1, prefill_input_count(max_sent_ * (max_prompt_ - 1),
                                                                                          heads_)) * i32));
  dev_step_ = static_cast<int32_t*>(take(step_input_count(max_hyps_, heads_, max_hyps_) * i32));
  dev_parents_ = static_cast<int32_t*>(take(elems(max_hyps_) * i32));
  dev_log_probs_ = static_cast<float*>(take(elems(max_hyps_, vocab_) * sizeof(float)));
  dev_topk_ = static_cast<float*>(take(elems(max_hyps_, 2 * kernels::kMaxTopK + 1) * sizeof(float)));
  for (int b = 0; b < 2; ++b) {
    dev_streams_[b] = static_cast<uint64_t*>(take(elems(max_hyps_) * sizeof(uint64_t)));
    dev_remaining_[b] = static_cast<int32_t*>(take(elems(max_hyps_) * i32));
    dev_drawn_[b] = static_cast<int32_t*>(take(elems(max_hyps_, 2) * i32));
  }
}

void DecoderOnlyStepModel::prefill(kernels::Backend& backend, StepMemory& memory, int first, int rows) {
  const LayerContext ctx{backend, memory, model_.param_store(), dt_, false, 0, 0};
  // The inputs of all n tokens of this start, one array after the other (see the header); planning: of `rows`.
  const int n = prefill_total_ > 0 ? prefill_total_ : rows;
  const int32_t* tokens = dev_prompt_;
  const int32_t* positions = tokens + n;
  const int32_t* lengths = positions + n;
  const int32_t* starts = lengths + n;
  const int32_t* kv_index = starts + n;
  const int32_t* append = kv_index + elems(n, heads_);
  CachedSelfAttention st;
  st.rows = rows, st.max_len = columns_;
  st.lengths = lengths + first;
  st.key_starts = starts + first;
  st.append_dst = append + 2 * elems(first, heads_);
  st.kv_index = kv_index + elems(first, heads_);
  model_.stack().step(ctx, tokens + first, positions + first, model_.positions(), st, caches_, true);
}

OutputLayer::StepLogits DecoderOnlyStepModel::forward_step(kernels::Backend& backend, StepMemory& memory, int rows) {
  const LayerContext ctx{backend, memory, model_.param_store(), dt_, false, 0, 0};
  const int32_t* tokens = dev_step_;
  CachedSelfAttention st;
  st.rows = rows, st.max_len = columns_;
  st.lengths = tokens + 2 * max_hyps_;
  st.key_starts = tokens + 3 * max_hyps_;
  st.append_dst = tokens + 4 * max_hyps_;
  st.origin = origins_.origin;
  const void* states = model_.stack().step(ctx, tokens, tokens + max_hyps_, model_.positions(), st, caches_);
  return model_.output_layer().step_logits(ctx, states, rows);
}

void DecoderOnlyStepModel::start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths,
                                 int sentences, int src_len) {
  if (sentences < 1 || src_len < 1) fail("internal error: start() needs prompts, got {} x {}", sentences, src_len);
  if (sentences > max_sent_) {
    fail("decoding was planned for at most {} prompts at a time but got {}; lower --mini-batch", max_sent_,
         sentences);
  }
  if (src_len > max_prompt_) {
    fail("a prompt of {} tokens (eos included) is longer than the {} the decoder was planned for; crop prompts "
         "shorter",
         src_len, max_prompt_);
  }
  if (src.size() != elems(sentences, src_len) || src_lengths.size() != static_cast<std::size_t>(sentences)) {
    fail("internal error: start() got {} ids and {} lengths for {} prompts of {} tokens", src.size(),
         src_lengths.size(), sentences, src_len);
  }
  for (int s = 0; s < sentences; ++s)
    if (src_lengths[s] < 1 || src_lengths[s] > src_len)
      fail("internal error: prompt {} has length {} outside 1..{}", s, src_lengths[s], src_len);
  for (int32_t id : src)
    if (id < 0 || id >= vocab_)
      fail("token id {} is outside the language model's vocabulary ({} entries); the vocabulary file does not match "
           "the model",
           id, vocab_);

  // Prompt s: bos w1 .. wk (its eos dropped); the prefill takes all but the last, which the first step feeds.
  prompt_tokens_.assign(sentences, 0);
  first_tokens_.assign(sentences, data::kBosId);
  int longest = 0, total = 0;
  for (int s = 0; s < sentences; ++s) {
    const int k = src_lengths[s] - 1;
    if (k >= model_.max_positions())
      fail("a prompt of {} tokens leaves none of the language model's {} positions for a continuation; crop prompts "
           "to at most {} tokens",
           k, model_.max_positions(), model_.max_positions() - 2);
    prompt_tokens_[s] = k;
    if (k > 0) first_tokens_[s] = src[elems(s, src_len) + k - 1];
    longest = std::max(longest, k), total += k;
  }
  // Right-aligned: prompt s fills columns longest - k .. longest - 1, so that every row steps at one column.
  staging_.assign(prefill_input_count(total, heads_), 0);
  int32_t* tokens = staging_.data();
  int32_t* positions = tokens + total;
  int32_t* lengths = positions + total;
  int32_t* starts = lengths + total;
  int32_t* kv_index = starts + total;
  int32_t* append = kv_index + elems(total, heads_);
  for (int s = 0, r = 0; s < sentences; ++s) {
    const int k = prompt_tokens_[s];
    for (int i = 0; i < k; ++i, ++r) {
      const int column = longest - k + i;
      tokens[r] = i == 0 ? data::kBosId : src[elems(s, src_len) + i - 1];
      positions[r] = i;
      lengths[r] = column + 1;
      starts[r] = longest - k;
      for (int h = 0; h < heads_; ++h) kv_index[elems(r, heads_) + h] = s * heads_ + h;
    }
  }
  // The cache rows of each piece of the prefill: its keys, then its values (Backend::split_step_qkv).
  for (int first = 0; first < total; first += prefill_chunk_) {
    const int rows = std::min(prefill_chunk_, total - first);
    int32_t* dst = append + 2 * elems(first, heads_);
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < heads_; ++h) {
        const int slice = kv_index[elems(first + r, heads_) + h];
        const int column = lengths[first + r] - 1;
        dst[elems(r, heads_) + h] = (2 * slice) * columns_ + column;
        dst[elems(rows, heads_) + elems(r, heads_) + h] = (2 * slice + 1) * columns_ + column;
      }
  }
  if (total > 0) backend_.copy_to_device(dev_prompt_, staging_.data(), staging_.size() * sizeof(int32_t));
  prefill_total_ = total;
  origins_.reset(backend_);
  for (int first = 0; first < total; first += prefill_chunk_) {
    scratch_->reset();
    StepMemory memory(scratch_.get());
    prefill(backend_, memory, first, std::min(prefill_chunk_, total - first));
  }

  started_ = true;
  draw_k_ = 0, queued_draws_.clear();  // draws start with begin_draws()
  sentences_ = sentences, live_ = sentences, t_ = 0, prompt_columns_ = longest;
  sentence_of_.clear();
  for (int s = 0; s < sentences; ++s) sentence_of_.push_back(s);
}

void DecoderOnlyStepModel::select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) {
  if (!started_) fail("internal error: select() before start()");
  if (parents.size() != sentence_of.size())
    fail("internal error: select() got {} parents but {} prompt indices", parents.size(), sentence_of.size());
  const int n = static_cast<int>(parents.size());
  if (n > max_hyps_) {
    fail("the search asks for {} hypotheses but decoding was planned for at most {} (prompts x beam size); lower "
         "--beam-size or --mini-batch",
         n, max_hyps_);
  }
  bool identity = true;
  for (int j = 0; j < n; ++j) {
    identity = identity && parents[j] == j;
    if (parents[j] < 0 || parents[j] >= live_)
      fail("internal error: select() names parent {} of {} live hypotheses", parents[j], live_);
    if (sentence_of[j] != sentence_of_[parents[j]])
      fail("internal error: select() puts hypothesis {} into prompt {} but its parent continues prompt {}", j,
           sentence_of[j], sentence_of_[parents[j]]);
  }
  // Hypothesis j continues parents[j]: its history (the prompt's columns and the steps so far) is where its
  // parent's is, one gather of the origin table (docs/decoding.md). Nothing moves when every row continues itself.
  const int filled = prompt_columns_ + t_;
  const bool drawing = draw_k_ > 0;
  if (n > 0 && !identity && (filled > 0 || drawing))
    backend_.copy_to_device(dev_parents_, parents.data(), parents.size() * sizeof(int32_t));
  if (n > 0 && filled > 0 && !identity) origins_.reorder(backend_, dev_parents_, n, filled);
  if (n > 0 && drawing && !identity) {
    // The draws' state follows its hypotheses: the stream, what is left, and the token the next step is fed.
    const int from = draws_, to = 1 - draws_;
    using kernels::DType;
    backend_.gather_rows(DType::f32, dev_streams_[from], 2, dev_parents_, n, 2, dev_streams_[to], 2, nullptr);
    backend_.gather_rows(DType::f32, dev_remaining_[from], 1, dev_parents_, n, 1, dev_remaining_[to], 1, nullptr);
    backend_.gather_rows(DType::f32, dev_drawn_[from], 1, dev_parents_, n, 1, dev_drawn_[to], 1, nullptr);
    draws_ = to;
  }
  live_ = n;
  sentence_of_.assign(sentence_of.begin(), sentence_of.end());
}

void DecoderOnlyStepModel::begin_step(const std::vector<int32_t>& tokens) {
  if (!started_) fail("internal error: step() before start()");
  if (tokens.size() != static_cast<std::size_t>(live_))
    fail("internal error: step() got {} tokens for {} live hypotheses", tokens.size(), live_);
  const int column = prompt_columns_ + t_;
  if (t_ >= max_steps_ || column >= columns_) {
    fail("decoding step {} goes past the {} steps the decoder was planned for; the search must stop at its "
         "maximum output length (--max-length)",
         t_ + 1, max_steps_);
  }
  for (int32_t id : tokens)
    if (id < 0 || id >= vocab_) fail("internal error: step() got token id {} outside the vocabulary", id);
  if (live_ == 0) return;
  // Laid out as dev_step_ (see the header). At the first step each row feeds its prompt's last token (search
  // passes bos). Rows past live_ (up to the bucket) feed eos at position 0 and see only their own new key.
  const int rows = recorder_.rows(live_, max_hyps_);
  int32_t* in = step_staging_.data();
  int32_t* positions = in + max_hyps_;
  int32_t* lengths = in + 2 * max_hyps_;
  int32_t* starts = in + 3 * max_hyps_;
  for (int r = 0; r < rows; ++r) {
    const bool real = r < live_;
    const int s = real ? sentence_of_[r] : 0;
    in[r] = !real ? data::kEosId : t_ == 0 ? first_tokens_[s] : tokens[r];
    positions[r] = real ? prompt_tokens_[s] + t_ : 0;
    lengths[r] = column + 1;
    starts[r] = real ? prompt_columns_ - prompt_tokens_[s] : column;
    if (positions[r] >= model_.max_positions()) {
      fail("a continuation reached the language model's {} positions (a prompt of {} tokens and {} new ones); "
           "lower --max-length or crop prompts shorter",
           model_.max_positions(), prompt_tokens_[s], t_);
    }
  }
  int32_t* append_dst = in + 4 * max_hyps_;
  const int slices = rows * heads_;
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < slices; ++i) append_dst[p * slices + i] = (2 * i + p) * columns_ + column;
  backend_.copy_to_device(dev_step_, in, step_input_count(max_hyps_, heads_, rows) * sizeof(int32_t));
}

void DecoderOnlyStepModel::run_step_ops(int k, const FinishStep& finish) {
  const int rows = recorder_.rows(live_, max_hyps_);
  const auto ops = [&] {
    scratch_->reset();
    StepMemory memory(scratch_.get());
    finish(forward_step(backend_, memory, rows));
  };
  // A step's ops depend on its rows and k only: prompts, columns and positions reach them through device memory.
  recorder_.run_step(live_, max_hyps_, k, ops);
}

DecoderOnlyStepModel::StepTopK DecoderOnlyStepModel::run_step_topk(int k) {
  const int rows = recorder_.rows(live_, max_hyps_);
  StepTopK top;
  top.computed = elems(rows, k);
  top.values = dev_topk_;
  top.ids = reinterpret_cast<int32_t*>(dev_topk_ + top.computed);
  top.eos = dev_topk_ + 2 * top.computed;
  run_step_ops(k, [&](const OutputLayer::StepLogits& logits) {
    backend_.topk_log_softmax(dt_, logits.logits, rows, vocab_, k, kFirstWordId, data::kEosId, top.values, top.ids,
                              top.eos, logits.ld);
  });
  return top;
}

void DecoderOnlyStepModel::step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) {
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

void DecoderOnlyStepModel::step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values,
                                     std::vector<int32_t>& ids, std::vector<float>& eos_log_probs) {
  if (k < 1) fail("internal error: step_topk() needs k >= 1, got {}", k);
  if (k > kernels::kMaxTopK) return StepModel::step_topk(tokens, k, values, ids, eos_log_probs);
  begin_step(tokens);
  const std::size_t n = elems(live_, k);
  values.resize(n);
  ids.resize(n);
  eos_log_probs.resize(live_);
  if (live_ > 0) {
    const std::size_t computed = run_step_topk(k).computed;
    topk_staging_.resize(2 * computed + live_);
    backend_.copy_to_host(topk_staging_.data(), dev_topk_, topk_staging_.size() * sizeof(float));
    std::memcpy(values.data(), topk_staging_.data(), n * sizeof(float));
    std::memcpy(ids.data(), topk_staging_.data() + computed, n * sizeof(int32_t));
    std::memcpy(eos_log_probs.data(), topk_staging_.data() + 2 * computed, live_ * sizeof(float));
  }
  ++t_;
}

bool DecoderOnlyStepModel::can_draw() const {
  return elems(max_hyps_, 2) * sizeof(int32_t) <= kernels::Backend::kAsyncDownloadBytes;
}

void DecoderOnlyStepModel::begin_draws(const std::vector<uint64_t>& streams, const std::vector<int32_t>& remaining,
                                       int k, double temperature) {
  if (!started_ || t_ != 0) fail("internal error: begin_draws() must follow start()");
  if (!can_draw()) fail("internal error: {} hypotheses are too many for draws on the backend", max_hyps_);
  if (streams.size() != static_cast<std::size_t>(live_) || remaining.size() != static_cast<std::size_t>(live_))
    fail("internal error: begin_draws() got {} streams and {} limits for {} hypotheses", streams.size(),
         remaining.size(), live_);
  kernels::check_draw_topk_args(live_, k, temperature);
  draws_ = 0;
  backend_.copy_to_device(dev_streams_[0], streams.data(), streams.size() * sizeof(uint64_t));
  backend_.copy_to_device(dev_remaining_[0], remaining.data(), remaining.size() * sizeof(int32_t));
  draw_k_ = k, draw_temperature_ = temperature;
  queued_draws_.clear();
}

void DecoderOnlyStepModel::queue_drawn_step(const std::vector<int32_t>* tokens) {
  if (draw_k_ == 0) fail("internal error: queue_drawn_step() before begin_draws()");
  if (!tokens && t_ == 0) fail("internal error: the first step after start() needs its tokens");
  if (queued_draws_.size() >= static_cast<std::size_t>(kernels::Backend::kAsyncDownloadSlots))
    fail("internal error: more than {} steps queued", kernels::Backend::kAsyncDownloadSlots);
  unused_tokens_.assign(live_, data::kBosId);
  begin_step(tokens ? *tokens : unused_tokens_);
  if (live_ > 0) {
    int32_t* drawn = dev_drawn_[draws_];
    // Fed from the draws: they overwrite the placeholders begin_step() uploaded (in stream order).
    if (!tokens) backend_.copy(dev_step_, drawn, elems(live_) * sizeof(int32_t));
    const StepTopK top = run_step_topk(draw_k_);
    backend_.draw_topk(top.values, top.ids, top.eos, live_, draw_k_, data::kEosId, draw_temperature_,
                       dev_streams_[draws_], dev_remaining_[draws_], drawn, reinterpret_cast<float*>(drawn + live_));
    const int slot = backend_.download_async(drawn, elems(live_, 2) * sizeof(int32_t));
    queued_draws_.push_back({slot, live_});
  }
  ++t_;
}

void DecoderOnlyStepModel::take_draws(std::vector<int32_t>& tokens, std::vector<float>& log_probs) {
  if (queued_draws_.empty()) fail("internal error: take_draws() with no step queued");
  const QueuedDraws queued = queued_draws_.front();
  queued_draws_.pop_front();
  const std::size_t n = elems(queued.rows);
  draws_staging_.resize(2 * n);
  backend_.collect_download(queued.slot, draws_staging_.data(), 2 * n * sizeof(int32_t));
  tokens.assign(draws_staging_.begin(), draws_staging_.begin() + static_cast<std::ptrdiff_t>(n));
  log_probs.resize(n);
  std::memcpy(log_probs.data(), draws_staging_.data() + n, n * sizeof(float));
}

std::unique_ptr<StepModel> make_decoder_only_step_model(const DecoderOnlyModel& model, int max_hypotheses,
                                                        int max_prompt, int max_steps, int max_sentences) {
  return std::make_unique<DecoderOnlyStepModel>(model, max_hypotheses, max_prompt, max_steps, max_sentences);
}

}  // namespace lseq

#include "core/model/lm/decoder_only_model.h"

#include <algorithm>
#include <optional>

#include "core/model/layers/embedding_layer.h"
#include "core/model/layers/layer_context.h"
#include "core/model/step_gradients.h"
#include "core/model/step_memory.h"
#include "kernels/planning/planning_backend.h"
#include "util/error.h"

namespace lseq {

std::string lm_composed_attention_reason(const ModelConfig& config, bool document_masks) {
  const int positions = config.max_length + 1;
  if (!kernels::Backend::fused_attention_fits(positions, positions, config.head_dim()))
    return fmt::format("--max-length {} with heads of {} is past the fused core's {} positions and heads of {}",
                       config.max_length, config.head_dim(), kernels::Backend::kMaxFusedAttentionLen,
                       kernels::Backend::kMaxFusedAttentionHeadDim);
  if (config.dropout_attention > 0.0f && !kernels::Backend::fused_attention_drops(positions, positions))
    return fmt::format("--transformer-dropout-attention {} drops attention probabilities, which the fused core "
                       "does only past {} positions",
                       config.dropout_attention, kernels::Backend::kWholeSliceAttentionLen);
  if (document_masks) return "--lm-document-masks keeps attention inside documents, which the fused core cannot mask";
  return "";
}

DecoderOnlyModel::DecoderOnlyModel(const ModelConfig& config, kernels::Backend& backend, kernels::DType compute_dt,
                                   ParamUse use)
    : Model(config, backend) {
  if (!config_.is_lm()) fail("internal error: the decoder-only model needs a language model's config (--type lm)");
  config_.normalize_lm();  // one vocabulary, no encoder, tied output (what from_yaml gives; tests build configs)
  config_.validate();
  const int dim = config_.dim_emb;
  ParamTable table;
  // One vocabulary: the target embedding, which is also the output weight.
  const std::size_t embedding = table.add("embeddings.tgt.weight", {config_.tgt_vocab, dim}, ParamInit::normal_embedding);
  if (config_.learned_positions) {
    learned_positions_ =
        table.add("embeddings.positions.weight", {max_positions(), dim}, ParamInit::normal_embedding);
  }
  stack_ = std::make_unique<Encoder>(table, config_, embedding, StackRole::causal_decoder, learned_positions_);
  output_ = std::make_unique<OutputLayer>(table, config_, embedding);
  // The tensors below the stack's (the embedding and position tables) get gradients out of backward's order.
  set_store(std::move(table), compute_dt, use, stack_->param_begin());
  if (!config_.learned_positions) {
    const std::vector<float> table_values = sinusoidal_positions(max_positions(), dim, config_.positions);
    sinusoidal_ = backend_.allocate(table_values.size() * kernels::dtype_size(compute_dt));
    upload_as(backend_, table_values, compute_dt, sinusoidal_);
  }
  sums_ = static_cast<float*>(backend_.allocate(2 * sizeof(float)));
}

DecoderOnlyModel::~DecoderOnlyModel() {
  backend_.release(sums_);
  if (sinusoidal_) backend_.release(sinusoidal_);
}

const void* DecoderOnlyModel::positions() const {
  return config_.learned_positions ? store_->weight(learned_positions_) : sinusoidal_;
}

void DecoderOnlyModel::check_batch(const data::Batch& b) const {
  if (b.size <= 0 || b.tgt_len <= 0) fail("internal error: empty batch ({} sequences of {})", b.size, b.tgt_len);
  if (b.src_len != 0 || !b.src.empty() || !b.src_lengths.empty())
    fail("internal error: a language model's batch has a source side");
  if (b.tgt_len > max_positions()) {
    fail("a batch has sequences of {} tokens (bos included) but the model's --max-length is {}; raise --max-length "
         "or filter longer lines",
         b.tgt_len, config_.max_length);
  }
  const std::size_t n = static_cast<std::size_t>(b.size), cells = n * b.tgt_len;
  if (b.tgt_in.size() != cells || b.tgt_out.size() != cells || b.tgt_lengths.size() != n ||
      (!b.doc_starts.empty() && b.doc_starts.size() != cells)) {
    fail("internal error: batch arrays do not match its shape ({} x {})", b.size, b.tgt_len);
  }
  for (const std::vector<int32_t>* ids : {&b.tgt_in, &b.tgt_out}) {
    for (int32_t id : *ids) {
      if (id < 0 || id >= config_.tgt_vocab) {
        fail("token id {} is outside the vocabulary of the model ({} entries); the vocabulary file does not match "
             "the model",
             id, config_.tgt_vocab);
      }
    }
  }
  for (int s = 0; s < b.size; ++s) {
    if (b.tgt_lengths[s] < 1 || b.tgt_lengths[s] > b.tgt_len)
      fail("internal error: sequence {} of a batch has length {} outside 1..{}", s, b.tgt_lengths[s], b.tgt_len);
    for (int i = 0; i < b.tgt_len && !b.doc_starts.empty(); ++i) {
      const int32_t start = b.doc_starts[static_cast<std::size_t>(s) * b.tgt_len + i];
      if (start < 0 || start > i)
        fail("internal error: token {} of sequence {} starts its document at {}, outside 0..{}", i, s, start, i);
    }
  }
}

StepLoss DecoderOnlyModel::run(const data::Batch& b, kernels::Backend& backend, kernels::Workspace* ws,
                               const StepRun& how, Tape& tape, std::vector<double>* sentence_nll,
                               std::size_t* measured, std::vector<float>* logits) const {
  const int batch = b.size, len = b.tgt_len, rows = batch * len;
  const std::size_t dim = static_cast<std::size_t>(config_.dim_emb), cells = static_cast<std::size_t>(rows);
  const bool documents = !b.doc_starts.empty();
  if (ws) ws->reset();
  StepMemory memory(ws);
  LayerContext ctx{backend, memory, *store_, store_->working_dtype(), how.train, how.seed, how.step};
  ctx.recompute_ffn = recompute_ffn_ && how.backward;

  // Tokens, targets, lengths (and with documents each token's first key and position): one staging, one upload.
  const std::size_t ids = 2 * cells + batch + (documents ? 2 * cells : 0);
  int32_t* dev_ids = memory.keep_n<int32_t>(ids);
  if (ws) {
    staging_.clear();
    staging_.insert(staging_.end(), b.tgt_in.begin(), b.tgt_in.end());
    staging_.insert(staging_.end(), b.tgt_out.begin(), b.tgt_out.end());
    staging_.insert(staging_.end(), b.tgt_lengths.begin(), b.tgt_lengths.end());
    if (documents) {
      staging_.insert(staging_.end(), b.doc_starts.begin(), b.doc_starts.end());
      for (std::size_t e = 0; e < cells; ++e)  // a document's positions count from its first token
        staging_.push_back(static_cast<int32_t>(e % len) - b.doc_starts[e]);
    }
    backend.copy_to_device(dev_ids, staging_.data(), ids * sizeof(int32_t));
  }
  const int32_t* tokens = dev_ids;
  const int32_t* targets = tokens + cells;
  const int32_t* lengths = targets + cells;
  DocumentMasks masks;
  if (documents) {
    masks.key_starts = lengths + batch;
    masks.position_ids = masks.key_starts + cells;
  }
  float* row_loss = memory.keep_n<float>(cells);
  float* row_nll = memory.keep_n<float>(cells);
  // What backward passes between layers, taken before forward (the step's memory is a stack).
  void* d_states = how.backward ? ctx.keep(cells * dim) : nullptr;
  void* spare = how.backward ? ctx.keep(cells * dim) : nullptr;
  std::optional<StepGradients> gradients;
  if (how.backward && store_->grads_in_step_memory()) {
    gradients.emplace(backend, memory, *store_, ws == nullptr);
    ctx.gradients = &*gradients;
  }
  std::optional<GradientReadiness> ready;
  if (how.backward && how.ready) {
    ready.emplace(GradientReadiness{*how.ready});
    ctx.ready = &*ready;
  }

  const void* states = stack_->forward(ctx, tokens, lengths, batch, len, positions(), tape.stack, PackedRows{}, masks);
  if (logits) {  // a test path (forward_logits): all logits, bias included, on the host
    if (how.backward) fail("internal error: logits are only returned by forward-only runs");
    output_->forward(ctx, states, rows, tape.output);
    logits->resize(cells * config_.tgt_vocab);
    const std::size_t bytes = logits->size() * sizeof(float);
    if (ctx.dt == kernels::DType::f32) {
      backend.copy_to_host(logits->data(), tape.output.logits, bytes);
    } else {  // a temporary fp32 copy
      void* wide = backend.allocate(bytes);
      backend.cast(ctx.dt, tape.output.logits, kernels::DType::f32, wide, logits->size());
      backend.copy_to_host(logits->data(), wide, bytes);
      backend.release(wide);
    }
    output_->loss(ctx, tape.output, targets, false, how.grad_scale, row_loss, row_nll);
  } else {
    ctx.gradients_from(output_->param_begin());
    output_->loss_in_chunks(ctx, states, rows, targets, how.grad_scale, row_loss, row_nll, d_states);
  }
  if (how.backward) {
    stack_->backward(ctx, tape.stack, d_states, spare);
    if (gradients) gradients->finish();
    if (ready) ready->finish();
  }

  // The one place where results come back to the host.
  backend.reduce_sum(row_loss, cells, sums_, false);
  backend.reduce_sum(row_nll, cells, sums_ + 1, false);
  float sums[2] = {0.0f, 0.0f};
  backend.copy_to_host(sums, sums_, sizeof(sums));
  StepLoss result;
  result.loss_sum = sums[0];
  result.nll_sum = sums[1];
  for (int32_t n : b.tgt_lengths) result.target_tokens += n;
  if (sentence_nll) {
    std::vector<float> per_row(cells);
    backend.copy_to_host(per_row.data(), row_nll, per_row.size() * sizeof(float));
    sentence_nll->assign(batch, 0.0);
    for (int s = 0; s < batch; ++s)
      for (int t = 0; t < b.tgt_lengths[s]; ++t) (*sentence_nll)[s] += per_row[static_cast<std::size_t>(s) * len + t];
  }
  if (measured) *measured = memory.needed();
  return result;
}

std::size_t DecoderOnlyModel::workspace_bytes(int64_t max_tokens, int max_len, bool training) const {
  if (max_tokens <= 0 || max_len <= 0) {
    fail("cannot plan the workspace for {} tokens of sequences up to {} tokens; check --mini-batch-words and "
         "--max-length",
         max_tokens, max_len);
  }
  max_len = static_cast<int>(std::min<int64_t>({max_len, max_positions(), max_tokens}));
  // Every length up to max_len (attention pads head lengths above 8 to multiples of 8, so a shorter batch can need
  // more room: EncoderDecoderModel::workspace_bytes), each without and with document masks (which run attention
  // composed at every length and keep their padded starts).
  std::size_t measured = 0;
  for (int len = 1; len <= max_len; ++len) {
    data::Batch b;
    b.size = static_cast<int>((max_tokens + len - 1) / len);
    b.tgt_len = len;
    const std::size_t n = static_cast<std::size_t>(b.size) * len;
    b.tgt_in.assign(n, 1);
    b.tgt_out.assign(n, 1);
    b.tgt_lengths.assign(b.size, len);
    measured = std::max(measured, measure_bytes(b, training));
    b.doc_starts.assign(n, 0);
    measured = std::max(measured, measure_bytes(b, training));
  }
  // More sequences than this shape's need more room for their lengths (up to max_tokens ints).
  return measured + StepMemory::align((static_cast<std::size_t>(max_tokens) + 1) * sizeof(int32_t));
}

std::size_t DecoderOnlyModel::measure_bytes(const data::Batch& b, bool training) const {
  auto planning = kernels::make_planning_backend();
  Tape tape;
  StepRun how;
  how.train = how.backward = training;
  std::size_t measured = 0;
  run(b, *planning, nullptr, how, tape, nullptr, &measured);
  return measured;
}

StepLoss DecoderOnlyModel::run_step(const data::Batch& batch, kernels::Workspace& ws, const StepRun& how,
                          std::vector<double>* sentence_nll, std::vector<float>* logits) {
  return run(batch, backend_, &ws, how, tape_, sentence_nll, nullptr, logits);
}

}  // namespace lseq

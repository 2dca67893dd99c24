#include "core/model/encoder_decoder_model.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/model/layers/embedding_layer.h"
#include "core/model/layers/layer_context.h"
#include "core/model/step_gradients.h"
#include "core/model/step_memory.h"
#include "kernels/planning/planning_backend.h"
#include "util/error.h"

namespace lseq {

EncoderDecoderModel::EncoderDecoderModel(const ModelConfig& config, kernels::Backend& backend,
                                         kernels::DType compute_dt, ParamUse use)
    : Model(config, backend) {
  config_.validate();
  if (config_.is_lm()) fail("internal error: a language model's config (--type lm) given to the encoder-decoder model");
  const int dim = config_.dim_emb;
  ParamTable table;
  std::size_t src_emb, tgt_emb;
  if (config_.tied == TiedEmbeddings::all || config_.tied == TiedEmbeddings::source) {
    src_emb = tgt_emb = table.add("embeddings.shared.weight", {config_.tgt_vocab, dim}, ParamInit::normal_embedding);
  } else {
    src_emb = table.add("embeddings.src.weight", {config_.src_vocab, dim}, ParamInit::normal_embedding);
    tgt_emb = table.add("embeddings.tgt.weight", {config_.tgt_vocab, dim}, ParamInit::normal_embedding);
  }
  encoder_ = std::make_unique<Encoder>(table, config_, src_emb);
  decoder_ = std::make_unique<Decoder>(table, config_, tgt_emb);
  output_ = std::make_unique<OutputLayer>(
      table, config_,
      config_.tied == TiedEmbeddings::none || config_.tied == TiedEmbeddings::source ? OutputLayer::kUntied : tgt_emb);
  // The tensors below the encoder's (the embedding tables) get gradients out of backward's order.
  set_store(std::move(table), compute_dt, use, encoder_->param_begin());

  // --max-length counts words without eos/bos (as the corpus filter does): one more position for them.
  const std::vector<float> positions = sinusoidal_positions(config_.max_length + 1, dim, config_.positions);
  positions_ = backend_.allocate(positions.size() * kernels::dtype_size(compute_dt));
  upload_as(backend_, positions, compute_dt, positions_);
  sums_ = static_cast<float*>(backend_.allocate(2 * sizeof(float)));
}

EncoderDecoderModel::~EncoderDecoderModel() {
  backend_.release(sums_);
  backend_.release(positions_);
}

void EncoderDecoderModel::check_batch(const data::Batch& b) const {
  if (b.size <= 0 || b.src_len <= 0 || b.tgt_len <= 0) {
    fail("internal error: empty batch ({} sentences, lengths {} and {})", b.size, b.src_len, b.tgt_len);
  }
  if (b.src_len > config_.max_length + 1 || b.tgt_len > config_.max_length + 1) {
    fail("a batch has sentences of {} source and {} target tokens (eos/bos included) but the model's --max-length "
         "is {}; raise --max-length or filter longer sentences",
         b.src_len, b.tgt_len, config_.max_length);
  }
  const std::size_t n = static_cast<std::size_t>(b.size);
  if (b.src.size() != n * b.src_len || b.tgt_in.size() != n * b.tgt_len || b.tgt_out.size() != n * b.tgt_len ||
      b.src_lengths.size() != n || b.tgt_lengths.size() != n || !b.doc_starts.empty()) {
    fail("internal error: batch arrays do not match its shape ({} x {} / {})", b.size, b.src_len, b.tgt_len);
  }
  auto check_ids = [](const std::vector<int32_t>& ids, int vocab, const char* side) {
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab) {
        fail(
            "token id {} is outside the {} vocabulary of the model ({} entries); the vocabulary files do not match "
            "the model",
            id, side, vocab);
      }
    }
  };
  check_ids(b.src, config_.src_vocab, "source");
  check_ids(b.tgt_in, config_.tgt_vocab, "target");
  check_ids(b.tgt_out, config_.tgt_vocab, "target");
  for (int i = 0; i < b.size; ++i) {
    if (b.src_lengths[i] < 1 || b.src_lengths[i] > b.src_len || b.tgt_lengths[i] < 1 || b.tgt_lengths[i] > b.tgt_len) {
      fail("internal error: sentence {} of a batch has lengths {} / {} outside 1..{} / 1..{}", i, b.src_lengths[i],
           b.tgt_lengths[i], b.src_len, b.tgt_len);
    }
  }
}

bool EncoderDecoderModel::packs_source(const data::Batch& b, bool training) const {
  if (!pack_source_) return false;
  // Every attention over the source on the fused core (AttentionLayer::fused_core): lengths it takes, and dropout
  // on the probabilities (LayerContext::dropout draws only in training) only at lengths where the core draws it.
  const int head_dim = config_.dim_emb / config_.heads;
  const bool dropping = training && config_.dropout_attention > 0.0f;
  const bool fused = kernels::Backend::fused_attention_fits(b.src_len, b.src_len, head_dim) &&
                     kernels::Backend::fused_attention_fits(b.tgt_len, b.src_len, head_dim) &&
                     (!dropping || (kernels::Backend::fused_attention_drops(b.src_len, b.src_len) &&
                                    kernels::Backend::fused_attention_drops(b.tgt_len, b.src_len)));
  if (!fused) return false;
  for (int32_t n : b.src_lengths)
    if (n < b.src_len) return true;
  return false;  // no padding: nothing to skip
}

StepLoss EncoderDecoderModel::run(const data::Batch& b, kernels::Backend& backend, kernels::Workspace* ws,
                                  const StepRun& how, Tape& tape, std::vector<double>* sentence_nll,
                                  std::size_t* measured, std::vector<float>* logits) const {
  const int batch = b.size, src_len = b.src_len, tgt_len = b.tgt_len;
  const int padded_src_rows = batch * src_len, tgt_rows = batch * tgt_len;
  const std::size_t dim = static_cast<std::size_t>(config_.dim_emb);
  if (ws) ws->reset();
  StepMemory memory(ws);
  LayerContext ctx{backend, memory, *store_, store_->working_dtype(), how.train, how.seed, how.step};
  ctx.recompute_ffn = recompute_ffn_ && how.backward;
  const int packed_src_rows =
      packs_source(b, how.train) ? std::accumulate(b.src_lengths.begin(), b.src_lengths.end(), 0) : 0;
  const bool packed = packed_src_rows > 0;
  const int src_rows = packed ? packed_src_rows : padded_src_rows;

  // Ids and lengths (and the source's packed rows: row offsets and each row's padded position): one host staging
  // buffer, one upload.
  const std::size_t ids = static_cast<std::size_t>(padded_src_rows) + 2 * static_cast<std::size_t>(tgt_rows) +
                          2 * batch + (packed ? batch + 1 + static_cast<std::size_t>(src_rows) : 0);
  int32_t* dev_ids = memory.keep_n<int32_t>(ids);
  if (ws) {
    staging_.clear();
    staging_.insert(staging_.end(), b.src.begin(), b.src.end());
    staging_.insert(staging_.end(), b.tgt_in.begin(), b.tgt_in.end());
    staging_.insert(staging_.end(), b.tgt_out.begin(), b.tgt_out.end());
    staging_.insert(staging_.end(), b.src_lengths.begin(), b.src_lengths.end());
    staging_.insert(staging_.end(), b.tgt_lengths.begin(), b.tgt_lengths.end());
    if (packed) {
      int32_t offset = 0;
      for (int s = 0; s < batch; ++s) staging_.push_back(offset), offset += b.src_lengths[s];
      staging_.push_back(offset);
      for (int s = 0; s < batch; ++s)
        for (int i = 0; i < b.src_lengths[s]; ++i) staging_.push_back(s * src_len + i);
    }
    backend.copy_to_device(dev_ids, staging_.data(), ids * sizeof(int32_t));
  }
  const int32_t* src = dev_ids;
  const int32_t* tgt_in = src + padded_src_rows;
  const int32_t* tgt_out = tgt_in + tgt_rows;
  const int32_t* src_lengths = tgt_out + tgt_rows;
  const int32_t* tgt_lengths = src_lengths + batch;
  PackedRows src_packing;
  if (packed) {
    src_packing.offsets = tgt_lengths + batch;
    src_packing.index = src_packing.offsets + batch + 1;
    src_packing.rows = src_rows;
  }
  float* row_loss = memory.keep_n<float>(tgt_rows);
  float* row_nll = memory.keep_n<float>(tgt_rows);
  // What backward passes between layers, taken before forward: backward gives back each layer's activations as
  // it goes (the step's memory is a stack), so only what lies below them outlives them.
  void* d_decoded = how.backward ? ctx.keep(tgt_rows * dim) : nullptr;
  void* spare_tgt = how.backward ? ctx.keep(tgt_rows * dim) : nullptr;
  void* d_encoded = how.backward ? ctx.keep(src_rows * dim) : nullptr;
  void* spare_src = how.backward ? ctx.keep(src_rows * dim) : nullptr;
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

  const void* encoded =
      encoder_->forward(ctx, src, src_lengths, batch, src_len, positions_, tape.encoder, src_packing);
  const DecoderMemory mem{encoded, src_lengths, src_len, src_packing};
  const void* decoded = decoder_->forward(ctx, tgt_in, tgt_lengths, batch, tgt_len, positions_, mem, tape.decoder);
  if (logits) {  // a test path (forward_logits): all logits, bias included, on the host
    if (how.backward) fail("internal error: logits are only returned by forward-only runs");
    output_->forward(ctx, decoded, tgt_rows, tape.output);
    logits->resize(static_cast<std::size_t>(tgt_rows) * config_.tgt_vocab);
    const std::size_t bytes = logits->size() * sizeof(float);
    if (ctx.dt == kernels::DType::f32) {
      backend.copy_to_host(logits->data(), tape.output.logits, bytes);
    } else {  // a temporary fp32 copy
      void* wide = backend.allocate(bytes);
      backend.cast(ctx.dt, tape.output.logits, kernels::DType::f32, wide, logits->size());
      backend.copy_to_host(logits->data(), wide, bytes);
      backend.release(wide);
    }
    output_->loss(ctx, tape.output, tgt_out, false, how.grad_scale, row_loss, row_nll);
  } else {
    ctx.gradients_from(output_->param_begin());
    output_->loss_in_chunks(ctx, decoded, tgt_rows, tgt_out, how.grad_scale, row_loss, row_nll, d_decoded);
  }

  if (how.backward) {
    backend.fill(ctx.dt, d_encoded, src_rows * dim, 0.0f);
    decoder_->backward(ctx, tape.decoder, d_decoded, spare_tgt, d_encoded);
    encoder_->backward(ctx, tape.encoder, d_encoded, spare_src);
    if (gradients) gradients->finish();
    if (ready) ready->finish();
  }

  // The one place where results come back to the host.
  backend.reduce_sum(row_loss, tgt_rows, sums_, false);
  backend.reduce_sum(row_nll, tgt_rows, sums_ + 1, false);
  float sums[2] = {0.0f, 0.0f};
  backend.copy_to_host(sums, sums_, sizeof(sums));
  StepLoss result;
  result.loss_sum = sums[0];
  result.nll_sum = sums[1];
  for (int32_t n : b.tgt_lengths) result.target_tokens += n;
  if (sentence_nll) {
    std::vector<float> rows(static_cast<std::size_t>(tgt_rows));
    backend.copy_to_host(rows.data(), row_nll, rows.size() * sizeof(float));
    sentence_nll->assign(batch, 0.0);
    for (int s = 0; s < batch; ++s) {
      for (int t = 0; t < b.tgt_lengths[s]; ++t) (*sentence_nll)[s] += rows[static_cast<std::size_t>(s) * tgt_len + t];
    }
  }
  if (measured) *measured = memory.needed();
  return result;
}

std::size_t EncoderDecoderModel::workspace_bytes(int64_t max_tokens, int max_len, bool training) const {
  if (max_tokens <= 0 || max_len <= 0) {
    fail(
        "cannot plan the workspace for {} tokens of sentences up to {} tokens; check --mini-batch-words and "
        "--max-length",
        max_tokens, max_len);
  }
  // Longer sentences are rejected (check_batch), and a batch holds at most max_tokens tokens.
  max_len = static_cast<int>(std::min<int64_t>({max_len, config_.max_length, max_tokens}));
  // A batch of sentences of length len holds at most max_tokens / len of them. Activations grow with the tokens
  // (batch * len <= max_tokens per side) and attention scores with batch * len * len, but attention pads head
  // lengths above 8 to a multiple of 8 (AttentionLayer), so shorter sentences (9 tokens: 16 rows) can need more
  // room than the longest ones. Run the step over the planning backend for every length up to max_len and keep the
  // largest; a batch with shorter sources than targets (or the reverse) needs no more than its longer side's length
  // on both sides.
  std::size_t measured = 0;
  for (int len = 1; len <= max_len; ++len) {
    data::Batch b;
    b.size = static_cast<int>((max_tokens + len - 1) / len);
    b.src_len = b.tgt_len = len;
    const std::size_t n = static_cast<std::size_t>(b.size) * len;
    b.src.assign(n, 1);
    b.tgt_in.assign(n, 1);
    b.tgt_out.assign(n, 1);
    b.src_lengths.assign(b.size, len);
    b.tgt_lengths.assign(b.size, len);
    measured = std::max(measured, measure_bytes(b, training));
  }
  // Many short sentences need more room for per-sentence lengths than this shape (up to 2 * max_tokens ids), and a
  // packed source its row offsets and positions (up to 2 * max_tokens + 1 more).
  return measured + StepMemory::align((4 * static_cast<std::size_t>(max_tokens) + 1) * sizeof(int32_t));
}

std::size_t EncoderDecoderModel::measure_bytes(const data::Batch& b, bool training) const {
  auto planning = kernels::make_planning_backend();
  Tape tape;
  StepRun how;
  how.train = how.backward = training;
  // A packed source makes a step's memory depend on its sentences' lengths, while sizes are kept per shape
  // (step_bytes): measure the shape padded (every source full) and at its largest packing (all full but one, one
  // token short), and keep the larger.
  data::Batch shape = b;
  shape.src_lengths.assign(static_cast<std::size_t>(b.size), b.src_len);
  std::size_t measured = 0, packed = 0;
  run(shape, *planning, nullptr, how, tape, nullptr, &measured);
  if (b.src_len > 1 && b.size > 0) {
    shape.src_lengths[0] = b.src_len - 1;
    run(shape, *planning, nullptr, how, tape, nullptr, &packed);
  }
  return std::max(measured, packed);
}

StepLoss EncoderDecoderModel::run_step(const data::Batch& batch, kernels::Workspace& ws, const StepRun& how,
                          std::vector<double>* sentence_nll, std::vector<float>* logits) {
  return run(batch, backend_, &ws, how, tape_, sentence_nll, nullptr, logits);
}

}  // namespace lseq

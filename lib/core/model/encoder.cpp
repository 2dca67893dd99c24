#include "core/model/encoder.h"

#include <utility>

#include "util/error.h"

namespace lseq {

EncoderLayer::EncoderLayer(ParamTable& table, const std::string& prefix, const ModelConfig& config, int index,
                           StackRole role)
    : config_(config), index_(index), causal_(role == StackRole::causal_decoder),
      stack_(causal_ ? Stack::decoder : Stack::encoder) {
  attn_begin_ = table.next_offset();
  attn_ = AttentionLayer(table, prefix + ".self_attn", config.dim_emb, config.heads, AttentionLayer::Kind::self);
  attn_block_ = ResidualBlock(table, prefix + ".self_attn_norm", config.dim_emb, config.layer_norm_eps, config.norm);
  ffn_begin_ = table.next_offset();
  ffn_ = FeedForwardLayer(table, prefix + ".ffn", config.dim_emb, config.dim_ffn, config.activation);
  ffn_block_ = ResidualBlock(table, prefix + ".ffn_norm", config.dim_emb, config.layer_norm_eps, config.norm);
}

const void* EncoderLayer::forward(const LayerContext& ctx, const void* x, const int32_t* lengths, int batch, int len,
                                  Saved& s, const PackedRows& packing, const int32_t* key_starts) const {
  const int rows = packing.count(batch, len);
  const std::size_t count = static_cast<std::size_t>(rows) * config_.dim_emb;
  const void* h;
  s.attn_from = ctx.memory.kept();
  {
    TempScope scope(ctx.memory);
    const void* in = attn_block_.sublayer_input(ctx, x, rows, s.attn_block);
    void* o = ctx.temp(count);
    attn_.forward(ctx, in, nullptr, lengths, batch, len, len, causal_,
                  ctx.dropout(config_.dropout_attention, dropout_site(stack_, index_, DropoutKind::self_attn_probs)),
                  o, s.attn, packing, packing, key_starts);
    h = attn_block_.output(
        ctx, x, o, attn_.out_bias(), rows,
        ctx.dropout(config_.dropout, dropout_site(stack_, index_, DropoutKind::self_attn_residual)), s.attn_block);
  }
  s.ffn_from = ctx.memory.kept();
  TempScope scope(ctx.memory);
  const void* in = ffn_block_.sublayer_input(ctx, h, rows, s.ffn_block);
  void* o = ctx.temp(count);
  ffn_.forward(ctx, in, rows,
               ctx.dropout(config_.dropout_ffn, dropout_site(stack_, index_, DropoutKind::ffn_activation)), o, s.ffn);
  return ffn_block_.output(ctx, h, o, ffn_.out_bias(), rows,
                           ctx.dropout(config_.dropout, dropout_site(stack_, index_, DropoutKind::ffn_residual)),
                           s.ffn_block);
}

const void* EncoderLayer::step(const LayerContext& ctx, const void* x, const CachedSelfAttention& st, void* cache,
                               bool cache_only) const {
  if (!causal_) fail("internal error: incremental steps need a causal stack");
  const int rows = st.rows;
  const std::size_t count = static_cast<std::size_t>(rows) * config_.dim_emb;
  const kernels::Dropout none;
  const void* h;
  {
    TempScope scope(ctx.memory);
    ResidualBlock::Saved block;
    const void* in = attn_block_.sublayer_input(ctx, x, rows, block);
    void* o = cache_only ? nullptr : ctx.temp(count);
    attn_.step_self(ctx, in, st, cache, o, cache_only);
    if (cache_only) return nullptr;
    h = attn_block_.output(ctx, x, o, attn_.out_bias(), rows, none, block, false);
  }
  TempScope scope(ctx.memory);
  ResidualBlock::Saved block;
  const void* in = ffn_block_.sublayer_input(ctx, h, rows, block);
  void* o = ctx.temp(count);
  ffn_.infer(ctx, in, rows, o);
  return ffn_block_.output(ctx, h, o, ffn_.out_bias(), rows, none, block, false);
}

void EncoderLayer::step_pre_norm(const LayerContext& ctx, void* x, void* normed, const CachedSelfAttention& st,
                                 void* cache, bool cache_only, const LayerNormLayer& next_norm) const {
  if (!causal_ || config_.norm != NormPlacement::pre)
    fail("internal error: step_pre_norm needs a causal pre-norm stack");
  const int rows = st.rows;
  TempScope scope(ctx.memory);
  void* o = cache_only ? nullptr : ctx.temp(static_cast<std::size_t>(rows) * config_.dim_emb);
  attn_.step_self(ctx, normed, st, cache, o, cache_only);
  if (cache_only) return;
  // normed is free once the attention has read it: it takes each block's next input.
  ffn_block_.norm().forward_residual_sum(ctx, o, ctx.w(attn_.out_bias()), x, rows, x, normed);
  ffn_.infer(ctx, normed, rows, o);
  next_norm.forward_residual_sum(ctx, o, ctx.w(ffn_.out_bias()), x, rows, x, normed);
}

void* EncoderLayer::backward(const LayerContext& ctx, const Saved& s, void* g, void* spare) const {
  void* cur = ffn_block_.backward(
      ctx, s.ffn_block, g, spare, ffn_.out_bias(), ffn_begin_, s.ffn_from,
      [&](const void* d_o, void* dx, bool accumulate) { ffn_.backward(ctx, s.ffn, d_o, dx, accumulate); });
  return attn_block_.backward(
      ctx, s.attn_block, cur, cur == g ? spare : g, attn_.out_bias(), attn_begin_, s.attn_from,
      [&](const void* d_o, void* dx, bool accumulate) { attn_.backward(ctx, s.attn, d_o, dx, accumulate, nullptr); });
}

Encoder::Encoder(ParamTable& table, const ModelConfig& config, std::size_t embedding_table, StackRole role,
                 std::size_t learned_positions)
    : config_(config), role_(role), param_begin_(table.next_offset()),
      embedding_(embedding_table, config.dim_emb, learned_positions, config.scale_embeddings) {
  const bool causal = role == StackRole::causal_decoder;
  const std::string prefix = causal ? "decoder" : "encoder";
  for (int i = 0; i < (causal ? config.dec_depth : config.enc_depth); ++i) {
    layers_.emplace_back(table, prefix + ".l" + std::to_string(i + 1), config, i, role);
  }
  final_norm_begin_ = table.next_offset();
  if (config.norm == NormPlacement::pre) {
    final_norm_ = LayerNormLayer(table, prefix + ".final_norm", config.dim_emb, config.layer_norm_eps);
  }
}

const void* Encoder::forward(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
                             const void* positions, Saved& s, const PackedRows& packing,
                             const DocumentMasks& documents) const {
  if (packing.packed() && documents.key_starts)
    fail("internal error: document masks over packed rows are not implemented");
  s.layers.resize(layers_.size());
  s.tokens = tokens;
  s.batch = batch, s.len = len;
  s.packing = packing;
  s.documents = documents;
  s.rows = packing.count(batch, len);
  s.kept_from = ctx.memory.kept();
  // The target embedding's site for a language model's stack (Marian's lm-transformer is a decoder).
  const int embedding_site = role_ == StackRole::causal_decoder ? 1 : 0;
  s.emb_drop = ctx.dropout(config_.embedding_dropout ? config_.dropout : 0.0f,
                           dropout_site(Stack::embeddings, embedding_site, DropoutKind::embedding));
  const int dim = config_.dim_emb;
  const std::size_t count = static_cast<std::size_t>(s.rows) * dim;
  void* emb = ctx.keep(count);
  if (packing.packed()) {  // embedded over the padded rows (positions by index), then gathered
    TempScope scope(ctx.memory);
    void* padded = ctx.temp(static_cast<std::size_t>(batch) * len * dim);
    embedding_.forward(ctx, tokens, batch, len, positions, s.emb_drop, padded);
    ctx.backend.gather_rows(ctx.dt, padded, dim, packing.index, s.rows, dim, emb, dim, nullptr);
  } else {
    embedding_.forward(ctx, tokens, batch, len, positions, s.emb_drop, emb, documents.position_ids);
  }
  const void* h = emb;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    h = layers_[i].forward(ctx, h, lengths, batch, len, s.layers[i], packing, documents.key_starts);
  if (config_.norm == NormPlacement::post) return h;
  void* out = ctx.keep(count);
  final_norm_.forward(ctx, h, s.rows, out, s.final_norm);
  return out;
}

void Encoder::encode(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
                     const void* positions, void* out) const {
  if (ctx.train) fail("internal error: Encoder::encode is forward-only and runs without dropout");
  const std::size_t count = static_cast<std::size_t>(batch) * len * config_.dim_emb;
  embedding_.forward(ctx, tokens, batch, len, positions, kernels::Dropout{}, out);
  for (const EncoderLayer& layer : layers_) {
    const std::size_t mark = ctx.memory.kept();
    EncoderLayer::Saved saved;
    const void* h = layer.forward(ctx, out, lengths, batch, len, saved);
    ctx.backend.copy(out, h, ctx.bytes(count));
    ctx.memory.release_kept(mark);
  }
  if (config_.norm == NormPlacement::post) return;
  const std::size_t mark = ctx.memory.kept();
  LayerNormLayer::Saved saved;
  void* normed = ctx.keep(count);
  final_norm_.forward(ctx, out, batch * len, normed, saved);
  ctx.backend.copy(out, normed, ctx.bytes(count));
  ctx.memory.release_kept(mark);
}

const void* Encoder::step(const LayerContext& ctx, const int32_t* tokens, const int32_t* position_ids,
                          const void* positions, const CachedSelfAttention& st, const std::vector<void*>& caches,
                          bool cache_only) const {
  if (ctx.train) fail("internal error: Encoder::step is forward-only and runs without dropout");
  const std::size_t count = static_cast<std::size_t>(st.rows) * config_.dim_emb;
  // One buffer of states; what each layer keeps is given back once its output is copied there, so that a long
  // prompt's prefill holds one layer's worth of activations (as encode() does).
  void* x = ctx.keep(count);
  embedding_.forward(ctx, tokens, 1, st.rows, positions, kernels::Dropout{}, x, position_ids);
  if (config_.norm == NormPlacement::pre) {
    void* normed = ctx.keep(count);
    LayerNormLayer::Saved saved;
    (layers_.empty() ? final_norm_ : layers_.front().attention_norm()).forward(ctx, x, st.rows, normed, saved);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      const bool last = i + 1 == layers_.size();
      layers_[i].step_pre_norm(ctx, x, normed, st, caches.at(i), cache_only && last,
                               last ? final_norm_ : layers_[i + 1].attention_norm());
    }
    return cache_only ? nullptr : normed;
  }
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const std::size_t mark = ctx.memory.kept();
    const void* h = layers_[i].step(ctx, x, st, caches.at(i), cache_only && i + 1 == layers_.size());
    if (h) ctx.backend.copy(x, h, ctx.bytes(count));
    ctx.memory.release_kept(mark);
  }
  return cache_only ? nullptr : x;
}

void Encoder::backward(const LayerContext& ctx, const Saved& s, void* d_out, void* spare) const {
  void* g = d_out;
  if (config_.norm == NormPlacement::pre) {
    ctx.gradients_from(final_norm_begin_);
    final_norm_.backward(ctx, s.final_norm, d_out, s.rows, spare);
    std::swap(g, spare);
  }
  for (std::size_t i = layers_.size(); i-- > 0;) {
    void* cur = layers_[i].backward(ctx, s.layers[i], g, spare);
    if (cur != g) std::swap(g, spare);
  }
  if (s.packing.packed()) {  // scattered back over the padded rows (padding 0)
    TempScope scope(ctx.memory);
    const int dim = config_.dim_emb;
    void* padded = ctx.temp(static_cast<std::size_t>(s.batch) * s.len * dim);
    ctx.backend.fill(ctx.dt, padded, static_cast<std::size_t>(s.batch) * s.len * dim, 0.0f);
    ctx.backend.gather_rows(ctx.dt, g, dim, nullptr, s.rows, dim, padded, dim, s.packing.index);
    embedding_.backward(ctx, s.tokens, s.batch, s.len, s.emb_drop, padded);
  } else {
    embedding_.backward(ctx, s.tokens, s.batch, s.len, s.emb_drop, g, s.documents.position_ids);
  }
  ctx.memory.release_kept(s.kept_from);
}

}  // namespace lseq

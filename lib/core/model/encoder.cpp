#include "core/model/encoder.h"

#include <utility>

#include "util/error.h"

namespace lseq {

EncoderLayer::EncoderLayer(ParamTable& table, const std::string& prefix, const ModelConfig& config, int index)
    : config_(config), index_(index) {
  attn_begin_ = table.next_offset();
  attn_ = AttentionLayer(table, prefix + ".self_attn", config.dim_emb, config.heads, AttentionLayer::Kind::self);
  attn_block_ = ResidualBlock(table, prefix + ".self_attn_norm", config.dim_emb, config.layer_norm_eps, config.norm);
  ffn_begin_ = table.next_offset();
  ffn_ = FeedForwardLayer(table, prefix + ".ffn", config.dim_emb, config.dim_ffn, config.activation);
  ffn_block_ = ResidualBlock(table, prefix + ".ffn_norm", config.dim_emb, config.layer_norm_eps, config.norm);
}

const void* EncoderLayer::forward(const LayerContext& ctx, const void* x, const int32_t* lengths, int batch, int len,
                                  Saved& s, const PackedRows& packing) const {
  const int rows = packing.count(batch, len);
  const std::size_t count = static_cast<std::size_t>(rows) * config_.dim_emb;
  const void* h;
  s.attn_from = ctx.memory.kept();
  {
    TempScope scope(ctx.memory);
    const void* in = attn_block_.sublayer_input(ctx, x, rows, s.attn_block);
    void* o = ctx.temp(count);
    attn_.forward(
        ctx, in, nullptr, lengths, batch, len, len, false,
        ctx.dropout(config_.dropout_attention, dropout_site(Stack::encoder, index_, DropoutKind::self_attn_probs)), o,
        s.attn, packing, packing);
    h = attn_block_.output(
        ctx, x, o, attn_.out_bias(), rows,
        ctx.dropout(config_.dropout, dropout_site(Stack::encoder, index_, DropoutKind::self_attn_residual)),
        s.attn_block);
  }
  s.ffn_from = ctx.memory.kept();
  TempScope scope(ctx.memory);
  const void* in = ffn_block_.sublayer_input(ctx, h, rows, s.ffn_block);
  void* o = ctx.temp(count);
  ffn_.forward(ctx, in, rows,
               ctx.dropout(config_.dropout_ffn, dropout_site(Stack::encoder, index_, DropoutKind::ffn_activation)), o,
               s.ffn);
  return ffn_block_.output(
      ctx, h, o, ffn_.out_bias(), rows,
      ctx.dropout(config_.dropout, dropout_site(Stack::encoder, index_, DropoutKind::ffn_residual)), s.ffn_block);
}

void* EncoderLayer::backward(const LayerContext& ctx, const Saved& s, void* g, void* spare) const {
  void* cur = ffn_block_.backward(ctx, s.ffn_block, g, spare, ffn_.out_bias(), ffn_begin_, s.ffn_from,
                                  [&](void* d_o, void* dx, bool accumulate) {
                                    ffn_.backward(ctx, s.ffn, d_o, dx, accumulate);
                                  });
  return attn_block_.backward(ctx, s.attn_block, cur, cur == g ? spare : g, attn_.out_bias(), attn_begin_,
                              s.attn_from, [&](void* d_o, void* dx, bool accumulate) {
                                attn_.backward(ctx, s.attn, d_o, dx, accumulate, nullptr);
                              });
}

Encoder::Encoder(ParamTable& table, const ModelConfig& config, std::size_t embedding_table)
    : config_(config), embedding_(embedding_table, config.dim_emb), param_begin_(table.next_offset()) {
  for (int i = 0; i < config.enc_depth; ++i) {
    layers_.emplace_back(table, "encoder.l" + std::to_string(i + 1), config, i);
  }
  final_norm_begin_ = table.next_offset();
  if (config.norm == NormPlacement::pre) {
    final_norm_ = LayerNormLayer(table, "encoder.final_norm", config.dim_emb, config.layer_norm_eps);
  }
}

const void* Encoder::forward(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
                             const void* positions, Saved& s, const PackedRows& packing) const {
  s.layers.resize(layers_.size());
  s.tokens = tokens;
  s.batch = batch, s.len = len;
  s.packing = packing;
  s.rows = packing.count(batch, len);
  s.kept_from = ctx.memory.kept();
  s.emb_drop = ctx.dropout(config_.embedding_dropout ? config_.dropout : 0.0f,
                           dropout_site(Stack::embeddings, 0, DropoutKind::embedding));
  const int dim = config_.dim_emb;
  const std::size_t count = static_cast<std::size_t>(s.rows) * dim;
  void* emb = ctx.keep(count);
  if (packing.packed()) {  // embedded over the padded rows (positions by index), then gathered
    TempScope scope(ctx.memory);
    void* padded = ctx.temp(static_cast<std::size_t>(batch) * len * dim);
    embedding_.forward(ctx, tokens, batch, len, positions, s.emb_drop, padded);
    ctx.backend.gather_rows(ctx.dt, padded, dim, packing.index, s.rows, dim, emb, dim, nullptr);
  } else {
    embedding_.forward(ctx, tokens, batch, len, positions, s.emb_drop, emb);
  }
  const void* h = emb;
  for (std::size_t i = 0; i < layers_.size(); ++i)
    h = layers_[i].forward(ctx, h, lengths, batch, len, s.layers[i], packing);
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
    embedding_.backward(ctx, s.tokens, s.batch, s.len, s.emb_drop, g);
  }
  ctx.memory.release_kept(s.kept_from);
}

}  // namespace lseq

#include "core/model/decoder.h"

#include <utility>

#include "util/error.h"

namespace lseq {

namespace {
uint64_t site(int layer, DropoutKind kind) { return dropout_site(Stack::decoder, layer, kind); }
}  // namespace

DecoderLayer::DecoderLayer(ParamTable& table, const std::string& prefix, const ModelConfig& config, int index)
    : config_(config), index_(index) {
  const int dim = config.dim_emb;
  self_begin_ = table.next_offset();
  self_attn_ = AttentionLayer(table, prefix + ".self_attn", dim, config.heads, AttentionLayer::Kind::self);
  self_block_ = ResidualBlock(table, prefix + ".self_attn_norm", dim, config.layer_norm_eps, config.norm);
  cross_begin_ = table.next_offset();
  cross_attn_ = AttentionLayer(table, prefix + ".cross_attn", dim, config.heads, AttentionLayer::Kind::cross);
  cross_block_ = ResidualBlock(table, prefix + ".cross_attn_norm", dim, config.layer_norm_eps, config.norm);
  ffn_begin_ = table.next_offset();
  ffn_ = FeedForwardLayer(table, prefix + ".ffn", dim, config.dim_ffn, config.activation);
  ffn_block_ = ResidualBlock(table, prefix + ".ffn_norm", dim, config.layer_norm_eps, config.norm);
}

const void* DecoderLayer::forward(const LayerContext& ctx, const void* x, const int32_t* lengths, int batch, int len,
                                  const DecoderMemory& memory, Saved& s) const {
  const int rows = batch * len;
  const std::size_t count = static_cast<std::size_t>(rows) * config_.dim_emb;
  const void* h1;
  s.self_from = ctx.memory.kept();
  {
    TempScope scope(ctx.memory);
    const void* in = self_block_.sublayer_input(ctx, x, rows, s.self_block);
    void* o = ctx.temp(count);
    self_attn_.forward(ctx, in, nullptr, lengths, batch, len, len, true,
                       ctx.dropout(config_.dropout_attention, site(index_, DropoutKind::self_attn_probs)), o,
                       s.self_attn);
    h1 = self_block_.output(ctx, x, o, self_attn_.out_bias(), rows,
                            ctx.dropout(config_.dropout, site(index_, DropoutKind::self_attn_residual)), s.self_block);
  }
  const void* h2;
  s.cross_from = ctx.memory.kept();
  {
    TempScope scope(ctx.memory);
    const void* in = cross_block_.sublayer_input(ctx, h1, rows, s.cross_block);
    void* o = ctx.temp(count);
    cross_attn_.forward(ctx, in, memory.states, memory.lengths, batch, len, memory.len, false,
                        ctx.dropout(config_.dropout_attention, site(index_, DropoutKind::cross_attn_probs)), o,
                        s.cross_attn, PackedRows{}, memory.packing);
    h2 = cross_block_.output(ctx, h1, o, cross_attn_.out_bias(), rows,
                             ctx.dropout(config_.dropout, site(index_, DropoutKind::cross_attn_residual)),
                             s.cross_block);
  }
  s.ffn_from = ctx.memory.kept();
  TempScope scope(ctx.memory);
  const void* in = ffn_block_.sublayer_input(ctx, h2, rows, s.ffn_block);
  void* o = ctx.temp(count);
  ffn_.forward(ctx, in, rows, ctx.dropout(config_.dropout_ffn, site(index_, DropoutKind::ffn_activation)), o, s.ffn);
  return ffn_block_.output(ctx, h2, o, ffn_.out_bias(), rows,
                           ctx.dropout(config_.dropout, site(index_, DropoutKind::ffn_residual)), s.ffn_block);
}

void* DecoderLayer::backward(const LayerContext& ctx, const Saved& s, void* g, void* spare, void* d_memory) const {
  void* cur = ffn_block_.backward(
      ctx, s.ffn_block, g, spare, ffn_.out_bias(), ffn_begin_, s.ffn_from,
      [&](const void* d_o, void* dx, bool accumulate) { ffn_.backward(ctx, s.ffn, d_o, dx, accumulate); });
  cur = cross_block_.backward(ctx, s.cross_block, cur, cur == g ? spare : g, cross_attn_.out_bias(), cross_begin_,
                              s.cross_from, [&](const void* d_o, void* dx, bool accumulate) {
                                cross_attn_.backward(ctx, s.cross_attn, d_o, dx, accumulate, d_memory);
                              });
  return self_block_.backward(ctx, s.self_block, cur, cur == g ? spare : g, self_attn_.out_bias(), self_begin_,
                              s.self_from, [&](const void* d_o, void* dx, bool accumulate) {
                                self_attn_.backward(ctx, s.self_attn, d_o, dx, accumulate, nullptr);
                              });
}

void DecoderLayer::project_memory(const LayerContext& ctx, const void* states, int sentences, int src_len,
                                  int memory_sentences, int memory_len, void* cross_kv) const {
  cross_attn_.project_kv(ctx, states, sentences, src_len, memory_len, memory_sentences, cross_kv);
}

void DecoderLayer::self_attention_step(const LayerContext& ctx, const void* in, const DecoderStep& st,
                                       const DecoderLayerCache& cache, void* o) const {
  // Position t's keys and values appended to every row's slices, then attention over positions 0..t (the first
  // self_lengths[r] = t + 1 of max_len), each read where the origin table says the hypothesis' history wrote it.
  CachedSelfAttention self;
  self.rows = st.rows, self.max_len = st.max_len;
  self.lengths = st.self_lengths;
  self.key_starts = st.key_starts;
  self.append_dst = st.append_dst;
  self.origin = st.origin;
  self_attn_.step_self(ctx, in, self, cache.self_kv, o);
}

void DecoderLayer::cross_attention_step(const LayerContext& ctx, const void* in, const DecoderStep& st,
                                        const DecoderLayerCache& cache, void* o) const {
  const int rows = st.rows, hd = config_.head_dim();
  const std::size_t count = static_cast<std::size_t>(rows) * config_.dim_emb;
  TempScope scope(ctx.memory);
  void* q = ctx.temp(count);
  cross_attn_.project_q(ctx, in, rows, 1, 1, q);
  // Rows share their sentence's keys/values: slices are picked by st.cross_slices, not copied per hypothesis.
  const std::size_t memory_count = static_cast<std::size_t>(st.memory_sentences) * st.src_len * config_.dim_emb;
  void* context = ctx.temp(count);
  cross_attn_.attend_step(ctx, q, cache.cross_kv, offset_ptr(cache.cross_kv, memory_count, ctx.dt),
                          static_cast<int64_t>(st.src_len) * hd, st.cross_slices, nullptr, 0, st.src_lengths, rows,
                          st.src_len, context);
  cross_attn_.project_out(ctx, context, rows, o);
}

const void* DecoderLayer::step(const LayerContext& ctx, const void* x, const DecoderStep& st,
                               const DecoderLayerCache& cache) const {
  const int rows = st.rows;
  const std::size_t count = static_cast<std::size_t>(rows) * config_.dim_emb;
  const kernels::Dropout none;
  const void* h1;
  {
    TempScope scope(ctx.memory);
    ResidualBlock::Saved block;
    const void* in = self_block_.sublayer_input(ctx, x, rows, block);
    void* o = ctx.temp(count);
    self_attention_step(ctx, in, st, cache, o);
    h1 = self_block_.output(ctx, x, o, self_attn_.out_bias(), rows, none, block, false);
  }
  const void* h2;
  {
    TempScope scope(ctx.memory);
    ResidualBlock::Saved block;
    const void* in = cross_block_.sublayer_input(ctx, h1, rows, block);
    void* o = ctx.temp(count);
    cross_attention_step(ctx, in, st, cache, o);
    h2 = cross_block_.output(ctx, h1, o, cross_attn_.out_bias(), rows, none, block, false);
  }
  TempScope scope(ctx.memory);
  ResidualBlock::Saved block;
  const void* in = ffn_block_.sublayer_input(ctx, h2, rows, block);
  void* o = ctx.temp(count);
  ffn_.infer(ctx, in, rows, o);
  return ffn_block_.output(ctx, h2, o, ffn_.out_bias(), rows, none, block, false);
}

void DecoderLayer::step_pre_norm(const LayerContext& ctx, void* x, void* normed, const DecoderStep& st,
                                 const DecoderLayerCache& cache, const LayerNormLayer& next_norm) const {
  if (config_.norm != NormPlacement::pre) fail("internal error: step_pre_norm needs a pre-norm stack");
  const int rows = st.rows;
  TempScope scope(ctx.memory);
  void* o = ctx.temp(static_cast<std::size_t>(rows) * config_.dim_emb);
  // normed is free once a sublayer has read it: it takes each block's next input.
  self_attention_step(ctx, normed, st, cache, o);
  cross_block_.norm().forward_residual_sum(ctx, o, ctx.w(self_attn_.out_bias()), x, rows, x, normed);
  cross_attention_step(ctx, normed, st, cache, o);
  ffn_block_.norm().forward_residual_sum(ctx, o, ctx.w(cross_attn_.out_bias()), x, rows, x, normed);
  ffn_.infer(ctx, normed, rows, o);
  next_norm.forward_residual_sum(ctx, o, ctx.w(ffn_.out_bias()), x, rows, x, normed);
}

Decoder::Decoder(ParamTable& table, const ModelConfig& config, std::size_t embedding_table)
    : config_(config), embedding_(embedding_table, config.dim_emb) {
  for (int i = 0; i < config.dec_depth; ++i) {
    layers_.emplace_back(table, "decoder.l" + std::to_string(i + 1), config, i);
  }
  final_norm_begin_ = table.next_offset();
  if (config.norm == NormPlacement::pre) {
    final_norm_ = LayerNormLayer(table, "decoder.final_norm", config.dim_emb, config.layer_norm_eps);
  }
}

const void* Decoder::forward(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
                             const void* positions, const DecoderMemory& memory, Saved& s) const {
  s.layers.resize(layers_.size());
  s.tokens = tokens;
  s.batch = batch, s.len = len;
  s.kept_from = ctx.memory.kept();
  s.emb_drop = ctx.dropout(config_.embedding_dropout ? config_.dropout : 0.0f,
                           dropout_site(Stack::embeddings, 1, DropoutKind::embedding));
  const std::size_t count = static_cast<std::size_t>(batch) * len * config_.dim_emb;
  void* emb = ctx.keep(count);
  embedding_.forward(ctx, tokens, batch, len, positions, s.emb_drop, emb);
  const void* h = emb;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i].forward(ctx, h, lengths, batch, len, memory, s.layers[i]);
  }
  if (config_.norm == NormPlacement::post) return h;
  void* out = ctx.keep(count);
  final_norm_.forward(ctx, h, batch * len, out, s.final_norm);
  return out;
}

void Decoder::project_memory(const LayerContext& ctx, const void* states, int sentences, int src_len,
                             int memory_sentences, int memory_len, const std::vector<DecoderLayerCache>& caches) const {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    layers_[i].project_memory(ctx, states, sentences, src_len, memory_sentences, memory_len, caches.at(i).cross_kv);
  }
}

void Decoder::project_memory_to_slots(const LayerContext& ctx, const void* states, int sentences, int src_len,
                                      const int32_t* slot_slices, int memory_len,
                                      const std::vector<DecoderLayerCache>& caches) const {
  const int heads = config_.heads, hd = config_.head_dim();
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    TempScope scope(ctx.memory);
    void* projected = ctx.temp(2 * static_cast<std::size_t>(sentences) * src_len * config_.dim_emb);
    layers_[i].project_memory(ctx, states, sentences, src_len, sentences, src_len, projected);
    ctx.backend.gather_rows(ctx.dt, projected, static_cast<int64_t>(src_len) * hd, nullptr, 2 * sentences * heads,
                            src_len * hd, caches.at(i).cross_kv, static_cast<int64_t>(memory_len) * hd, slot_slices);
  }
}

const void* Decoder::step(const LayerContext& ctx, const int32_t* tokens, const void* positions,
                          const DecoderStep& st, const std::vector<DecoderLayerCache>& caches) const {
  const std::size_t count = static_cast<std::size_t>(st.rows) * config_.dim_emb;
  void* emb = ctx.keep(count);
  // One sequence of rows tokens, each taking its own positions row: the same sums as a batch of rows at one position.
  embedding_.forward(ctx, tokens, 1, st.rows, positions, kernels::Dropout{}, emb, st.positions);
  if (config_.norm == NormPlacement::pre) {  // the residual stream in place (DecoderLayer::step_pre_norm)
    void* normed = ctx.keep(count);
    LayerNormLayer::Saved saved;
    (layers_.empty() ? final_norm_ : layers_.front().self_attention_norm()).forward(ctx, emb, st.rows, normed, saved);
    for (std::size_t i = 0; i < layers_.size(); ++i)
      layers_[i].step_pre_norm(ctx, emb, normed, st, caches.at(i),
                               i + 1 == layers_.size() ? final_norm_ : layers_[i + 1].self_attention_norm());
    return normed;
  }
  const void* h = emb;
  for (std::size_t i = 0; i < layers_.size(); ++i) h = layers_[i].step(ctx, h, st, caches.at(i));
  return h;
}

void Decoder::backward(const LayerContext& ctx, const Saved& s, void* d_out, void* spare, void* d_memory) const {
  void* g = d_out;
  if (config_.norm == NormPlacement::pre) {
    ctx.gradients_from(final_norm_begin_);
    final_norm_.backward(ctx, s.final_norm, d_out, s.batch * s.len, spare);
    std::swap(g, spare);
  }
  for (std::size_t i = layers_.size(); i-- > 0;) {
    void* cur = layers_[i].backward(ctx, s.layers[i], g, spare, d_memory);
    if (cur != g) std::swap(g, spare);
  }
  embedding_.backward(ctx, s.tokens, s.batch, s.len, s.emb_drop, g);
  ctx.memory.release_kept(s.kept_from);
}

}  // namespace lseq

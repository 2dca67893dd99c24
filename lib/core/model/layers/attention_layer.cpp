#include "core/model/layers/attention_layer.h"

#include <cmath>

#include "core/model/layers/linear.h"
#include "util/error.h"

namespace lseq {

namespace {

// Batched products over the batch*heads slices of [len][hd] head buffers.
kernels::GemmArgs batched(const LayerContext& ctx, int batch) {
  kernels::GemmArgs g;
  g.ab = ctx.dt, g.c_type = ctx.dt;
  g.batch = batch;
  return g;
}

// Training pads the per-head sequence length to a multiple of 8 (16 bytes in bf16): the head buffers are
// [batch][heads][padded(len)][hd] and the score/probability slices [padded(q_len)][padded(k_len)], so every
// attention GEMM (forward and backward) has m, n, k and leading dimensions that are multiples of 8 and cuBLAS can
// pick its aligned tensor-core kernels (odd lengths force slow align1 kernels). split_heads writes the padding rows
// as 0 and merge_heads drops them. Why the padding never reaches a real value:
// - padded keys j in [k_len, padded(k_len)) are never keys: the softmax gives them probability 0 and its backward
//   gradient 0 (and their K/V rows are 0), so they add nothing to the context, to d_q or to real rows of d_k/d_v;
// - padded query rows get finite probabilities (zero query: a uniform softmax over the valid keys) and finite
//   context rows, which merge_heads drops; in backward their d_context rows are 0 (split_heads), hence d_probs and
//   d_scores rows are 0 and they add nothing to d_v = P^T dO or d_k = dS^T Q.
// Lengths up to 8 are left as they are: their GEMMs are tiny, and padding them would multiply the head buffers of
// batches of very short sentences by up to 8 (and the worst-case workspace plan with them, about 2.4x for a base
// model), while from 9 tokens on the padding adds less than 8/9 of a row per token.
int padded(int len) { return len <= 8 ? len : (len + 7) / 8 * 8; }

}  // namespace

AttentionLayer::AttentionLayer(ParamTable& table, const std::string& prefix, int dim, int heads, Kind kind)
    : kind_(kind), dim_(dim), heads_(heads), head_dim_(dim / heads) {
  if (kind == Kind::self) {
    w_qkv_ = table.add(prefix + ".qkv.weight", {3 * dim, dim}, ParamInit::glorot_uniform, 3);
    b_qkv_ = table.add(prefix + ".qkv.bias", {3 * dim}, ParamInit::zeros);
  } else {
    w_q_ = table.add(prefix + ".q.weight", {dim, dim}, ParamInit::glorot_uniform);
    b_q_ = table.add(prefix + ".q.bias", {dim}, ParamInit::zeros);
    w_kv_ = table.add(prefix + ".kv.weight", {2 * dim, dim}, ParamInit::glorot_uniform, 2);
    b_kv_ = table.add(prefix + ".kv.bias", {2 * dim}, ParamInit::zeros);
  }
  w_out_ = table.add(prefix + ".out.weight", {dim, dim}, ParamInit::glorot_uniform);
  b_out_ = table.add(prefix + ".out.bias", {dim}, ParamInit::zeros);
}

void AttentionLayer::project_qkv(const LayerContext& ctx, const void* x, int batch, int len, int padded_len,
                                 void* qkv_heads) const {
  TempScope scope(ctx.memory);
  const int rows = batch * len;
  void* qkv = ctx.temp(static_cast<std::size_t>(rows) * 3 * dim_);
  linear_forward(ctx, x, rows, dim_, 3 * dim_, w_qkv_, qkv);
  ctx.backend.split_heads(ctx.dt, qkv, ctx.w(b_qkv_), batch, len, padded_len, heads_, head_dim_, 3, qkv_heads);
}

void AttentionLayer::project_step_qkv(const LayerContext& ctx, const void* x, int rows, void* cache,
                                      const int32_t* append_dst, void* q_heads) const {
  TempScope scope(ctx.memory);
  void* qkv = ctx.temp(static_cast<std::size_t>(rows) * 3 * dim_);
  linear_forward(ctx, x, rows, dim_, 3 * dim_, w_qkv_, qkv);
  ctx.backend.split_step_qkv(ctx.dt, qkv, ctx.w(b_qkv_), rows, heads_, head_dim_, q_heads, cache, append_dst);
}

void AttentionLayer::project_q(const LayerContext& ctx, const void* x, int batch, int q_len, int padded_len,
                               void* q_heads) const {
  if (q_len == 1 && padded_len == 1) {
    // One query per sentence (decoding's steps): [batch, heads*hd] already is the [batch][heads][1][hd] head layout,
    // so the bias rides in the product's epilogue and nothing is split.
    ctx.backend.linear_bias_forward(ctx.dt, x, ctx.w(w_q_), ctx.w(b_q_), batch, dim_, dim_,
                                    kernels::BiasActivation::none, q_heads);
    return;
  }
  TempScope scope(ctx.memory);
  const int rows = batch * q_len;
  void* q = ctx.temp(static_cast<std::size_t>(rows) * dim_);
  linear_forward(ctx, x, rows, dim_, dim_, w_q_, q);
  ctx.backend.split_heads(ctx.dt, q, ctx.w(b_q_), batch, q_len, padded_len, heads_, head_dim_, 1, q_heads);
}

void AttentionLayer::project_kv(const LayerContext& ctx, const void* memory, int batch, int k_len, int padded_len,
                                int layout_batch, void* kv_heads) const {
  if (layout_batch < batch)
    fail("internal error: project_kv lays out {} sentences for a batch of {}", layout_batch, batch);
  TempScope scope(ctx.memory);
  const int rows = batch * k_len;
  if (layout_batch == batch) {
    void* kv = ctx.temp(static_cast<std::size_t>(rows) * 2 * dim_);
    linear_forward(ctx, memory, rows, dim_, 2 * dim_, w_kv_, kv);
    ctx.backend.split_heads(ctx.dt, kv, ctx.w(b_kv_), batch, k_len, padded_len, heads_, head_dim_, 2, kv_heads);
    return;
  }
  // Keys and values projected apart (the weight's first dim rows, then the next dim, and the bias' halves), so
  // that the values start layout_batch sentences in whatever this batch's size (decoding's memory).
  void* projected = ctx.temp(static_cast<std::size_t>(rows) * dim_);
  const std::size_t part = static_cast<std::size_t>(layout_batch) * padded_len * dim_;
  for (int p = 0; p < 2; ++p) {
    const std::size_t half = static_cast<std::size_t>(p) * dim_;
    linear_forward(ctx, memory, rows, dim_, dim_, w_kv_ + half * dim_, projected);
    ctx.backend.split_heads(ctx.dt, projected, ctx.w(b_kv_ + half), batch, k_len, padded_len, heads_, head_dim_, 1,
                            offset_ptr(kv_heads, p * part, ctx.dt));
  }
}

float AttentionLayer::scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim_)); }

// The fused core (Backend::attention_forward/backward) wherever its kernels fit (lengths up to 128). It used to stop
// at 64, when the kernels lost to the batched GEMMs above that; since they stage with cp.async and spread score rows
// over a few lanes, the full limit runs as fast or faster and needs no probability buffer (H100, bf16, 2026-11-24,
// 64 -> 128, two interleaved rounds: transformer-base at 16384 tokens 650-657k -> 653-675k target tokens/s and
// peak memory 5196 -> 4746 MiB; big at 16384 288-289k -> 288k, 11744 -> 10814 MiB; big at 8192 263-266k ->
// 263-264k). Past 128 positions the fused core also drops out the probabilities (Backend::fused_attention_drops);
// shorter slices with attention dropout run composed. A function of the shape and the dropout only, so CPU and GPU
// runs take the same path.
bool AttentionLayer::fused_core(int q_len, int k_len, const kernels::Dropout& drop) const {
  return kernels::Backend::fused_attention_fits(q_len, k_len, head_dim_) &&
         (drop.p == 0.0f || kernels::Backend::fused_attention_drops(q_len, k_len));
}

void AttentionLayer::attend(const LayerContext& ctx, const void* q, const void* k, const void* v,
                            const int32_t* k_lengths, int batch, int q_len, int k_len, bool causal,
                            const kernels::Dropout& drop, void* probs, void* context,
                            const int32_t* key_starts) const {
  TempScope scope(ctx.memory);
  const int lq = padded(q_len);
  void* context_heads = ctx.temp(static_cast<std::size_t>(batch) * lq * dim_);
  attend_composed(ctx, q, k, v, k_lengths, batch, q_len, k_len, causal, key_starts, drop, probs, context_heads);
  ctx.backend.merge_heads(ctx.dt, context_heads, batch, q_len, lq, heads_, head_dim_, 1, context, nullptr);
}

void AttentionLayer::attend_composed(const LayerContext& ctx, const void* q, const void* k, const void* v,
                                     const int32_t* k_lengths, int batch, int q_len, int k_len, bool causal,
                                     const int32_t* key_starts, const kernels::Dropout& drop, void* probs,
                                     void* context_heads) const {
  TempScope scope(ctx.memory);
  const int slices = batch * heads_;
  const int lq = padded(q_len), lk = padded(k_len);  // every GEMM extent below is lq, lk or head_dim
  const std::size_t prob_count = static_cast<std::size_t>(slices) * lq * lk;
  composed_probs(ctx, q, k, k_lengths, batch, q_len, k_len, causal, key_starts, probs);

  const void* used_probs = probs;
  if (drop.p > 0.0f) {
    void* dropped = ctx.temp(prob_count);
    ctx.backend.dropout(ctx.dt, probs, prob_count, drop, dropped);
    used_probs = dropped;
  }
  kernels::GemmArgs c = batched(ctx, slices);  // context = probs v
  c.m = lq, c.n = head_dim_, c.k = lk;
  c.a = used_probs, c.lda = lk, c.stride_a = static_cast<int64_t>(lq) * lk;
  c.b = v, c.ldb = head_dim_, c.stride_b = static_cast<int64_t>(lk) * head_dim_;
  c.c = context_heads, c.ldc = head_dim_, c.stride_c = static_cast<int64_t>(lq) * head_dim_;
  ctx.backend.gemm(c);
}

void AttentionLayer::composed_probs(const LayerContext& ctx, const void* q, const void* k, const int32_t* k_lengths,
                                    int batch, int q_len, int k_len, bool causal, const int32_t* key_starts,
                                    void* probs) const {
  const int lq = padded(q_len), lk = padded(k_len);
  kernels::GemmArgs s = batched(ctx, batch * heads_);  // scores = q k^T
  s.trans_b = true;
  s.m = lq, s.n = lk, s.k = head_dim_;
  s.a = q, s.lda = head_dim_, s.stride_a = static_cast<int64_t>(lq) * head_dim_;
  s.b = k, s.ldb = head_dim_, s.stride_b = static_cast<int64_t>(lk) * head_dim_;
  s.c = probs, s.ldc = lk, s.stride_c = static_cast<int64_t>(lq) * lk;
  ctx.backend.gemm(s);
  // Over all lq rows (padded query rows too, so that their context rows are finite); keys >= k_len get 0.
  ctx.backend.attention_softmax_forward(ctx.dt, probs, k_lengths, batch, heads_, lq, k_len, lk, scale(), causal,
                                        probs, key_starts);
}

void AttentionLayer::project_out(const LayerContext& ctx, const void* context, int rows, void* o) const {
  linear_forward(ctx, context, rows, dim_, dim_, w_out_, o);
}

void AttentionLayer::attend_step(const LayerContext& ctx, const void* q, const void* k, const void* v,
                                 int64_t slice_stride, const int32_t* kv_index, const int32_t* origin,
                                 int origin_stride, const int32_t* k_lengths, int rows, int k_len, void* context,
                                 const int32_t* key_starts) const {
  // One op (one launch on the GPU): scores, masked softmax and probs v per (row, head). With one query per row the
  // [rows][heads][hd] context is already the merged [rows, dim].
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
  ctx.backend.attention_step(ctx.dt, q, k, v, slice_stride, kv_index, origin, origin_stride, k_lengths, rows, heads_,
                             head_dim_, k_len, scale, context, key_starts);
}

void AttentionLayer::step_self(const LayerContext& ctx, const void* x, const CachedSelfAttention& st, void* cache,
                               void* o, bool cache_only) const {
  TempScope scope(ctx.memory);
  const std::size_t count = static_cast<std::size_t>(st.rows) * dim_;
  // The rows' queries, and their keys and values appended to the cache (key and value of slice i to cache rows
  // st.append_dst[i] and [rows*heads + i]) in one op; then each row attends over its cached positions, each read
  // where st says its sequence wrote it (nothing is copied when beams reorder).
  void* q = ctx.temp(count);  // [rows][heads][hd]
  project_step_qkv(ctx, x, st.rows, cache, st.append_dst, q);
  if (cache_only) return;
  const int64_t part = static_cast<int64_t>(st.max_len) * head_dim_;  // a slice's keys, then as many values
  void* context = ctx.temp(count);
  attend_step(ctx, q, cache, offset_ptr(cache, static_cast<std::size_t>(part), ctx.dt), 2 * part, st.kv_index,
              st.origin, st.max_len, st.lengths, st.rows, st.max_len, context, st.key_starts);
  project_out(ctx, context, st.rows, o);
}

void AttentionLayer::forward(const LayerContext& ctx, const void* x, const void* memory, const int32_t* k_lengths,
                             int batch, int q_len, int k_len, bool causal, const kernels::Dropout& drop, void* o,
                             Saved& saved, const PackedRows& q_packing, const PackedRows& k_packing,
                             const int32_t* key_starts) const {
  saved = Saved{};  // the pointers of one path stay null (a Saved outlives a step)
  saved.x = x;
  saved.memory = memory;
  saved.k_lengths = k_lengths;
  saved.causal = causal;
  saved.key_starts = key_starts;
  saved.drop = drop;
  saved.batch = batch, saved.q_len = q_len, saved.k_len = k_len;
  saved.q_packing = q_packing, saved.k_packing = k_packing;
  saved.q_rows = q_packing.count(batch, q_len), saved.k_rows = k_packing.count(batch, k_len);
  saved.context = ctx.keep(static_cast<std::size_t>(saved.q_rows) * dim_);
  // The fused kernels know lengths and causality but not document masks: a batch with them runs composed.
  saved.fused = fused_core(q_len, k_len, drop) && key_starts == nullptr;
  if (saved.fused) {
    forward_fused(ctx, saved);
  } else {
    if (q_packing.packed() || k_packing.packed())
      fail("internal error: packed attention rows need the fused core (lengths {} x {})", q_len, k_len);
    forward_composed(ctx, saved);
  }
  project_out(ctx, saved.context, saved.q_rows, o);
}

void AttentionLayer::forward_fused(const LayerContext& ctx, Saved& s) const {
  const int q_rows = s.q_rows, k_rows = s.k_rows;
  if (kind_ == Kind::self) {  // q, k, v: column ranges of the one [rows, 3*dim] product
    s.ldq = s.ldkv = 3 * dim_;
    s.q = ctx.keep(static_cast<std::size_t>(q_rows) * 3 * dim_);
    s.k = offset_ptr(s.q, dim_, ctx.dt);
    s.v = offset_ptr(s.q, 2 * dim_, ctx.dt);
    ctx.backend.linear_bias_forward(ctx.dt, s.x, ctx.w(w_qkv_), ctx.w(b_qkv_), q_rows, dim_, 3 * dim_,
                                    kernels::BiasActivation::none, s.q);
  } else {  // q [q_rows, dim]; k, v: column ranges of [k_rows, 2*dim]
    s.ldq = dim_, s.ldkv = 2 * dim_;
    s.q = ctx.keep(static_cast<std::size_t>(q_rows) * dim_);
    s.k = ctx.keep(static_cast<std::size_t>(k_rows) * 2 * dim_);
    s.v = offset_ptr(s.k, dim_, ctx.dt);
    ctx.backend.linear_bias_forward(ctx.dt, s.x, ctx.w(w_q_), ctx.w(b_q_), q_rows, dim_, dim_,
                                    kernels::BiasActivation::none, s.q);
    ctx.backend.linear_bias_forward(ctx.dt, s.memory, ctx.w(w_kv_), ctx.w(b_kv_), k_rows, dim_, 2 * dim_,
                                    kernels::BiasActivation::none, s.k);
  }
  s.lse = ctx.memory.keep_n<float>(static_cast<std::size_t>(s.batch) * heads_ * s.q_len);
  ctx.backend.attention_forward(ctx.dt, s.q, s.ldq, s.k, s.v, s.ldkv, s.k_lengths, s.batch, heads_, s.q_len, s.k_len,
                                head_dim_, scale(), s.causal, s.context, s.lse, s.q_packing.offsets,
                                s.k_packing.offsets, s.drop);
}

void AttentionLayer::forward_composed(const LayerContext& ctx, Saved& s) const {
  const int lq = padded(s.q_len), lk = padded(s.k_len);
  const std::size_t q_heads = static_cast<std::size_t>(s.batch) * lq * dim_;  // [batch][heads][lq][hd]
  const std::size_t k_heads = static_cast<std::size_t>(s.batch) * lk * dim_;
  if (kind_ == Kind::self) {
    s.q = ctx.keep(3 * q_heads);
    s.k = offset_ptr(s.q, q_heads, ctx.dt);
    s.v = offset_ptr(s.q, 2 * q_heads, ctx.dt);
    project_qkv(ctx, s.x, s.batch, s.q_len, lq, s.q);
  } else {
    s.q = ctx.keep(q_heads);
    s.k = ctx.keep(2 * k_heads);
    s.v = offset_ptr(s.k, k_heads, ctx.dt);
    project_q(ctx, s.x, s.batch, s.q_len, lq, s.q);
    project_kv(ctx, s.memory, s.batch, s.k_len, lk, s.batch, s.k);
  }
  if (s.key_starts && lq == s.q_len) {
    s.padded_key_starts = s.key_starts;
  } else if (s.key_starts) {  // rows of q_len starts spread to rows of lq (padding queries start at 0), kept for backward
    int32_t* starts = ctx.memory.keep_n<int32_t>(static_cast<std::size_t>(s.batch) * lq);
    s.padded_key_starts = starts;
    ctx.backend.fill(kernels::DType::f32, starts, static_cast<std::size_t>(s.batch) * lq, 0.0f);  // int 0 bits
    ctx.backend.gather_rows(kernels::DType::f32, s.key_starts, s.q_len, nullptr, s.batch, s.q_len, starts, lq,
                            nullptr);  // a copy of 4-byte elements: int32 bit for bit
  }
  // Score rows x padded keys, for this pass only: [batch, heads, lq, lk] a layer was the largest thing a step kept
  // at lengths above the fused core's (a tenth of a transformer-big step's memory at 4096 tokens with one such
  // batch), against one batched GEMM and a softmax more in backward.
  TempScope scope(ctx.memory);
  void* probs = ctx.temp(static_cast<std::size_t>(s.batch) * heads_ * lq * lk);
  attend(ctx, s.q, s.k, s.v, s.k_lengths, s.batch, s.q_len, s.k_len, s.causal, s.drop, probs, s.context,
         s.padded_key_starts);
}

void AttentionLayer::backward(const LayerContext& ctx, const Saved& s, const void* d_o, void* dx, bool accumulate_dx,
                              void* d_memory) const {
  TempScope scope(ctx.memory);
  const int q_rows = s.q_rows;
  // Output projection: dW_o += d_o^T context; d_context = d_o W_o.
  void* d_context = ctx.temp(static_cast<std::size_t>(q_rows) * dim_);
  linear_backward(ctx, s.context, d_o, q_rows, dim_, dim_, w_out_, d_context, false);
  if (s.fused)
    backward_fused(ctx, s, d_context, dx, accumulate_dx, d_memory);
  else
    backward_composed(ctx, s, d_context, dx, accumulate_dx, d_memory);
}

void AttentionLayer::backward_fused(const LayerContext& ctx, const Saved& s, const void* d_context, void* dx,
                                    bool accumulate_dx, void* d_memory) const {
  TempScope scope(ctx.memory);
  const int q_rows = s.q_rows, k_rows = s.k_rows;
  // The head gradients land in the projections' layouts, so they feed the projections' backward as they are.
  void* d_q = ctx.temp(static_cast<std::size_t>(q_rows) * s.ldq);
  void* d_k = kind_ == Kind::self ? offset_ptr(d_q, dim_, ctx.dt) : ctx.temp(static_cast<std::size_t>(k_rows) * s.ldkv);
  void* d_v = offset_ptr(d_k, dim_, ctx.dt);
  ctx.backend.attention_backward(ctx.dt, s.q, s.ldq, s.k, s.v, s.ldkv, s.k_lengths, s.batch, heads_, s.q_len, s.k_len,
                                 head_dim_, scale(), s.causal, s.lse, s.context, d_context, d_q, d_k, d_v,
                                 s.q_packing.offsets, s.k_packing.offsets, s.drop);
  if (kind_ == Kind::self) {
    ctx.backend.bias_grad(ctx.dt, d_q, q_rows, 3 * dim_, ctx.g(b_qkv_));
    linear_backward(ctx, s.x, d_q, q_rows, dim_, 3 * dim_, w_qkv_, dx, accumulate_dx);
  } else {
    ctx.backend.bias_grad(ctx.dt, d_q, q_rows, dim_, ctx.g(b_q_));
    linear_backward(ctx, s.x, d_q, q_rows, dim_, dim_, w_q_, dx, accumulate_dx);
    ctx.backend.bias_grad(ctx.dt, d_k, k_rows, 2 * dim_, ctx.g(b_kv_));
    linear_backward(ctx, s.memory, d_k, k_rows, dim_, 2 * dim_, w_kv_, d_memory, true);
  }
}

void AttentionLayer::backward_composed(const LayerContext& ctx, const Saved& s, const void* d_context, void* dx,
                                       bool accumulate_dx, void* d_memory) const {
  TempScope scope(ctx.memory);
  const int q_rows = s.batch * s.q_len, k_rows = s.batch * s.k_len;
  const std::size_t q_count = static_cast<std::size_t>(q_rows) * dim_;
  const std::size_t k_count = static_cast<std::size_t>(k_rows) * dim_;
  const int lq = padded(s.q_len), lk = padded(s.k_len);  // the padded head lengths of forward (see padded())
  const std::size_t q_heads = static_cast<std::size_t>(s.batch) * lq * dim_;
  const std::size_t k_heads = static_cast<std::size_t>(s.batch) * lk * dim_;

  // d_context split into heads (padded query rows 0).
  void* d_context_heads = ctx.temp(q_heads);
  ctx.backend.split_heads(ctx.dt, d_context, nullptr, s.batch, s.q_len, lq, heads_, head_dim_, 1, d_context_heads);

  // Head gradients: self [3][B][H][lq][hd] (q, k, v), cross q [1][B][H][lq][hd] and kv [2][B][H][lk][hd].
  void* d_q = ctx.temp(kind_ == Kind::self ? 3 * q_heads : q_heads);
  void* d_k = kind_ == Kind::self ? offset_ptr(d_q, q_heads, ctx.dt) : ctx.temp(2 * k_heads);
  void* d_v = offset_ptr(d_k, k_heads, ctx.dt);
  attend_backward_composed(ctx, s, d_context_heads, d_q, d_k, d_v);

  // Back through the projections (merge_heads drops the padding rows and accumulates the biases' gradients).
  if (kind_ == Kind::self) {
    void* d_qkv = ctx.temp(3 * q_count);
    ctx.backend.merge_heads(ctx.dt, d_q, s.batch, s.q_len, lq, heads_, head_dim_, 3, d_qkv, ctx.g(b_qkv_));
    linear_backward(ctx, s.x, d_qkv, q_rows, dim_, 3 * dim_, w_qkv_, dx, accumulate_dx);
  } else {
    void* d_qm = ctx.temp(q_count);
    ctx.backend.merge_heads(ctx.dt, d_q, s.batch, s.q_len, lq, heads_, head_dim_, 1, d_qm, ctx.g(b_q_));
    linear_backward(ctx, s.x, d_qm, q_rows, dim_, dim_, w_q_, dx, accumulate_dx);
    void* d_kvm = ctx.temp(2 * k_count);
    ctx.backend.merge_heads(ctx.dt, d_k, s.batch, s.k_len, lk, heads_, head_dim_, 2, d_kvm, ctx.g(b_kv_));
    linear_backward(ctx, s.memory, d_kvm, k_rows, dim_, 2 * dim_, w_kv_, d_memory, true);
  }
}

void AttentionLayer::attend_backward_composed(const LayerContext& ctx, const Saved& s, const void* d_context_heads,
                                              void* d_q, void* d_k, void* d_v) const {
  TempScope scope(ctx.memory);
  const int slices = s.batch * heads_;
  const int lq = padded(s.q_len), lk = padded(s.k_len);
  const std::size_t prob_count = static_cast<std::size_t>(slices) * lq * lk;

  // The probabilities are recomputed (the same ops as forward, so the same values), the dropped ones from them
  // and the key.
  void* probs = ctx.temp(prob_count);
  composed_probs(ctx, s.q, s.k, s.k_lengths, s.batch, s.q_len, s.k_len, s.causal, s.padded_key_starts, probs);
  const void* used_probs = probs;
  if (s.drop.p > 0.0f) {
    void* dropped = ctx.temp(prob_count);
    ctx.backend.dropout(ctx.dt, probs, prob_count, s.drop, dropped);
    used_probs = dropped;
  }
  // d_v = dropped_probs^T d_context
  kernels::GemmArgs dv = batched(ctx, slices);
  dv.trans_a = true;
  dv.m = lk, dv.n = head_dim_, dv.k = lq;
  dv.a = used_probs, dv.lda = lk, dv.stride_a = static_cast<int64_t>(lq) * lk;
  dv.b = d_context_heads, dv.ldb = head_dim_, dv.stride_b = static_cast<int64_t>(lq) * head_dim_;
  dv.c = d_v, dv.ldc = head_dim_, dv.stride_c = static_cast<int64_t>(lk) * head_dim_;
  ctx.backend.gemm(dv);
  // d_probs = d_context v^T, through the dropout, then the softmax (scores gradient in place).
  void* d_probs = ctx.temp(prob_count);
  kernels::GemmArgs dp = batched(ctx, slices);
  dp.trans_b = true;
  dp.m = lq, dp.n = lk, dp.k = head_dim_;
  dp.a = d_context_heads, dp.lda = head_dim_, dp.stride_a = static_cast<int64_t>(lq) * head_dim_;
  dp.b = s.v, dp.ldb = head_dim_, dp.stride_b = static_cast<int64_t>(lk) * head_dim_;
  dp.c = d_probs, dp.ldc = lk, dp.stride_c = static_cast<int64_t>(lq) * lk;
  ctx.backend.gemm(dp);
  if (s.drop.p > 0.0f) ctx.backend.dropout(ctx.dt, d_probs, prob_count, s.drop, d_probs);
  ctx.backend.attention_softmax_backward(ctx.dt, probs, d_probs, slices * lq, s.k_len, lk, scale(), d_probs);
  // d_q = d_scores k; d_k = d_scores^T q
  kernels::GemmArgs dq = batched(ctx, slices);
  dq.m = lq, dq.n = head_dim_, dq.k = lk;
  dq.a = d_probs, dq.lda = lk, dq.stride_a = static_cast<int64_t>(lq) * lk;
  dq.b = s.k, dq.ldb = head_dim_, dq.stride_b = static_cast<int64_t>(lk) * head_dim_;
  dq.c = d_q, dq.ldc = head_dim_, dq.stride_c = static_cast<int64_t>(lq) * head_dim_;
  ctx.backend.gemm(dq);
  kernels::GemmArgs dk = batched(ctx, slices);
  dk.trans_a = true;
  dk.m = lk, dk.n = head_dim_, dk.k = lq;
  dk.a = d_probs, dk.lda = lk, dk.stride_a = static_cast<int64_t>(lq) * lk;
  dk.b = s.q, dk.ldb = head_dim_, dk.stride_b = static_cast<int64_t>(lq) * head_dim_;
  dk.c = d_k, dk.ldc = head_dim_, dk.stride_c = static_cast<int64_t>(lk) * head_dim_;
  ctx.backend.gemm(dk);
}

}  // namespace lseq

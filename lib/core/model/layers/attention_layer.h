#pragma once
// Multi-head attention with separate projection and core steps, so that incremental decoding can reuse them
// (project the new token's q/k/v, append k/v to a cache, attend over the cache; cross-attention k/v once).
//   self:  qkv = x W_qkv^T + b_qkv (one fused GEMM)
//   cross: q = x W_q^T + b_q; kv = memory W_kv^T + b_kv (fused)
//   core:  probs = softmax(q k^T / sqrt(hd)) with key padding (and causal) masks; context = dropout(probs) v
//   out:   o = context W_o^T; its bias b_o is applied by the residual op that follows (bias_dropout_residual).
// Training's core runs one of two ways (fused_core chooses by the lengths):
//   fused:    Backend::attention_forward/backward read the heads as column ranges of the projections' token-major
//             rows and write the context (and in backward the q/k/v gradients) in the same layouts, the bias rides
//             in the projection's GEMM epilogue: no head split or merge, no probabilities stored;
//   composed: the projections split into [parts][batch][heads][padded len][hd] head buffers, batched GEMMs around
//             the softmax ops, the context merged back (longer sentences, or dropout on the probabilities); the
//             probabilities are not kept either: backward recomputes them (one batched GEMM and a softmax).
#include <string>

#include "core/model/layers/layer_context.h"
#include "core/model/layers/packed_rows.h"

namespace lseq {

// One self-attention pass over a decoding cache (forward only, no dropout): the rows' queries, keys and values are
// projected, the keys and values appended to the cache (layout [slices][2][max_len][hd]: slice i = r*heads + h holds
// max_len keys, then max_len values), then each row attends over its cached keys. The encoder-decoder's decoding
// steps (DecoderLayer::step) and a language model's prefill and steps (EncoderLayer::step) run it.
struct CachedSelfAttention {
  int rows = 0;
  int max_len = 0;                        // positions a slice holds
  const int32_t* lengths = nullptr;       // [rows] device: row r attends over cache positions < lengths[r]
  const int32_t* key_starts = nullptr;    // [rows] device or null: ... and >= key_starts[r]
  // [2*rows*heads] device: slice i's key goes to cache row append_dst[i], its value to append_dst[rows*heads + i]
  // (rows of hd; Backend::split_step_qkv).
  const int32_t* append_dst = nullptr;
  // Where row r's key of position p lives (Backend::attention_step): in slice origin[r*max_len + p]*heads + h (beam
  // search's position-origin table), or in slice kv_index[r*heads + h] (a prompt's tokens, which all read their
  // sequence's slice), or in the row's own slice when both are null.
  const int32_t* origin = nullptr;
  const int32_t* kv_index = nullptr;
};

class AttentionLayer {
 public:
  enum class Kind { self, cross };

  struct Saved {
    const void* x = nullptr;       // query-side input [batch*q_len, dim]
    const void* memory = nullptr;  // cross: key/value-side input [batch*k_len, dim]
    // Fused core: the projections' rows, q [batch*q_len] with row stride ldq, k and v [batch*k_len] with ldkv
    // (self: the three are column ranges of one [rows, 3*dim] buffer; cross: q alone, k and v share one).
    // Composed core: head buffers over lengths lq, lk padded to multiples of 8 when above 8 (padding rows 0:
    // attention_layer.cpp), q [batch][heads][lq][hd]; self: followed by k and v; cross: k, v one buffer
    // [2][batch][heads][lk][hd].
    void* q = nullptr;
    void* k = nullptr;
    void* v = nullptr;
    bool fused = false;       // which core ran (a flag rather than a test of the buffers)
    int ldq = 0, ldkv = 0;    // fused core only
    float* lse = nullptr;     // fused core: the rows' log-sum-exp [batch][heads][q_len] (null on the composed one)
    void* context = nullptr;  // merged heads [batch*q_len, dim]
    const int32_t* k_lengths = nullptr;
    bool causal = false;
    // Document masks (composed core only): query i of sentence b sees keys from key_starts[b*q_len + i] on, and in
    // the head layout's padded rows ([batch][lq], padding rows 0) as the softmax reads them.
    const int32_t* key_starts = nullptr;
    const int32_t* padded_key_starts = nullptr;
    kernels::Dropout drop;  // of the probabilities
    int batch = 0, q_len = 0, k_len = 0;
    PackedRows q_packing, k_packing;  // fused core only
    int q_rows = 0, k_rows = 0;       // rows of x (and the context), of memory
  };

  AttentionLayer() = default;
  AttentionLayer(ParamTable& table, const std::string& prefix, int dim, int heads, Kind kind);

  // ---- steps (also used by incremental decoding) ----
  // Heads [parts][batch][heads][padded_len][hd] with rows [len, padded_len) 0 (Backend::split_heads); decoding
  // passes padded_len = len, training the padded length of attend.
  void project_qkv(const LayerContext& ctx, const void* x, int batch, int len, int padded_len, void* qkv_heads) const;
  void project_q(const LayerContext& ctx, const void* x, int batch, int q_len, int padded_len, void* q_heads) const;
  // Keys, then values: kv_heads [2][layout_batch][heads][padded_len][hd], the first `batch` of each filled.
  void project_kv(const LayerContext& ctx, const void* memory, int batch, int k_len, int padded_len,
                  int layout_batch, void* kv_heads) const;
  // A decoding step (self-attention, one token per row): queries to q_heads [rows][heads][hd], keys and values
  // appended to the cache rows append_dst names (Backend::split_step_qkv).
  void project_step_qkv(const LayerContext& ctx, const void* x, int rows, void* cache, const int32_t* append_dst,
                        void* q_heads) const;
  // The composed core over head buffers: q [batch][heads][lq][hd], k and v [batch][heads][lk][hd] with lq, lk =
  // q_len, k_len, rounded up to multiples of 8 when above 8 (padding rows 0, as project_* write them with those
  // padded lengths). probs [batch][heads][lq][lk] (softmax over the k_len keys, masked; padding columns 0; padded
  // query rows finite); context [batch*q_len, dim] (merged heads).
  // key_starts (or null): [batch][lq] as attention_softmax_forward reads it.
  void attend(const LayerContext& ctx, const void* q, const void* k, const void* v, const int32_t* k_lengths, int batch,
              int q_len, int k_len, bool causal, const kernels::Dropout& drop, void* probs, void* context,
              const int32_t* key_starts = nullptr) const;
  // Whether the core of these lengths runs fused (Backend::attention_forward/backward over the projections' rows,
  // the probabilities never stored): the lengths and head size fit the fused kernels and no dropout acts on the
  // probabilities.
  bool fused_core(int q_len, int k_len, const kernels::Dropout& drop) const;
  void project_out(const LayerContext& ctx, const void* context, int rows, void* o) const;
  std::size_t out_bias() const { return b_out_; }

  // ---- incremental decoding: one query per row over cached keys/values, no dropout ----
  // q [rows][heads][hd]. The keys of (row r, head h) are the first k_len rows of [.][hd] at k + i * slice_stride
  // with i = kv_index[r*heads + h] (device array), or i = r*heads + h when kv_index is null; values alike at v.
  // With origin (device array [rows][origin_stride], kv_index null), key j is instead row j of slice
  // origin[r*origin_stride + j]*heads + h: re-indexed self-attention caches. Keys j >= k_lengths[r] (if not null)
  // are masked, and so are keys j < key_starts[r] (if not null). context [rows, dim] (heads merged). One backend op
  // (Backend::attention_step).
  void attend_step(const LayerContext& ctx, const void* q, const void* k, const void* v, int64_t slice_stride,
                   const int32_t* kv_index, const int32_t* origin, int origin_stride, const int32_t* k_lengths,
                   int rows, int k_len, void* context, const int32_t* key_starts = nullptr) const;
  // Self-attention over a cache (CachedSelfAttention): x [rows, dim] (the sublayer's input) -> o [rows, dim], the
  // output before its bias; the rows' keys and values are appended to `cache`. With cache_only only that is done
  // (o is not written): a prompt's last layer, whose outputs nothing reads.
  void step_self(const LayerContext& ctx, const void* x, const CachedSelfAttention& st, void* cache, void* o,
                 bool cache_only = false) const;

  // ---- training ----
  // o [batch*q_len, dim] (caller's buffer) = attention output before its bias. memory == nullptr for self.
  // Packed query rows (q_packing: x and o hold q_packing.rows rows) or key rows (k_packing: memory, or x for self)
  // need the fused core (fused_core true for these lengths and dropout). key_starts (device [batch][q_len], or
  // null): query i of sentence b attends only to keys j >= key_starts[b*q_len + i] (with causal: its document of a
  // language model's packed block); they run on the composed core at any length.
  void forward(const LayerContext& ctx, const void* x, const void* memory, const int32_t* k_lengths, int batch,
               int q_len, int k_len, bool causal, const kernels::Dropout& drop, void* o, Saved& saved,
               const PackedRows& q_packing = {}, const PackedRows& k_packing = {},
               const int32_t* key_starts = nullptr) const;
  // d_o: gradient of o. dx (query side) overwritten or added (accumulate_dx); cross: d_memory += always.
  void backward(const LayerContext& ctx, const Saved& saved, const void* d_o, void* dx, bool accumulate_dx,
                void* d_memory) const;

 private:
  float scale() const;  // of the scores: 1/sqrt(head_dim)
  // forward's and backward's two ways (see the top of this file); s has the inputs and lengths, the context buffer.
  void forward_fused(const LayerContext& ctx, Saved& s) const;
  void forward_composed(const LayerContext& ctx, Saved& s) const;
  // The composed core's probabilities [batch*heads][lq][lk] (before dropout) from head buffers q and k.
  void composed_probs(const LayerContext& ctx, const void* q, const void* k, const int32_t* k_lengths, int batch,
                      int q_len, int k_len, bool causal, const int32_t* key_starts, void* probs) const;
  void backward_fused(const LayerContext& ctx, const Saved& s, const void* d_context, void* dx, bool accumulate_dx,
                      void* d_memory) const;
  void backward_composed(const LayerContext& ctx, const Saved& s, const void* d_context, void* dx, bool accumulate_dx,
                         void* d_memory) const;
  // The composed core (GEMMs around the softmax ops): context heads [batch][heads][lq][hd] from q, k, v; the
  // head gradients from d_context heads.
  void attend_composed(const LayerContext& ctx, const void* q, const void* k, const void* v, const int32_t* k_lengths,
                       int batch, int q_len, int k_len, bool causal, const int32_t* key_starts,
                       const kernels::Dropout& drop, void* probs, void* context_heads) const;
  void attend_backward_composed(const LayerContext& ctx, const Saved& s, const void* d_context_heads, void* d_q,
                                void* d_k, void* d_v) const;

  Kind kind_ = Kind::self;
  int dim_ = 0, heads_ = 0, head_dim_ = 0;
  std::size_t w_qkv_ = 0, b_qkv_ = 0;                    // self
  std::size_t w_q_ = 0, b_q_ = 0, w_kv_ = 0, b_kv_ = 0;  // cross
  std::size_t w_out_ = 0, b_out_ = 0;
};

}  // namespace lseq

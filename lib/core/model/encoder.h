#pragma once
// The Transformer encoder stack: embeddings (+ sinusoidal positions, dropout), enc_depth layers of self-attention and
// feed-forward blocks, and in pre-norm a final LayerNorm. The same stack with causal self-attention is the whole of
// a decoder-only language model (DecoderOnlyModel, StackRole::causal_decoder), which also runs it incrementally over
// key/value caches (step()).
#include <string>
#include <vector>

#include "core/model/layers/attention_layer.h"
#include "core/model/layers/embedding_layer.h"
#include "core/model/layers/feed_forward_layer.h"
#include "core/model/layers/layer_norm_layer.h"
#include "core/model/layers/residual_block.h"
#include "core/model/model_config.h"

namespace lseq {

// Which stack an Encoder is: the encoder of the encoder-decoder Transformer (bidirectional self-attention, tensors
// encoder.*), or a language model's stack (causal self-attention, dec_depth layers named decoder.* with the
// decoder's dropout sites and the target embedding's, as Marian's lm-transformer is a decoder without
// cross-attention: docs/tensor-names.md).
enum class StackRole { encoder, causal_decoder };

// A language model's document masks over packed blocks (DecoderOnlyModel), device arrays [batch*len]: each token's
// first visible key (the position in its row where its document starts) and its position within its document (its
// position embedding's row). Null: no documents (every row is one sequence from position 0).
struct DocumentMasks {
  const int32_t* key_starts = nullptr;
  const int32_t* position_ids = nullptr;
};

class EncoderLayer {
 public:
  struct Saved {
    AttentionLayer::Saved attn;
    FeedForwardLayer::Saved ffn;
    ResidualBlock::Saved attn_block, ffn_block;
    // StepMemory::kept() before each block's forward: backward releases from there once the block is done.
    std::size_t attn_from = 0, ffn_from = 0;
  };

  EncoderLayer(ParamTable& table, const std::string& prefix, const ModelConfig& config, int index,
               StackRole role = StackRole::encoder);
  // Returns the layer output [batch*len, dim] (kept), or [packing.rows, dim] over packed rows (PackedRows).
  // key_starts: document masks (DocumentMasks), or null.
  const void* forward(const LayerContext& ctx, const void* x, const int32_t* lengths, int batch, int len,
                      Saved& saved, const PackedRows& packing = {}, const int32_t* key_starts = nullptr) const;
  // g: gradient of the output; spare: a free buffer of the same size. Returns which holds the input gradient.
  // Block by block, from the top: announces the block's gradients (LayerContext::gradients_from), then gives back
  // what the block kept.
  void* backward(const LayerContext& ctx, const Saved& saved, void* g, void* spare) const;
  // Incremental decoding (causal stacks; forward only, no dropout): x [st.rows, dim] -> the layer output (kept);
  // the rows' keys and values go to `cache` as st says. cache_only: only the keys and values are computed (the last
  // layer of a prompt's prefill, whose outputs nothing reads); returns null.
  const void* step(const LayerContext& ctx, const void* x, const CachedSelfAttention& st, void* cache,
                   bool cache_only = false) const;
  // The same step for a pre-norm stack, over its residual stream x [st.rows, dim], updated in place. `normed` holds
  // this layer's attention input, LN(x), and receives next_norm(x out): the next layer's attention norm, or the
  // stack's final one. Each block's residual add and the LayerNorm after it are one op, so a layer runs two such ops
  // where step() runs two adds, two LayerNorms and (in Encoder::step) a copy.
  void step_pre_norm(const LayerContext& ctx, void* x, void* normed, const CachedSelfAttention& st, void* cache,
                     bool cache_only, const LayerNormLayer& next_norm) const;
  const LayerNormLayer& attention_norm() const { return attn_block_.norm(); }

 private:
  ModelConfig config_;
  int index_ = 0;
  bool causal_ = false;
  Stack stack_ = Stack::encoder;  // dropout sites
  std::size_t attn_begin_ = 0, ffn_begin_ = 0;  // table offsets of the blocks' first tensors
  AttentionLayer attn_;
  ResidualBlock attn_block_;
  FeedForwardLayer ffn_;
  ResidualBlock ffn_block_;
};

class Encoder {
 public:
  struct Saved {
    std::vector<EncoderLayer::Saved> layers;
    LayerNormLayer::Saved final_norm;
    kernels::Dropout emb_drop;
    const int32_t* tokens = nullptr;
    int batch = 0, len = 0;
    PackedRows packing;
    DocumentMasks documents;
    int rows = 0;               // of the activations: batch*len, or packing.rows
    std::size_t kept_from = 0;  // StepMemory::kept() before forward
  };

  // `embedding_table`: offset of the (possibly shared) source embedding (a language model's one embedding).
  // learned_positions: offset of a learned position table (EmbeddingLayer), for a language model.
  Encoder(ParamTable& table, const ModelConfig& config, std::size_t embedding_table,
          StackRole role = StackRole::encoder,
          std::size_t learned_positions = EmbeddingLayer::kNoLearnedPositions);
  // tokens, lengths on the device. Returns the encoder output [batch*len, dim] (kept). With packing (training, when
  // the batch fits the fused attention core) the embeddings are gathered into packed rows and every layer runs over
  // those: the output is [packing.rows, dim]. positions: the position table (sinusoidal, or the learned table's
  // working copy). documents: a language model's document masks (not with packing).
  const void* forward(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
                      const void* positions, Saved& saved, const PackedRows& packing = {},
                      const DocumentMasks& documents = {}) const;
  // d_out: gradient of the output (overwritten); spare: a free buffer of the same size. Gives back what forward
  // kept, layer by layer as it goes (the step's memory is a stack).
  void backward(const LayerContext& ctx, const Saved& saved, void* d_out, void* spare) const;
  // Forward only, without dropout or tape (decoding; ctx.train must be false): what each layer keeps is released
  // once its output is copied into `out` [batch*len, dim] (the caller's buffer), so memory holds one layer's worth.
  void encode(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
              const void* positions, void* out) const;
  // Incremental decoding of a causal stack (DecoderOnlyStepModel; forward only, no dropout): tokens [st.rows]
  // (device) at positions position_ids [st.rows] (device rows of the table `positions`); every layer's keys and
  // values go to its cache (caches[layer], CachedSelfAttention's layout) as st says. Returns the final states
  // [st.rows, dim] (kept), or null with cache_only (a prompt's prefill, where only the caches are wanted).
  const void* step(const LayerContext& ctx, const int32_t* tokens, const int32_t* position_ids, const void* positions,
                   const CachedSelfAttention& st, const std::vector<void*>& caches, bool cache_only = false) const;
  int depth() const { return static_cast<int>(layers_.size()); }
  // Table offset of the encoder's first tensor: the tensors below it (the embedding tables) are written out of
  // backward's order (StepGradients).
  std::size_t param_begin() const { return param_begin_; }

 private:
  ModelConfig config_;
  StackRole role_ = StackRole::encoder;
  std::size_t param_begin_ = 0, final_norm_begin_ = 0;
  EmbeddingLayer embedding_;
  std::vector<EncoderLayer> layers_;
  LayerNormLayer final_norm_;  // pre-norm only
};

}  // namespace lseq

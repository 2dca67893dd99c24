#pragma once
// The Transformer encoder: embeddings (+ sinusoidal positions, dropout), enc_depth layers of self-attention and
// feed-forward blocks, and in pre-norm a final LayerNorm.
#include <string>
#include <vector>

#include "core/attention_layer.h"
#include "core/embedding_layer.h"
#include "core/feed_forward_layer.h"
#include "core/layer_norm_layer.h"
#include "core/model_config.h"
#include "core/residual_block.h"

namespace lseq {

class EncoderLayer {
 public:
  struct Saved {
    AttentionLayer::Saved attn;
    FeedForwardLayer::Saved ffn;
    ResidualBlock::Saved attn_block, ffn_block;
  };

  EncoderLayer(ParamTable& table, const std::string& prefix, const ModelConfig& config, int index);
  // Returns the layer output [batch*len, dim] (kept).
  const void* forward(const LayerContext& ctx, const void* x, const int32_t* lengths, int batch, int len,
                      Saved& saved) const;
  // g: gradient of the output; spare: a free buffer of the same size. Returns which holds the input gradient.
  void* backward(const LayerContext& ctx, const Saved& saved, void* g, void* spare) const;

 private:
  ModelConfig config_;
  int index_ = 0;
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
  };

  // `embedding_table`: offset of the (possibly shared) source embedding.
  Encoder(ParamTable& table, const ModelConfig& config, std::size_t embedding_table);
  // tokens, lengths on the device. Returns the encoder output [batch*len, dim] (kept).
  const void* forward(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
                      const void* positions, Saved& saved) const;
  // d_out: gradient of the output (overwritten); spare: a free buffer of the same size.
  void backward(const LayerContext& ctx, const Saved& saved, void* d_out, void* spare) const;
  // Forward only, without dropout or tape (decoding; ctx.train must be false): what each layer keeps is released
  // once its output is copied into `out` [batch*len, dim] (the caller's buffer), so memory holds one layer's worth.
  void encode(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
              const void* positions, void* out) const;
  int depth() const { return static_cast<int>(layers_.size()); }

 private:
  ModelConfig config_;
  EmbeddingLayer embedding_;
  std::vector<EncoderLayer> layers_;
  LayerNormLayer final_norm_;  // pre-norm only
};

}  // namespace lseq

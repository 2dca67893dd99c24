#pragma once
// Token embeddings scaled by sqrt(dim) (or not: GPT-2), plus positions, with dropout. The table is a parameter that
// may be shared (tied embeddings), so the model registers it and passes its offset; gradients of shared tables add
// up. Positions are a sinusoidal table the caller owns, or a learned table (a parameter: a language model's
// --transformer-train-position-embeddings) whose gradient backward accumulates.
#include <vector>

#include "core/model/layers/layer_context.h"
#include "core/model/model_config.h"

namespace lseq {

// The sinusoidal position table [max_len, dim] in the given layout (PositionLayout in model_config.h says what each
// column holds; the default is the interleaved table of Vaswani et al. 2017). Computed on the host once.
std::vector<float> sinusoidal_positions(int max_len, int dim, PositionLayout layout = PositionLayout::interleaved);

class EmbeddingLayer {
 public:
  static constexpr std::size_t kNoLearnedPositions = static_cast<std::size_t>(-1);

  EmbeddingLayer() = default;
  // learned_positions: table offset of a learned position table [positions, dim], whose gradient backward adds up;
  // forward then reads the positions the caller passes (that table's working copy, ctx.w(learned_positions)).
  // scale_by_sqrt_dim: false leaves the embeddings unscaled (ModelConfig::scale_embeddings).
  EmbeddingLayer(std::size_t table, int dim, std::size_t learned_positions = kNoLearnedPositions,
                 bool scale_by_sqrt_dim = true);

  // out [batch*len, dim]; positions [>= len, dim] in the activation dtype, or nullptr. Token t of a row takes
  // positions row t, or with position_ids (device [batch*len]) row position_ids[b*len + t] (a language model's
  // documents, whose positions restart where they start in a packed block).
  void forward(const LayerContext& ctx, const int32_t* tokens, int batch, int len, const void* positions,
               const kernels::Dropout& drop, void* out, const int32_t* position_ids = nullptr) const;
  void backward(const LayerContext& ctx, const int32_t* tokens, int batch, int len, const kernels::Dropout& drop,
                const void* d_out, const int32_t* position_ids = nullptr) const;
  float scale() const { return scale_; }
  bool learned_positions() const { return positions_ != kNoLearnedPositions; }

 private:
  std::size_t table_ = 0;
  int dim_ = 0;
  float scale_ = 1.0f;
  std::size_t positions_ = kNoLearnedPositions;
};

}  // namespace lseq

#pragma once
// Token embeddings scaled by sqrt(dim), plus sinusoidal positions, with dropout. The table is a parameter that may
// be shared (tied embeddings), so the model registers it and passes its offset; gradients of shared tables add up.
#include <vector>

#include "core/model/layers/layer_context.h"
#include "core/model/model_config.h"

namespace lseq {

// The sinusoidal position table [max_len, dim] in the given layout (PositionLayout in model_config.h says what each
// column holds; the default is the interleaved table of Vaswani et al. 2017). Computed on the host once.
std::vector<float> sinusoidal_positions(int max_len, int dim, PositionLayout layout = PositionLayout::interleaved);

class EmbeddingLayer {
 public:
  EmbeddingLayer() = default;
  EmbeddingLayer(std::size_t table, int dim);

  // out [batch*len, dim]; positions [>= len, dim] in the activation dtype, or nullptr.
  void forward(const LayerContext& ctx, const int32_t* tokens, int batch, int len, const void* positions,
               const kernels::Dropout& drop, void* out) const;
  void backward(const LayerContext& ctx, const int32_t* tokens, int batch, int len, const kernels::Dropout& drop,
                const void* d_out) const;
  float scale() const { return scale_; }

 private:
  std::size_t table_ = 0;
  int dim_ = 0;
  float scale_ = 1.0f;
};

}  // namespace lseq

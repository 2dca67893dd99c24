#pragma once
// LayerNorm over the model dimension with gain (`.weight`, ones) and bias (`.bias`, zeros).
#include <string>

#include "core/layer_context.h"

namespace lseq {

class LayerNormLayer {
 public:
  struct Saved {
    const void* x = nullptr;
    float* mean = nullptr;
    float* rstd = nullptr;
  };

  LayerNormLayer() = default;
  LayerNormLayer(ParamTable& table, const std::string& name, int dim, float eps);

  // y = LN(x) into a buffer the caller provides; mean/rstd kept for backward.
  void forward(const LayerContext& ctx, const void* x, int rows, void* y, Saved& saved) const;
  // y = LN(residual + dropout(o + bias)) in one op (Backend::residual_layer_norm_forward): the post-norm residual
  // block's end. With `backward` the sum is kept as this LayerNorm's input, with mean/rstd; without (decoding)
  // none of the three is written.
  void forward_residual(const LayerContext& ctx, const void* o, const void* bias, const void* residual, int rows,
                        const kernels::Dropout& drop, bool backward, void* y, Saved& saved) const;
  // dx overwritten (dx may not alias dy).
  void backward(const LayerContext& ctx, const Saved& saved, const void* dy, int rows, void* dx) const;

 private:
  std::size_t gamma_ = 0, beta_ = 0;
  int dim_ = 0;
  float eps_ = 1e-6f;
};

}  // namespace lseq

#pragma once
// LayerNorm over the model dimension with gain (`.weight`, ones) and bias (`.bias`, zeros).
#include <string>

#include "core/model/layers/layer_context.h"

namespace lseq {

class LayerNormLayer {
 public:
  struct Saved {
    // What backward recovers xhat from: forward() keeps the input x with mean, forward_residual() the output y
    // (which the caller keeps unchanged until backward).
    const void* x = nullptr;
    const void* y = nullptr;
    float* mean = nullptr;
    float* rstd = nullptr;
  };

  LayerNormLayer() = default;
  LayerNormLayer(ParamTable& table, const std::string& name, int dim, float eps);

  // y = LN(x) into a buffer the caller provides; mean/rstd kept for backward.
  void forward(const LayerContext& ctx, const void* x, int rows, void* y, Saved& saved) const;
  // y = LN(residual + dropout(o + bias)) in one op (Backend::residual_layer_norm_forward): the post-norm residual
  // block's end. With `backward` only rstd is kept: backward recovers xhat from y, which the block keeps anyway as
  // the next sublayer's input, so the sum itself is never stored. Without (decoding) nothing is kept.
  void forward_residual(const LayerContext& ctx, const void* o, const void* bias, const void* residual, int rows,
                        const kernels::Dropout& drop, bool backward, void* y, Saved& saved) const;
  // Decoding's pre-norm residual stream: s = residual + o + bias into `sum` (which may be `residual`: the stream
  // updated in place) and y = LN(s), in one op; nothing kept.
  void forward_residual_sum(const LayerContext& ctx, const void* o, const void* bias, const void* residual, int rows,
                            void* sum, void* y) const;
  // forward()'s backward: dx overwritten, or added to with accumulate_dx (the pre-norm residual block: the residual's
  // gradient is in dx already). dx may not alias dy.
  void backward(const LayerContext& ctx, const Saved& saved, const void* dy, int rows, void* dx,
                bool accumulate_dx = false) const;
  // forward_residual()'s backward in one op (Backend::residual_layer_norm_backward): ds, the gradient of the sum
  // (the block's input gradient), and d_o = dropout(ds), the sublayer output's gradient, whose column sums go to
  // the gradient of `bias` (a parameter offset).
  void backward_residual(const LayerContext& ctx, const Saved& saved, const void* dy, int rows,
                         const kernels::Dropout& drop, std::size_t bias, void* ds, void* d_o) const;

 private:
  std::size_t gamma_ = 0, beta_ = 0;
  int dim_ = 0;
  float eps_ = 1e-6f;
};

}  // namespace lseq

#pragma once
// Position-wise feed-forward: o = dropout(act(x W_in^T + b_in)) W_out^T. The output bias b_out is applied by the
// residual op that follows (bias_dropout_residual), like the attention's.
// - ReLU without activation dropout (the transformer-base/big presets): the first layer's bias and ReLU run inside
//   its matrix product (Backend::linear_bias_forward), and a = relu(x W_in^T + b_in) is kept: W_out's gradient
//   needs it, and relu' is a > 0, so backward needs no recompute pass.
// - Otherwise (GELU, swish, or activation dropout): only h = x W_in^T is kept; a = dropout(act(h + b_in)) is
//   recomputed in backward (one memory-bound pass instead of rows * ffn more saved values).
#include <string>

#include "core/layer_context.h"

namespace lseq {

class FeedForwardLayer {
 public:
  struct Saved {
    const void* x = nullptr;    // input [rows, dim]
    void* h = nullptr;          // x W_in^T, before bias and activation [rows, ffn] (the unfused path)
    void* a = nullptr;          // relu(x W_in^T + b_in) [rows, ffn] (the fused path)
    kernels::Dropout drop;
    int rows = 0;
  };

  FeedForwardLayer() = default;
  FeedForwardLayer(ParamTable& table, const std::string& prefix, int dim, int dim_ffn, kernels::Activation act);

  void forward(const LayerContext& ctx, const void* x, int rows, const kernels::Dropout& drop, void* o,
               Saved& saved) const;
  // dx overwritten or added (accumulate_dx).
  void backward(const LayerContext& ctx, const Saved& saved, const void* d_o, void* dx, bool accumulate_dx) const;
  std::size_t out_bias() const { return b_out_; }

 private:
  int dim_ = 0, dim_ffn_ = 0;
  kernels::Activation act_ = kernels::Activation::relu;
  std::size_t w_in_ = 0, b_in_ = 0, w_out_ = 0, b_out_ = 0;
};

}  // namespace lseq

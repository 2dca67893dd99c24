#pragma once
// Position-wise feed-forward: o = dropout(act(x W_in^T + b_in)) W_out^T. The output bias b_out is applied by the
// residual op that follows (bias_dropout_residual), like the attention's.
// - ReLU without activation dropout (the transformer-base/big presets): the first layer's bias and ReLU run inside
//   its matrix product (Backend::linear_bias_forward), and a = relu(x W_in^T + b_in) is the hidden layer kept for
//   backward: W_out's gradient needs it, and relu' is a > 0, so backward needs no other pass.
// - Otherwise (GELU, swish, or activation dropout): both h = x W_in^T (the activation's gradient needs it) and
//   a = dropout(act(h + b_in)) (W_out's gradient needs it) are kept. Recomputing a in backward instead cost one
//   memory-bound pass a block (GPT-2 small, 16 x 1024 tokens: 0.87 of 41 ms an update on an H100) to save
//   rows * dim_ffn values a block.
// - Decoding's steps (infer()) keep nothing for a backward, so GELU too runs inside the first product.
// With LayerContext::recompute_ffn nothing of the hidden layers is kept: backward runs the first product (and the
// activation) again from the saved input x (kept anyway: it is the previous block's output) into temporaries. That
// saves rows * dim_ffn values a block with the fused ReLU and twice that otherwise, the largest activations of a
// layer, for one more matrix product; the gradients are the same, since the ops are repeated exactly.
#include <string>

#include "core/model/layers/layer_context.h"

namespace lseq {

class FeedForwardLayer {
 public:
  struct Saved {
    const void* x = nullptr;          // input [rows, dim]
    const void* hidden = nullptr;     // [rows, ffn]: a (fused) or h (unfused); unset when recomputed in backward
    const void* activated = nullptr;  // [rows, ffn]: a on the unfused path, unset when recomputed in backward
    bool recompute = false;           // a flag rather than a test of the buffers
    bool fused_relu = false;
    kernels::Dropout drop;
    int rows = 0;
  };

  FeedForwardLayer() = default;
  FeedForwardLayer(ParamTable& table, const std::string& prefix, int dim, int dim_ffn, kernels::Activation act);

  void forward(const LayerContext& ctx, const void* x, int rows, const kernels::Dropout& drop, void* o,
               Saved& saved) const;
  // Forward with nothing kept for a backward (decoding's steps): ReLU and GELU run inside the first product
  // (Backend::linear_bias_forward's epilogue), so a block is two products; swish adds one pass. o as forward's.
  void infer(const LayerContext& ctx, const void* x, int rows, void* o) const;
  // dx overwritten or added (accumulate_dx).
  void backward(const LayerContext& ctx, const Saved& saved, const void* d_o, void* dx, bool accumulate_dx) const;
  std::size_t out_bias() const { return b_out_; }

 private:
  // The kept hidden layer: relu(x W_in^T + b_in) on the fused path, x W_in^T otherwise.
  void hidden_forward(const LayerContext& ctx, const void* x, int rows, bool fused_relu, void* hidden) const;

  int dim_ = 0, dim_ffn_ = 0;
  kernels::Activation act_ = kernels::Activation::relu;
  std::size_t w_in_ = 0, b_in_ = 0, w_out_ = 0, b_out_ = 0;
};

}  // namespace lseq

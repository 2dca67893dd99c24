#pragma once
// The residual connection and LayerNorm around one sublayer (attention or feed-forward), in either placement:
//   post-norm:  out = LN(x + dropout(o + b))        (Marian "" + "dan")
//   pre-norm:   out = x + dropout(o + b), o from LN(x)   (Marian "n" + "da")
// where o is the sublayer's output before its last bias b. Forward is split around the sublayer call
// (sublayer_input, then output); backward likewise (begin_backward, sublayer backward, end_backward, or all three
// with the step's memory bookkeeping in backward()).
#include <string>

#include "core/model/layers/layer_context.h"
#include "core/model/layers/layer_norm_layer.h"
#include "core/model/model_config.h"

namespace lseq {

class ResidualBlock {
 public:
  struct Saved {
    LayerNormLayer::Saved norm;
    void* normed = nullptr;  // pre-norm: LN(x), the sublayer's input
    kernels::Dropout drop;
    int rows = 0;
  };
  // Where the sublayer's backward puts the gradient of its input.
  struct Grad {
    void* residual = nullptr;           // gradient of the block's input, being completed
    const void* sublayer_dy = nullptr;  // gradient of the sublayer's output: d_o, or g itself (pre-norm, no dropout)
    void* sublayer_dx = nullptr;
    bool accumulate = false;  // sublayer adds into sublayer_dx (post-norm) or overwrites it (pre-norm)
  };

  ResidualBlock() = default;
  ResidualBlock(ParamTable& table, const std::string& norm_name, int dim, float eps, NormPlacement placement);

  const void* sublayer_input(const LayerContext& ctx, const void* x, int rows, Saved& saved) const;
  const LayerNormLayer& norm() const { return norm_; }
  // Returns the block output (kept until the step ends). `backward` false (decoding's steps) keeps nothing that only
  // the backward reads.
  void* output(const LayerContext& ctx, const void* x, const void* o, std::size_t bias, int rows,
               const kernels::Dropout& drop, Saved& saved, bool backward = true) const;

  // g: gradient of the block output (may be overwritten); spare: a free buffer of the same size. Puts the gradient
  // of the sublayer output in d_o (caller's temporary), or leaves it in g where they are equal (pre-norm without
  // dropout), and accumulates the bias gradient. grad.sublayer_dy says which.
  Grad begin_backward(const LayerContext& ctx, const Saved& saved, void* g, void* spare, std::size_t bias,
                      void* d_o) const;
  // Returns the buffer (g or spare) holding the gradient of the block input. Takes temporaries in pre-norm.
  void* end_backward(const LayerContext& ctx, const Saved& saved, const Grad& grad) const;

  // A whole block of a layer's backward: announces the gradients of the block's tensors (table offsets from
  // params_from: the sublayer's and the norm's, LayerContext::gradients_from), runs begin_backward,
  // sublayer(d_o, sublayer_dx, accumulate_dx) and end_backward, then gives back what the block's forward kept (from
  // kept_from, StepMemory::kept() before it). g and spare as begin_backward; returns which holds the input gradient.
  template <typename Sublayer>
  void* backward(const LayerContext& ctx, const Saved& saved, void* g, void* spare, std::size_t bias,
                 std::size_t params_from, std::size_t kept_from, Sublayer&& sublayer) const {
    ctx.gradients_from(params_from);
    void* input_grad;
    {
      TempScope scope(ctx.memory);
      void* d_o = ctx.temp(static_cast<std::size_t>(saved.rows) * dim_);
      const Grad grad = begin_backward(ctx, saved, g, spare, bias, d_o);
      sublayer(grad.sublayer_dy, grad.sublayer_dx, grad.accumulate);
      input_grad = end_backward(ctx, saved, grad);
    }
    ctx.memory.release_kept(kept_from);
    return input_grad;
  }

 private:
  LayerNormLayer norm_;
  int dim_ = 0;
  NormPlacement placement_ = NormPlacement::post;
};

}  // namespace lseq

#pragma once
// The output projection to target-vocabulary logits (weight [tgt_vocab, dim], own or the tied target embedding;
// bias [tgt_vocab]) and the label-smoothed cross-entropy against the reference, pad id 0 ignored.
#include <cstddef>

#include "core/layer_context.h"
#include "core/model_config.h"

namespace lseq {

class OutputLayer {
 public:
  struct Saved {
    const void* x = nullptr;  // decoder states [rows, dim]
    void* logits = nullptr;   // [rows, vocab]; after loss() with gradients, d loss / d logits in place
    int rows = 0;
    bool bias_pending = false;  // logits lack the bias: loss() adds it inside cross_entropy
  };

  // `tied_weight`: offset of the target embedding when tied, or kUntied to own `output.weight`.
  static constexpr std::size_t kUntied = static_cast<std::size_t>(-1);
  OutputLayer(ParamTable& table, const ModelConfig& config, std::size_t tied_weight);

  // `loss_only`: the caller uses the logits only through loss() (training, validation, scoring), so the bias is
  // left for cross_entropy to add on the fly instead of a separate pass over [rows, vocab]; saved.logits then
  // lack the bias. Decoding and forward_logits need the real logits: false.
  void forward(const LayerContext& ctx, const void* x, int rows, Saved& saved, bool loss_only = false) const;
  // Per-row loss and nll ([rows] fp32, caller's buffers). With `gradients` the logits are replaced by
  // grad_scale * d loss / d logits for backward.
  void loss(const LayerContext& ctx, const Saved& saved, const int32_t* targets, bool gradients, float grad_scale,
            float* row_loss, float* row_nll) const;
  // dx [rows, dim] overwritten; weight and bias gradients accumulate.
  void backward(const LayerContext& ctx, const Saved& saved, void* dx) const;

 private:
  int dim_ = 0, vocab_ = 0;
  float label_smoothing_ = 0.0f;
  std::size_t weight_ = 0, bias_ = 0;
};

}  // namespace lseq

#pragma once
// The output projection to target-vocabulary logits (weight [tgt_vocab, dim], own or the tied target embedding;
// bias [tgt_vocab]) and the label-smoothed cross-entropy against the reference, pad id 0 ignored.
#include <cstddef>

#include "core/model/layers/layer_context.h"
#include "core/model/model_config.h"

namespace lseq {

class OutputLayer {
 public:
  struct Saved {
    const void* x = nullptr;  // decoder states [rows, dim]
    void* logits = nullptr;   // [rows, vocab]; after loss() with gradients, d loss / d logits in place
    int rows = 0;
  };

  // `tied_weight`: offset of the target embedding when tied, or kUntied to own `output.weight`.
  static constexpr std::size_t kUntied = static_cast<std::size_t>(-1);
  OutputLayer(ParamTable& table, const ModelConfig& config, std::size_t tied_weight);

  // The logits [rows, vocab], bias included (forward_logits). Training, validation and scoring use loss_in_chunks,
  // decoding step_logits.
  void forward(const LayerContext& ctx, const void* x, int rows, Saved& saved) const;
  // A decoding step's logits, bias included: rows of ld elements (the vocabulary rounded up to 16 bytes in 16-bit
  // types, the columns past it undefined), so that the product, the top-k and the log-softmax all take aligned
  // paths whatever the vocabulary (GPT-2's 50261 ids: the unaligned product took 0.16 ms a step at 128 rows on an
  // H100).
  struct StepLogits {
    const void* logits = nullptr;
    int ld = 0;
  };
  StepLogits step_logits(const LayerContext& ctx, const void* x, int rows) const;
  // Per-row loss and nll ([rows] fp32, caller's buffers). With `gradients` the logits are replaced by
  // grad_scale * d loss / d logits for backward.
  void loss(const LayerContext& ctx, const Saved& saved, const int32_t* targets, bool gradients, float grad_scale,
            float* row_loss, float* row_nll) const;
  // dx [rows, dim] overwritten; weight and bias gradients accumulate.
  void backward(const LayerContext& ctx, const Saved& saved, void* dx) const;

  // forward + loss (+ backward when dx is not null) without ever holding all [rows, vocab] logits: the rows go
  // through in chunks of chunk_rows (0: default_chunk_rows), each projected (the bias added in the product's
  // epilogue, before the logits are rounded to dt), scored by cross_entropy, and (with dx) turned into its rows of dx
  // and its share of the weight and bias gradients at once. The workspace then holds one chunk's logits. Same results
  // as forward/loss/backward up to the order of the fp32 gradient sums.
  void loss_in_chunks(const LayerContext& ctx, const void* x, int rows, const int32_t* targets, float grad_scale,
                      float* row_loss, float* row_nll, void* dx, int chunk_rows = 0) const;
  static constexpr std::size_t kChunkLogits = std::size_t(1) << 28;  // see default_chunk_rows
  static constexpr int kHalfChunkRows = 8192;
  std::size_t param_begin() const { return param_begin_; }  // table offset of the layer's first own tensor

 private:
  // A quarter of the rows (rounded up to 64), or half of them from kHalfChunkRows rows on, and at most kChunkLogits
  // logits (8192 rows, 512 MiB in bf16, with a 32000-word vocabulary). The chunk lies on top of everything forward
  // kept, so it is part of a step's memory peak, which matters most for small batches of large models (big at 4096
  // tokens: a quarter). Each chunk's weight gradient adds into the fp32 [vocab, dim] sum once more (131 MB of
  // traffic for transformer-base, 262 MB for big), so large batches take large chunks: at 16384 target tokens two
  // chunks of about 8000 rows instead of eight of 2048 made base 3% faster and big 2% (H100, bench/results/README.md round
  // 11); at 8192 two chunks instead of four measured the same as before.
  int default_chunk_rows(int rows) const;
  // A chunk's logits [rows][ld] = x W^T + b and its backward (dW += dlogits^T x, dx = dlogits W), with the
  // vocabulary cut at a multiple of 8 (output_layer.cpp says why).
  void project_aligned(const LayerContext& ctx, const void* x, int rows, void* logits, int ld) const;
  void project_aligned_backward(const LayerContext& ctx, const void* x, const void* dlogits, int rows, int ld,
                                void* dx) const;

  std::size_t param_begin_ = 0;
  int dim_ = 0, vocab_ = 0;
  float label_smoothing_ = 0.0f;
  std::size_t weight_ = 0, bias_ = 0;
};

}  // namespace lseq

#pragma once
// A decoder-only Transformer language model (--type lm, Marian's lm-transformer): token embeddings (+ sinusoidal or
// learned positions), dec_depth layers of causal self-attention and feed-forward blocks (the encoder's layers with
// causal masks: Encoder with StackRole::causal_decoder) and in pre-norm a final LayerNorm, then the output layer tied
// to the embeddings. The same flat parameters, explicit forward and backward, planned workspace, mixed precision and
// checkpoints as the encoder-decoder model; a batch is the target side of data::Batch (tgt_in -> tgt_out), with
// document masks where it carries doc_starts (packed blocks: attention stays inside each document and positions
// restart at its first token). Attention runs on the fused core (on the GPU: whole slices up to 128 positions,
// tiles with an online softmax above) and composed (batched GEMMs around the masked softmax) where documents are
// masked or the probabilities dropped out, on the CPU and the GPU alike. Tensor
// names: docs/tensor-names.md.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/encoder.h"
#include "core/model/layers/output_layer.h"
#include "core/model/model.h"

namespace lseq {

// Why a language model's training attention runs on the composed core (batched GEMMs around a stored softmax, whose
// memory grows with the square of the length) instead of the fused one, or "" when it does not: positions
// (--max-length + 1) past Backend::kMaxFusedAttentionLen, heads larger than its head size, dropout on the attention
// probabilities at up to 128 positions (Backend::fused_attention_drops), or document masks (the fused kernels know
// lengths and causality only). lstrain says so in one log
// line. The rule AttentionLayer::fused_core and forward apply, for the model's longest batch.
std::string lm_composed_attention_reason(const ModelConfig& config, bool document_masks);

class DecoderOnlyModel : public Model {
 public:
  // Validates the config (config.type must be ModelType::lm), lays out and allocates parameters; see make_model.
  DecoderOnlyModel(const ModelConfig& config, kernels::Backend& backend,
                   kernels::DType compute_dt = kernels::DType::f32, ParamUse use = ParamUse::training);
  ~DecoderOnlyModel() override;

  // The parts, for incremental decoding (DecoderOnlyStepModel).
  const Encoder& stack() const { return *stack_; }
  const OutputLayer& output_layer() const { return *output_; }
  // The position table on the device, [max_positions(), dim] in the compute dtype: the sinusoidal table, or the
  // learned table's working copy.
  const void* positions() const;
  int max_positions() const { return config_.max_length + 1; }

  std::size_t workspace_bytes(int64_t max_tokens, int max_len, bool training = true) const override;

 private:
  struct Tape {
    Encoder::Saved stack;
    OutputLayer::Saved output;
  };
  StepLoss run(const data::Batch& batch, kernels::Backend& backend, kernels::Workspace* ws, const StepRun& how,
               Tape& tape, std::vector<double>* sentence_nll, std::size_t* measured,
               std::vector<float>* logits = nullptr) const;
  void check_batch(const data::Batch& batch) const override;
  std::size_t measure_bytes(const data::Batch& batch, bool training) const override;
  StepLoss run_step(const data::Batch& batch, kernels::Workspace& ws, const StepRun& how,
                    std::vector<double>* sentence_nll, std::vector<float>* logits) override;

  std::unique_ptr<Encoder> stack_;
  std::unique_ptr<OutputLayer> output_;
  std::size_t learned_positions_ = EmbeddingLayer::kNoLearnedPositions;  // table offset, when learned
  void* sinusoidal_ = nullptr;  // [max_positions, dim] in the compute dtype, when not learned
  float* sums_ = nullptr;       // device scalars: loss sum, nll sum
  Tape tape_;
  mutable std::vector<int32_t> staging_;
};

}  // namespace lseq

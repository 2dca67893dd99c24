#pragma once
// The encoder-decoder Transformer over the kernel API: one flat parameter buffer, explicit forward and backward,
// activations from a workspace planned once. The trainer, validator and scorer see it as a Model (model.h).
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/model/decoder.h"
#include "core/model/encoder.h"
#include "core/model/layers/output_layer.h"
#include "core/model/model.h"
#include "core/model/model_config.h"
#include "core/model/params.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "kernels/workspace.h"

namespace lseq {

class EncoderDecoderModel : public Model {
 public:
  // Validates the config, lays out and allocates parameters and gradients (zeros until init_params).
  // compute_dt and use: see make_model (model.h).
  EncoderDecoderModel(const ModelConfig& config, kernels::Backend& backend,
                      kernels::DType compute_dt = kernels::DType::f32, ParamUse use = ParamUse::training);
  ~EncoderDecoderModel() override;

  // The parts, for incremental decoding (encoder_decoder_step_model.h), which runs them step by step.
  const Encoder& encoder() const { return *encoder_; }
  const Decoder& decoder() const { return *decoder_; }
  const OutputLayer& output_layer() const { return *output_; }

  // Source packing (on by default): a batch whose attention runs on the fused core (lengths up to 128, no dropout
  // on the probabilities) and whose source side has padding runs the encoder over packed, padding-free rows
  // (PackedRows), as does the cross-attention's key/value projection. The math is the same (padded positions never
  // reach a real one); dropout draws differ, as they are keyed by row. Off: always padded (tests compare the two).
  void set_pack_source(bool on) { pack_source_ = on; }
  bool pack_source() const { return pack_source_; }
  // Whether a step over this batch packs its source rows.
  bool packs_source(const data::Batch& batch, bool training) const;

  std::size_t workspace_bytes(int64_t max_tokens, int max_len, bool training = true) const override;

 private:
  struct Tape {
    Encoder::Saved encoder;
    Decoder::Saved decoder;
    OutputLayer::Saved output;
  };
  StepLoss run(const data::Batch& batch, kernels::Backend& backend, kernels::Workspace* ws, const StepRun& how,
               Tape& tape, std::vector<double>* sentence_nll, std::size_t* measured,
               std::vector<float>* logits = nullptr) const;
  void check_batch(const data::Batch& batch) const override;
  std::size_t measure_bytes(const data::Batch& batch, bool training) const override;
  StepLoss run_step(const data::Batch& batch, kernels::Workspace& ws, const StepRun& how,
                    std::vector<double>* sentence_nll, std::vector<float>* logits) override;

  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<OutputLayer> output_;
  void* positions_ = nullptr;  // sinusoidal table [max_length + 1, dim], activation dtype
  float* sums_ = nullptr;      // device scalars: loss sum, nll sum
  Tape tape_;
  mutable std::vector<int32_t> staging_;  // host ids and lengths, uploaded with one copy
  bool pack_source_ = true;
};

}  // namespace lseq

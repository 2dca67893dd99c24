// Loads a model directory's weights onto the chosen backend and wraps the Transformer in its incremental decoder,
// planned once for the largest batch the options allow.
#include "core/model_loader.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/backend_select.h"
#include "core/checkpoint.h"
#include "core/search_types.h"
#include "core/transformer.h"
#include "core/transformer_step_decoder.h"
#include "util/error.h"

namespace lseq {

namespace {

// Owns what the decoder runs on: the backend, the model's parameters, and the decoder's planned state.
class LoadedStepDecoder : public StepDecoder {
 public:
  LoadedStepDecoder(std::unique_ptr<kernels::Backend> backend, std::unique_ptr<Transformer> model,
                    std::unique_ptr<StepDecoder> decoder)
      : backend_(std::move(backend)), model_(std::move(model)), decoder_(std::move(decoder)) {}

  int vocab_size() const override { return decoder_->vocab_size(); }
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    decoder_->start(src, src_lengths, sentences, src_len);
  }
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override {
    decoder_->select(parents, sentence_of);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    decoder_->step(tokens, log_probs);
  }
  int live() const override { return decoder_->live(); }

 private:
  std::unique_ptr<kernels::Backend> backend_;  // destroyed last
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<StepDecoder> decoder_;
};

}  // namespace

std::unique_ptr<StepDecoder> make_step_decoder(const ModelFiles& files, const Options& options) {
  const ModelConfig config = read_model_config(files.weights);
  std::unique_ptr<kernels::Backend> backend = select_backend(options);
  // The checkpoint's fp32 weights run in the --precision asked for now, whatever the training precision was; only
  // the weights the layers read are kept on the device (no gradients, no fp32 master in 16 bits).
  auto model = std::make_unique<Transformer>(config, *backend, precision_dtype(options), ParamUse::inference);
  std::vector<float> weights;
  load_weights(files.weights, model->param_store().table(), weights);
  model->load_params(weights);

  // The largest batch: --mini-batch sentences (or, with only --mini-batch-words, that many one-word sentences),
  // each up to --max-length tokens + eos; lstranslate keeps --beam-size hypotheses per sentence and decodes up to
  // --max-length-factor times the source length; lsscore feeds targets of up to --max-length tokens.
  const int max_length = static_cast<int>(options.get_int("max-length"));
  const int64_t mini_batch = options.get_int("mini-batch"), words = options.get_int("mini-batch-words");
  const int sentences = static_cast<int>(mini_batch > 0 ? (words > 0 ? std::min(mini_batch, words) : mini_batch) : words);
  const bool translating = options.has("beam-size");
  const int beam = translating ? static_cast<int>(options.get_int("beam-size")) : 1;
  const int max_tgt = translating ? max_output_tokens(max_length, options.get_float("max-length-factor")) + 1
                                  : max_length + 1;
  auto decoder = make_transformer_step_decoder(*model, sentences * beam, max_length + 1, max_tgt, sentences);
  spdlog::info("model {}: {} parameters; decoding up to {} sentences x {} hypotheses, {} source and {} target tokens",
               files.weights, model->num_weights(), sentences, beam, max_length + 1, max_tgt);
  return std::make_unique<LoadedStepDecoder>(std::move(backend), std::move(model), std::move(decoder));
}

}  // namespace lseq

// Loads a model directory's weights onto the chosen backend and wraps the model in its incremental step model,
// planned once for the largest batch the options allow.
#include "core/cli/model_loader.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/checkpoint/checkpoint.h"
#include "core/cli/backend_select.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/search/search_types.h"
#include "util/error.h"

namespace lseq {

namespace {

// Owns what the step model runs on: the backend, the model's parameters, and the step model's planned state.
class LoadedStepModel : public StepModel {
 public:
  LoadedStepModel(std::unique_ptr<kernels::Backend> backend, std::unique_ptr<EncoderDecoderModel> model,
                    std::unique_ptr<StepModel> steps)
      : backend_(std::move(backend)), model_(std::move(model)), steps_(std::move(steps)) {}

  int vocab_size() const override { return steps_->vocab_size(); }
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    steps_->start(src, src_lengths, sentences, src_len);
  }
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override {
    steps_->select(parents, sentence_of);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    steps_->step(tokens, log_probs);
  }
  int live() const override { return steps_->live(); }

 private:
  std::unique_ptr<kernels::Backend> backend_;  // destroyed last
  std::unique_ptr<EncoderDecoderModel> model_;
  std::unique_ptr<StepModel> steps_;
};

}  // namespace

ModelVocabSizes check_model_vocabs(const ModelFiles& files, const data::Vocab* source, const data::Vocab* target) {
  const ModelConfig config = read_model_config(files.weights);
  auto check = [&](const data::Vocab* vocab, int model_size, const char* side) {
    if (vocab && vocab->size() != model_size)
      fail("the vocabulary {} has {} entries but the model {} was trained with a {} vocabulary of {}; put the "
           "vocabulary the model was trained with into {}",
           vocab->path(), vocab->size(), files.weights, side, model_size, files.dir);
  };
  check(source, config.src_vocab, "source");
  check(target, config.tgt_vocab, "target");
  return ModelVocabSizes{config.src_vocab, config.tgt_vocab};
}

std::unique_ptr<StepModel> load_step_model(const ModelFiles& files, const Options& options) {
  const ModelConfig config = read_model_config(files.weights);
  std::unique_ptr<kernels::Backend> backend = select_backend(options);
  // The checkpoint's fp32 weights run in the --precision asked for now, whatever the training precision was; only
  // the weights the layers read are kept on the device (no gradients, no fp32 master in 16 bits).
  auto model = std::make_unique<EncoderDecoderModel>(config, *backend, precision_dtype(options), ParamUse::inference);
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
  auto steps = make_encoder_decoder_step_model(*model, sentences * beam, max_length + 1, max_tgt, sentences);
  spdlog::info("model {}: {} parameters; decoding up to {} sentences x {} hypotheses, {} source and {} target tokens",
               files.weights, model->num_weights(), sentences, beam, max_length + 1, max_tgt);
  return std::make_unique<LoadedStepModel>(std::move(backend), std::move(model), std::move(steps));
}

}  // namespace lseq

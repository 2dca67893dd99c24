// Loads a model directory's weights onto the chosen backend and wraps the model in its incremental step model,
// planned once for the largest batch the options allow.
#include "core/cli/model_loader.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <future>

#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/safetensors.h"
#include "core/cli/backend_select.h"
#include "core/model/decoder_warm_up.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/model/lm/decoder_only_model.h"
#include "core/model/lm/decoder_only_step_model.h"
#include "core/search/search_types.h"
#include "util/error.h"

namespace lseq {

namespace {

// A model directory's weights on the backend that placed them, shared by every decoder of the process.
struct LoadedWeights {
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<Model> model;
};

// What a loaded step model runs on, built before it and destroyed after it (a base class listed first): the shared
// weights and, for every decoder but the one on the weights' backend, a backend of its own (its stream, cuBLAS
// handle and recorded steps; the same device, so it reads the weights where they lie).
struct DecoderParts {
  std::shared_ptr<const LoadedWeights> weights;
  std::unique_ptr<kernels::Backend> own_backend;
  kernels::Backend& runs_on() const { return own_backend ? *own_backend : *weights->backend; }
};

// The step model of a model directory: an EncoderDecoderStepModel that owns what it runs on. Owning by inheritance
// instead of wrapping means every StepModel call reaches the model itself; a forwarding wrapper that missed
// step_topk once sent lstranslate's beam search through the host fallback (whole log-softmax rows copied to the
// host at every step).
class LoadedStepModel : private DecoderParts, public EncoderDecoderStepModel {
 public:
  LoadedStepModel(DecoderParts parts, int max_hypotheses, int max_src_len, int max_tgt_len, int max_sentences,
                  int max_live_sentences)
      : DecoderParts(std::move(parts)),
        EncoderDecoderStepModel(static_cast<const EncoderDecoderModel&>(*weights->model), max_hypotheses, max_src_len,
                                max_tgt_len, max_sentences, &runs_on(), max_live_sentences) {}
};

// The same for a language model.
class LoadedLmStepModel : private DecoderParts, public DecoderOnlyStepModel {
 public:
  LoadedLmStepModel(DecoderParts parts, int max_hypotheses, int max_prompt, int max_steps, int max_sentences)
      : DecoderParts(std::move(parts)),
        DecoderOnlyStepModel(static_cast<const DecoderOnlyModel&>(*weights->model), max_hypotheses, max_prompt,
                             max_steps, max_sentences, &runs_on()) {}
};

double seconds_since(std::chrono::steady_clock::time_point& last) {  // and restarts the clock
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - last).count();
  last = now;
  return seconds;
}

// The backend the options choose, with the model's weights placed on it.
std::shared_ptr<const LoadedWeights> load_weights(const ModelFiles& files, const Options& options) {
  // Where a load's time goes, at debug level (the whole is in lstranslate's and lsscore's summary line).
  auto last = std::chrono::steady_clock::now();
  const ModelConfig config = read_model_config(files.weights);
  // The weights file is read in while the backend starts (on a GPU: the CUDA context and cuBLASLt's first-use
  // set-up, ~0.3 s), and its tensors go to the device from where they lie: on an H100, reading transformer-base's
  // 193 MB into one flat host copy took 0.19 s after the backend; checking and placing them now 0.03 + 0.04 s.
  std::future<SafetensorsFile> weights_file =
      std::async(std::launch::async, [&files] { return SafetensorsFile::open(files.weights, true); });
  auto loaded = std::make_shared<LoadedWeights>();
  loaded->backend = select_backend(options);
  const double backend_seconds = seconds_since(last);
  // The checkpoint's fp32 weights run in the --precision asked for now, whatever the training precision was; only
  // the weights the layers read are kept on the device (no gradients, no fp32 master in 16 bits).
  loaded->model = make_model(config, *loaded->backend, precision_dtype(options), ParamUse::inference);
  const double model_seconds = seconds_since(last);
  const SafetensorsFile file = weights_file.get();
  const std::vector<HostTensor> tensors = weight_tensors(file, loaded->model->param_store().table());
  const double read_seconds = seconds_since(last);
  loaded->model->load_params(tensors);  // straight from the mapped file
  loaded->backend->synchronize();       // placed before decoders on other streams read them
  spdlog::debug("loading {}: backend {:.3f} s, model {:.3f} s, checking weights {:.3f} s, placing them {:.3f} s",
                files.weights, backend_seconds, model_seconds, read_seconds, seconds_since(last));
  return loaded;
}

}  // namespace

int decoding_row_class_growth(bool language_model) {
  // On an H200 (bench/results/translate-row-classes-h200-2026-11-28.txt) powers of 16 gave translation the most
  // (powers of 4 about half of it); for GPT-2 generation at 32 prompts a batch powers of 4 were 7-10% faster than 16
  // and as fast at 128.
  return language_model ? 4 : 16;
}

bool is_language_model(const ModelFiles& files, const Options& options, LanguageModelLimits* limits) {
  const ModelConfig config = read_model_config(files.weights);
  if (!config.is_lm()) return false;
  if (limits) {
    const int max_length = static_cast<int>(options.get_int("max-length"));
    // Positions 0 .. config.max_length: bos, the prompt, and the continuation but its last token (or eos).
    limits->context = config.max_length;
    limits->prompt_tokens = std::max(1, config.max_length - 1);
    limits->new_tokens = std::min(max_length, config.max_length);
    limits->scored_tokens = std::min(max_length, config.max_length);
  }
  return true;
}

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

namespace {

// The vocabularies against the fingerprints the model directory's latest checkpoint recorded (lstrain writes them
// into progress.yml): one of the same size but another content would decode into the wrong words.
void check_trained_vocabs(const ModelFiles& files, const data::Vocab& source, const data::Vocab& target) {
  const ModelDir dir(files.dir);
  std::string latest;
  TrainingProgress progress;
  try {
    latest = dir.latest_name();
    if (latest.empty()) return;  // no checkpoint (a converted model): nothing recorded to compare with
    progress = dir.check_checkpoint(latest, read_model_config(files.weights));
  } catch (const Error& e) {
    spdlog::warn("the vocabularies of '{}' are not checked against its checkpoint ({})", files.dir, e.what());
    return;
  }
  if (progress.vocabs.size() != 2) return;  // a checkpoint older than the recorded identities
  const data::Vocab* vocabs[2] = {&source, &target};
  const std::string* paths[2] = {&files.source_vocab, &files.target_vocab};
  for (int side = 0; side < 2; ++side) {
    if (vocabs[side]->fingerprint() == progress.vocabs[static_cast<std::size_t>(side)]) continue;
    fail("the vocabulary {} is not the one the model in '{}' was trained with (its checkpoint {} records another "
         "fingerprint); put back the vocabulary lstrain copied there",
         *paths[side], files.dir, latest);
  }
}

}  // namespace

ModelVocabs load_model_vocabs(const ModelFiles& files, bool needed, const char* token_id_options) {
  if (needed && files.source_vocab.empty())
    fail("model directory '{}' has no vocab.spm (or vocab.src.spm and vocab.tgt.spm, or vocab.json and merges.txt); "
         "without them use {} with token ids",
         files.dir, token_id_options);
  ModelVocabs vocabs;
  if (!files.source_vocab.empty()) {
    vocabs.source.emplace(data::Vocab::load(files.source_vocab));
    vocabs.target.emplace(data::Vocab::load(files.target_vocab));
  }
  vocabs.sizes = check_model_vocabs(files, vocabs.source ? &*vocabs.source : nullptr,
                                    vocabs.target ? &*vocabs.target : nullptr);
  if (vocabs.source) check_trained_vocabs(files, *vocabs.source, *vocabs.target);
  return vocabs;
}

namespace {

// Sentence places a decoder holds per --mini-batch sentence, at most: see make_decoder.
constexpr int kLiveSentencesPerBatch = 2;

// --warm-up: lsserve's default, lstranslate's option; lsscore has none.
bool asks_warm_up(const Options& options) { return options.has("warm-up") && options.get_bool("warm-up"); }

// What a decoder is made for: decoding, or (kernel_preload) a decoder over placeholder weights that only
// warms up, so that the process has loaded its GEMM kernels before the real decoders meet them.
enum class DecoderUse { decode, kernel_preload };

// A decoder over loaded weights, on own_backend (or the weights' when null), planned once for the largest batch the
// options allow. `warms` picks which decoders --warm-up warms (the kernel preload always warms).
std::unique_ptr<StepModel> make_decoder(const ModelFiles& files, const Options& options,
                                        std::shared_ptr<const LoadedWeights> weights,
                                        std::unique_ptr<kernels::Backend> own_backend,
                                        DecoderUse use = DecoderUse::decode, bool warms = true) {
  auto last = std::chrono::steady_clock::now();
  DecoderParts parts{std::move(weights), std::move(own_backend)};
  kernels::Backend& backend = parts.runs_on();
  // --warm-up (lsserve's default, lstranslate's option): on a GPU a decoder meets its kernels before the first input
  // (core/model/decoder_warm_up.h); the CPU has no such first-use cost.
  auto finish_load = [&](StepModel& loaded, const WarmUpLimits* warm_up) {  // warms up where asked, logs the phases
    const double planning_seconds = seconds_since(last);
    const int calls = warm_up ? warm_up_decoding(loaded, *warm_up) : 0;
    spdlog::debug("{} of {}: planning {:.3f} s, warming up {:.3f} s ({} calls)",
                  use == DecoderUse::decode ? "decoder" : "kernel preload", files.weights, planning_seconds,
                  seconds_since(last), calls);
  };
  const bool warm_up = backend.can_record() && (use == DecoderUse::kernel_preload || (warms && asks_warm_up(options)));
  const std::size_t parameters = parts.weights->model->num_weights();

  // The largest batch: --mini-batch sentences (or, with only --mini-batch-words, that many one-word sentences),
  // each up to --max-length tokens + eos; lstranslate keeps --beam-size hypotheses per sentence and decodes up to
  // --max-length-factor times the source length; lsscore feeds targets of up to --max-length tokens.
  const int max_length = static_cast<int>(options.get_int("max-length"));
  const int64_t mini_batch = options.get_int("mini-batch"), words = options.get_int("mini-batch-words");
  const int sentences =
      static_cast<int>(mini_batch > 0 ? (words > 0 ? std::min(mini_batch, words) : mini_batch) : words);
  const bool translating = options.has("beam-size");
  const int beam = translating ? static_cast<int>(options.get_int("beam-size")) : 1;
  LanguageModelLimits lm;
  const bool language_model = is_language_model(files, options, &lm);
  backend.set_matmul_row_class_growth(decoding_row_class_growth(language_model));
  if (language_model) {
    // lstranslate: prompts (cropped, + eos) and their continuations; lsscore: empty prompts, lines as continuations.
    const int max_prompt = translating ? lm.prompt_tokens + 1 : 1;
    const int max_steps = (translating ? lm.new_tokens : lm.scored_tokens) + 1;
    auto loaded = std::make_unique<LoadedLmStepModel>(std::move(parts), sentences * beam, max_prompt, max_steps,
                                                      sentences);
    loaded->limit_recorded_steps(static_cast<std::size_t>(options.get_int("max-recorded-steps")));
    WarmUpLimits limits{sentences, sentences * beam, max_prompt};
    limits.prefill_piece = DecoderOnlyStepModel::kPrefillChunk;
    limits.row_class_growth = decoding_row_class_growth(true);
    finish_load(*loaded, warm_up ? &limits : nullptr);
    if (use == DecoderUse::kernel_preload) return loaded;
    spdlog::info("language model {}: {} parameters; decoding up to {} prompts x {} hypotheses, prompts of {} and {} "
                 "{} tokens",
                 files.weights, parameters, sentences, beam, max_prompt - 1, max_steps - 1,
                 translating ? "new" : "scored");
    return loaded;
  }
  const int max_tgt = translating ? max_output_tokens(max_length, options.get_float("max-length-factor")) + 1
                                  : max_length + 1;
  // Twice the sentence places when beams are wider than one: continuous search fills the hypotheses of beams that
  // narrowed (finished hypotheses leave them) with more sentences, up to --mini-batch x --beam-size hypotheses a
  // step. Costs a second batch's cross-attention memory, a small part of the self-attention caches' beside it.
  const int live_sentences = sentences * std::min(beam, kLiveSentencesPerBatch);
  auto loaded = std::make_unique<LoadedStepModel>(std::move(parts), sentences * beam, max_length + 1, max_tgt,
                                                  sentences, live_sentences);
  loaded->limit_recorded_steps(static_cast<std::size_t>(options.get_int("max-recorded-steps")));
  const WarmUpLimits limits{sentences, sentences * beam, max_length + 1};
  finish_load(*loaded, warm_up ? &limits : nullptr);
  if (use == DecoderUse::kernel_preload) return loaded;
  spdlog::info(
      "model {}: {} parameters; decoding up to {} hypotheses a step ({} sentences a batch x {}, up to {} "
      "sentences at once), {} source and {} target tokens",
      files.weights, parameters, sentences * beam, sentences, beam, live_sentences, max_length + 1, max_tgt);
  return loaded;
}

// --warm-up's first part, beside the load of the real weights: a decoder over zero weights on a backend of its own
// runs every class of shapes once and is dropped. cuBLAS loads a GEMM kernel once a process (2-9 ms of host time
// each, about 0.1 s for transformer-base's), and a kernel's choice depends on the shapes alone, so the real
// decoders, warmed up after their weights are placed, find the kernels loaded: the loading runs while the weights
// are read, checked and placed and the other decoders' backends start, instead of after them. On a GPU only (the CPU
// has no such first-use cost). A failure costs only the head start: the decoders load their kernels as they meet
// them.
void preload_decoding_kernels(const ModelFiles& files, const Options& options) {
  try {
    auto last = std::chrono::steady_clock::now();
    auto placeholder = std::make_shared<LoadedWeights>();
    placeholder->backend = select_backend(options);
    if (!placeholder->backend->can_record()) return;
    placeholder->model = make_model(read_model_config(files.weights), *placeholder->backend, precision_dtype(options),
                                    ParamUse::inference);
    placeholder->model->load_params(std::vector<HostTensor>{});  // every weight 0
    make_decoder(files, options, placeholder, nullptr, DecoderUse::kernel_preload);
    spdlog::debug("kernel preload of {}: {:.3f} s", files.weights, seconds_since(last));
  } catch (const std::exception& e) {  // at debug level: a bad model file is the real load's to report
    spdlog::debug("kernel preload of {} gave up ({}); the decoders load their kernels as they meet them", files.weights,
                  e.what());
  }
}

}  // namespace

std::unique_ptr<StepModel> load_step_model(const ModelFiles& files, const Options& options) {
  return make_decoder(files, options, load_weights(files, options), nullptr);
}

std::vector<std::unique_ptr<StepModel>> load_copies(int count, bool all_required,
                                                    const std::function<std::unique_ptr<StepModel>(int)>& load_one) {
  if (count < 1) fail("internal error: loading needs at least one copy, got {}", count);
  std::vector<std::future<std::unique_ptr<StepModel>>> loads;
  for (int i = 1; i < count; ++i) loads.push_back(std::async(std::launch::async, load_one, i));
  std::vector<std::unique_ptr<StepModel>> models;
  std::exception_ptr error;
  std::string first_failure;
  auto collect = [&](const std::function<std::unique_ptr<StepModel>()>& get) {
    try {
      models.push_back(get());
    } catch (const std::exception& e) {
      if (!error) {
        error = std::current_exception();
        first_failure = e.what();
      }
    } catch (...) {
      if (!error) {
        error = std::current_exception();
        first_failure = "unknown error";
      }
    }
  };
  collect([&load_one] { return load_one(0); });  // the first copy on the calling thread
  for (auto& load : loads) collect([&load] { return load.get(); });
  if (error && (all_required || models.empty())) std::rethrow_exception(error);
  if (error)
    spdlog::warn("{} of {} decoders loaded; decoding with {} ({}); --decoders sets the count", models.size(), count,
                 models.size(), first_failure);
  return models;
}

namespace {

// `count` decoders over one copy of the weights: it is placed by the first decoder's backend (copy 0, the first
// returned) while the others' backends start, and each further decoder runs on a backend of its own (load_copies'
// threads).
std::vector<std::unique_ptr<StepModel>> load_sharing_weights(
    const ModelFiles& files, const Options& options, int count, bool all_required, WarmedDecoders warmed,
    std::function<std::unique_ptr<StepModel>()>* make_another = nullptr) {
  std::shared_future<std::shared_ptr<const LoadedWeights>> weights =
      std::async(std::launch::async, [&files, &options] { return load_weights(files, options); }).share();
  // --warm-up's kernel preload runs beside the weights' load. The decoders are planned only after it has ended and
  // given its memory back, so that the load's peak is the weights and the decoders as without it.
  std::shared_future<void> preload;
  if (asks_warm_up(options) && runs_on_gpu(options))
    preload = std::async(std::launch::async, [&files, &options] { preload_decoding_kernels(files, options); }).share();
  const bool first_only = warmed == WarmedDecoders::first_of_language_model && is_language_model(files, options);
  std::vector<std::unique_ptr<StepModel>> decoders =
      load_copies(count, all_required, [&](int copy) -> std::unique_ptr<StepModel> {
        std::unique_ptr<kernels::Backend> own_backend;
        if (copy > 0) own_backend = select_backend(options);
        std::shared_ptr<const LoadedWeights> loaded = weights.get();
        if (preload.valid()) preload.wait();
        return make_decoder(files, options, std::move(loaded), std::move(own_backend), DecoderUse::decode,
                            copy == 0 || !first_only);
      });
  if (make_another) {
    *make_another = [files, &options, loaded = weights.get()] {
      return make_decoder(files, options, loaded, select_backend(options), DecoderUse::decode, false);
    };
  }
  return decoders;
}

}  // namespace

std::vector<std::unique_ptr<StepModel>> load_step_models(const ModelFiles& files, const Options& options, int count) {
  return load_sharing_weights(files, options, count, true, WarmedDecoders::all);
}

std::vector<std::unique_ptr<StepModel>> load_decoders(const ModelFiles& files, const Options& options,
                                                      WarmedDecoders warmed,
                                                      std::function<std::unique_ptr<StepModel>()>* make_another) {
  return load_sharing_weights(files, options, decoder_count(options), options.get_int("decoders") > 0, warmed,
                              make_another);
}

}  // namespace lseq

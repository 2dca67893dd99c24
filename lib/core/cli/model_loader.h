#pragma once
// The single point where a model directory becomes a StepModel on the backend the options choose.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/checkpoint/model_files.h"
#include "core/cli/options.h"
#include "core/search/step_model.h"
#include "data/vocab.h"

namespace lseq {

// The vocabulary sizes a model was trained with (its config, stored in the weights).
struct ModelVocabSizes {
  int source = 0, target = 0;
};

// Reads the model's vocabulary sizes and checks the directory's vocabularies against them (nullptr where it has
// none): a vocabulary of another size would decode into the wrong ids, so it throws lseq::Error naming the file,
// its size and the model's.
ModelVocabSizes check_model_vocabs(const ModelFiles& files, const data::Vocab* source, const data::Vocab* target);

// The model directory's vocabularies, loaded and checked against the model (check_model_vocabs); empty where the
// directory has none.
struct ModelVocabs {
  std::optional<data::Vocab> source, target;
  ModelVocabSizes sizes;
};
// `needed`: text is to be encoded or decoded, so a directory without vocabularies is an error that tells the user
// to pass `token_id_options` (e.g. "--no-spm-encode") and token ids instead.
ModelVocabs load_model_vocabs(const ModelFiles& files, bool needed, const char* token_id_options);

// Loads the model in `files` onto the backend the options choose (--cpu, --devices, --precision, --cpu-threads,
// --workspace) and returns its incremental step model, planned once for the largest batch the options allow. A
// language model's (--type lm) is a DecoderOnlyStepModel whose "sources" are prompts: lstranslate's continue them
// (language_model_limits), lsscore's are empty and score each line as the continuation.
std::unique_ptr<StepModel> load_step_model(const ModelFiles& files, const Options& options);
// How widely a decoder's GEMMs share one algorithm over row counts (Backend::set_matmul_row_class_growth; training
// keeps 2): wider classes load fewer cuBLAS kernels, each of which costs 2-9 ms of host time at its first launch.
int decoding_row_class_growth(bool language_model);
// `count` such step models (lstranslate's and lsserve's --decoders) over one copy of the weights: each on a backend
// of its own (its stream, cuBLAS handle, recorded steps), started side by side while the first places the weights,
// so that a further decoder costs little start-up time and no weights memory. The first error is rethrown once all
// loads have ended.
std::vector<std::unique_ptr<StepModel>> load_step_models(const ModelFiles& files, const Options& options, int count);

// Which decoders --warm-up warms. lsserve: all, since each takes requests. lstranslate: a language model's first
// decoder only, the one the first batch goes to. A prompt file of one batch leaves the others idle, and an idle
// decoder that has warmed up (run work on its stream) slowed the busy one's recorded steps: GPT-2 small and medium
// at 128 prompts, one batch, 4-5% fewer tokens/s with four decoders than with one (H200; the cause, below our code,
// was not found: docs/decoding.md). The kernel preload and the first decoder have loaded the kernels the others
// meet. A translation model warms all (continuous batching gives every decoder work at once; not measured).
enum class WarmedDecoders { all, first_of_language_model };

// lstranslate's and lsserve's decoders: decoder_count(options) step models, loaded as load_step_models loads them.
// When --decoders is not given, a copy that fails to load (a GPU with room for two copies, not the default four) is
// left out with a warning naming the error, as long as one loaded; a count given with --decoders loads in full or
// not at all.
// With `make_another`, sets it to make one more such decoder later, over the same weights and not warmed up
// (lstranslate's extra decoders, core/search/translator.h); it holds the weights and `options`, which must outlive it.
std::vector<std::unique_ptr<StepModel>> load_decoders(
    const ModelFiles& files, const Options& options, WarmedDecoders warmed = WarmedDecoders::all,
    std::function<std::unique_ptr<StepModel>()>* make_another = nullptr);

// How those two load: `count` calls of load_one(copy), copy 0 on the calling thread and the others side by side on
// threads of their own; copy 0's model comes first. all_required: the first error is rethrown once every load has
// ended. Otherwise the copies that loaded are returned, with a warning for those that did not, and the first error
// is rethrown only when none loaded.
std::vector<std::unique_ptr<StepModel>> load_copies(int count, bool all_required,
                                                    const std::function<std::unique_ptr<StepModel>(int)>& load_one);

// What lstranslate and lsscore do with a language model's lines (--max-length means new tokens to lstranslate):
struct LanguageModelLimits {
  int prompt_tokens = 0;   // prompts are cropped to this many tokens (the model's positions less one new token)
  int new_tokens = 0;      // lstranslate: tokens a continuation may have (--max-length, within the positions)
  int context = 0;         // a prompt and its continuation together (the model's --max-length)
  int scored_tokens = 0;   // lsscore: lines are cropped to this many tokens (--max-length, within the positions)
};
// Reads the model's config; `lm` false (and the rest 0) for an encoder-decoder model.
bool is_language_model(const ModelFiles& files, const Options& options, LanguageModelLimits* limits = nullptr);

}  // namespace lseq

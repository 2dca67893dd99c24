// Marian compatibility: --task presets, Marian's spellings mapped onto lseq's options, the registry's notes
// (accepted with no effect, refused), and the table of docs/marian-compat.md.
#include "core/cli/marian_compat.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <utility>

#include "core/cli/options_registry.h"
#include "core/cli/options_values.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {

namespace {

using Preset = std::vector<std::pair<std::string, std::vector<std::string>>>;

// Marian's presets (its src/common/aliases.cpp), restricted to what lseq has: the options are the same, so are
// the values. The -prenorm variants normalize before each sublayer and after each stack (--transformer-prenorm).
Preset preset_of(const std::string& task) {
  const bool big = task.rfind("transformer-big", 0) == 0;
  const bool prenorm = task.size() > 8 && task.compare(task.size() - 8, 8, "-prenorm") == 0;
  Preset p = {
      {"type", {"transformer"}},
      {"enc-depth", {"6"}},
      {"dec-depth", {"6"}},
      {"dim-emb", {big ? "1024" : "512"}},
      {"tied-embeddings-all", {"true"}},
      {"transformer-dim-ffn", {big ? "4096" : "2048"}},
      {"transformer-heads", {big ? "16" : "8"}},
      {"transformer-postprocess", {"dan"}},
      {"transformer-preprocess", {""}},
      {"transformer-ffn-activation", {"relu"}},
      {"transformer-dropout", {"0.1"}},
      {"learn-rate", {big ? "0.0002" : "0.0003"}},
      {"cost-type", {"ce-mean-words"}},
      {"lr-warmup", {big ? "8000" : "16000"}},
      {"lr-decay-inv-sqrt", {big ? "8000" : "16000"}},
      {"label-smoothing", {"0.1"}},
      {"clip-norm", {"0"}},
      {"sync-sgd", {"true"}},
      {"exponential-smoothing", {"1e-4"}},
      {"max-length", {"100"}},
      {"mini-batch-fit", {"true"}},
      {"mini-batch", {"1000"}},
      {"maxi-batch", {"1000"}},
      {"workspace", {big ? "13000" : "9500"}},
      {"optimizer-params", {"0.9", big ? "0.998" : "0.98", "1e-09"}},
      {"beam-size", {"8"}},
      {"valid-mini-batch", {big ? "8" : "16"}},
      {"normalize", {"1"}},
  };
  if (prenorm) p.push_back({"transformer-prenorm", {"true"}});
  return p;
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

std::string value_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  std::string text;
  for (const auto& element : node) text += (text.empty() ? "" : " ") + element.Scalar();
  return text;
}

bool holds(const YAML::Node& node, const std::string& value) {
  if (node.IsScalar()) return node.Scalar() == value;
  for (const auto& element : node)
    if (element.IsScalar() && element.Scalar() == value) return true;
  return false;
}

// Whether `value` is the registry's default of `spec` for `app`.
bool is_default(const OptionSpec& spec, App app, const YAML::Node& value) {
  const DefaultTokens tokens = spec.default_for(app);
  if (!tokens) return value.IsNull();
  return YAML::Dump(value_from_words(spec, *tokens, ValueSource{"the option registry", 0})) == YAML::Dump(value);
}

// The note of `notes` that applies to `value`, or nullptr.
const OptionSpec::ValueNote* note_for(const std::vector<OptionSpec::ValueNote>& notes, const OptionSpec& spec,
                                      App app, const YAML::Node& value) {
  for (const auto& note : notes) {
    if (note.value.empty() ? !is_default(spec, app, value) : holds(value, note.value)) return &note;
  }
  return nullptr;
}

std::string given_text(const OptionSpec& spec, const OptionSpec::ValueNote& note, const YAML::Node& value) {
  if (!note.value.empty()) return fmt::format("--{} {}", spec.name, note.value);
  if (spec.type == OptionType::boolean) return "--" + spec.name;
  return fmt::format("--{} {}", spec.name, value_text(value));
}

// A Marian model path for a program that reads a model: an lseq model directory, or its model.safetensors.
std::string model_directory(const std::string& option, const std::string& path) {
  std::error_code ec;
  if (ends_with(path, ".npz") || ends_with(path, ".bin")) {
    fail("--{} {} is a Marian model file; convert it into an lseq model directory (python3 "
         "tools/marian/marian_npz_to_lseq.py, see docs/convert-marian.md) and give that directory",
         option, path);
  }
  if (fs::is_regular_file(path, ec)) {
    if (fs::path(path).filename() != "model.safetensors")
      fail("--{} {} is a file; give the model directory written by lstrain", option, path);
    const std::string dir = fs::path(path).parent_path().string();
    return dir.empty() ? "." : dir;
  }
  return path;
}

void map_model_paths(App app, Options& options, std::ostream& err) {
  if (app == App::translate && options.has("models") && !options.get_strings("models").empty()) {
    const std::vector<std::string> models = options.get_strings("models");
    if (models.size() > 1)
      fail("--models names {} models: ensembles are not implemented; give one model directory", models.size());
    if (!options.has("model")) options.set("model", YAML::Node(model_directory("models", models[0])));
  }
  if (!options.has("model") || (app != App::train && app != App::translate && app != App::score)) return;
  const std::string path = options.get_string("model");
  if (app != App::train) {
    options.set("model", YAML::Node(model_directory("model", path)));
    return;
  }
  if (ends_with(path, ".npz") || ends_with(path, ".bin")) {
    std::string dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    err << fmt::format("warning: --model {} is a Marian model file name; lseq trains into the model directory '{}' "
                       "(model.safetensors, checkpoint/, decoder.yml there); the name '{}' is not used\n",
                       path, dir, fs::path(path).filename().string());
    options.set("model", YAML::Node(dir));
  }
}

void map_precision(App app, Options& options) {
  const OptionSpec* fp16 = find_option("fp16");
  if (fp16->accepted_by(app) && options.get_bool("fp16")) {
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back("fp16");
    options.set("precision", list);
  }
  if (!find_option("precision")->accepted_by(app) || !options.has("precision")) return;
  const std::vector<std::string> precision = options.get_strings("precision");
  if (precision.empty()) fail("--precision is empty; give fp32, bf16 or fp16");
  if (precision.size() > 2)
    fail("--precision takes one or two values (compute type, optimizer type), got {}", precision.size());
  if (precision.size() == 2 && precision[1] != "fp32")
    fail("--precision {} {}: lseq keeps master weights and optimizer state in fp32; give float32 as the second "
         "value, or only the first",
         precision[0], precision[1]);
}

}  // namespace

YAML::Node task_preset_layer(App app, const std::vector<std::string>& tasks) {
  YAML::Node layer(YAML::NodeType::Map);
  for (const std::string& task : tasks) {
    for (const auto& [key, words] : preset_of(task)) {
      const OptionSpec* spec = find_option(key);
      if (!spec || !spec->accepted_by(app)) continue;
      layer[key] = value_from_words(*spec, words, ValueSource{"--task " + task, 0});
    }
  }
  return layer;
}

void apply_marian_compat(App app, Options& options, std::ostream& err) {
  map_model_paths(app, options, err);
  map_precision(app, options);
  if ((app == App::translate || app == App::score) && !options.get_strings("vocabs").empty()) {
    err << fmt::format("warning: --vocabs has no effect here: {} uses the vocabularies of the model directory\n",
                       app_name(app));
  }
  for (const auto& spec : option_registry()) {
    if (!spec.accepted_by(app) || spec.command_line_only || !options.has(spec.name)) continue;
    const YAML::Node value = options.yaml()[spec.name];
    if (const auto* note = note_for(spec.refused, spec, app, value))
      fail("{} {}", given_text(spec, *note, value), note->text);
    if (const auto* note = note_for(spec.ignored, spec, app, value))
      err << fmt::format("warning: {} has no effect here: {}\n", given_text(spec, *note, value), note->text);
  }
}

const std::vector<std::string>& marian_training_options() {
  // Marian's training options (marian), as its config_parser.cpp declares them for training, in its order.
  static const std::vector<std::string> names = {
      "authors", "cite", "build-info", "config", "workspace", "log", "log-level", "log-time-zone", "quiet",
      "quiet-translation", "seed", "check-nan", "interpolate-env-vars", "relative-paths", "dump-config", "sigterm",
      "model", "pretrained-model", "ignore-model-config", "type", "dim-vocabs", "dim-emb", "factors-dim-emb",
      "factors-combine", "lemma-dependency", "lemma-dim-emb", "dim-rnn", "enc-type", "enc-cell", "enc-cell-depth",
      "enc-depth", "dec-cell", "dec-cell-base-depth", "dec-cell-high-depth", "dec-depth", "skip",
      "layer-normalization", "right-left", "input-types", "input-reorder", "input-join-fields", "best-deep",
      "tied-embeddings", "tied-embeddings-src", "tied-embeddings-all", "output-omit-bias", "transformer-heads",
      "transformer-no-projection", "transformer-rnn-projection", "transformer-pool", "transformer-dim-ffn",
      "transformer-decoder-dim-ffn", "transformer-ffn-depth", "transformer-decoder-ffn-depth",
      "transformer-ffn-activation", "transformer-dim-aan", "transformer-aan-depth", "transformer-aan-activation",
      "transformer-aan-nogate", "transformer-decoder-autoreg", "transformer-tied-layers",
      "transformer-guided-alignment-layer", "transformer-preprocess", "transformer-postprocess-emb",
      "transformer-postprocess", "transformer-postprocess-top", "transformer-train-position-embeddings",
      "transformer-depth-scaling", "transformer-attention-mask", "transformer-alibi-shift", "separator-symbol",
      "transformer-disable-position-embeddings", "transformer-alibi-trainable", "alibi", "transformer-no-bias",
      "transformer-no-affine", "bert-mask-symbol", "bert-sep-symbol", "bert-class-symbol", "bert-masking-fraction",
      "bert-train-type-embeddings", "bert-type-vocab-size", "comet-final-sigmoid", "comet-stop-grad", "comet-mix",
      "comet-mix-norm", "comet-pool", "comet-mix-transformation", "comet-dropout", "comet-mixup", "comet-mixup-reg",
      "comet-augment-bad", "comet-pooler-ffn", "comet-prepend-zero", "comet-use-separator", "dropout-rnn",
      "dropout-src", "dropout-trg", "transformer-dropout", "transformer-dropout-attention",
      "transformer-dropout-ffn", "cost-type", "multi-loss-type", "unlikelihood-loss", "overwrite",
      "overwrite-checkpoint", "no-reload", "no-optimizer-reload", "train-sets", "vocabs", "sentencepiece-alphas",
      "sentencepiece-options", "sentencepiece-max-lines", "no-spm-encode", "after-epochs", "after-batches", "after",
      "disp-freq", "disp-first", "disp-label-counts", "save-freq", "logical-epoch", "shuffle", "no-shuffle",
      "no-restore-corpus", "tempdir", "sqlite", "sqlite-drop", "optimizer", "optimizer-params", "optimizer-delay",
      "sync-sgd", "learn-rate", "lr-report", "lr-decay", "lr-decay-strategy", "lr-decay-start", "lr-decay-freq",
      "lr-decay-reset-optimizer", "lr-decay-repeat-warmup", "lr-decay-inv-sqrt", "lr-warmup", "lr-warmup-start-rate",
      "lr-warmup-cycle", "lr-warmup-at-reload", "label-smoothing", "factor-weight", "clip-norm",
      "exponential-smoothing", "exponential-smoothing-replace-freq", "guided-alignment", "guided-alignment-cost",
      "guided-alignment-weight", "data-weighting", "data-weighting-type", "embedding-vectors",
      "embedding-normalization", "embedding-fix-src", "embedding-fix-trg", "fp16", "precision", "cost-scaling",
      "throw-on-divergence", "custom-fallbacks", "fp16-fallback-to-fp32", "gradient-norm-average-window",
      "dynamic-gradient-scaling", "check-gradient-nan", "normalize-gradient", "normalize-gradient-by-ratio",
      "train-embedder-rank", "task", "valid-sets", "valid-freq", "valid-metrics", "valid-reset-stalled",
      "valid-reset-all", "early-stopping", "early-stopping-epsilon", "early-stopping-on", "beam-size", "normalize",
      "max-length-factor", "word-penalty", "allow-unk", "n-best", "word-scores", "valid-mini-batch",
      "valid-max-length", "valid-script-path", "valid-script-args", "valid-translation-output", "keep-best",
      "valid-log", "quiet-validation", "devices", "no-nccl", "sharding", "sync-freq", "cpu-threads", "max-length",
      "max-length-crop", "tsv", "tsv-fields", "ulr", "ulr-query-vectors", "ulr-keys-vectors",
      "ulr-trainable-transformation", "ulr-dim-emb", "ulr-dropout", "ulr-softmax-temperature", "quantize-bits",
      "quantize-optimization-steps", "quantize-log-based", "quantize-biases", "mini-batch", "mini-batch-words",
      "mini-batch-fit", "mini-batch-fit-step", "gradient-checkpointing", "maxi-batch", "maxi-batch-sort",
      "shuffle-in-ram", "data-threads", "all-caps-every", "english-title-case-every", "mini-batch-words-ref",
      "mini-batch-warmup", "mini-batch-track-lr", "mini-batch-round-up"
};
  return names;
}

const std::vector<std::string>& marian_decoder_options() {
  // Marian's decoding options (marian-decoder), likewise.
  static const std::vector<std::string> names = {
      "authors", "cite", "build-info", "config", "workspace", "log", "log-level", "log-time-zone", "quiet",
      "quiet-translation", "seed", "check-nan", "interpolate-env-vars", "relative-paths", "dump-config", "models",
      "model-mmap", "ignore-model-config", "type", "dim-vocabs", "dim-emb", "factors-dim-emb", "factors-combine",
      "lemma-dependency", "lemma-dim-emb", "dim-rnn", "enc-type", "enc-cell", "enc-cell-depth", "enc-depth",
      "dec-cell", "dec-cell-base-depth", "dec-cell-high-depth", "dec-depth", "skip", "layer-normalization",
      "right-left", "input-types", "input-reorder", "input-join-fields", "best-deep", "tied-embeddings",
      "tied-embeddings-src", "tied-embeddings-all", "output-omit-bias", "transformer-heads",
      "transformer-no-projection", "transformer-rnn-projection", "transformer-pool", "transformer-dim-ffn",
      "transformer-decoder-dim-ffn", "transformer-ffn-depth", "transformer-decoder-ffn-depth",
      "transformer-ffn-activation", "transformer-dim-aan", "transformer-aan-depth", "transformer-aan-activation",
      "transformer-aan-nogate", "transformer-decoder-autoreg", "transformer-tied-layers",
      "transformer-guided-alignment-layer", "transformer-preprocess", "transformer-postprocess-emb",
      "transformer-postprocess", "transformer-postprocess-top", "transformer-train-position-embeddings",
      "transformer-depth-scaling", "transformer-attention-mask", "transformer-alibi-shift", "separator-symbol",
      "transformer-disable-position-embeddings", "transformer-alibi-trainable", "alibi", "transformer-no-bias",
      "transformer-no-affine", "bert-mask-symbol", "bert-sep-symbol", "bert-class-symbol", "bert-masking-fraction",
      "bert-train-type-embeddings", "bert-type-vocab-size", "comet-final-sigmoid", "comet-stop-grad", "comet-mix",
      "comet-mix-norm", "comet-pool", "comet-mix-transformation", "comet-dropout", "comet-mixup", "comet-mixup-reg",
      "comet-augment-bad", "comet-pooler-ffn", "comet-prepend-zero", "comet-use-separator", "input", "output",
      "vocabs", "beam-size", "normalize", "max-length-factor", "word-penalty", "allow-unk", "allow-special",
      "n-best", "alignment", "force-decode", "word-scores", "stat-freq", "no-spm-decode", "no-spm-encode", "fp16",
      "precision", "skip-cost", "shortlist", "weights", "output-sampling", "output-approx-knn", "optimize",
      "gemm-type", "quantize-range", "devices", "cpu-threads", "max-length", "max-length-crop", "tsv", "tsv-fields",
      "mini-batch", "mini-batch-words", "maxi-batch", "maxi-batch-sort", "data-threads"
};
  return names;
}

}  // namespace lseq

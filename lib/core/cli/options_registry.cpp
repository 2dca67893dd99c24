#include "core/cli/options_registry.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "core/model/model_config.h"
#include "util/error.h"

namespace lseq {

DefaultTokens OptionSpec::default_for(App app) const {
  for (const auto& o : overrides)
    if (o.app == app && o.default_value) return *o.default_value;
  return default_value;
}

OptionGroup OptionSpec::group_for(App app) const {
  for (const auto& o : overrides)
    if (o.app == app && o.group) return *o.group;
  return group;
}

const std::string& OptionSpec::help_for(App app) const {
  for (const auto& o : overrides)
    if (o.app == app && o.help) return *o.help;
  return help;
}

namespace {

using T = OptionType;
using G = OptionGroup;

// Limits of the sizes that are not the model's own (those are in core/model/model_config.h). Beyond them a run
// could not fit on any machine, or the counts would leave the types that hold them; the parser refuses them with
// one line instead of failing later in an allocation.
constexpr int kMaxCpuThreads = 1024;
constexpr int kMaxBatchTokens = 1 << 24;      // --mini-batch-words
constexpr int kMaxBatchSentences = 1 << 20;   // --mini-batch, --valid-mini-batch
constexpr int kMaxMaxiBatch = 100000;         // --maxi-batch
constexpr int kMaxWorkspaceMiB = 1 << 26;     // --workspace (64 TiB)
constexpr int kMaxOptimizerDelay = 1 << 16;   // --optimizer-delay
constexpr int kMaxBeamSize = 1024;            // --beam-size

DefaultTokens none() { return std::nullopt; }
DefaultTokens def(std::string value) { return std::vector<std::string>{std::move(value)}; }
DefaultTokens defs(std::vector<std::string> values) { return values; }
DefaultTokens empty_list() { return std::vector<std::string>{}; }

// Declares one option; the chained calls add checks and per-app differences.
class Opt {
 public:
  Opt(std::string name, T type, G group, unsigned apps, DefaultTokens default_value, std::string help) {
    spec_.name = std::move(name);
    spec_.type = type;
    spec_.group = group;
    spec_.apps = apps;
    spec_.default_value = std::move(default_value);
    spec_.help = std::move(help);
  }
  Opt& flag(char c) { return spec_.short_flag = c, *this; }
  Opt& cli_only() { return spec_.command_line_only = true, *this; }
  Opt& at_least(double min) { return spec_.min = min, *this; }
  Opt& in(double min, double max) { return spec_.min = min, spec_.max = max, *this; }
  // [min, max): probabilities such as dropout, where 1 would remove everything.
  Opt& in_half_open(double min, double max) { return in(min, max), spec_.max_exclusive = true, *this; }
  Opt& one_of(std::vector<std::string> choices) { return spec_.choices = std::move(choices), *this; }
  Opt& alias(std::string spelling, std::string canonical) {
    return spec_.aliases.emplace_back(std::move(spelling), std::move(canonical)), *this;
  }
  Opt& schedule(std::string units) { return spec_.schedule_units = std::move(units), *this; }
  Opt& letters(std::string allowed) { return spec_.allowed_letters = std::move(allowed), *this; }
  Opt& words() { return spec_.split_words = true, *this; }
  Opt& implicit(std::string value) { return spec_.implicit_value = std::move(value), *this; }
  // Marian compatibility: accepted with a warning (no effect here), refused with a line, or differing from Marian.
  Opt& ignored(std::string why, std::string value = "") {
    return spec_.ignored.push_back({std::move(value), std::move(why)}), *this;
  }
  Opt& refused(std::string what_to_do, std::string value = "") {
    return spec_.refused.push_back({std::move(value), std::move(what_to_do)}), *this;
  }
  Opt& differs(std::string how) { return spec_.marian_differs = std::move(how), *this; }
  Opt& lseq_only() { return spec_.lseq_only = true, *this; }
  Opt& default_in(App app, DefaultTokens value) {
    return spec_.overrides.push_back({app, std::move(value), std::nullopt, std::nullopt}), *this;
  }
  Opt& group_in(App app, G group) {
    return spec_.overrides.push_back({app, std::nullopt, group, std::nullopt}), *this;
  }
  Opt& help_in(App app, std::string help) {
    return spec_.overrides.push_back({app, std::nullopt, std::nullopt, std::move(help)}), *this;
  }
  OptionSpec take() { return std::move(spec_); }

 private:
  OptionSpec spec_;
};

constexpr unsigned TXS = kAllApps;
constexpr unsigned EVERY = kEveryProgram;
constexpr unsigned XS = kTranslate | kScore;

std::vector<OptionSpec> build_registry() {
  std::vector<OptionSpec> r;
  auto add = [&r](Opt& o) { r.push_back(o.take()); };

  // ---- General (all apps) ----
  {
    Opt o[] = {
        Opt("help", T::boolean, G::general, EVERY, def("false"), "Print this help and exit").flag('h').cli_only(),
        Opt("version", T::boolean, G::general, EVERY, def("false"), "Print the version and exit").cli_only(),
        Opt("config", T::strings, G::general, EVERY, empty_list(),
            "YAML config files, merged in order; options on the command line win")
            .flag('c')
            .cli_only(),
        Opt("dump-config", T::string, G::general, EVERY, none(),
            "Print the merged options as YAML and exit: full (every option; alone means full), minimal (only those "
            "that differ from the defaults) or expand (as full: --task presets are always expanded)")
            .one_of({"full", "minimal", "expand"})
            .implicit("full")
            .cli_only(),
        Opt("dump-marian-compat", T::boolean, G::general, kTrain, def("false"),
            "Print the table of Marian's options and what lstrain and lstranslate do with each (docs/marian-compat.md) "
            "and exit")
            .cli_only()
            .lseq_only(),
        Opt("model", T::string, G::general, TXS | kBench, none(),
            "Model directory (written by lstrain, read by lstranslate and lsscore); required. A Marian file path "
            "such as model/model.npz names the directory model/ (a warning says so)")
            .flag('m')
            .differs("Marian names a model file (model.npz) and writes decoder.yml and checkpoints beside it; lseq "
                     "names a directory that holds all of them: a path ending in .npz or .bin means its directory")
            .help_in(App::bench, "bench_decode_throughput: a model directory written by lstrain, decoded instead of "
                                 "--preset's random weights"),
        Opt("log", T::string, G::general, EVERY, none(), "Also write the log to this file"),
        Opt("quiet", T::boolean, G::general, EVERY, def("false"), "Show only warnings and errors on the terminal")
            .default_in(App::eval, def("true")),
        Opt("seed", T::integer, G::general, TXS | kBench, def("1234"), "Seed for all random number generators")
            .at_least(0)
            .differs("Marian's default 0 draws a random seed; lseq's 1234 makes runs repeatable, and 0 is a seed")
            .default_in(App::bench, def("1"))
            .help_in(App::bench, "Seed of the random weights and inputs"),
        Opt("devices", T::ints, G::general, TXS | kBench, defs({"0"}),
            "GPU device ids to use; lstrain trains on all of them, one process each (with --cpu: that many CPU "
            "processes)")
            .flag('d')
            .at_least(0)
            .help_in(App::bench, "GPU device id to run on (a benchmark uses one: the first; bench_train_throughput "
                                 "runs one process per id: data parallelism, as lstrain --devices)"),
        Opt("cpu", T::boolean, G::general, TXS | kBench, def("false"), "Run on the CPU backend instead of GPUs")
            .help_in(App::bench, "bench_train_throughput, bench_decode_throughput: run on the CPU backend"),
        Opt("cpu-threads", T::integer, G::general, TXS | kBench, def("0"), "CPU threads; 0 uses all cores")
            .in(0, kMaxCpuThreads)
            .differs("in Marian a value above 0 also selects the CPU; in lseq --cpu does, and 0 uses all cores")
            .help_in(App::bench, "CPU threads; 0 uses all cores (bench_data_pipeline: threads encoding the corpus)"),
        // The benchmarks' default depends on --cpu (bench/bench_options.h).
        Opt("precision", T::strings, G::general, TXS | kBench, defs({"fp32"}),
            "Compute precision: fp32, bf16 or fp16 (Marian's float32, bfloat16, float16 also accepted); a second "
            "value, as in Marian's 'float16 float32', is the optimizer's type, which is always fp32 here")
            .one_of({"fp32", "bf16", "fp16"})
            .differs("Marian takes a list (compute type, optimizer type); lseq computes in the first and keeps the "
                     "master weights and optimizer state in fp32, so a second value must be float32")
            .alias("float32", "fp32")
            .alias("bfloat16", "bf16")
            .alias("float16", "fp16")
            .default_in(App::bench, none())
            .help_in(App::bench, "Compute precision: fp32, bf16 or fp16 (default: bf16, fp32 with --cpu)"),
        Opt("workspace", T::integer, G::general, TXS, def("0"),
            "Initial device workspace in MiB; it grows to what the batches need (0: start empty). With "
            "--mini-batch-fit: the memory for activations that the batch size is fitted to")
            .flag('w')
            .differs("Marian preallocates it (default 2048 MiB for training, 512 for decoding; negative: all but N); "
                     "lseq's workspace grows with the batches, so the default is 0, and -N is refused")
            .flag('w')
            .in(0, kMaxWorkspaceMiB),
    };
    for (auto& x : o) add(x);
  }

  // ---- Model architecture (lstrain; lstranslate and lsscore read it from the model directory) ----
  {
    Opt o[] = {
        Opt("type", T::string, G::model, kTrain, def("transformer"),
            "Model type: transformer (encoder-decoder) or lm (decoder-only language model; Marian's "
            "lm-transformer also accepted)")
            .one_of({"transformer", "lm", "s2s", "amun", "nematus", "multi-s2s", "multi-transformer"})
            .alias("lm-transformer", "lm")
            .refused("is a Marian RNN model, which lseq does not build; use --type transformer", "s2s")
            .refused("is a Marian RNN model, which lseq does not build; use --type transformer", "amun")
            .refused("is a Marian RNN model, which lseq does not build; use --type transformer", "nematus")
            .refused("is a Marian RNN model, which lseq does not build; use --type transformer", "multi-s2s")
            .refused("(two encoders) is not built by lseq; use --type transformer", "multi-transformer")
            .differs("Marian's default is amun (an RNN); lseq builds Transformers, so its default is transformer; "
                     "`lm-transformer` is Marian's decoder-only Transformer, stored as `lm`, and `lm` (in Marian an "
                     "RNN language model) is that decoder-only Transformer here"),
        // Benchmarks: their own default each (bench/bench_options.h).
        Opt("dim-vocabs", T::ints, G::model, kTrain | kBench, defs({"8000", "8000"}),
            "Vocabulary sizes (source, target); also the SentencePiece size when lstrain creates the vocabularies")
            .in(0, kMaxVocab)
            .differs("Marian's default 0 0 keeps every item of a given vocabulary; lseq uses the size of the "
                     "SentencePiece model and needs a size (8000) to create one")
            .default_in(App::bench, empty_list())
            .help_in(App::bench, "Vocabulary size, one for both sides or source and target (default: 32000 in "
                                 "bench_train_throughput, bench_decode_throughput and bench_kernels_gpu, where 0 "
                                 "keeps --preset's, and 8000 in the others)"),
        // bench_decode_step and bench_model_step build their model from these (defaults: a small model).
        Opt("dim-emb", T::integer, G::model, kTrain | kBench, def("512"), "Embedding and model dimension")
            .in(1, kMaxModelDim)
            .default_in(App::bench, def("256"))
            .help_in(App::bench, "bench_decode_step, bench_model_step: embedding and model dimension"),
        Opt("enc-depth", T::integer, G::model, kTrain | kBench, def("6"), "Number of encoder layers")
            .in(0, kMaxDepth)
            .differs("Marian's default 1 is for its RNNs; lseq's 6 is the Transformer's")
            .default_in(App::bench, def("3"))
            .help_in(App::bench, "bench_decode_step, bench_model_step: encoder layers"),
        Opt("dec-depth", T::integer, G::model, kTrain | kBench, def("6"), "Number of decoder layers")
            .in(1, kMaxDepth)
            .differs("Marian's default 1 is for its RNNs; lseq's 6 is the Transformer's")
            .default_in(App::bench, def("3"))
            .help_in(App::bench, "bench_decode_step, bench_model_step: decoder layers"),
        Opt("transformer-heads", T::integer, G::model, kTrain | kBench, def("8"), "Attention heads (divide dim-emb)")
            .in(1, kMaxHeads)
            .default_in(App::bench, def("4"))
            .help_in(App::bench, "bench_decode_step, bench_model_step: attention heads (divide dim-emb)"),
        Opt("transformer-dim-ffn", T::integer, G::model, kTrain | kBench, def("2048"),
            "Inner size of the feed-forward blocks")
            .in(1, kMaxFfnDim)
            .default_in(App::bench, def("1024"))
            .help_in(App::bench, "bench_decode_step, bench_model_step: inner size of the feed-forward blocks"),
        Opt("transformer-ffn-activation", T::string, G::model, kTrain, def("relu"),
            "Feed-forward activation: relu, gelu or swish")
            .one_of({"relu", "gelu", "swish"})
            .differs("Marian's option default is swish, but its transformer-base/big presets (--task) and the paper "
                     "use relu, which is lseq's default"),
        Opt("transformer-dropout", T::floating, G::model, kTrain, def("0.1"),
            "Dropout between sublayers and on the embeddings")
            .in_half_open(0, 1)
            .differs("Marian's default is 0; lseq's 0.1 is the paper's and Marian's presets'"),
        Opt("transformer-dropout-attention", T::floating, G::model, kTrain, def("0"),
            "Dropout on the attention weights")
            .in_half_open(0, 1),
        Opt("transformer-dropout-ffn", T::floating, G::model, kTrain, def("0"),
            "Dropout after the feed-forward activation")
            .in_half_open(0, 1),
        Opt("transformer-preprocess", T::string, G::model, kTrain, def(""),
            "Operations before each sublayer: d = dropout, a = add residual, n = LayerNorm")
            .letters("dan"),
        Opt("transformer-postprocess", T::string, G::model, kTrain, def("dan"),
            "Operations after each sublayer (d, a, n as above)")
            .letters("dan"),
        Opt("transformer-postprocess-emb", T::string, G::model, kTrain, def("d"),
            "Operations after the embeddings (d, a, n as above)")
            .letters("dan"),
        Opt("transformer-prenorm", T::boolean, G::model, kTrain, def("false"),
            "Pre-norm shortcut: preprocess n, postprocess da and a final LayerNorm"),
        Opt("tied-embeddings", T::boolean, G::model, kTrain, def("false"),
            "Tie the target embeddings and the output layer"),
        Opt("tied-embeddings-src", T::boolean, G::model, kTrain, def("false"),
            "Tie the source and target embeddings"),
        Opt("tied-embeddings-all", T::boolean, G::model, kTrain, def("false"),
            "Tie source and target embeddings and the output layer (needs one shared vocabulary)"),
        Opt("label-smoothing", T::floating, G::model, kTrain, def("0.1"), "Label smoothing of the training loss")
            .in_half_open(0, 1)
            .differs("Marian's default is 0; lseq's 0.1 is the paper's and Marian's presets'"),
        Opt("layer-norm-epsilon", T::floating, G::model, kTrain, def("1e-6"),
            "Epsilon of every LayerNorm (Marian: 1e-6; Hugging Face MarianMT: 1e-5)")
            .in(1e-12, 1)
            .lseq_only(),
        Opt("transformer-positions", T::string, G::model, kTrain, def("interleaved"),
            "Sinusoidal position layout: interleaved (lseq), concatenated (Hugging Face MarianMT) or marian (Marian)")
            .one_of({"interleaved", "concatenated", "marian"})
            .lseq_only(),
        Opt("max-length", T::integer, G::model, TXS | kBench, def("100"),
            "Longest sentence in tokens; longer ones are skipped (or cropped, see max-length-crop)")
            .in(1, kMaxLength)
            .differs("Marian's training default is 50; lseq's 100 is what Marian's presets and recipes set "
                     "(for translating and scoring both use 1000)")
            .default_in(App::translate, def("1000"))
            .default_in(App::score, def("1000"))
            .group_in(App::translate, G::translation)
            .group_in(App::score, G::translation)
            .default_in(App::bench, none())
            .group_in(App::bench, G::training)
            .help_in(App::bench, "bench_data_pipeline: skip pairs with a side longer than this (default: no limit)"),
        Opt("max-length-crop", T::boolean, G::model, TXS, def("false"),
            "Crop sentences longer than max-length instead of skipping them")
            .group_in(App::translate, G::translation)
            .group_in(App::score, G::translation),
    };
    for (auto& x : o) add(x);
  }

  // ---- Data and training (lstrain; corpus and batching options also for lsscore/lstranslate) ----
  {
    Opt o[] = {
        Opt("train-sets", T::strings, G::training, kTrain | kScore | kBench, empty_list(),
            "Parallel corpus files (source target); plain text or .gz")
            .flag('t')
            .group_in(App::score, G::translation)
            .help_in(App::bench, "bench_data_pipeline: the parallel corpus files (source target); required"),
        Opt("vocabs", T::strings, G::training, kTrain | kBench | XS, empty_list(),
            "SentencePiece models (source target); created by lstrain when missing")
            .flag('v')
            .group_in(App::translate, G::translation)
            .group_in(App::score, G::translation)
            .help_in(App::translate, "Marian's vocabularies: lstranslate uses the model directory's copies (a "
                                     "warning says so when this is given)")
            .help_in(App::score, "Marian's vocabularies: lsscore uses the model directory's copies (a warning says "
                                 "so when this is given)")
            .help_in(App::bench, "bench_data_pipeline: the SentencePiece model of both sides (one path), trained on "
                                 "the corpus when missing; required"),
        Opt("sentencepiece-max-lines", T::integer, G::training, kTrain, def("2000000"),
            "Lines sampled to train a new SentencePiece model")
            .at_least(0),
        Opt("sentencepiece-options", T::string, G::training, kTrain, def(""),
            "Extra SentencePiece trainer options, e.g. '--character_coverage=1.0'"),
        Opt("cache-dir", T::string, G::training, kTrain | kBench, def(""),
            "Directory for the binary corpus cache; empty keeps it next to the model")
            .help_in(App::bench, "bench_data_pipeline: directory for the corpus cache; empty: a fresh temporary one, "
                                 "removed at the end (so that encoding is timed)"),
        Opt("mini-batch-words", T::integer, G::training, TXS | kBench, def("4096"),
            "Target tokens per batch (0: use mini-batch)")
            .in(0, kMaxBatchTokens)
            .differs("Marian has no default (batches count sentences, --mini-batch 64); lseq's 4096 tokens")
            .default_in(App::translate, def("0"))
            .default_in(App::score, def("0"))
            .group_in(App::translate, G::translation)
            .group_in(App::score, G::translation)
            .default_in(App::bench, none())
            .help_in(App::bench, "Tokens per batch: bench_data_pipeline (default: 4096), bench_model_step (both "
                                 "sides; default: 2048)"),
        Opt("mini-batch", T::integer, G::training, TXS | kBench, def("0"),
            "Sentences per batch (0: use mini-batch-words; with mini-batch-words or mini-batch-fit: at most this many)")
            .in(0, kMaxBatchSentences)
            .differs("Marian's training default is 64 sentences; lseq's batches count tokens (--mini-batch-words)")
            .default_in(App::translate, def("16"))
            .default_in(App::score, def("16"))
            .group_in(App::translate, G::translation)
            .group_in(App::score, G::translation)
            .default_in(App::bench, none())
            .help_in(App::bench, "Sentences per batch: bench_decode_step (default: 16), bench_kernels_cpu (default: "
                                 "32), bench_kernels_gpu (default: 256; the kernels' op shapes are mini-batch x len "
                                 "tokens)"),
        Opt("maxi-batch", T::integer, G::training, TXS | kBench, def("100"),
            "Batches read ahead and sorted by length together")
            .in(1, kMaxMaxiBatch)
            .group_in(App::translate, G::translation)
            .group_in(App::score, G::translation)
            .help_in(App::bench, "bench_data_pipeline: batches read ahead and sorted by length together"),
        Opt("shuffle", T::string, G::training, kTrain, def("data"),
            "Each epoch: shuffle the sentences and the batches (data), read the corpus in order into batches and "
            "shuffle only the batches (batches), or neither (none)")
            .one_of({"data", "batches", "none"}),
        Opt("after", T::string, G::training, kTrain, def("0"),
            "Stop after this many units: 10e epochs, 5000u updates, 2Mt target labels; 0: no limit")
            .schedule("eut"),
        Opt("after-epochs", T::integer, G::training, kTrain, def("0"), "Stop after this many epochs; 0: no limit")
            .at_least(0),
        Opt("after-batches", T::integer, G::training, kTrain, def("0"), "Stop after this many updates; 0: no limit")
            .at_least(0),
        Opt("disp-freq", T::string, G::training, kTrain, def("500u"),
            "Log training progress every N updates (u) or target labels (t)")
            .schedule("ut")
            .differs("Marian's default is 1000u; lseq logs twice as often"),
        Opt("save-freq", T::string, G::training, kTrain, def("5000u"),
            "Save a checkpoint every N updates (u), target labels (t) or epochs (e)")
            .schedule("ute")
            .differs("Marian's default is 10000u; lseq saves twice as often (a checkpoint replaces the last one)"),
        Opt("optimizer", T::string, G::training, kTrain, def("adam"), "Optimizer: adam (AdamW with weight-decay)")
            .one_of({"adam", "sgd", "adagrad"})
            .refused("is not implemented; lseq trains with adam (AdamW with --weight-decay)", "sgd")
            .refused("is not implemented; lseq trains with adam (AdamW with --weight-decay)", "adagrad"),
        Opt("optimizer-params", T::floats, G::training, kTrain, defs({"0.9", "0.98", "1e-09"}),
            "Adam beta1, beta2, epsilon"),
        Opt("optimizer-delay", T::integer, G::training, kTrain, def("1"),
            "Accumulate gradients over N batches per update (above 1 they keep a buffer of their own)")
            .in(1, kMaxOptimizerDelay)
            .differs("Marian also takes fractions (0.5: half a batch per update); lseq whole numbers only"),
        Opt("learn-rate", T::floating, G::training, kTrain, def("0.0003"), "Peak learning rate")
            .flag('l')
            .at_least(0)
            .differs("Marian's default is 0.0001; lseq's 0.0003 is what Marian's transformer-base preset sets"),
        Opt("lr-warmup", T::string, G::training, kTrain, def("0"),
            "Raise the learning rate linearly over N updates (u), target labels (t) or epochs (e)")
            .schedule("ute"),
        Opt("lr-decay-inv-sqrt", T::strings, G::training, kTrain, defs({"0"}),
            "Decay the learning rate as sqrt(N / progress) once progress passes N updates (u), target labels (t) or "
            "epochs (e); a second value (same unit) starts the decay there instead (rate 1 at that point); 0: no "
            "decay")
            .schedule("ute"),
        Opt("lr-schedule", T::string, G::training, kTrain, def("inv-sqrt"),
            "Decay after warm-up: inv-sqrt (1/sqrt(step)), cosine (to 0 at --after) or constant")
            .one_of({"inv-sqrt", "cosine", "constant"}),
        Opt("clip-norm", T::floating, G::training, kTrain, def("1"), "Clip the global gradient norm; 0: off")
            .at_least(0),
        Opt("weight-decay", T::floating, G::training, kTrain, def("0"), "Decoupled weight decay (AdamW)")
            .at_least(0),
        Opt("exponential-smoothing", T::floating, G::training, kTrain, def("0"),
            "Keep an exponential moving average of the weights with this factor (e.g. 1e-4; larger during the first "
            "9 / factor updates, as in Marian); alone: 1e-4; 0: off")
            .in_half_open(0, 1)
            .implicit("1e-4"),
        Opt("max-nan-steps", T::integer, G::training, kTrain, def("10"),
            "Stop after this many consecutive non-finite losses or gradients (those updates are skipped; fp16 overflows "
            "count only once the loss scale is below 1)")
            .at_least(0),
        Opt("recompute-ffn", T::boolean, G::training, kTrain | kBench, def("false"),
            "Keep no feed-forward hidden activations for backward and recompute them there: batch tokens x "
            "transformer-dim-ffn values less per layer with relu (about 0.75 GiB for transformer-big at 8192 tokens "
            "in bf16), twice that with gelu or swish, for one more matrix product per layer (about 5% slower); the "
            "gradients are the same")
            .help_in(App::bench, "bench_train_throughput: lstrain's --recompute-ffn (impl=lseq-recompute-ffn in the "
                                 "RESULT lines)"),
        Opt("overwrite", T::boolean, G::training, kTrain, def("false"),
            "Keep no numbered model files, only the latest (Marian's meaning): lseq never keeps numbered copies, so "
            "this is what it always does; it does not start anew (that is --no-reload)"),
        Opt("no-reload", T::boolean, G::training, kTrain, def("false"),
            "Start anew instead of resuming: delete the model directory's checkpoint, weights and the vocabularies "
            "lstrain created there (one log line each; never a file that an option names)"),
        Opt("no-restore-corpus", T::boolean, G::training, kTrain, def("false"),
            "On resume, start the corpus from the beginning instead of where it stopped"),
        Opt("pretrained-model", T::string, G::training, kTrain, none(),
            "Start a new run from these weights instead of random ones: a model.safetensors written by lstrain or a "
            "converter (or its model directory), of the model the options describe; a run that resumes ignores it")
            .differs("Marian reads a .npz; lseq a model.safetensors of the same model, every tensor (a Marian .npz "
                     "converts with tools/marian/marian_npz_to_lseq.py)"),
        // Data parallelism (docs/data-parallel.md): --devices 0 1 starts one process per GPU; torchrun, srun and
        // mpirun start them on several machines.
        Opt("sync-sgd", T::boolean, G::training, kTrain, def("true"),
            "Synchronous SGD over several devices (Marian's option; lseq trains only synchronously)")
            .refused("(asynchronous SGD) is not implemented: lseq trains over several devices synchronously; drop "
                     "the option", "false")
            .differs("Marian's default is asynchronous SGD; lseq's only mode is synchronous"),
        Opt("sharding", T::string, G::training, kTrain | kBench, def("none"),
            "Optimizer state over several devices: none (every device keeps all of it), global (each keeps 1/N: "
            "ZeRO stage 1), local (the same within one machine)")
            .one_of({"none", "global", "local"})
            .differs("Marian's default is global; lseq's none keeps every device's state whole (faster on one "
                     "machine)"),
        Opt("sync-precision", T::string, G::training, kTrain | kBench, def("fp32"),
            "Type of the gradients sent between devices: fp32, or bf16 (half the traffic, coarser sums)")
            .one_of({"fp32", "bf16"})
            .alias("float32", "fp32")
            .alias("bfloat16", "bf16"),
        Opt("sync-bucket-mib", T::integer, G::training, kTrain | kBench, def("25"),
            "Gradients are exchanged in buckets of this many MiB (fp32), each as soon as backward has finished it")
            .in(1, 4096),
        Opt("sync-ctas", T::ints, G::training, kTrain | kBench, empty_list(),
            "NCCL's blocks (one SM each) for the gradient buckets exchanged beside backward and for the exchanges "
            "the step waits for, two numbers (0: NCCL's own choice); default 4 16 on one machine of Hopper or newer "
            "GPUs, elsewhere NCCL's own choice")
            .in(0, 64),
        Opt("dist-timeout", T::integer, G::training, kTrain | kBench, def("600"),
            "Seconds to wait for the other processes of a multi-device job (start-up, a collective) before stopping")
            .in(1, 86400),
    };
    for (auto& x : o) add(x);
  }

  // ---- Language models (lstrain --type lm; the decoder-only model: docs/decoding.md, README) ----
  // lstranslate and lsscore need no options of their own for a language model: its model directory says what it
  // is; lstranslate's --max-length then counts the new tokens of each continuation.
  {
    Opt o[] = {
        Opt("transformer-train-position-embeddings", T::boolean, G::model, kTrain, def("false"),
            "Learn the position embeddings instead of using sinusoidal ones (language models)")
            .differs("Marian learns positions for any Transformer; lseq only for a language model (--type lm or "
                     "lm-transformer), and refuses it for an encoder-decoder model in one line"),
        Opt("transformer-scale-embeddings", T::boolean, G::model, kTrain, def("true"),
            "Multiply the token embeddings by sqrt(dim-emb), as Marian does; false leaves them as they are (GPT-2; "
            "language models only)")
            .lseq_only(),
        Opt("lm-pack-blocks", T::boolean, G::training, kTrain, def("false"),
            "Language models: cut the corpus into blocks of max-length tokens, lines end to end (GPT style), instead "
            "of one line per sequence")
            .lseq_only(),
        Opt("lm-document-masks", T::boolean, G::training, kTrain, def("false"),
            "Language models with lm-pack-blocks: blank lines end documents, and attention and positions stay within "
            "each document")
            .lseq_only(),
    };
    for (auto& x : o) add(x);
  }

  // ---- Validation (lstrain) ----
  {
    Opt o[] = {
        Opt("valid-sets", T::strings, G::validation, kTrain, empty_list(), "Validation corpus (source target)"),
        Opt("valid-freq", T::string, G::validation, kTrain, def("5000u"),
            "Validate every N updates (u), target labels (t) or epochs (e)")
            .schedule("ute")
            .differs("Marian's default is 10000u; lseq validates twice as often"),
        Opt("valid-metrics", T::strings, G::validation, kTrain, defs({"cross-entropy"}),
            "Metrics, the first decides keep-best and early stopping: cross-entropy, ce-mean-words, perplexity, "
            "bleu (bleu-detok: the same, sacreBLEU on detokenized text), chrf, translation (the number that "
            "--valid-script-path prints for the translated validation set), valid-script (the number it prints)")
            .one_of({"cross-entropy", "ce-mean-words", "perplexity", "bleu", "chrf", "translation", "valid-script"})
            .alias("bleu-detok", "bleu")
            .refused("(BLEU over the model's own subword tokens) is not computed by lseq; use bleu (sacreBLEU)",
                     "bleu-segmented"),
        Opt("valid-mini-batch", T::integer, G::validation, kTrain, def("32"), "Sentences per validation batch")
            .in(1, kMaxBatchSentences),
        Opt("valid-max-length", T::integer, G::validation, kTrain, def("1000"),
            "Longest validation sentence in tokens (longer ones are cropped)")
            .in(1, kMaxLength),
        Opt("valid-translation-output", T::string, G::validation, kTrain, none(),
            "Write the validation translations to this file; {E} {B} {U} {T} in the name become the epoch, the batch "
            "within it, the updates and the target labels so far (Marian's templates)"),
        Opt("valid-script-path", T::string, G::validation, kTrain, none(),
            "Command run after each validation (through /bin/sh); the last number it prints is the 'translation' "
            "or 'valid-script' metric. For 'translation' the translation file is its last argument"),
        Opt("valid-script-args", T::strings, G::validation, kTrain, empty_list(),
            "Arguments passed to --valid-script-path, before the translation file"),
        Opt("valid-log", T::string, G::validation, kTrain, none(),
            "Also append each validation result to this file, one line per metric as Marian writes them"),
        Opt("keep-best", T::boolean, G::validation, kTrain, def("false"),
            "Also keep the weights that scored best on each metric (model.best-<metric>.safetensors)"),
        Opt("early-stopping", T::integer, G::validation, kTrain, def("10"),
            "Stop after this many validations without improvement; 0: never")
            .at_least(0),
    };
    for (auto& x : o) add(x);
  }

  // ---- Translation and scoring ----
  {
    Opt o[] = {
        Opt("input", T::strings, G::translation, kTranslate | kEval | kBench, defs({"stdin"}),
            "Input files; stdin means standard input (lseval: the translations to score)")
            .flag('i')
            .group_in(App::eval, G::evaluation)
            .default_in(App::bench, none())
            .help_in(App::bench, "bench_decode_throughput with --model: translate these lines (free decoding, "
                                 "batched as lstranslate batches them) instead of random sources"),
        Opt("output", T::string, G::translation, XS, def("stdout"), "Output file; stdout means standard output")
            .flag('o'),
        Opt("beam-size", T::integer, G::translation, kTranslate | kTrain | kBench, def("4"),
            "Beam size; 1 is greedy search (lstrain: for the bleu/chrf validation metrics)")
            .flag('b')
            .in(1, kMaxBeamSize)
            .differs("Marian's default is 12; lseq's 4 is nearly as good and three times faster")
            .help_in(App::bench, "bench_decode_step: hypotheses per sentence"),
        Opt("normalize", T::floating, G::translation, TXS | kBench, def("0.6"),
            "Divide scores by length^N (length normalisation); --normalize alone means 1")
            .flag('n')
            .at_least(0)
            .differs("Marian's default is 0 (none); lseq's 0.6 is the usual choice for Transformers")
            .implicit("1")
            .default_in(App::score, def("0")),
        Opt("word-penalty", T::floating, G::translation, kTranslate | kTrain, def("0"), "Subtract N per output word"),
        Opt("max-length-factor", T::floating, G::translation, kTranslate | kTrain, def("3"),
            "Longest output: N times the input length")
            .at_least(0),
        Opt("n-best", T::boolean, G::translation, XS, def("false"),
            "lstranslate: print the n-best list (beam-size entries); lsscore: rescore an n-best list"),
        Opt("word-scores", T::boolean, G::translation, XS, def("false"), "Also print a score per output word"),
        Opt("quiet-translation", T::boolean, G::translation, kTranslate | kTrain, def("false"),
            "No progress lines while translating (lines done, lines/s, target tokens/s every 10 s); lstrain: no "
            "line per translated validation sentence (lseq prints none: what Marian's option asks)"),
        Opt("output-sampling", T::strings, G::translation, kTranslate, empty_list(),
            "Sample instead of beam search: full, topk 10, topp 0.9, temperature 0.7 (combinable)")
            .words(),
        Opt("no-spm-encode", T::boolean, G::translation, XS, def("false"),
            "Input is token ids of the source vocabulary, separated by spaces (no SentencePiece encoding)"),
        Opt("no-spm-decode", T::boolean, G::translation, XS, def("false"),
            "Print token ids of the target vocabulary instead of decoded text"),
        Opt("summary", T::boolean, G::translation, kScore, def("false"),
            "Print only the total cross-entropy and perplexity"),
        Opt("n-best-feature", T::string, G::translation, kScore, def("Score"),
            "Feature name of the added score when rescoring n-best lists"),
    };
    for (auto& x : o) add(x);
  }

  // ---- Evaluation (lseval) ----
  {
    Opt o[] = {
        Opt("references", T::strings, G::evaluation, kEval, empty_list(),
            "Reference translations, one per line (required)")
            .flag('r'),
        Opt("metrics", T::strings, G::evaluation, kEval, defs({"bleu", "chrf"}),
            "Metrics to compute, as sacreBLEU does: bleu and/or chrf")
            .flag('m')
            .one_of({"bleu", "chrf"}),
    };
    for (auto& x : o) add(x);
  }

  // ---- Marian's options that lseq added for Marian's command lines (docs/marian-compat.md) ----
  // Implemented with Marian's meaning, accepted with a warning where they have no effect here, or refused with a
  // line that says what to use. Kept together so that Marian compatibility reads as one block.
  {
    const std::string rnn = "belongs to Marian's RNN models (--type s2s), which lseq does not build; drop it";
    Opt o[] = {
        Opt("task", T::strings, G::training, kTrain, empty_list(),
            "Marian's presets: transformer-base, transformer-big (and their -prenorm variants) set the model and "
            "training options of Marian's --task; options in config files and on the command line win")
            .one_of({"transformer-base", "transformer-big", "transformer-base-prenorm", "transformer-big-prenorm"}),
        Opt("cost-type", T::string, G::training, kTrain, def("ce-mean-words"),
            "Training loss: ce-mean-words (mean over target tokens), ce-mean (mean over sentences), ce-sum (sum), "
            "perplexity (exp of ce-mean-words)")
            .one_of({"ce-mean-words", "ce-mean", "ce-sum", "perplexity"})
            .alias("cross-entropy", "ce-mean")
            .differs("Marian's default is ce-sum; lseq's ce-mean-words is what Marian's presets and recipes set, and "
                     "keeps the learning rate independent of the batch size"),
        Opt("mini-batch-fit", T::boolean, G::training, kTrain, def("false"),
            "Fit the batch to --workspace: the largest --mini-batch-words whose planned activations (longest "
            "sentences) fit in --workspace MiB; --mini-batch still caps the sentences"),
        Opt("lr-report", T::boolean, G::training, kTrain, def("false"),
            "Report the learning rate in the progress lines (lseq's progress lines always do)"),
        Opt("maxi-batch-sort", T::string, G::training, TXS, def("trg"),
            "How a maxi-batch is sorted before it is cut into batches: trg, src (lseq: by the longer side), none")
            .one_of({"trg", "src", "none"})
            .default_in(App::translate, def("src"))
            .group_in(App::translate, G::translation)
            .group_in(App::score, G::translation)
            .ignored("lseq always sorts a maxi-batch by length (translation output keeps the input order)", "none")
            .differs("lseq sorts training batches by the longer side, translations by the source; 'none' is "
                     "accepted with a warning (Marian's decoder default is none)"),
        Opt("tempdir", T::string, G::training, kTrain, def("/tmp"),
            "Marian's directory for shuffled corpus copies")
            .flag('T')
            .ignored("lseq shuffles its binary corpus cache in memory and writes no temporary corpus (see "
                     "--cache-dir)"),
        Opt("shuffle-in-ram", T::boolean, G::training, kTrain, def("false"), "Marian: keep the shuffled corpus in RAM")
            .ignored("lseq always shuffles in memory"),
        Opt("data-threads", T::integer, G::training, TXS, def("8"), "Marian: threads that read and batch the data")
            .ignored("lseq's batcher prepares batches on one background thread ahead of training"),
        Opt("sigterm", T::string, G::training, kTrain, def("save-and-exit"),
            "What SIGTERM does: save-and-exit (lseq: a checkpoint, then exit)")
            .one_of({"save-and-exit", "exit-immediately"})
            .refused("is not implemented: lseq saves a checkpoint on SIGTERM (send SIGKILL to stop at once)",
                     "exit-immediately"),
        Opt("log-level", T::string, G::general, EVERY, def("info"),
            "Marian: verbosity of the log (debug adds, for example, lsserve's line per batch)")
            .one_of({"trace", "debug", "info", "warn", "err", "critical", "off"}),
        Opt("disp-first", T::integer, G::training, kTrain, def("0"), "Marian: log each of the first N updates")
            .ignored("lseq logs every --disp-freq"),
        Opt("disp-label-counts", T::boolean, G::training, kTrain, def("true"),
            "Marian: show label counts in progress lines (lseq's lines always show the tokens per second)"),
        Opt("mini-batch-fit-step", T::integer, G::training, kTrain, def("10"),
            "Marian: length step of --mini-batch-fit's statistics")
            .ignored("lseq fits one token budget to the longest sentences"),
        Opt("mini-batch-round-up", T::boolean, G::training, kTrain, def("true"),
            "Marian: round fitted batch sizes up to a power of two")
            .ignored("lseq fits one token budget", "false"),
        Opt("overwrite-checkpoint", T::boolean, G::training, kTrain, def("true"),
            "Marian: keep only the latest full checkpoint (lseq always does)")
            .ignored("lseq always keeps only the latest checkpoint", "false"),
        Opt("valid-reset-stalled", T::boolean, G::validation, kTrain, def("false"),
            "Marian: reset the stalled count of early stopping when training resumes")
            .ignored("lseq resumes the stalled count from the checkpoint"),
        Opt("quiet-validation", T::boolean, G::validation, kTrain, def("false"),
            "Marian: no sample translations in the validation log (lseq logs none)"),
        Opt("check-nan", T::boolean, G::general, kTrain, def("false"), "Marian: check every op for NaNs")
            .ignored("lseq checks the loss and gradient norm of every update (--max-nan-steps)"),
        Opt("no-nccl", T::boolean, G::training, kTrain, def("false"), "Marian: exchange gradients without NCCL")
            .ignored("lseq uses NCCL on GPUs and its TCP exchange on CPUs"),
        Opt("fp16", T::boolean, G::general, TXS, def("false"),
            "Marian's shortcut for --precision float16 float32 with loss scaling (lseq: --precision fp16)"),
        Opt("cost-scaling", T::strings, G::training, kTrain, empty_list(),
            "Marian: fp16 loss scaling factor, frequency, multiplier, minimum")
            .implicit("8.f 10000 1.f 8.f")
            .words()
            .ignored("lseq scales fp16 losses dynamically (from 2^16, halved on overflow, doubled after 2000 good "
                     "updates)"),
        Opt("gradient-checkpointing", T::boolean, G::training, kTrain, def("false"),
            "Marian: recompute activations in backward to save memory")
            .ignored("lseq's nearest is --recompute-ffn (the feed-forward activations)"),
        Opt("allow-unk", T::boolean, G::translation, kTrain | kTranslate, def("false"),
            "Marian: allow <unk> in translations (lseq's SentencePiece vocabularies decode it as ' ⁇ ')")
            .ignored("lseq does not suppress <unk> in search"),
        Opt("relative-paths", T::boolean, G::general, TXS, def("false"),
            "Paths in a config file (models, vocabs) are relative to the file's directory (Marian's decoder.yml)"),
        Opt("models", T::strings, G::translation, kTranslate, empty_list(),
            "Marian's model list: one lseq model directory (or a file in it) is the same as --model; a Marian "
            ".npz model must be converted first (tools/marian)"),
        // Marian's RNN models.
        Opt("dim-rnn", T::integer, G::model, kTrain, none(), "Marian: size of the RNN state").refused(rnn),
        Opt("enc-type", T::string, G::model, kTrain, none(), "Marian: RNN encoder type").refused(rnn),
        Opt("enc-cell", T::string, G::model, kTrain, none(), "Marian: RNN encoder cell").refused(rnn),
        Opt("enc-cell-depth", T::integer, G::model, kTrain, none(), "Marian: RNN encoder cell depth").refused(rnn),
        Opt("dec-cell", T::string, G::model, kTrain, none(), "Marian: RNN decoder cell").refused(rnn),
        Opt("dec-cell-base-depth", T::integer, G::model, kTrain, none(), "Marian: RNN decoder base depth")
            .refused(rnn),
        Opt("dec-cell-high-depth", T::integer, G::model, kTrain, none(), "Marian: RNN decoder high depth")
            .refused(rnn),
        Opt("skip", T::boolean, G::model, kTrain, def("false"), "Marian: RNN skip connections").refused(rnn),
        Opt("layer-normalization", T::boolean, G::model, kTrain, def("false"), "Marian: RNN layer normalization")
            .refused("belongs to Marian's RNN models (--type s2s); lseq's Transformers always normalize (see "
                     "--transformer-postprocess); drop it"),
        Opt("best-deep", T::boolean, G::model, kTrain, def("false"), "Marian: the BiDeep RNN preset").refused(rnn),
        Opt("dropout-rnn", T::floating, G::model, kTrain, def("0"), "Marian: RNN dropout").refused(rnn),
        Opt("dropout-src", T::floating, G::model, kTrain, def("0"), "Marian: source word dropout (RNN recipes)")
            .refused("(source word dropout) is not implemented; lseq's dropouts are --transformer-dropout*"),
        Opt("dropout-trg", T::floating, G::model, kTrain, def("0"), "Marian: target word dropout (RNN recipes)")
            .refused("(target word dropout) is not implemented; lseq's dropouts are --transformer-dropout*"),
        Opt("right-left", T::boolean, G::model, kTrain, def("false"), "Marian: train a right-to-left model")
            .refused("(right-to-left models) is not implemented: train on reversed target lines instead"),
    };
    for (auto& x : o) add(x);
  }

  // ---- Benchmarks (bench/, App::bench) ----
  // Every benchmark accepts all of them and reads those it uses. An option used by benchmarks with different
  // defaults has none here: its help names each benchmark's (bench/bench_options.h).
  {
    Opt o[] = {
        Opt("preset", T::string, G::benchmark, kBench, def("configs/transformer-base.yaml"),
            "bench_train_throughput, bench_decode_throughput: the model (an lstrain config), with random weights"),
        Opt("tokens", T::ints, G::benchmark, kBench, defs({"4096", "8192", "16384"}),
            "bench_train_throughput: target-token budgets of the batches, one case each")
            .at_least(1),
        Opt("warmup", T::integer, G::benchmark, kBench, def("10"),
            "bench_train_throughput: untimed steps before the timed ones")
            .at_least(0),
        Opt("steps", T::integer, G::benchmark, kBench, none(),
            "Timed training steps: bench_train_throughput (default: 32), bench_model_step (default: 5)")
            .at_least(1),
        Opt("pool", T::integer, G::benchmark, kBench, def("16"),
            "bench_train_throughput: distinct batches per case, cycled by the steps")
            .at_least(1),
        Opt("peak-flops", T::floating, G::benchmark, kBench, def("989e12"),
            "bench_train_throughput: the device's peak FLOP/s that MFU divides by (H100/H200 bf16 dense)")
            .at_least(1),
        Opt("plan", T::string, G::benchmark, kBench, def("lstrain"),
            "bench_train_throughput: the workspace grows to what the batches need, as in lstrain (lstrain), or holds "
            "lstrain's startup plan for the longest sentences throughout (worst)")
            .one_of({"lstrain", "worst"}),
        Opt("plan-only", T::boolean, G::benchmark, kBench, def("false"),
            "bench_train_throughput: print each case's workspace plan and the model and optimizer state; run no step"),
        Opt("dump-batches", T::string, G::benchmark, kBench, def(""),
            "bench_train_throughput: write every case's batch shapes to this file (for bench/pytorch_train.py)"),
        Opt("dump-only", T::boolean, G::benchmark, kBench, def("false"),
            "bench_train_throughput: stop after --dump-batches (needs no device)"),
        Opt("rank-batches", T::string, G::benchmark, kBench, def("by-length"),
            "bench_train_throughput over several devices: each step's batches (one a rank) are neighbours of the "
            "pool in length order, as lstrain's rounds are (by-length), or taken in the pool's shuffled order "
            "(shuffled)")
            .one_of({"by-length", "shuffled"}),
        Opt("timeline", T::string, G::benchmark, kBench, def(""),
            "bench_train_throughput: write each rank's timed steps, host clock at each synchronisation point, to "
            "FILE.rank<r>.csv (where a data-parallel step spends its time: bench/step_timeline.py)"),
        Opt("batch-sizes", T::ints, G::benchmark, kBench, empty_list(),
            "Sentences per batch, one case each: bench_decode_throughput (default: 32 64 128), "
            "bench_search_overhead (default: 1 16 64 128)")
            .at_least(1),
        Opt("beams", T::ints, G::benchmark, kBench, defs({"1", "4"}),
            "bench_decode_throughput, bench_search_overhead: beam sizes, one case each (1: greedy)")
            .at_least(1),
        Opt("src-len", T::integer, G::benchmark, kBench, none(),
            "Source tokens per sentence: bench_decode_throughput (eos included; default: 28), bench_decode_step "
            "(default: 32)")
            .at_least(1),
        Opt("out-len", T::integer, G::benchmark, kBench, none(),
            "Output tokens per sentence: bench_decode_throughput (forced; 0: free decoding; default: 28), "
            "bench_decode_step (its decoding steps; default: 32)")
            .at_least(0),
        Opt("batches-per-case", T::integer, G::benchmark, kBench, def("5"),
            "bench_decode_throughput: timed batches per case, after one untimed")
            .at_least(1),
        Opt("no-graphs", T::boolean, G::benchmark, kBench, def("false"),
            "bench_decode_throughput: run every decoding step op by op instead of replaying CUDA graphs"),
        Opt("min-seconds", T::floating, G::benchmark, kBench, def("3"),
            "bench_data_pipeline: read batches for at least this long (and at least one epoch)")
            .at_least(0),
        Opt("size", T::integer, G::benchmark, kBench, def("8192"), "bench_gemm_peak: M = N = K of the square GEMM")
            .at_least(1),
        Opt("rounds", T::integer, G::benchmark, kBench, def("15"),
            "bench_gemm_peak: timed rounds (the median round is reported)")
            .at_least(1),
        Opt("reps", T::integer, G::benchmark, kBench, def("20"),
            "bench_gemm_peak, bench_kernels_gpu: back-to-back launches timed together")
            .at_least(1),
        Opt("len", T::integer, G::benchmark, kBench, def("32"),
            "Tokens per sentence: bench_kernels_cpu and bench_kernels_gpu (the op shapes), bench_model_step (both "
            "sides)")
            .at_least(1),
        Opt("ffn-rows", T::integer, G::benchmark, kBench, def("16384"),
            "bench_kernels_gpu: rows of the feed-forward block timed fused against unfused")
            .at_least(1),
    };
    for (auto& x : o) add(x);
  }

  // ---- Serving (lsserve, App::serve) ----
  // lsserve's own options, then the options it shares with lstranslate (model, backend, search, batching): those
  // accept App::serve too, with lstranslate's defaults, groups and help unless lsserve's own are given here (they
  // are put first, so they win). docs/serving.md describes the server.
  {
    Opt o[] = {
        Opt("bind", T::string, G::serving, kServe, def("127.0.0.1"),
            "Address to listen on; 0.0.0.0 listens on every interface (lsserve has no authentication)"),
        Opt("port", T::integer, G::serving, kServe, def("8080"), "TCP port; 0 picks a free one (the log names it)")
            .in(0, 65535),
        Opt("http-threads", T::integer, G::serving, kServe, def("128"),
            "Threads serving connections, one connection each (a kept-alive one until it idles 5 s); more clients "
            "wait for a thread")
            .in(1, 4096),
        Opt("decoders", T::integer, G::translation, kTranslate | kServe, def("0"),
            "Decoding threads, each with its own copy of the model and its own stream: one thread's host work "
            "overlaps another's steps, and a batch with a long sentence no longer holds up the batches behind it; "
            "0: 4 on a GPU (at most the machine's cores; lstranslate adds 2 more once a continuous translation's input "
            "holds 6 batches a decoder), 1 on the CPU")
            .in(0, 16),
        Opt("max-recorded-steps", T::integer, G::translation, XS | kServe, def("256"),
            "Decoding steps and encodings of shapes that repeat are recorded (CUDA graphs) and replayed; each decoder "
            "keeps at most this many and drops the least recently replayed for a new shape. Each costs host memory "
            "(about 0.9 MiB for transformer-base on an H100), so this bounds what a server's resident memory grows "
            "by; 0: nothing is recorded, every step runs op by op (slower)")
            .in(0, 4096),
        Opt("warm-up", T::boolean, G::translation, kTranslate, def("false"),
            "On a GPU, each decoder runs every class of shapes once before reading input, so that the first batches "
            "do not pay cuBLAS's first launch of each kernel (about 0.1 s in all for transformer-base or GPT-2): the "
            "kernels load beside the weights' load, and the whole run took about as long (docs/decoding.md, 'A "
            "fresh process'). A language model warms its first decoder only (a warmed decoder left idle slows the "
            "busy one). Useful where the first lines' latency matters (input from a pipe)"),
        Opt("continuous-batching", T::boolean, G::translation, kTranslate | kServe, def("true"),
            "Beam search admits new sentences into a batch as its sentences finish, so that batches stay full "
            "instead of running on for their longest outputs (lsserve: waiting sentences join running searches). "
            "Translations are those of batch by batch, up to the last bits of scores, which depend on the rows a "
            "product had; false: batch by batch. Sampling and language models always go batch by batch"),
        Opt("max-wait-ms", T::floating, G::serving, kServe, def("20"),
            "Fuller batches may go first while a sentence waits up to this long; then its batch is next (the decoder "
            "never idles while sentences wait)")
            .in(0, 3600e3),
        Opt("max-queue", T::integer, G::serving, kServe, def("4096"),
            "Sentences waiting to be decoded, from all requests; a request that does not fit gets 503 with "
            "Retry-After")
            .in(1, 1 << 24),
        Opt("max-request-sentences", T::integer, G::serving, kServe, def("1024"),
            "Sentences in one request; more get 413")
            .in(1, 1 << 24),
        Opt("max-request-bytes", T::integer, G::serving, kServe, def("1048576"),
            "Bytes in one request body; more get 413")
            .in(2, 1 << 30),
        Opt("request-timeout", T::floating, G::serving, kServe, def("60"),
            "Seconds from a request's arrival to its answer; sentences not translated by then are dropped from the "
            "queue and answered with an error")
            .in(0.001, 86400),
        Opt("batch-fixed-cost", T::floating, G::serving, kServe, def("1000"),
            "The scheduler costs a batch as its longest source times (sentences + N): N is the part of a decoding "
            "step that does not grow with the batch, in sentences; larger: fewer, fuller batches of more mixed "
            "lengths")
            .in(0, 1e6),
    };
    for (auto& x : o) add(x);

    struct Shared {
      const char* name;
      std::optional<DefaultTokens> default_value = std::nullopt;  // lsserve's own default
      const char* help = nullptr;                                 // lsserve's own help
    };
    const Shared shared[] = {
        {"help"}, {"version"}, {"config"}, {"dump-config"}, {"model"}, {"log"}, {"log-level"}, {"quiet"}, {"cpu"},
        {"cpu-threads"},
        {"precision"}, {"workspace"}, {"max-length-factor"}, {"no-spm-encode"}, {"no-spm-decode"},
        {"devices", std::nullopt, "The GPU to serve on (one id)"},
        {"seed", std::nullopt, "Seed of sampling requests that give none ('seed')"},
        {"beam-size", std::nullopt,
         "Beam size of requests that give none ('beam-size'), and the largest a request may ask for (the decoder's "
         "memory is planned for it); 1 is greedy search"},
        {"normalize", std::nullopt, "Length normalisation of requests that give none ('normalize'); alone means 1"},
        {"word-penalty", std::nullopt, "Word penalty of requests that give none ('word-penalty')"},
        {"n-best", std::nullopt, "Answer n-best lists to requests that do not say ('n-best')"},
        {"word-scores", std::nullopt, "Add word scores for requests that do not say ('word-scores')"},
        {"output-sampling", std::nullopt,
         "Sample for requests that do not say ('output-sampling'): full, topk 10, topp 0.9, temperature 0.7"},
        {"mini-batch", def("64"), "Most sentences in one batch (the decoder's memory is planned for it)"},
        {"mini-batch-words", def("4096"),
         "Token budget of a batch: padded source tokens (sentences x longest, eos included); 0: no limit"},
        {"max-length", def("256"),
         "Longest sentence in tokens: longer ones get an error in the answer (the decoder's memory is planned for "
         "it)"},
        {"max-length-crop", std::nullopt, "Crop longer sentences to max-length, as lstranslate does, instead"},
        // In the decoder.yml that lstrain writes beside a model, which lsserve reads as lstranslate does.
        {"maxi-batch", std::nullopt, "Not used: lsserve pools every waiting sentence (lstranslate's, in decoder.yml)"},
        {"warm-up", def("true"),
         "On a GPU, each decoder runs every class of shapes once before the server listens, so that the first "
         "requests do not pay cuBLAS's first launch of each kernel (2-9 ms of host time each, about 0.2 s in all for "
         "transformer-base on an H100); false: the first requests pay it"},
    };
    for (const Shared& s : shared) {
      auto spec = std::find_if(r.begin(), r.end(), [&](const OptionSpec& x) { return x.name == s.name; });
      if (spec == r.end()) fail("internal: lsserve shares option '{}', which the registry does not declare", s.name);
      spec->apps |= kServe;
      std::vector<OptionSpec::AppOverride> own;
      if (s.default_value || s.help)
        own.push_back({App::serve, s.default_value, std::nullopt,
                       s.help ? std::optional<std::string>(s.help) : std::nullopt});
      for (const auto& o : spec->overrides)
        if (o.app == App::translate) own.push_back({App::serve, o.default_value, o.group, o.help});
      spec->overrides.insert(spec->overrides.begin(), own.begin(), own.end());
    }
  }
  return r;
}

}  // namespace

const std::vector<OptionSpec>& option_registry() {
  static const std::vector<OptionSpec> registry = build_registry();
  return registry;
}

const OptionSpec* find_option(const std::string& name) {
  static const auto index = [] {
    std::unordered_map<std::string, const OptionSpec*> map;
    for (const auto& spec : option_registry()) map.emplace(spec.name, &spec);
    return map;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

const OptionSpec* find_short_option(App app, char flag) {
  for (const auto& spec : option_registry())
    if (spec.short_flag == flag && spec.accepted_by(app)) return &spec;
  return nullptr;
}

bool needs_model(App app) {
  return app == App::train || app == App::translate || app == App::score || app == App::serve;
}

const char* app_name(App app) {
  switch (app) {
    case App::train: return "lstrain";
    case App::translate: return "lstranslate";
    case App::score: return "lsscore";
    case App::eval: return "lseval";
    case App::bench: return "lseq's benchmarks";
    case App::serve: return "lsserve";
  }
  return "lseq";
}

const char* group_title(OptionGroup group) {
  switch (group) {
    case OptionGroup::general: return "General options";
    case OptionGroup::model: return "Model options";
    case OptionGroup::training: return "Training options";
    case OptionGroup::validation: return "Validation options";
    case OptionGroup::translation: return "Translation options";
    case OptionGroup::evaluation: return "Evaluation options";
    case OptionGroup::benchmark: return "Benchmark options";
    case OptionGroup::serving: return "Serving options";
  }
  return "Options";
}

const char* type_description(OptionType type) {
  switch (type) {
    case OptionType::boolean: return "true or false";
    case OptionType::integer: return "an integer";
    case OptionType::floating: return "a number";
    case OptionType::string: return "a string";
    case OptionType::strings: return "a list of strings";
    case OptionType::ints: return "a list of integers";
    case OptionType::floats: return "a list of numbers";
  }
  return "a value";
}

}  // namespace lseq

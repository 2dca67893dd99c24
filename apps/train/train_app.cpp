// lstrain: turns the options into vocabularies, an encoded corpus, a model, an optimizer and a trainer, and runs.
// Every check comes before anything in the model directory is written (a new directory may be created and locked,
// and the corpus cache goes beside the model): a refused run leaves an existing model as it was.
#include "train_app.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "model_dir_plan.h"
#include "output_paths.h"
#include "ranks.h"
#include "training_options.h"
#include "vocabularies.h"

#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/model_dir_lock.h"
#include "core/checkpoint/pretrained_weights.h"
#include "core/cli/backend_select.h"
#include "core/dist/local_launch.h"
#include "core/model/lm/decoder_only_model.h"
#include "core/model/model.h"
#include "core/train/shard.h"
#include "core/train/stop_signal.h"
#include "core/train/trainer.h"
#include "core/train/validator.h"
#include "data/corpus_cache.h"
#include "data/input_line_reader.h"
#include "data/vocab.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {

namespace {

// decoder.yml: lstranslate's defaults for this model (Marian writes the same file beside its models). Only
// lstranslate options: it is validated as an lstranslate config file. A language model's continuations: greedy, and
// --max-length counts their new tokens (100, or what the model's positions allow after a one-token prompt).
void write_decoder_config(const ModelDir& dir, const Options& options, const ModelConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "beam-size" << YAML::Value << (config.is_lm() ? 1 : 4);
  out << YAML::Key << "normalize" << YAML::Value << 0.6;
  out << YAML::Key << "max-length-factor" << YAML::Value << 3;
  out << YAML::Key << "mini-batch" << YAML::Value << 16;
  out << YAML::Key << "maxi-batch" << YAML::Value << 100;
  out << YAML::Key << "max-length" << YAML::Value
      << (config.is_lm() ? std::min<int64_t>(100, std::max(1, config.max_length - 1)) : options.get_int("max-length"));
  out << YAML::EndMap;
  write_file_atomic(dir.file("decoder.yml"), std::string(out.c_str()) + "\n");
}

bool is_lm(const Options& options) { return options.get_string("type") == "lm"; }

// The options that can be checked alone: counts of files, batch sizes, metrics and the files lstrain writes.
void check_options(const Options& options) {
  if (!options.has("model")) fail("lstrain needs --model DIR: the directory to write the model to");
  const std::vector<std::string> train_sets = options.get_strings("train-sets");
  const bool lm = is_lm(options);
  if (lm && train_sets.size() != 1)
    fail("--type lm trains on one monolingual corpus: --train-sets needs one file, got {}", train_sets.size());
  if (!lm && train_sets.size() != 2) fail("--train-sets needs two files (source target), got {}", train_sets.size());
  if (options.get_int("mini-batch-words") <= 0 && options.get_int("mini-batch") <= 0) {
    fail("set --mini-batch-words or --mini-batch to a positive number");
  }
  const std::vector<std::string> valid_sets = options.get_strings("valid-sets");
  if (lm && valid_sets.size() > 1) fail("--type lm validates on one file: --valid-sets got {}", valid_sets.size());
  if (!lm && !valid_sets.empty() && valid_sets.size() != 2) {
    fail("--valid-sets needs two files (source target), got {}", valid_sets.size());
  }
  const std::vector<std::string> metrics = options.get_strings("valid-metrics");
  if (!valid_sets.empty()) Validator::check_metrics(metrics);
  if (lm) {
    for (const std::string& m : metrics)
      if (Validator::needs_translation(m))
        fail("--valid-metrics {} translates, which a language model does not: use cross-entropy or perplexity", m);
    const std::vector<std::string> vocabs = options.get_strings("vocabs");
    if (vocabs.size() == 2 && vocabs[0] != vocabs[1])
      fail("--type lm has one vocabulary: --vocabs needs one path, got two");
    if (options.get_bool("lm-document-masks") && !options.get_bool("lm-pack-blocks"))
      fail("--lm-document-masks masks documents inside packed blocks: add --lm-pack-blocks (without it every line "
           "is a sequence of its own)");
  } else {
    for (const char* option : {"lm-pack-blocks", "lm-document-masks", "transformer-train-position-embeddings"})
      if (options.get_bool(option)) fail("--{} is for language models: add --type lm", option);
  }
  for (const char* scripted : {"translation", "valid-script"}) {
    if (!valid_sets.empty() && std::count(metrics.begin(), metrics.end(), scripted) > 0 &&
        !options.has("valid-script-path")) {
      fail("--valid-metrics {} is the number --valid-script-path prints; give that script (or use bleu, which lseq "
           "computes as sacreBLEU does)", scripted);
    }
  }
  if (options.has("valid-translation-output")) {
    if (std::none_of(metrics.begin(), metrics.end(), Validator::needs_translation)) {
      fail("--valid-translation-output needs a translation metric: add bleu or chrf to --valid-metrics");
    }
    check_output_file(options.get_string("valid-translation-output"), "--valid-translation-output");
  }
}

// The model directory exists (created when new) and lstrain can write into it.
void prepare_model_directory(const ModelDir& dir) {
  dir.create();
  check_writable_directory(dir.path(), "the model directory");
  std::error_code ec;
  if (fs::is_directory(dir.file("checkpoint"), ec)) {
    check_writable_directory(dir.file("checkpoint"), "the checkpoint directory");
  }
}

// The workspace follows the batches: it starts at --workspace MiB and grows to what each new batch shape needs
// (EncoderDecoderModel::step_bytes), as a caching allocator would. The largest batch the batcher can produce is
// planned here and allocated once, so that a configuration that cannot fit fails now with a clear message rather
// than hours later when its longest batch arrives.
// What each device keeps of the parameters' state beside the workspace (data parallelism changes it).
struct StateLayout {
  int shards = 1;              // --sharding: the optimizer state (and in 16 bits the master) over this many ranks
  double wire_bytes = 0;       // per parameter: the 16-bit copy of the gradients that --sync-precision bf16 sends
};

std::unique_ptr<kernels::Workspace> checked_workspace(const Options& options, Model& model,
                                                      kernels::Backend& backend, int64_t max_tokens, int max_len,
                                                      const StateLayout& layout) {
  const std::size_t worst_case = model.workspace_bytes(max_tokens, max_len);
  const std::size_t initial = static_cast<std::size_t>(options.get_int("workspace")) << 20;
  // Parameters and Adam's moments (fp32), gradients (fp32; with gradients in step memory only the embedding
  // tables' side buffer lives here, and with --optimizer-delay the sum of the batches' gradients), the working
  // copy in 16-bit precisions, and the smoothed weights with a temporary for --exponential-smoothing. Sharded,
  // each device keeps 1/shards of the moments and smoothed weights, and in 16 bits of the master too (the layers
  // read the working copy).
  const bool half = model.compute_dtype() != kernels::DType::f32;
  const double optimizer_bytes = 8.0 + (options.get_float("exponential-smoothing") > 0 ? 8.0 : 0.0) +
                                 (half && layout.shards > 1 ? 4.0 : 0.0);
  const double bytes_per_param = optimizer_bytes / layout.shards + (half && layout.shards > 1 ? 0.0 : 4.0) +
                                 (half ? 2.0 : 0.0) + layout.wire_bytes;
  const std::size_t persistent_grads =
      model.gradients_in_step_memory()
          ? model.param_store().side_end() + (model.param_store().sums_steps() ? model.num_params() : 0)
          : model.num_params();
  const double state_mib =
      (static_cast<double>(model.num_params()) * bytes_per_param + 4.0 * persistent_grads) / 1048576.0;
  try {
    kernels::Workspace probe(backend, std::max(worst_case, initial), "");
  } catch (const Error& e) {
    fail("the activations of batches of {} tokens per side and sentences of {} tokens need {:.1f} MiB beside "
         "{:.1f} MiB of parameters and optimizer state, which do not fit: lower --mini-batch-words or --max-length{} "
         "({})",
         max_tokens, max_len, std::max(worst_case, initial) / 1048576.0, state_mib,
         model.recompute_ffn() ? "" : ", or set --recompute-ffn", e.what());
  }
  auto workspace = std::make_unique<kernels::Workspace>(
      backend, initial, "lower --mini-batch-words or --max-length, or free device memory");
  spdlog::info("device memory: {:.1f} MiB of parameters, gradients and optimizer state{}; the workspace ({} "
               "activations{}) grows with the batches, up to {:.1f} MiB for batches of {} tokens per side and {} "
               "tokens per sentence (checked to fit)",
               state_mib,
               layout.shards > 1 ? fmt::format(" (optimizer state sharded over {} devices)", layout.shards) : "",
               kernels::dtype_name(model.compute_dtype()),
               model.gradients_in_step_memory() ? " and the step's gradients" : "", worst_case / 1048576.0,
               max_tokens, max_len);
  if (model.recompute_ffn()) {
    spdlog::info("feed-forward hidden activations are recomputed in backward (--recompute-ffn)");
  }
  return workspace;
}

// --mini-batch-fit (Marian): the largest token budget whose planned activations, for batches of the longest
// sentences, fit in --workspace MiB. The plan is the step's own code run over the planning backend
// (Model::workspace_bytes: the encoder-decoder model's or the language model's), so it is what the step will use.
int64_t fitted_batch_words(const Options& options, Model& model, int max_len) {
  const std::size_t budget = static_cast<std::size_t>(options.get_int("workspace")) << 20;
  if (budget == 0) fail("--mini-batch-fit fits the batches to --workspace MiB; give it (e.g. -w 9000)");
  if (model.workspace_bytes(max_len, max_len) > budget) {
    fail("--mini-batch-fit: even one sentence of {} tokens needs {:.1f} MiB of activations, more than --workspace {}; "
         "raise --workspace or lower --max-length", max_len, model.workspace_bytes(max_len, max_len) / 1048576.0,
         options.get_int("workspace"));
  }
  int64_t low = max_len, high = int64_t{1} << 24;  // low fits; find the largest that does
  while (low < high) {
    const int64_t mid = low + (high - low + 1) / 2;
    if (model.workspace_bytes(mid, max_len) <= budget) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  spdlog::info("--mini-batch-fit: batches of up to {} tokens per side fit in --workspace {} MiB (activations "
               "planned for sentences of {} tokens)", low, options.get_int("workspace"), max_len);
  return low;
}

// The validator of --valid-sets (encoded in memory), or null without them. Only the writer (rank 0 of several)
// writes --valid-translation-output.
std::unique_ptr<Validator> make_validator(const Options& options, const Vocabularies& vocabs,
                                          const ModelConfig& config, int64_t max_tokens, bool writer,
                                          const data::BatcherOptions& blocks) {
  const std::vector<std::string> valid_sets = options.get_strings("valid-sets");
  if (valid_sets.empty()) return nullptr;
  data::CorpusOptions valid_options;
  valid_options.files = valid_sets;
  valid_options.max_length =
      static_cast<int>(std::min<int64_t>(options.get_int("valid-max-length"), config.max_length));
  valid_options.crop = true;
  valid_options.use_cache = false;
  if (blocks.block_length > 0) valid_options.max_length = 0;  // lines run on over blocks: none is too long
  std::vector<const data::Vocab*> valid_vocabs = {vocabs.src.get(), &vocabs.target()};
  if (config.is_lm()) valid_vocabs = {&vocabs.target()};
  auto valid = data::EncodedCorpus::open_or_build(valid_options, valid_vocabs);
  if (valid->size() == 0 && config.is_lm()) fail("the validation set {} has no usable lines", valid_sets[0]);
  if (valid->size() == 0) fail("the validation set {} {} has no usable sentence pairs", valid_sets[0], valid_sets[1]);
  if (valid->cropped() > 0) {
    spdlog::warn("validation: {} sentences longer than {} tokens were cropped (--max-length)", valid->cropped(),
                 valid_options.max_length);
  }
  const std::vector<std::string> metrics = options.get_strings("valid-metrics");
  TranslationValidation translation;
  if (std::any_of(metrics.begin(), metrics.end(), Validator::needs_translation)) {
    data::InputLineReader reader({valid_sets[1]}, "--valid-sets");
    for (std::string line; reader.next(line);) translation.references.push_back(line);
    translation.target_vocab = &vocabs.target();
    translation.beam.beam_size = static_cast<int>(options.get_int("beam-size"));
    translation.beam.normalize = options.get_float("normalize");
    translation.beam.word_penalty = options.get_float("word-penalty");
    translation.beam.max_length_factor = options.get_float("max-length-factor");
    translation.mini_batch = static_cast<int>(options.get_int("valid-mini-batch"));
    if (options.has("valid-translation-output") && writer) {
      translation.output_path = options.get_string("valid-translation-output");
    }
  }
  if (options.has("valid-script-path")) {
    translation.script = options.get_string("valid-script-path");
    translation.script_args = options.get_strings("valid-script-args");
  }
  return std::make_unique<Validator>(valid, metrics, max_tokens, static_cast<int>(options.get_int("valid-mini-batch")),
                                     std::move(translation), blocks);
}


// Training over several devices runs one process per device: here rank 0 (or a single process) prepares the model
// directory, the vocabularies and the corpus cache exactly as one process does, then releases the other ranks, which
// open what it prepared (writing nothing). Every rank then connects to the others (the communicator) and trains;
// rank 0 alone writes checkpoints.
int train(const Options& options, const TrainPlace& place, dist::ProcessGroup* group) {
  const bool leader = group == nullptr || group->rank() == 0;
  const int ranks = group ? group->size() : 1;
  if (!leader) group->wait_for_rank0();
  const std::vector<std::string> train_sets = options.get_strings("train-sets");
  TrainerOptions trainer_settings = trainer_options(options);
  const OptimizerOptions optimizer_settings = optimizer_options(options);
  const std::string sharding = options.get_string("sharding");
  const bool sharded = ranks > 1 && sharding != "none";
  if (sharded && sharding == "local" && place.env.local_world != ranks) {
    fail("--sharding local shards within one machine and replicates across machines, which this version does not "
         "do: this job spans {} ranks, {} on this machine; use --sharding global", ranks, place.env.local_world);
  }

  // The model directory: created when new, locked for the run; what it holds decides resume, fresh start or refusal.
  const ModelDir dir(options.get_string("model"));
  std::unique_ptr<ModelDirLock> lock;
  if (leader) {
    prepare_model_directory(dir);
    lock = std::make_unique<ModelDirLock>(dir.path());
  } else {
    check_prepared_by_rank0(options, dir, group->rank());
  }
  // The other ranks find the directory as rank 0 left it (its --no-reload done): they resume what it resumes.
  const bool fresh_start = leader && options.get_bool("no-reload");
  const ModelDirPlan plan = plan_model_dir(dir, fresh_start, paths_named_by_options(options));

  const Vocabularies vocabs = prepare_vocabularies(options, dir, train_sets, !fresh_start);
  const ModelConfig config = model_config_from(options, vocabs);
  TrainingProgress resumed;
  if (!plan.resume_from.empty()) {
    resumed = dir.check_checkpoint(plan.resume_from, config);
    check_checkpoint_vocabularies(vocabs, resumed, dir);
  }
  trainer_settings.vocabs = vocabs.identities();

  std::unique_ptr<kernels::Backend> backend = select_backend(options, place.backend);
  const kernels::DType dt = precision_dtype(options);
  const std::unique_ptr<Model> built = make_model(config, *backend, dt);
  Model& model = *built;
  model.set_recompute_ffn(options.get_bool("recompute-ffn"));
  // Updates of one batch need no gradients between steps: backward places them in the activations' room (also
  // under data parallelism on CPUs: the exchange works on them there, and the optimizer steps before the next
  // forward). Over several GPUs the store keeps them, in NCCL's symmetric window (DataParallel), which the
  // exchange sums in place over NVLink at less cost to the backward beside it (bench/results/README.md, issue 24).
  // Updates of several batches in one process add each batch's gradients to a sum, as data parallelism adds the
  // ranks' (2 ranks with batch B make the update of 1 with --optimizer-delay 2); with several ranks each
  // accumulates its batches in place, which the exchange during the last backward needs.
  const bool delayed = options.get_int("optimizer-delay") > 1;
  const bool gpu_ranks = ranks > 1 && !place.cpu;
  model.set_gradients_in_step_memory(ranks == 1 || (!delayed && !gpu_ranks), delayed && ranks == 1);
  // Sharded 16-bit training: each rank's optimizer keeps its shard of the fp32 master, the store none.
  if (sharded && dt != kernels::DType::f32) model.param_store().release_master();
  if (options.has("pretrained-model") && !options.get_string("pretrained-model").empty()) {
    const std::string pretrained = pretrained_weights_path(options.get_string("pretrained-model"));
    if (plan.resume_from.empty()) {
      trainer_settings.initial_weights = load_pretrained_weights(pretrained, model.param_store().table(), config);
      spdlog::info("the weights start from --pretrained-model {}", pretrained);
    } else {
      spdlog::info("resuming {}: --pretrained-model {} is not read", dir.checkpoint_dir(plan.resume_from), pretrained);
    }
  }
  if (config.is_lm()) {
    spdlog::info("model: language model of {} parameters ({} layers, dim {}, {} heads, ffn {}, {} positions)",
                 model.num_weights(), config.dec_depth, config.dim_emb, config.heads, config.dim_ffn,
                 config.learned_positions ? "learned" : "sinusoidal");
    const std::string composed = lm_composed_attention_reason(
        config, options.get_bool("lm-pack-blocks") && options.get_bool("lm-document-masks"));
    if (leader && !composed.empty())
      spdlog::info("attention runs on the composed core (GEMMs around a stored softmax; memory grows with the square "
                   "of the length): {}",
                   composed);
  } else {
    spdlog::info("model: {} parameters ({} encoder + {} decoder layers, dim {}, {} heads, ffn {})",
                 model.num_weights(), config.enc_depth, config.dec_depth, config.dim_emb, config.heads,
                 config.dim_ffn);
  }
  // A language model's blocks (--lm-pack-blocks) hold --max-length tokens; lines hold up to it + eos / bos.
  data::BatcherOptions blocks;
  if (config.is_lm() && options.get_bool("lm-pack-blocks")) {
    blocks.block_length = config.max_length;
    blocks.document_masks = options.get_bool("lm-document-masks");
  }
  const int max_len = config.max_length + 1;  // + eos / bos
  const int64_t words = options.get_bool("mini-batch-fit") ? fitted_batch_words(options, model, max_len)
                                                           : options.get_int("mini-batch-words");
  const int sentences = static_cast<int>(options.get_int("mini-batch"));
  const int64_t max_tokens = words > 0 ? std::max<int64_t>(words, max_len) : int64_t(sentences) * max_len;
  StateLayout layout;
  layout.shards = sharded ? ranks : 1;
  layout.wire_bytes = ranks > 1 && trainer_settings.sync.wire != kernels::DType::f32 ? 2.0 : 0.0;
  const std::unique_ptr<kernels::Workspace> workspace =
      checked_workspace(options, model, *backend, max_tokens, max_len, layout);
  const std::unique_ptr<Validator> validator = make_validator(options, vocabs, config, max_tokens, leader, blocks);

  data::CorpusOptions corpus_options;
  corpus_options.files = train_sets;
  corpus_options.max_length = blocks.block_length > 0 ? 0 : config.max_length;  // blocks split long lines
  corpus_options.crop = options.get_bool("max-length-crop");
  corpus_options.cache_dir = options.get_string("cache-dir").empty() ? dir.path() : options.get_string("cache-dir");
  std::vector<const data::Vocab*> corpus_vocabs = {vocabs.src.get(), &vocabs.target()};
  if (config.is_lm()) corpus_vocabs = {&vocabs.target()};
  auto corpus = data::EncodedCorpus::open_or_build(corpus_options, corpus_vocabs);
  if (config.is_lm()) {
    if (corpus->size() == 0) fail("the training corpus {} has no usable lines", train_sets[0]);
    spdlog::info("training corpus: {} lines ({} tokens){}; skipped {} empty{}, {} longer than --max-length {}, "
                 "cropped {}",
                 corpus->size(), corpus->total_tokens(0),
                 blocks.block_length > 0 ? fmt::format(" in blocks of {} tokens", blocks.block_length) : "",
                 corpus->skipped_empty(), blocks.document_masks ? " (document breaks)" : "", corpus->skipped_long(),
                 config.max_length, corpus->cropped());
  } else {
    if (corpus->size() == 0)
      fail("the training corpus {} {} has no usable sentence pairs", train_sets[0], train_sets[1]);
    spdlog::info("training corpus: {} pairs ({} source and {} target tokens); skipped {} with an empty side, {} "
                 "longer than --max-length {}, cropped {}",
                 corpus->size(), corpus->total_tokens(0), corpus->total_tokens(1), corpus->skipped_empty(),
                 corpus->skipped_long(), config.max_length, corpus->cropped());
  }

  data::BatcherOptions batcher_options = blocks;
  batcher_options.mini_batch_words = words > 0 ? words : max_tokens;
  batcher_options.mini_batch = sentences;
  batcher_options.maxi_batch = static_cast<int>(options.get_int("maxi-batch"));
  batcher_options.shuffle = options.get_string("shuffle") != "none";
  batcher_options.shuffle_batches_only = options.get_string("shuffle") == "batches";
  batcher_options.seed = static_cast<uint64_t>(options.get_int("seed"));
  batcher_options.rank = group ? group->rank() : 0;
  batcher_options.world_size = ranks;
  batcher_options.update_batches = int64_t(ranks) * trainer_settings.optimizer_delay;
  data::Batcher batcher(corpus, batcher_options);
  const bool restore_data = !options.get_bool("no-restore-corpus");
  if (!plan.resume_from.empty() && restore_data) {
    check_batcher_position(batcher, resumed, dir.checkpoint_dir(plan.resume_from));
  }

  // The optimizer and the trainer: over several devices they need the communicator, which needs every rank, so
  // rank 0 writes (below) and releases the others first; the trainer's start then reads what was checked above.
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Trainer> trainer;
  auto start_training = [&](kernels::Communicator* comm) {
    OptimizerShard shard;
    if (sharded) {
      shard.comm = comm;
      shard.offsets = shard_offsets(model.num_params(), ranks);
      shard.own_master = dt != kernels::DType::f32;
    }
    optimizer = std::make_unique<Optimizer>(*backend, model.num_params(), optimizer_settings, shard);
    trainer_settings.comm = comm;
    if (sharded) trainer_settings.sync.shards = shard_offsets(model.num_params(), ranks);
    trainer = std::make_unique<Trainer>(model, batcher, *optimizer, *workspace, dir, validator.get(), trainer_settings);
    trainer->start(plan.resume_from, restore_data);
  };
  if (group == nullptr) start_training(nullptr);

  // Every check has passed: only now does the model directory change.
  if (leader) {
    delete_for_fresh_start(plan);
    write_file_atomic(dir.file("config.yml"), options.dump());
    write_decoder_config(dir, options, config);
    write_vocabulary_copies(vocabs, dir);
  }
  if (group) {
    if (leader) group->release_others();
    kernels::Communicator* comm = group->connect(*backend);
    spdlog::info("data parallelism: {} ranks over {}; gradients exchanged in {} MiB buckets in {}{}", ranks,
                 comm->name(), options.get_int("sync-bucket-mib"), options.get_string("sync-precision"),
                 sharded ? ", optimizer state sharded (ZeRO-1)" : "");
    start_training(comm);
  }

  const TrainResult result = trainer->run();
  if (leader) {
    spdlog::info("model written to {} (workspace peak {:.1f} MiB)", dir.file("model.safetensors"),
                 workspace->peak() / 1048576.0);
  }
  return result.stop_reason == "signal" ? 130 : 0;
}

}  // namespace

int run_train(const Options& options) {
  install_stop_signal_handlers();
  check_options(options);
  const TrainPlace place = place_this_process(options);
  if (place.role == TrainPlace::Role::launcher) return run_local_launcher(place, options);
  if (place.role == TrainPlace::Role::single) return train(options, place, nullptr);
  log_as_rank(place.env.rank);
  std::unique_ptr<dist::ProcessGroup> group = join_job(place, options);
  try {
    return train(options, place, group.get());
  } catch (const std::exception& e) {
    if (!group->failed_elsewhere(0.5)) {
      group->report_failure(e.what());  // the others stop with this message
      throw;
    }
    // Stopped because another rank failed first: the message names it; the exit code tells a launcher so.
    const std::string line = std::string("error: ") + e.what() + "\n";
    std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
    return dist::kExitOtherRankFailed;
  }
}

}  // namespace lseq

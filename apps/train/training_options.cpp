#include "training_options.h"

#include <algorithm>

#include "core/cli/backend_select.h"
#include "core/dist/process_group.h"
#include "util/error.h"

namespace lseq {

namespace {

Frequency after_limit(const Options& options) {
  Frequency after{options.get_schedule("after")};
  if (!after.enabled() && options.get_int("after-epochs") > 0) {
    after.schedule = {options.get_int("after-epochs"), ScheduleUnit::epochs};
  }
  if (!after.enabled() && options.get_int("after-batches") > 0) {
    after.schedule = {options.get_int("after-batches"), ScheduleUnit::updates};
  }
  return after;
}

// --lr-decay-inv-sqrt N [B]: the decay point and where the decay starts, in one unit (Marian's rule).
void inv_sqrt_decay(const Options& options, LrSchedule& lr) {
  const std::vector<std::string> values = options.get_strings("lr-decay-inv-sqrt");
  if (values.empty()) return;
  if (values.size() > 2)
    fail("--lr-decay-inv-sqrt takes one or two values (decay point, start), got {}", values.size());
  const Schedule decay = parse_schedule(values[0], "ute", "option '--lr-decay-inv-sqrt'");
  lr.decay_start = decay.count;
  lr.decay_unit = decay.unit;
  if (values.size() == 2) {
    const Schedule from = parse_schedule(values[1], "ute", "option '--lr-decay-inv-sqrt'");
    if (from.count > 0 && from.unit != decay.unit)
      fail("--lr-decay-inv-sqrt {} {}: both values must have the same unit", values[0], values[1]);
    lr.decay_from = from.count;
  }
}

TrainerOptions::Cost cost_type(const Options& options) {
  const std::string cost = options.get_string("cost-type");
  if (cost == "ce-mean") return TrainerOptions::Cost::ce_mean;
  if (cost == "ce-sum") return TrainerOptions::Cost::ce_sum;
  if (cost == "perplexity") return TrainerOptions::Cost::perplexity;
  return TrainerOptions::Cost::ce_mean_words;
}

}  // namespace

ModelConfig model_config_from(const Options& options, const Vocabularies& vocabs) {
  YAML::Node node = YAML::Clone(options.yaml());
  node.remove("dim-vocabs");  // the sizes come from the vocabularies themselves
  ModelConfig config = ModelConfig::from_yaml(node);
  config.src_vocab = vocabs.src->size();
  config.tgt_vocab = vocabs.target().size();
  if (config.is_lm()) {
    if (!vocabs.joint())
      fail("--type lm has one vocabulary, but --vocabs names two files ({} and {}); give one path", vocabs.src_path,
           vocabs.tgt_path);
    config.normalize_lm();  // the output is tied to the embeddings whatever --tied-embeddings says
    config.validate();
    return config;
  }
  if ((config.tied == TiedEmbeddings::all || config.tied == TiedEmbeddings::source) && !vocabs.joint()) {
    fail("--{} shares the source and target embeddings, which needs one joint vocabulary, but --vocabs names two "
         "files ({} and {}); give one path",
         config.tied == TiedEmbeddings::all ? "tied-embeddings-all" : "tied-embeddings-src", vocabs.src_path,
         vocabs.tgt_path);
  }
  config.validate();
  return config;
}

TrainerOptions trainer_options(const Options& options) {
  TrainerOptions t;
  t.seed = static_cast<uint64_t>(options.get_int("seed"));
  t.optimizer_delay = static_cast<int>(std::max<int64_t>(1, options.get_int("optimizer-delay")));
  t.disp_freq = Frequency{options.get_schedule("disp-freq")};
  t.save_freq = Frequency{options.get_schedule("save-freq")};
  t.valid_freq = Frequency{options.get_schedule("valid-freq")};
  t.after = after_limit(options);
  t.early_stopping = static_cast<int>(options.get_int("early-stopping"));
  t.keep_best = options.get_bool("keep-best");
  t.max_nan_steps = static_cast<int>(std::max<int64_t>(1, options.get_int("max-nan-steps")));
  t.precision = precision_dtype(options);
  t.sync.wire = options.get_string("sync-precision") == "bf16" ? kernels::DType::bf16 : kernels::DType::f32;
  t.sync.bucket_elements = static_cast<std::size_t>(options.get_int("sync-bucket-mib")) << 18;  // MiB of fp32
  dist::check_sync_ctas(options.get_ints("sync-ctas"));  // here, before the model directory is touched

  t.lr.base = options.get_float("learn-rate");
  const Schedule warmup = options.get_schedule("lr-warmup");
  t.lr.warmup = warmup.count;
  t.lr.warmup_unit = warmup.unit;
  inv_sqrt_decay(options, t.lr);
  t.cost = cost_type(options);
  if (options.has("valid-log")) t.valid_log = options.get_string("valid-log");
  const std::string schedule = options.get_string("lr-schedule");
  if (schedule == "constant") {
    t.lr.kind = LrSchedule::Kind::constant;
  } else if (schedule == "cosine") {
    if (!t.after.enabled() || t.after.schedule.unit != ScheduleUnit::updates) {
      fail("--lr-schedule cosine decays to zero at --after, which must then be given in updates (e.g. 50000u)");
    }
    if (t.lr.warmup > 0 && t.lr.warmup_unit != ScheduleUnit::updates)
      fail("--lr-schedule cosine counts in updates: give --lr-warmup in updates (e.g. 16000u)");
    t.lr.kind = LrSchedule::Kind::cosine;
    t.lr.total = t.after.schedule.count;
  } else {
    t.lr.kind = t.lr.decay_start > 0 ? LrSchedule::Kind::inv_sqrt : LrSchedule::Kind::constant;
  }
  return t;
}

OptimizerOptions optimizer_options(const Options& options) {
  if (options.get_string("optimizer") != "adam") {
    fail("--optimizer {} is not supported; lseq trains with adam (AdamW with --weight-decay)",
         options.get_string("optimizer"));
  }
  OptimizerOptions o;
  const std::vector<double> params = options.get_floats("optimizer-params");
  if (params.size() > 3) fail("--optimizer-params takes up to three values (beta1 beta2 epsilon), got {}", params.size());
  if (params.size() > 0) o.beta1 = static_cast<float>(params[0]);
  if (params.size() > 1) o.beta2 = static_cast<float>(params[1]);
  if (params.size() > 2) o.eps = static_cast<float>(params[2]);
  o.weight_decay = static_cast<float>(options.get_float("weight-decay"));
  o.clip_norm = static_cast<float>(options.get_float("clip-norm"));
  o.smoothing = static_cast<float>(options.get_float("exponential-smoothing"));
  return o;
}

}  // namespace lseq

#include "training_options.h"

#include <algorithm>

#include "core/cli/backend_select.h"
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

int64_t updates_option(const Options& options, const std::string& key) {
  const Schedule s = options.get_schedule(key);
  if (s.count > 0 && s.unit != ScheduleUnit::updates) {
    fail("--{} {} must be given in updates (e.g. 16000 or 16000u)", key, options.get_string(key));
  }
  return s.count;
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
  if (!options.get_bool("sync-sgd")) {
    fail("--sync-sgd false (asynchronous SGD) is not implemented: lseq trains over several devices synchronously; "
         "drop the option");
  }
  t.sync.wire = options.get_string("sync-precision") == "bf16" ? kernels::DType::bf16 : kernels::DType::f32;
  t.sync.bucket_elements = static_cast<std::size_t>(options.get_int("sync-bucket-mib")) << 18;  // MiB of fp32

  t.lr.base = options.get_float("learn-rate");
  t.lr.warmup = updates_option(options, "lr-warmup");
  t.lr.decay_start = updates_option(options, "lr-decay-inv-sqrt");
  const std::string schedule = options.get_string("lr-schedule");
  if (schedule == "constant") {
    t.lr.kind = LrSchedule::Kind::constant;
  } else if (schedule == "cosine") {
    if (!t.after.enabled() || t.after.schedule.unit != ScheduleUnit::updates) {
      fail("--lr-schedule cosine decays to zero at --after, which must then be given in updates (e.g. 50000u)");
    }
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

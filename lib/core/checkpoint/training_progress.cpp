#include "core/checkpoint/training_progress.h"

#include <yaml-cpp/yaml.h>

#include <cmath>

#include "core/checkpoint/text_excerpt.h"
#include "util/error.h"

namespace lseq {

namespace {

// Reads the fields of one progress file; every defect ends in one error naming the file and the field.
class FieldReader {
 public:
  FieldReader(const YAML::Node& node, const std::string& path) : node_(node), path_(path) {}

  [[noreturn]] void damaged(const std::string& what) const {
    fail("progress file '{}' is damaged: {}; restore the checkpoint from a backup, or start afresh with --overwrite",
         path_, what);
  }

  int64_t count(const char* key, int64_t min = 0) const {
    const YAML::Node value = scalar(key);
    int64_t x = 0;
    if (!YAML::convert<int64_t>::decode(value, x)) {
      damaged(fmt::format("field '{}' is {}, not a whole number", key, quoted_excerpt(value.Scalar())));
    }
    if (x < min) damaged(fmt::format("field '{}' is {}, but it must be at least {}", key, x, min));
    return x;
  }

  double real(const char* key) const { return real_value(key, scalar(key)); }

  // A map of metric name -> finite value (absent: empty).
  std::map<std::string, double> metrics(const char* key) const {
    std::map<std::string, double> out;
    const YAML::Node map = node_[key];
    if (!map || map.IsNull()) return out;
    if (!map.IsMap()) damaged(fmt::format("field '{}' is not a map of metric values", key));
    for (const auto& entry : map) {
      if (!entry.first.IsScalar()) damaged(fmt::format("field '{}' has a metric name that is not text", key));
      const std::string metric = entry.first.Scalar();
      if (!entry.second.IsScalar()) {
        damaged(fmt::format("field '{}' has no number for metric {}", key, quoted_excerpt(metric)));
      }
      out[metric] = real_value(fmt::format("{}: {}", key, metric).c_str(), entry.second);
    }
    return out;
  }

  // A list of non-empty strings (absent: empty).
  std::vector<std::string> strings(const char* key, std::size_t size) const {
    std::vector<std::string> out;
    const YAML::Node list = node_[key];
    if (!list) return out;
    if (!list.IsSequence() || list.size() != size) {
      damaged(fmt::format("field '{}' is not a list of {} entries", key, size));
    }
    for (const auto& item : list) {
      if (!item.IsScalar() || item.Scalar().empty()) damaged(fmt::format("field '{}' has an empty entry", key));
      out.push_back(item.Scalar());
    }
    return out;
  }

  bool has(const char* key) const { return static_cast<bool>(node_[key]); }

 private:
  YAML::Node scalar(const char* key) const {
    const YAML::Node value = node_[key];
    if (!value) damaged(fmt::format("field '{}' is missing", key));
    if (!value.IsScalar()) damaged(fmt::format("field '{}' is not a single value", key));
    return value;
  }

  double real_value(const std::string& key, const YAML::Node& value) const {
    double x = 0;
    if (!YAML::convert<double>::decode(value, x)) {
      damaged(fmt::format("field '{}' is {}, not a number", key, quoted_excerpt(value.Scalar())));
    }
    if (!std::isfinite(x)) {
      damaged(fmt::format("field '{}' is {}, not a finite number", key, quoted_excerpt(value.Scalar())));
    }
    return x;
  }

  const YAML::Node& node_;
  const std::string& path_;
};

}  // namespace

std::string TrainingProgress::to_yaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "updates" << YAML::Value << updates;
  out << YAML::Key << "epochs-done" << YAML::Value << epochs_done;
  out << YAML::Key << "target-tokens" << YAML::Value << target_tokens;
  out << YAML::Key << "batches" << YAML::Value << batches;
  out << YAML::Key << "optimizer-steps" << YAML::Value << optimizer_steps;
  out << YAML::Key << "batcher-epoch" << YAML::Value << batcher_epoch;
  out << YAML::Key << "batcher-batch" << YAML::Value << batcher_batch;
  out << YAML::Key << "batcher-group" << YAML::Value << batcher_group;
  out << YAML::Key << "batcher-phase" << YAML::Value << batcher_phase;
  out << YAML::Key << "stalled" << YAML::Value << stalled;
  out << YAML::Key << "seconds" << YAML::Value << seconds;
  if (loss_scale > 0) {
    out << YAML::Key << "loss-scale" << YAML::Value << loss_scale;
    out << YAML::Key << "loss-scale-good-steps" << YAML::Value << loss_scale_good_steps;
  }
  if (!vocabs.empty()) out << YAML::Key << "vocabs" << YAML::Value << YAML::Flow << vocabs;
  out << YAML::Key << "best" << YAML::Value << YAML::BeginMap;
  for (const auto& [metric, value] : best) out << YAML::Key << metric << YAML::Value << value;
  out << YAML::EndMap;
  out << YAML::Key << "last" << YAML::Value << YAML::BeginMap;
  for (const auto& [metric, value] : last) out << YAML::Key << metric << YAML::Value << value;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

TrainingProgress TrainingProgress::from_yaml(const std::string& text, const std::string& path) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("progress file '{}' is damaged: it is not valid YAML (line {}: {}); restore the checkpoint from a backup, "
         "or start afresh with --overwrite",
         path, e.mark.line + 1, e.msg);
  }
  const FieldReader field(node, path);
  if (!node.IsMap()) field.damaged("it is not a YAML map of fields");
  TrainingProgress p;
  p.updates = field.count("updates");
  p.epochs_done = field.count("epochs-done");
  p.target_tokens = field.count("target-tokens");
  p.batches = field.count("batches");
  p.optimizer_steps = field.count("optimizer-steps");
  p.batcher_epoch = field.count("batcher-epoch", 1);
  p.batcher_batch = field.count("batcher-batch");
  if (field.has("batcher-group")) {  // absent in older files
    p.batcher_group = field.count("batcher-group", 1);
    p.batcher_phase = field.count("batcher-phase");
    if (p.batcher_phase >= p.batcher_group) {
      field.damaged(fmt::format("field 'batcher-phase' is {}, but it must be below batcher-group ({})", p.batcher_phase,
                                p.batcher_group));
    }
  }
  p.stalled = field.count("stalled");
  p.seconds = field.real("seconds");
  if (p.seconds < 0) field.damaged(fmt::format("field 'seconds' is {}, which is negative", p.seconds));
  if (field.has("loss-scale")) {  // absent in fp32/bf16 runs and in older files
    p.loss_scale = field.real("loss-scale");
    if (p.loss_scale <= 0) field.damaged(fmt::format("field 'loss-scale' is {}, not positive", p.loss_scale));
    p.loss_scale_good_steps = field.has("loss-scale-good-steps") ? field.count("loss-scale-good-steps") : 0;
  }
  p.vocabs = field.strings("vocabs", 2);
  p.best = field.metrics("best");
  p.last = field.metrics("last");
  // Every update and every optimizer step consumed at least one micro-batch.
  if (p.updates > p.batches) {
    field.damaged(fmt::format("field 'updates' is {} but only {} batches were consumed ('batches')", p.updates,
                              p.batches));
  }
  if (p.optimizer_steps > p.batches) {
    field.damaged(fmt::format("field 'optimizer-steps' is {} but only {} batches were consumed ('batches')",
                              p.optimizer_steps, p.batches));
  }
  return p;
}

}  // namespace lseq

#include "core/checkpoint/pretrained_weights.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "core/checkpoint/weights_file.h"
#include "util/error.h"

namespace lseq {

namespace fs = std::filesystem;

std::string pretrained_weights_path(const std::string& option_value) {
  std::error_code ec;
  if (fs::is_directory(option_value, ec)) return (fs::path(option_value) / "model.safetensors").string();
  return option_value;
}

std::string architecture_difference(const ModelConfig& pretrained, const ModelConfig& wanted) {
  std::set<std::string> training_only = {"transformer-dropout", "transformer-dropout-attention",
                                         "transformer-dropout-ffn", "transformer-postprocess-emb",
                                         "label-smoothing"};
  // Sinusoidal positions are computed for any length; a learned table's rows are weights (max-length must match).
  if (!pretrained.learned_positions && !wanted.learned_positions) training_only.insert("max-length");
  const YAML::Node a = pretrained.to_yaml(), b = wanted.to_yaml();
  for (const auto& entry : a) {
    const std::string key = entry.first.as<std::string>();
    if (training_only.count(key)) continue;
    std::string va = YAML::Dump(entry.second), vb = YAML::Dump(b[key]);
    if (va != vb) return key + " is " + va + " in the pretrained model but " + vb + " here";
  }
  for (const auto& entry : b) {  // a key only this run's config has (the other model type's)
    const std::string key = entry.first.as<std::string>();
    if (!a[key] && !training_only.count(key)) return key + " is " + YAML::Dump(entry.second) + " here only";
  }
  return {};
}

std::vector<float> load_pretrained_weights(const std::string& path, const ParamTable& table,
                                           const ModelConfig& config) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    fail("--pretrained-model: '{}' not found; give a model.safetensors written by lstrain or a converter, or its "
         "model directory",
         path);
  const std::string difference = architecture_difference(read_model_config(path), config);
  if (!difference.empty())
    fail("--pretrained-model '{}' is another model than this run's options describe ({}); give the model's own "
         "options, e.g. --config with the config.yml beside it",
         path, difference);
  std::vector<float> flat;
  load_weights(path, table, flat);
  return flat;
}

}  // namespace lseq

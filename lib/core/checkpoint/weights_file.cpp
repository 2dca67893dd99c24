#include "core/checkpoint/weights_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "core/checkpoint/safetensors.h"
#include "util/error.h"

namespace lseq {

namespace {

constexpr const char* kConfigKey = "lseq.model_config";

}  // namespace

void require_finite(const std::string& path, const std::string& tensor, const float* values, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) {
      fail("'{}': tensor '{}' holds {} at element {}; the file is damaged or was written by a diverged run: use "
           "another checkpoint or train again",
           path, tensor, std::isnan(values[i]) ? "NaN" : "an infinity", i);
    }
  }
}

void save_weights(const std::string& path, const ParamTable& table, const ModelConfig& config,
                  const std::vector<float>& flat, int64_t updates) {
  if (flat.size() != table.size()) fail("internal: {} parameters for a table of {}", flat.size(), table.size());
  std::vector<SafetensorsInput> tensors;
  tensors.reserve(table.list().size());
  for (const ParamInfo& p : table.list()) tensors.push_back({p.name, "F32", p.shape, flat.data() + p.offset});
  std::map<std::string, std::string> metadata;
  metadata[kConfigKey] = YAML::Dump(config.to_yaml());
  metadata["lseq.updates"] = std::to_string(updates);
  metadata["lseq.format"] = "1";
  write_safetensors(path, tensors, metadata);
}

void load_weights(const std::string& path, const ParamTable& table, std::vector<float>& flat) {
  const SafetensorsFile file = SafetensorsFile::open(path);
  // A tensor the table has no place for means the config stored with the weights does not describe them (e.g.
  // enc-depth 1 over a 2-layer file): loading would silently drop it.
  std::set<std::string> expected;
  for (const ParamInfo& p : table.list()) expected.insert(p.name);
  for (const std::string& name : file.names()) {
    if (expected.count(name) == 0) {
      fail("weights file '{}' holds tensor '{}', which is not a parameter of the model its config describes; the "
           "file and its config disagree: use weights written by lstrain for this model",
           path, name);
    }
  }
  flat.assign(table.size(), 0.0f);
  for (const ParamInfo& p : table.list()) {
    const auto& tensor = file.require(p.name, "F32", p.shape);
    std::memcpy(flat.data() + p.offset, tensor.data, tensor.bytes);
    require_finite(path, p.name, flat.data() + p.offset, p.count);
  }
}

ModelConfig read_model_config(const std::string& weights_path) {
  const SafetensorsFile file = SafetensorsFile::open(weights_path);
  const auto it = file.metadata().find(kConfigKey);
  if (it == file.metadata().end()) {
    fail("'{}' holds no model config (metadata key {}); it was not written by lstrain", weights_path, kConfigKey);
  }
  try {
    return ModelConfig::from_yaml(YAML::Load(it->second));
  } catch (const YAML::Exception& e) {
    fail("the model config in '{}' is corrupt: {}", weights_path, e.what());
  }
}

}  // namespace lseq

#include "core/checkpoint/weights_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
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
  // All exponent bits set: NaN or an infinity. The branch-free pass vectorises (a checkpoint has ~10^8 values).
  uint32_t bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + i, sizeof(bits));
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  if (bad == 0) return;
  for (std::size_t i = 0; i < count; ++i) {
    float value;
    std::memcpy(&value, values + i, sizeof(value));
    if (!std::isfinite(value)) {
      fail("'{}': tensor '{}' holds {} at element {}; the file is damaged or was written by a diverged run: use "
           "another checkpoint or train again",
           path, tensor, std::isnan(value) ? "NaN" : "an infinity", i);
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
  load_weights(SafetensorsFile::open(path, true), table, flat);
}

void load_weights(const SafetensorsFile& file, const ParamTable& table, std::vector<float>& flat) {
  const std::vector<HostTensor> tensors = weight_tensors(file, table);
  flat.assign(table.size(), 0.0f);
  for (const HostTensor& t : tensors) std::memcpy(flat.data() + t.offset, t.values, t.count * sizeof(float));
}

std::vector<HostTensor> weight_tensors(const SafetensorsFile& file, const ParamTable& table) {
  const std::string& path = file.path();
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
  std::vector<HostTensor> tensors;
  tensors.reserve(table.list().size());
  for (const ParamInfo& p : table.list()) {
    const auto& tensor = file.require(p.name, "F32", p.shape);
    // safetensors does not promise 4-byte aligned data: the values are only ever read through memcpy.
    const auto* values = static_cast<const float*>(static_cast<const void*>(tensor.data));
    require_finite(path, p.name, values, p.count);
    tensors.push_back({p.offset, values, p.count});
  }
  return tensors;
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

#include "core/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/checkpoint/safetensors.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}': {}", path, std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Makes a rename or a new directory entry durable.
void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string checkpoint_name(int64_t updates) {
  char name[32];
  std::snprintf(name, sizeof name, "u%09lld", static_cast<long long>(updates));
  return name;
}

void write_flat(std::vector<SafetensorsInput>& out, const char* name, const std::vector<float>& flat) {
  if (!flat.empty()) out.push_back({name, "F32", {static_cast<int64_t>(flat.size())}, flat.data()});
}

void read_flat(const SafetensorsFile& file, const char* name, std::size_t size, std::vector<float>& flat) {
  const auto& tensor = file.require(name, "F32", {static_cast<int64_t>(size)});
  flat.resize(size);
  std::memcpy(flat.data(), tensor.data, tensor.bytes);
  require_finite(file.path(), name, flat.data(), size);
}

// The first option whose value differs between two model configs, as "key: stored vs wanted".
std::string config_difference(const ModelConfig& stored, const ModelConfig& wanted) {
  const YAML::Node a = stored.to_yaml(), b = wanted.to_yaml();
  for (const auto& entry : a) {
    const std::string key = entry.first.as<std::string>();
    const std::string va = YAML::Dump(entry.second), vb = YAML::Dump(b[key]);
    if (va != vb) return key + " is " + va + " in the checkpoint but " + vb + " in the config";
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------- the model directory

ModelDir::ModelDir(std::string path) : path_(std::move(path)) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
}

void ModelDir::create() const {
  std::error_code ec;
  if (fs::exists(path_, ec) && !fs::is_directory(path_, ec)) {
    fail("--model '{}' is a file; lseq's model is a directory: give a new or existing directory", path_);
  }
  fs::create_directories(file("checkpoint"), ec);
  if (ec) fail("cannot create model directory '{}': {}", path_, ec.message());
}

bool ModelDir::has_checkpoint() const { return fs::exists(file("checkpoint/latest")); }

std::string ModelDir::latest_checkpoint() const {
  const std::string pointer = file("checkpoint/latest");
  if (!fs::exists(pointer)) fail("no checkpoint in '{}' (missing {})", path_, pointer);
  std::string name = read_text(pointer);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  const std::string dir = file("checkpoint/" + name);
  if (name.empty() || name.find('/') != std::string::npos || !fs::is_directory(dir)) {
    fail("checkpoint pointer '{}' names '{}', which is not a checkpoint directory; the model directory is "
         "damaged: remove it or train with --overwrite",
         pointer, name);
  }
  return dir;
}

void ModelDir::save_checkpoint(const ParamTable& table, const ModelConfig& config,
                               const CheckpointTensors& tensors, const TrainingProgress& progress) const {
  const std::string root = file("checkpoint");
  const std::string name = checkpoint_name(progress.updates);
  const std::string partial = root + "/" + name + ".partial", final_dir = root + "/" + name;
  std::error_code ec;
  fs::remove_all(partial, ec);
  fs::create_directories(partial, ec);
  if (ec) fail("cannot create checkpoint directory '{}': {}", partial, ec.message());

  const std::vector<float>& inference = tensors.smoothed.empty() ? tensors.params : tensors.smoothed;
  save_weights(partial + "/model.safetensors", table, config, inference, progress.updates);
  std::vector<SafetensorsInput> state;
  write_flat(state, "params", tensors.params);
  write_flat(state, "adam.m", tensors.adam_m);
  write_flat(state, "adam.v", tensors.adam_v);
  write_flat(state, "smoothed", tensors.smoothed);
  write_safetensors(partial + "/optimizer.safetensors", state, {{"lseq.updates", std::to_string(progress.updates)}});
  write_file_atomic(partial + "/progress.yml", progress.to_yaml());
  sync_directory(partial);

  // Complete: give it its final name, then make it the latest (the commit point).
  fs::remove_all(final_dir, ec);
  fs::rename(partial, final_dir, ec);
  if (ec) fail("cannot rename checkpoint '{}' to '{}': {}", partial, final_dir, ec.message());
  sync_directory(root);
  write_file_atomic(root + "/latest", name + "\n");

  // model.safetensors: a hard link to the new weights, swapped in atomically (a copy where links fail).
  const std::string link_tmp = file(".model.safetensors.link");
  fs::remove(link_tmp, ec);
  fs::create_hard_link(final_dir + "/model.safetensors", link_tmp, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(final_dir + "/model.safetensors", link_tmp, fs::copy_options::overwrite_existing, ec);
  }
  if (!ec) fs::rename(link_tmp, file("model.safetensors"), ec);
  if (ec) fail("cannot update '{}': {}", file("model.safetensors"), ec.message());
  sync_directory(path_);

  // Older checkpoints (and partial ones a crash left behind) go only now.
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string entry_name = entry.path().filename().string();
    if (entry.is_directory() && entry_name != name) fs::remove_all(entry.path(), ec);
  }
}

void ModelDir::load_checkpoint(const ParamTable& table, const ModelConfig& config, CheckpointTensors& tensors,
                               TrainingProgress& progress) const {
  const std::string dir = latest_checkpoint();
  const std::string weights = dir + "/model.safetensors";
  const std::string difference = config_difference(read_model_config(weights), config);
  if (!difference.empty()) {
    fail("the checkpoint in '{}' is of a different model ({}); train with --overwrite to start anew, or use "
         "another --model",
         path_, difference);
  }
  progress = TrainingProgress::from_yaml(read_text(dir + "/progress.yml"), dir + "/progress.yml");
  const SafetensorsFile state = SafetensorsFile::open(dir + "/optimizer.safetensors");
  const std::set<std::string> known = {"params", "adam.m", "adam.v", "smoothed"};
  for (const std::string& tensor : state.names()) {
    if (known.count(tensor) == 0) {
      fail("optimizer state '{}' holds tensor '{}', which lstrain does not write (only params, adam.m, adam.v, "
           "smoothed); the checkpoint is damaged: restore it from a backup, or start afresh with --overwrite",
           state.path(), tensor);
    }
  }
  read_flat(state, "params", table.size(), tensors.params);
  read_flat(state, "adam.m", table.size(), tensors.adam_m);
  read_flat(state, "adam.v", table.size(), tensors.adam_v);
  if (state.find("smoothed")) {
    read_flat(state, "smoothed", table.size(), tensors.smoothed);
  } else {
    tensors.smoothed.clear();
  }
  // The weights file must agree with the table too (catches a damaged or foreign file early).
  std::vector<float> check;
  load_weights(weights, table, check);
}

}  // namespace lseq

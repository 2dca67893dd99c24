#include "core/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/text_excerpt.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {

namespace {

constexpr const char* kCheckpointFiles[] = {"model.safetensors", "optimizer.safetensors", "progress.yml"};

// At most max_bytes of a file (a damaged file may be anything, also huge).
std::string read_text(const std::string& path, std::size_t max_bytes = std::size_t(1) << 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}': {}", path, std::strerror(errno));
  std::string text(max_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(max_bytes));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

// The name in checkpoint/latest without its newline; "" when it is missing or not a readable file.
std::string read_pointer(const std::string& pointer) {
  std::error_code ec;
  if (!fs::is_regular_file(pointer, ec)) return {};
  std::ifstream in(pointer, std::ios::binary);
  std::string name(256, '\0');
  in.read(name.data(), static_cast<std::streamsize>(name.size()));
  name.resize(static_cast<std::size_t>(in.gcount()));
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name;
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

// "u<digits>" -> the update count; -1 for any other name (partial directories included).
int64_t updates_of(const std::string& name) {
  if (name.size() < 2 || name.size() > 19 || name[0] != 'u') return -1;
  if (!std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoll(name.substr(1));
}

// The directories lstrain makes in checkpoint/: u<digits> and u<digits>.partial.
bool is_checkpoint_entry(const std::string& name) {
  const std::string suffix = ".partial";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return updates_of(name.substr(0, name.size() - suffix.size())) >= 0;
  }
  return updates_of(name) >= 0;
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

ModelDir::ModelDir(std::string path) : path_(std::move(path)) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
}

void ModelDir::create() const {
  std::error_code ec;
  if (fs::exists(path_, ec) && !fs::is_directory(path_, ec)) {
    fail("--model '{}' is a file; lseq's model is a directory: give a new or existing directory", path_);
  }
  fs::create_directories(path_, ec);
  if (ec) fail("cannot create model directory '{}': {}", path_, ec.message());
}

bool ModelDir::has_checkpoint() const {
  std::error_code ec;
  return fs::exists(fs::symlink_status(file("checkpoint/latest"), ec));
}

std::vector<std::string> ModelDir::complete_checkpoints() const {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(file("checkpoint"), ec)) {
    const std::string name = entry.path().filename().string();
    const int64_t updates = updates_of(name);
    if (updates < 0 || !entry.is_directory(ec)) continue;
    const bool complete = std::all_of(std::begin(kCheckpointFiles), std::end(kCheckpointFiles), [&](const char* f) {
      return fs::is_regular_file(entry.path() / f, ec);
    });
    if (complete) found.emplace_back(updates, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> names;
  for (const auto& [updates, name] : found) names.push_back(name);
  return names;
}

std::string ModelDir::latest_name() const {
  const std::string pointer = file("checkpoint/latest");
  if (!has_checkpoint()) return {};
  const std::string name = read_pointer(pointer);
  const std::vector<std::string> complete = complete_checkpoints();
  if (std::find(complete.begin(), complete.end(), name) == complete.end()) {
    std::string found = "no complete checkpoint is left: start afresh with --overwrite";
    if (!complete.empty()) {
      found = "complete checkpoints found: ";
      for (std::size_t i = 0; i < complete.size(); ++i) found += (i ? ", " : "") + complete[i];
      found += "; write one of their names into it to resume from it, or start afresh with --overwrite";
    }
    fail("checkpoint pointer '{}' is damaged: it holds {}, which is not the name of a complete checkpoint; {}",
         pointer, quoted_excerpt(name), found);
  }
  return name;
}

std::string ModelDir::latest_checkpoint() const {
  const std::string name = latest_name();
  if (name.empty()) fail("no checkpoint in '{}' (missing {})", path_, file("checkpoint/latest"));
  return checkpoint_dir(name);
}

void ModelDir::save_checkpoint(const ParamTable& table, const ModelConfig& config,
                               const CheckpointTensors& tensors, const TrainingProgress& progress) const {
  const std::string root = file("checkpoint");
  const std::string name = checkpoint_name(progress.updates);
  const std::string partial = root + "/" + name + ".partial", final_dir = root + "/" + name;
  std::error_code ec;
  if (read_pointer(root + "/latest") == name) {
    fail("internal: checkpoint {} in '{}' is the latest; it is not saved again", name, path_);
  }
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

  // Complete: give it its final name, then make it the latest (the commit point). A directory of that name is a
  // complete checkpoint that `latest` does not name (a crash came before the commit): it is replaced.
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

  // Older checkpoints (and partial ones a crash left behind) go only now; nothing else in checkpoint/ is touched.
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string entry_name = entry.path().filename().string();
    if (entry.is_directory() && entry_name != name && is_checkpoint_entry(entry_name)) fs::remove_all(entry.path(), ec);
  }
}

TrainingProgress ModelDir::check_checkpoint(const std::string& name, const ModelConfig& config) const {
  const std::string dir = checkpoint_dir(name);
  const std::string difference = config_difference(read_model_config(dir + "/model.safetensors"), config);
  if (!difference.empty()) {
    fail("the checkpoint in '{}' is of a different model ({}); train with --overwrite to start anew, or use "
         "another --model",
         path_, difference);
  }
  const std::string progress_path = dir + "/progress.yml";
  const TrainingProgress progress = TrainingProgress::from_yaml(read_text(progress_path), progress_path);
  if (progress.updates != updates_of(name)) {
    fail("progress file '{}' is damaged: field 'updates' is {} but the checkpoint is {}; restore the checkpoint "
         "from a backup, or start afresh with --overwrite",
         progress_path, progress.updates, name);
  }
  return progress;
}

void ModelDir::load_checkpoint(const std::string& name, const ParamTable& table, const ModelConfig& config,
                               CheckpointTensors& tensors, TrainingProgress& progress) const {
  const std::string dir = checkpoint_dir(name);
  progress = check_checkpoint(name, config);
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
  load_weights(dir + "/model.safetensors", table, check);
}

void ModelDir::load_checkpoint(const ParamTable& table, const ModelConfig& config, CheckpointTensors& tensors,
                               TrainingProgress& progress) const {
  const std::string name = latest_name();
  if (name.empty()) fail("no checkpoint in '{}' (missing {})", path_, file("checkpoint/latest"));
  load_checkpoint(name, table, config, tensors, progress);
}

}  // namespace lseq

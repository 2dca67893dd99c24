#include "model_dir_plan.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "core/checkpoint/pretrained_weights.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {

namespace {

bool same_path(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

bool inside(const fs::path& path, const fs::path& dir) {
  std::error_code ec;
  const std::string p = fs::weakly_canonical(path, ec).string(), d = fs::weakly_canonical(dir, ec).string() + "/";
  return p.compare(0, d.size(), d) == 0;
}

// What lstrain writes into a model directory (the lock file and the corpus cache are not its model).
std::vector<std::string> made_by_lstrain(const ModelDir& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* name : {"checkpoint", "model.safetensors", ".model.safetensors.link", "config.yml", "decoder.yml",
                           "vocab.spm", "vocab.src.spm", "vocab.tgt.spm", "vocab.json", "merges.txt"}) {
    if (fs::exists(fs::symlink_status(dir.file(name), ec))) found.push_back(dir.file(name));
  }
  for (const auto& entry : fs::directory_iterator(dir.path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("model.best-", 0) == 0) found.push_back(entry.path().string());
  }
  return found;
}

// Trained weights: model.safetensors and the best-* copies.
std::vector<std::string> weights_files(const ModelDir& dir) {
  std::vector<std::string> weights;
  for (const std::string& path : made_by_lstrain(dir)) {
    const std::string name = fs::path(path).filename().string();
    if (name == "model.safetensors" || name.rfind("model.best-", 0) == 0) weights.push_back(name);
  }
  return weights;
}

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + names[i];
  return text;
}

ModelDirPlan plan_fresh_start(const ModelDir& dir, const std::vector<NamedPath>& keep) {
  ModelDirPlan plan;
  for (const std::string& path : made_by_lstrain(dir)) {
    const NamedPath* kept = nullptr;
    for (const NamedPath& named : keep) {
      if (same_path(path, named.path)) kept = &named;
      if (inside(named.path, path)) {
        fail("--no-reload would delete '{}', which holds '{}' given with {}; move that file out of the model "
             "directory first",
             path, named.path, named.option);
      }
    }
    if (kept != nullptr) {
      spdlog::info("--no-reload: keeping '{}', given with {}", path, kept->option);
    } else {
      plan.to_delete.push_back(path);
    }
  }
  return plan;
}

}  // namespace

std::vector<NamedPath> paths_named_by_options(const Options& options) {
  std::vector<NamedPath> named;
  for (const char* option : {"vocabs", "train-sets", "valid-sets"}) {
    for (const std::string& path : options.get_strings(option)) {
      named.push_back({std::string("--") + option, path});
      // A GPT-2 vocab.json comes with the merges.txt beside it: keep both.
      if (std::string(option) == "vocabs" && fs::path(path).extension() == ".json")
        named.push_back({"--vocabs (its merges.txt)", (fs::path(path).parent_path() / "merges.txt").string()});
    }
  }
  if (options.has("pretrained-model") && !options.get_string("pretrained-model").empty())
    named.push_back({"--pretrained-model", pretrained_weights_path(options.get_string("pretrained-model"))});
  for (const char* option : {"valid-translation-output", "log", "cache-dir"}) {
    if (options.has(option) && !options.get_string(option).empty()) {
      named.push_back({std::string("--") + option, options.get_string(option)});
    }
  }
  return named;
}

ModelDirPlan plan_model_dir(const ModelDir& dir, bool fresh_start, const std::vector<NamedPath>& keep) {
  if (fresh_start) return plan_fresh_start(dir, keep);
  ModelDirPlan plan;
  plan.resume_from = dir.latest_name();  // a damaged `latest` is refused here
  if (!plan.resume_from.empty()) return plan;

  const std::vector<std::string> complete = dir.complete_checkpoints();
  const std::vector<std::string> weights = weights_files(dir);
  const std::string pointer = dir.file("checkpoint/latest");
  if (!complete.empty() && weights.empty()) {
    // A crash between a first save's rename and its `latest`: nothing was published yet, the checkpoint is whole.
    plan.resume_from = complete.back();
    spdlog::warn("'{}' is missing but '{}' holds the complete checkpoint {} of an interrupted first save; resuming "
                 "from it",
                 pointer, dir.path(), plan.resume_from);
    return plan;
  }
  if (!complete.empty()) {
    fail("'{}' is missing but '{}' holds the complete checkpoint(s) {}: to resume, write the name of one into it "
         "(echo {} > {}); to start afresh and delete them, pass --no-reload",
         pointer, dir.path(), joined(complete), complete.back(), pointer);
  }
  if (!weights.empty()) {
    fail("'{}' holds a trained model ({}) but no checkpoint to resume from; train into another directory, or pass "
         "--no-reload to replace it",
         dir.path(), joined(weights));
  }
  return plan;
}

void delete_for_fresh_start(const ModelDirPlan& plan) {
  for (const std::string& path : plan.to_delete) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec) fail("--no-reload cannot delete '{}': {}", path, ec.message());
    spdlog::info("--no-reload: deleted '{}'", path);
  }
}

}  // namespace lseq

// A model directory's small text files: progress.yml (TrainingProgress::from_yaml) and checkpoint/latest
// (ModelDir::latest_checkpoint), each alone and inside a whole ModelDir::load_checkpoint of a real checkpoint
// written at start-up. The input is used as both files in turn.
// Promises checked: an accepted progress.yml writes back (to_yaml) to text that reads back to the same progress;
// latest_checkpoint names a directory under checkpoint/; load_checkpoint gives the tensors the table asks for and
// the progress that from_yaml reads from the same text.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/checkpoint/checkpoint.h"
#include "core/model/model_config.h"
#include "core/model/params.h"
#include "fuzz_support.h"

namespace {

namespace fs = std::filesystem;

lseq::ParamTable table;
lseq::ModelConfig config;
std::string model_dir, checkpoint_dir, good_latest, good_progress;

void check_progress(const std::string& text) {
  lseq::TrainingProgress progress;
  if (!lseq::fuzz::guarded([&] { progress = lseq::TrainingProgress::from_yaml(text, "progress.yml"); })) return;
  const std::string written = progress.to_yaml();
  lseq::TrainingProgress again;
  try {
    again = lseq::TrainingProgress::from_yaml(written, "progress.yml");
  } catch (const lseq::Error& e) {
    LSEQ_FUZZ_EXPECT(false, std::string("progress.yml written by to_yaml does not read back: ") + e.what());
  }
  LSEQ_FUZZ_EXPECT(again.to_yaml() == written, "progress.yml does not survive writing and reading:\n" + written);
}

void check_latest(const std::string& text) {
  lseq::fuzz::write_bytes(checkpoint_dir + "/progress.yml", good_progress);  // each input starts from the same files
  lseq::fuzz::write_bytes(model_dir + "/checkpoint/latest", text);
  const lseq::ModelDir dir(model_dir);
  std::string found;
  if (!lseq::fuzz::guarded([&] { found = dir.latest_checkpoint(); })) return;
  LSEQ_FUZZ_EXPECT(fs::is_directory(found) && fs::path(found).parent_path() == fs::path(model_dir) / "checkpoint",
                   "latest_checkpoint gave '" + found + "', not a directory under checkpoint/");
  lseq::CheckpointTensors tensors;
  lseq::TrainingProgress progress;
  if (lseq::fuzz::guarded([&] { dir.load_checkpoint(table, config, tensors, progress); }))
    LSEQ_FUZZ_EXPECT(tensors.params.size() == table.size(), "a loaded checkpoint has the wrong size");
}

void check_load_with_progress(const std::string& text) {
  lseq::fuzz::write_bytes(model_dir + "/checkpoint/latest", good_latest);
  lseq::fuzz::write_bytes(checkpoint_dir + "/progress.yml", text);
  lseq::CheckpointTensors tensors;
  lseq::TrainingProgress progress;
  if (!lseq::fuzz::guarded([&] { lseq::ModelDir(model_dir).load_checkpoint(table, config, tensors, progress); })) {
    return;
  }
  LSEQ_FUZZ_EXPECT(tensors.params.size() == table.size() && tensors.adam_m.size() == table.size() &&
                       tensors.adam_v.size() == table.size(),
                   "a loaded checkpoint has the wrong size");
  const lseq::TrainingProgress direct = lseq::TrainingProgress::from_yaml(text, "progress.yml");
  LSEQ_FUZZ_EXPECT(direct.to_yaml() == progress.to_yaml(), "load_checkpoint read another progress than from_yaml");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  config.src_vocab = config.tgt_vocab = 11;
  config.dim_emb = 4;
  config.heads = 2;
  config.dim_ffn = 8;
  config.enc_depth = config.dec_depth = 1;
  table.add("encoder.embedding", {11, 4}, lseq::ParamInit::normal_embedding);
  table.add("encoder.bias", {4}, lseq::ParamInit::zeros);
  lseq::CheckpointTensors tensors;
  tensors.params.assign(table.size(), 0.5f);
  tensors.adam_m.assign(table.size(), 0.25f);
  tensors.adam_v.assign(table.size(), 0.125f);
  lseq::TrainingProgress progress;
  progress.updates = 10;
  progress.best["perplexity"] = 12.5;
  model_dir = lseq::fuzz::scratch_file("model");
  const lseq::ModelDir dir(model_dir);
  dir.create();
  dir.save_checkpoint(table, config, tensors, progress);
  checkpoint_dir = dir.latest_checkpoint();
  good_latest = fs::path(checkpoint_dir).filename().string() + "\n";
  good_progress = progress.to_yaml();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check_progress(text);
  check_latest(text);
  check_load_with_progress(text);
  return 0;
}

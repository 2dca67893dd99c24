#pragma once
// The model directory written by lstrain and read by lstranslate/lsscore:
//
//   model/config.yml                    the merged training options (lstrain --dump-config of the run)
//   model/vocab.src.spm, vocab.tgt.spm  copies of the vocabularies (one file when joint: vocab.spm;
//                                       a byte-level BPE: vocab.json + merges.txt)
//   model/model.safetensors             the latest weights (the model config in its metadata); a hard link to the
//                                       latest checkpoint's weights
//   model/model.best-<metric>.safetensors  weights of the best validation score per metric (--keep-best)
//   model/checkpoint/latest             name of the latest complete checkpoint, replaced atomically
//   model/checkpoint/u<updates>/        one checkpoint: model.safetensors, optimizer.safetensors, progress.yml
//   model/.lock                         the pid of the lstrain that trains into it (model_dir_lock.h)
//
// A checkpoint is written into a fresh u<updates>.partial directory, renamed when complete, and only then named
// in `latest` (an atomic file replacement); older checkpoints are removed after that. A crash at any instant
// therefore leaves `latest` naming a complete checkpoint; only a crash in the very first save, between the rename
// and `latest`, leaves a complete checkpoint that no `latest` names yet. docs/checkpoints.md documents the files.
#include <cstdint>
#include <string>
#include <vector>

#include "core/checkpoint/training_progress.h"
#include "core/checkpoint/weights_file.h"
#include "core/model/model_config.h"
#include "core/model/params.h"

namespace lseq {

// Host copies of everything a checkpoint holds besides the progress.
struct CheckpointTensors {
  std::vector<float> params;   // flat master parameters (ParamTable layout, gaps included)
  std::vector<float> adam_m, adam_v;
  std::vector<float> smoothed; // exponential smoothing of the parameters; empty when off
};

class ModelDir {
 public:
  explicit ModelDir(std::string path);
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string checkpoint_dir(const std::string& name) const { return file("checkpoint/" + name); }

  void create() const;  // mkdir -p of the directory (checkpoint/ comes with the first save); a file -> lseq::Error
  bool has_checkpoint() const;  // checkpoint/latest exists
  // The checkpoint named by checkpoint/latest ("u000000040"), or "" when there is no `latest`. A `latest` that does
  // not name a complete checkpoint -> lseq::Error naming the file, a short excerpt of it and the complete
  // checkpoints found.
  std::string latest_name() const;
  std::string latest_checkpoint() const;  // the latest's directory; lseq::Error when there is none
  // The complete checkpoints in checkpoint/ (u<updates> directories holding all three files), oldest first.
  std::vector<std::string> complete_checkpoints() const;

  // Writes one checkpoint atomically (see above) and points model.safetensors at its weights, which are
  // `smoothed` when present, else `params`. The latest checkpoint is never replaced by one of the same name (that
  // would leave `latest` naming a missing directory for a moment): saving the same update twice is an error.
  void save_checkpoint(const ParamTable& table, const ModelConfig& config, const CheckpointTensors& tensors,
                       const TrainingProgress& progress) const;
  // The progress of a checkpoint, after the cheap checks (no tensor is read): the model config stored in its
  // weights equals `config` (else lseq::Error naming the option that differs) and its progress.yml is sound
  // (TrainingProgress::from_yaml; its updates must match the checkpoint's name).
  TrainingProgress check_checkpoint(const std::string& name, const ModelConfig& config) const;
  // Reads a checkpoint after check_checkpoint: its weights and optimizer state must hold exactly the expected
  // tensors (those of the table; params, adam.m, adam.v and optionally smoothed), in the table's shapes, and only
  // finite values (lseq::Error naming the file and the first offending tensor).
  void load_checkpoint(const std::string& name, const ParamTable& table, const ModelConfig& config,
                       CheckpointTensors& tensors, TrainingProgress& progress) const;
  void load_checkpoint(const ParamTable& table, const ModelConfig& config, CheckpointTensors& tensors,
                       TrainingProgress& progress) const;  // the latest

 private:
  std::string path_;
};

}  // namespace lseq

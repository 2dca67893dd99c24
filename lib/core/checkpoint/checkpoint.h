#pragma once
// The model directory written by lstrain and read by lstranslate/lsscore:
//
//   model/config.yml                    the merged training options (lstrain --dump-config of the run)
//   model/vocab.src.spm, vocab.tgt.spm  copies of the vocabularies (one file when joint: vocab.spm)
//   model/model.safetensors             the latest weights (the model config in its metadata); a hard link to the
//                                       latest checkpoint's weights
//   model/model.best-<metric>.safetensors  weights of the best validation score per metric (--keep-best)
//   model/checkpoint/latest             name of the latest complete checkpoint, replaced atomically
//   model/checkpoint/u<updates>/        one checkpoint: model.safetensors, optimizer.safetensors, progress.yml
//
// A checkpoint is written into a fresh u<updates>.partial directory, renamed when complete, and only then named
// in `latest` (an atomic file replacement); older checkpoints are removed after that. A crash at any instant
// therefore leaves `latest` naming a complete checkpoint. docs/checkpoints.md documents the files.
#include <cstdint>
#include <map>
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

  void create() const;  // mkdir -p; a path that is a file -> lseq::Error
  bool has_checkpoint() const;
  std::string latest_checkpoint() const;  // its directory; lseq::Error when there is none

  // Writes one checkpoint atomically (see above) and points model.safetensors at its weights, which are
  // `smoothed` when present, else `params`.
  void save_checkpoint(const ParamTable& table, const ModelConfig& config, const CheckpointTensors& tensors,
                       const TrainingProgress& progress) const;
  // Reads the latest checkpoint; the config stored in the weights is checked against `config` (a different model
  // -> lseq::Error naming the option that differs), and the weights and optimizer state must hold exactly the
  // expected tensors, in the table's shapes, with finite values (else lseq::Error naming the file and the tensor).
  void load_checkpoint(const ParamTable& table, const ModelConfig& config, CheckpointTensors& tensors,
                       TrainingProgress& progress) const;

 private:
  std::string path_;
};

}  // namespace lseq

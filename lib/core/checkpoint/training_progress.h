#pragma once
// progress.yml of a checkpoint: where training stands, enough to continue exactly (docs/checkpoints.md).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lseq {

struct TrainingProgress {
  int64_t updates = 0;
  int64_t epochs_done = 0;
  int64_t target_tokens = 0;       // trained on so far
  int64_t batches = 0;             // micro-batches consumed (keys the dropout masks)
  int64_t optimizer_steps = 0;     // Adam's step count (bias correction)
  int64_t batcher_epoch = 1;       // data::BatcherState
  int64_t batcher_batch = 0;
  int64_t batcher_group = 1;       // the epoch's batch order (BatcherState::group, phase); 1, 0 in progress files
  int64_t batcher_phase = 0;       // older than the fields, whose runs shuffled every batch on its own
  std::map<std::string, double> best;  // best validation value per metric
  std::map<std::string, double> last;  // last validation value per metric
  int64_t stalled = 0;             // validations without improvement of the first metric (--early-stopping)
  double seconds = 0;              // training time so far
  // fp16 dynamic loss scaling (LossScaler): the scale and the good updates since it last changed. 0 = none saved
  // (fp32/bf16 runs and progress files older than the field); written only when positive.
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0;
  // What identifies the source and target vocabularies the weights were trained with (lstrain stores a
  // fingerprint of each SentencePiece model); empty in progress files older than the field.
  std::vector<std::string> vocabs;

  std::string to_yaml() const;
  // Reads and checks every field: its type, its range (counts are not negative, batcher-epoch is at least 1, values
  // are finite) and that the counts agree with each other. A damaged file -> lseq::Error naming the file, the
  // field and a short excerpt of its value.
  static TrainingProgress from_yaml(const std::string& text, const std::string& path);
};

}  // namespace lseq

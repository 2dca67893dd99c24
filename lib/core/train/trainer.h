#pragma once
// The training loop of lstrain: batches from the batcher, forward+backward with gradient accumulation
// (--optimizer-delay), one optimizer update, and on schedule: a log line, validation, a checkpoint; until --after,
// early stopping or a stop signal. Resuming from the model directory continues exactly where the checkpoint was
// taken (same batches, same dropout masks, same optimizer state). Over several devices (data parallelism), each
// update sums the gradients, losses and token counts of all ranks, so it is the update of one batch of all their
// batches; the micro-batch counter (the dropout key) counts global batches, rank r's being counter + r.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "core/model/model.h"
#include "core/train/data_parallel.h"
#include "core/train/frequency.h"
#include "core/train/loss_scaler.h"
#include "core/train/lr_schedule.h"
#include "core/train/optimizer.h"
#include "core/train/validator.h"
#include "data/batcher.h"
#include "kernels/workspace.h"

namespace lseq {

struct TrainerOptions {
  uint64_t seed = 1234;
  int optimizer_delay = 1;
  Frequency disp_freq, save_freq, valid_freq;
  Frequency after;              // --after (and --after-epochs/--after-batches folded in)
  int early_stopping = 10;      // validations without improvement of the first metric
  bool keep_best = false;
  // Consecutive non-finite updates before giving up. In fp16 an update skipped for a gradient overflow lowers the
  // loss scale instead and does not count, unless the lowered scale is below 1 (then it is real divergence);
  // a non-finite loss always counts.
  int max_nan_steps = 10;
  kernels::DType precision = kernels::DType::f32;  // --precision: fp16 turns on dynamic loss scaling
  LrSchedule lr;
  // --cost-type: what the gradient is the gradient of. The model's gradients are sums over target tokens; the
  // update divides them by the tokens (ce-mean-words), the sentences (ce-mean) or nothing (ce-sum); perplexity is
  // exp(ce-mean-words), whose gradient is that of ce-mean-words times the perplexity.
  enum class Cost { ce_mean_words, ce_mean, ce_sum, perplexity };
  Cost cost = Cost::ce_mean_words;
  std::string valid_log;  // --valid-log: also append the validation lines to this file (rank 0)
  std::vector<std::string> vocabs;  // the vocabularies' identities, stored in each checkpoint's progress
  // Data parallelism (DataParallel): the communicator of this process's job, null for a single process. Rank 0
  // alone writes checkpoints and best models; every rank takes the same decisions from the job's totals.
  kernels::Communicator* comm = nullptr;
  GradientSyncOptions sync;
  // --pretrained-model: a new run's first weights (flat, in the table's layout); empty: drawn from `seed`.
  std::vector<float> initial_weights;
};

// The factor on the model's summed gradients for one update under --cost-type (TrainerOptions::Cost):
// 1/target_tokens (ce-mean-words), 1/sentences (ce-mean; at least one), 1 (ce-sum), or
// exp(loss_sum/target_tokens)/target_tokens (perplexity). target_tokens must be positive.
double cost_gradient_scale(TrainerOptions::Cost cost, double loss_sum, int64_t target_tokens, int64_t sentences);

struct TrainResult {
  int64_t updates = 0;
  std::string stop_reason;  // "after", "early-stopping", "signal"
};

// A checkpoint's batcher position (its progress) must lie within its epoch: else lseq::Error naming the progress file
// and --no-restore-corpus. Trainer::start checks it; lstrain also checks it before it writes anything.
void check_batcher_position(const data::Batcher& batcher, const TrainingProgress& progress,
                            const std::string& checkpoint_dir);

class Trainer {
 public:
  Trainer(Model& model, data::Batcher& batcher, Optimizer& optimizer, kernels::Workspace& workspace,
          ModelDir model_dir, Validator* validator, TrainerOptions options);

  // Loads the named checkpoint of the model directory (restore_data: also the batcher state, whose position must lie
  // within its epoch), or with an empty name initialises the parameters from the seed. Writes nothing.
  void start(const std::string& checkpoint, bool restore_data);
  TrainResult run();
  void save();  // a checkpoint of the current state, unless one of this update is saved already

  const TrainingProgress& progress() const { return progress_; }
  const LossScaler& loss_scaler() const { return scaler_; }

 private:
  void update();                          // one optimizer update over optimizer_delay batches
  void display();
  void validate();
  std::map<std::string, double> validate_smoothed();  // the validator's metrics, on the smoothed weights if any
  Progress progress_marks() const;
  bool should_stop(std::string& reason) const;
  bool last_step_skipped() const;         // the one host read per update (see trainer.cpp)
  std::string saved_state() const;        // what the model directory keeps, for an error that stops the run

  Model& model_;
  data::Batcher& batcher_;
  Optimizer& optimizer_;
  kernels::Workspace& workspace_;
  ModelDir model_dir_;
  Validator* validator_;
  TrainerOptions options_;
  TrainingProgress progress_;
  LossScaler scaler_;
  DataParallel parallel_;
  bool stop_asked_ = false;  // a rank was asked to stop (data parallelism: the flag of the last update's totals)
  double comm_wait_before_ = 0;  // DataParallel::comm_wait_seconds() at the window's start

  // Since the last log line.
  double window_loss_ = 0, window_nll_ = 0;
  int64_t window_tokens_ = 0, window_sentences_ = 0, window_updates_ = 0;
  double window_start_ = 0;
  int64_t last_validated_ = -1;
  int64_t last_saved_ = -1;  // the update of the newest checkpoint in the model directory; -1: none yet
  int nan_steps_in_row_ = 0;
  int64_t nan_steps_total_ = 0;
  int64_t overflow_steps_total_ = 0;  // fp16 updates skipped for a gradient overflow (not counted as NaN steps)
  double run_start_ = 0, seconds_before_ = 0;
};

}  // namespace lseq

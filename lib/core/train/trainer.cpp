#include "core/train/trainer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>

#include "core/train/stop_signal.h"
#include "util/error.h"

namespace lseq {

namespace {

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

bool all_finite(const std::vector<float>& values) {
  for (float x : values) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

}  // namespace

double cost_gradient_scale(TrainerOptions::Cost cost, double loss_sum, int64_t target_tokens, int64_t sentences) {
  const double tokens = static_cast<double>(target_tokens);
  switch (cost) {
    case TrainerOptions::Cost::ce_mean_words: return 1.0 / tokens;
    case TrainerOptions::Cost::ce_mean: return 1.0 / static_cast<double>(std::max<int64_t>(sentences, 1));
    case TrainerOptions::Cost::ce_sum: return 1.0;
    case TrainerOptions::Cost::perplexity: return std::exp(loss_sum / tokens) / tokens;
  }
  return 1.0 / tokens;
}

void check_batcher_position(const data::Batcher& batcher, const TrainingProgress& progress,
                            const std::string& checkpoint_dir) {
  // A position past the end of its epoch would silently skip the rest of it.
  const int64_t batches = batcher.batches_in_epoch(progress.batcher_epoch);
  if (progress.batcher_batch > batches) {
    fail("progress file '{}/progress.yml' has batcher-batch {}, but epoch {} has {} batches: the file is damaged "
         "or the corpus or batch options changed; resume with --no-restore-corpus to start the data afresh",
         checkpoint_dir, progress.batcher_batch, progress.batcher_epoch, batches);
  }
}

Trainer::Trainer(Model& model, data::Batcher& batcher, Optimizer& optimizer,
                 kernels::Workspace& workspace, ModelDir model_dir, Validator* validator, TrainerOptions options)
    : model_(model), batcher_(batcher), optimizer_(optimizer), workspace_(workspace),
      model_dir_(std::move(model_dir)), validator_(validator), options_(std::move(options)),
      scaler_(options_.precision == kernels::DType::f16), parallel_(model, options_.comm, options_.sync) {}

void Trainer::start(const std::string& checkpoint, bool restore_data) {
  if (checkpoint.empty()) {
    // The same seed (or pretrained file) on every rank: the same weights (the sharded optimizer takes its shard of
    // the master).
    const std::vector<float> initial =
        options_.initial_weights.empty() ? model_.initial_params(options_.seed) : std::move(options_.initial_weights);
    model_.load_params(initial);
    optimizer_.load_master(initial);
    optimizer_.start_smoothing_from(model_.master());
    progress_.vocabs = options_.vocabs;
    parallel_.check_same_start(-1);
    return;
  }
  CheckpointTensors tensors;
  const ParamTable& table = model_.param_store().table();
  model_dir_.load_checkpoint(checkpoint, table, model_.config(), tensors, progress_);
  if (restore_data) check_batcher_position(batcher_, progress_, model_dir_.checkpoint_dir(checkpoint));
  model_.load_params(tensors.params);
  optimizer_.load_master(tensors.params);
  if (progress_.loss_scale > 0) scaler_.restore(progress_.loss_scale, progress_.loss_scale_good_steps);
  optimizer_.import_state(tensors.adam_m, tensors.adam_v, tensors.smoothed, progress_.optimizer_steps);
  if (optimizer_.smoothing() && tensors.smoothed.empty()) optimizer_.start_smoothing_from(model_.master());
  if (restore_data) {
    data::BatcherState s;
    s.epoch = progress_.batcher_epoch;
    s.batch_in_epoch = progress_.batcher_batch;
    s.group = progress_.batcher_group;
    s.phase = progress_.batcher_phase;
    batcher_.restore(s);
  }
  progress_.vocabs = options_.vocabs;
  last_saved_ = progress_.updates;
  parallel_.check_same_start(progress_.updates);
  spdlog::info("resumed from {} at update {} (epoch {}, {} target tokens so far)",
               model_dir_.checkpoint_dir(checkpoint), progress_.updates, progress_.batcher_epoch,
               progress_.target_tokens);
}

// What is true about the saved state when a run stops on an error.
std::string Trainer::saved_state() const {
  if (last_saved_ < 0) {
    return fmt::format("no checkpoint was saved yet, so '{}' holds no weights of this run", model_dir_.path());
  }
  return fmt::format("the checkpoint of update {} in '{}' is kept", last_saved_, model_dir_.path());
}

// Reads the optimizer's device-side skip decision: a host synchronisation every update, kept in this one place
// until the step runs without it (the loss sums already come back each micro-batch).
bool Trainer::last_step_skipped() const { return optimizer_.last_step_skipped(); }

Progress Trainer::progress_marks() const {
  return {progress_.updates, progress_.epochs_done, progress_.target_tokens};
}

void Trainer::update() {
  model_.zero_grads();
  // fp16: gradients carry the loss scale S through backward; the optimizer divides it out (1 / (S * tokens)).
  const float loss_scale = static_cast<float>(scaler_.scale());
  StepLoss total;
  int64_t sentences = 0;
  bool epoch_ended = false;
  for (int i = 0; i < options_.optimizer_delay; ++i) {
    const data::Batch batch = batcher_.next();
    // The last batch's backward starts the gradient exchange (data parallelism).
    if (i + 1 == options_.optimizer_delay) parallel_.arm();
    // Dropout masks are keyed by the micro-batch counter, which a resumed run restores; it counts the batches of
    // all ranks, and this rank's is its rank-th of the round (data::Batcher), so a world of W draws the masks one
    // rank with --optimizer-delay W draws.
    const uint64_t key = static_cast<uint64_t>(progress_.batches + parallel_.rank());
    const StepLoss loss = model_.forward_backward(batch, options_.seed, key, loss_scale, workspace_);
    progress_.batches += parallel_.ranks();
    total.loss_sum += loss.loss_sum;
    total.nll_sum += loss.nll_sum;
    total.target_tokens += loss.target_tokens;
    sentences += batch.size;
    if (batcher_.epoch_finished()) epoch_ended = true;
  }
  if (parallel_.active()) {
    parallel_.finish();
    optimizer_.start_norm(model_.grads());  // sharded: its launch overlaps the last buckets, not the idle device
    // The job's totals: the loss of the global batch, its tokens (the optimizer's 1 / tokens), whether to stop.
    DataParallel::Totals mine;
    mine.loss_sum = total.loss_sum;
    mine.nll_sum = total.nll_sum;
    mine.target_tokens = static_cast<double>(total.target_tokens);
    mine.sentences = static_cast<double>(sentences);
    mine.stop = stop_requested();
    const DataParallel::Totals all = parallel_.sum(mine);
    total.loss_sum = all.loss_sum;
    total.nll_sum = all.nll_sum;
    total.target_tokens = static_cast<int64_t>(all.target_tokens);
    sentences = static_cast<int64_t>(all.sentences);
    stop_asked_ = all.stop;
  }
  const data::BatcherState state = batcher_.state();
  progress_.batcher_epoch = state.epoch;
  progress_.batcher_batch = state.batch_in_epoch;
  progress_.batcher_group = state.group;
  progress_.batcher_phase = state.phase;
  if (epoch_ended) {
    ++progress_.epochs_done;
    spdlog::info("epoch {} finished", progress_.epochs_done);
  }

  // Gradients are sums over target tokens: the optimizer scales them to a per-token mean.
  const bool finite_loss = std::isfinite(total.loss_sum);
  bool skipped = !finite_loss || total.target_tokens == 0;
  bool overflow = false;  // fp16: the loss was finite but the scaled gradient overflowed
  if (!skipped) {
    const double lr =
        options_.lr.at(Progress{progress_.updates + 1, progress_.epochs_done, progress_.target_tokens});
    ParamStore& store = model_.param_store();
    const double per_gradient = cost_gradient_scale(options_.cost, total.loss_sum, total.target_tokens, sentences);
    optimizer_.step(model_.master(), model_.grads(), static_cast<float>(per_gradient / loss_scale), lr,
                    store.working_dtype(), store.separate_working());
    skipped = last_step_skipped();
    overflow = skipped && scaler_.dynamic();
    if (skipped) {
      optimizer_.uncount_skipped_step();
    } else {
      ++progress_.optimizer_steps;
    }
  }
  if (!skipped || overflow) {
    if (scaler_.update(overflow)) {
      if (overflow) {
        spdlog::info("fp16: overflow at update {}, loss scale lowered to {}", progress_.updates + 1, scaler_.scale());
      } else {
        spdlog::info("fp16: {} good updates, loss scale raised to {}", LossScaler::kGrowthInterval, scaler_.scale());
      }
    }
  }
  if (skipped) {
    // The --max-nan-steps rule: a non-finite loss always counts, and so does a non-finite gradient in fp32/bf16;
    // an fp16 overflow counts only when the lowered scale is below 1 (it overflowed at S <= 1: scaling no longer
    // explains it, the gradients themselves blow up). Uncounted overflows leave the run of NaN steps as it is.
    if (overflow && !scaler_.overflow_is_divergence()) {
      ++overflow_steps_total_;
      return;
    }
    ++nan_steps_in_row_;
    ++nan_steps_total_;
    spdlog::warn("update {} skipped: the loss or the gradient is not finite ({} in a row, {} in all)",
                 progress_.updates + 1, nan_steps_in_row_, nan_steps_total_);
    if (nan_steps_in_row_ >= options_.max_nan_steps) {
      fail("training diverged: {} updates in a row had a non-finite loss or gradient (--max-nan-steps); {}. Lower "
           "--learn-rate, raise --lr-warmup or set --clip-norm",
           nan_steps_in_row_, saved_state());
    }
    return;
  }
  nan_steps_in_row_ = 0;
  ++progress_.updates;
  progress_.target_tokens += total.target_tokens;
  window_loss_ += total.loss_sum;
  window_nll_ += total.nll_sum;
  window_tokens_ += total.target_tokens;
  window_sentences_ += sentences;
  ++window_updates_;
}

void Trainer::display() {
  if (window_updates_ == 0) return;
  const double elapsed = now_seconds() - window_start_;
  const double tokens = static_cast<double>(window_tokens_);
  // Over several devices the counts are the whole job's (words/s: the job's throughput), and "Comm" is the share
  // of the time this rank's device stood waiting for gradients or weights from the others.
  std::string comm;
  if (parallel_.active()) {
    const double waited = parallel_.comm_wait_seconds();
    comm = fmt::format(" : Comm {:.1f}%", 100.0 * (waited - comm_wait_before_) / std::max(elapsed, 1e-9));
    comm_wait_before_ = waited;
  }
  spdlog::info("Ep. {} : Up. {} : Sen. {} : Cost {:.5f} : PPL {:.2f} : Time {:.2f}s : {:.1f} words/s : "
               "L.r. {:.4e} : gNorm {:.4f}{}",
               progress_.batcher_epoch, progress_.updates, window_sentences_, window_loss_ / tokens,
               std::exp(window_nll_ / tokens), elapsed, tokens / std::max(elapsed, 1e-9),
               options_.lr.at(progress_marks()), optimizer_.last_grad_norm(), comm);
  window_loss_ = window_nll_ = 0;
  window_tokens_ = window_sentences_ = window_updates_ = 0;
  window_start_ = now_seconds();
}

// With --exponential-smoothing, validation scores the smoothed weights, as Marian does: they are what
// model.safetensors and model.best-* hold. They take the master's place (and the working copy's) for the run.
// Every rank validates (the same weights, the same numbers); rank 0's values are the ones every rank then uses, so
// that early stopping and the best scores stay the same everywhere.
std::map<std::string, double> Trainer::validate_smoothed() {
  validator_->set_point({progress_.batcher_epoch, progress_.batcher_batch, progress_.updates, progress_.target_tokens});
  auto swap = [&] {
    ParamStore& store = model_.param_store();
    optimizer_.swap_smoothed(model_.master(), store.working_dtype(), store.separate_working());
  };
  if (!optimizer_.smoothing()) return parallel_.from_rank0(validator_->run(model_, workspace_));
  swap();
  std::map<std::string, double> values;
  try {
    values = validator_->run(model_, workspace_);
  } catch (...) {
    swap();
    throw;
  }
  swap();
  return parallel_.from_rank0(values);
}

namespace {

// --valid-log: the validation line with a time stamp, as Marian's valid.log has it ("[date time] [valid] ...").
void append_valid_log(const std::string& path, const std::string& line) {
  std::ofstream out(path, std::ios::app);
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  out << "[" << stamp << "] [valid] " << line << "\n";
  if (!out) fail("cannot append to --valid-log '{}'; check the path and its permissions", path);
}

}  // namespace

void Trainer::validate() {
  if (!validator_) return;
  const std::map<std::string, double> values = validate_smoothed();
  const std::string& first = validator_->metrics().front();
  for (const std::string& metric : validator_->metrics()) {
    const double value = values.at(metric);
    const auto best = progress_.best.find(metric);
    const bool better = best == progress_.best.end() ||
                        (Validator::lower_is_better(metric) ? value < best->second : value > best->second);
    if (better) {
      progress_.best[metric] = value;
      if (options_.keep_best) {
        std::vector<float> params;  // sharded: gathered from every rank
        optimizer_.weights_to_host(model_.master(), optimizer_.smoothing(), params);
        if (parallel_.rank() == 0) {
          save_weights(model_dir_.file("model.best-" + metric + ".safetensors"), model_.param_store().table(),
                       model_.config(), params, progress_.updates);
        }
      }
    }
    if (metric == first) progress_.stalled = better ? 0 : progress_.stalled + 1;
    progress_.last[metric] = value;
    const std::string line =
        fmt::format("Ep. {} : Up. {} : {} : {:.4f} : {}", progress_.batcher_epoch, progress_.updates, metric, value,
                    better ? "new best" : fmt::format("stalled {} times", metric == first ? progress_.stalled : 0));
    spdlog::info("{}", line);
    if (!options_.valid_log.empty() && parallel_.rank() == 0) append_valid_log(options_.valid_log, line);
  }
}

void Trainer::save() {
  if (last_saved_ == progress_.updates) return;
  // Sharded, the master and the optimizer state are gathered from every rank (every rank takes part); rank 0
  // alone writes the one checkpoint, in the format every world size reads.
  CheckpointTensors tensors;
  optimizer_.weights_to_host(model_.master(), false, tensors.params);
  if (!all_finite(tensors.params)) {
    fail("the parameters at update {} are not finite and are not saved; {}", progress_.updates, saved_state());
  }
  optimizer_.export_state(tensors.adam_m, tensors.adam_v, tensors.smoothed);
  progress_.seconds = seconds_before_ + (now_seconds() - run_start_);
  progress_.loss_scale = scaler_.dynamic() ? scaler_.scale() : 0.0;
  progress_.loss_scale_good_steps = scaler_.dynamic() ? scaler_.good_steps() : 0;
  if (parallel_.rank() == 0) {
    model_dir_.save_checkpoint(model_.param_store().table(), model_.config(), tensors, progress_);
    spdlog::info("saved checkpoint at update {} to {}", progress_.updates, model_dir_.path());
  }
  last_saved_ = progress_.updates;
}

bool Trainer::should_stop(std::string& reason) const {
  // Over several devices only the flag all ranks share, so that all stop after the same update.
  if (parallel_.active() ? stop_asked_ : stop_requested()) {
    reason = "signal";
    return true;
  }
  if (options_.after.reached(progress_marks())) {
    reason = "after";
    return true;
  }
  if (validator_ && options_.early_stopping > 0 && progress_.stalled >= options_.early_stopping) {
    reason = "early-stopping";
    return true;
  }
  return false;
}

TrainResult Trainer::run() {
  defer_stop_signals();  // from here on a signal means: save a checkpoint, then stop
  run_start_ = window_start_ = now_seconds();
  seconds_before_ = progress_.seconds;
  TrainResult result;
  while (!should_stop(result.stop_reason)) {
    const Progress before = progress_marks();
    update();
    const Progress now = progress_marks();
    if (options_.disp_freq.crossed(before, now)) display();
    if (options_.valid_freq.crossed(before, now)) {
      validate();
      last_validated_ = progress_.updates;
    }
    if (options_.save_freq.crossed(before, now)) save();
  }
  display();
  if (result.stop_reason != "signal" && last_validated_ != progress_.updates) validate();
  if (result.stop_reason == "signal") {
    const int signal = stop_signal_number();
    spdlog::warn("{}: {}; run the same command again to resume",
                 signal != 0 ? fmt::format("stopping on signal {}", signal)
                             : std::string("stopping: another rank got a stop signal"),
                 last_saved_ == progress_.updates ? "the checkpoint of this update is saved already"
                                                  : "saving a checkpoint");
  }
  save();
  result.updates = progress_.updates;
  spdlog::info("training finished after {} updates ({}); {} skipped non-finite updates", progress_.updates,
               result.stop_reason, nan_steps_total_);
  if (scaler_.dynamic()) {
    spdlog::info("fp16: {} updates skipped for gradient overflow; final loss scale {}", overflow_steps_total_,
                 scaler_.scale());
  }
  return result;
}

}  // namespace lseq

#pragma once
// Synchronous data parallelism as the trainer sees it (Marian's --sync-sgd): one process per device, each with its
// own batches (data::Batcher's rounds); per update, the last batch's backward hands its finished gradients to the
// exchange (GradientSync) while it runs, the backend waits for the sums before the optimizer, and one small
// exchange of host values gives every rank the update's totals: losses and token counts of the global batch (so
// logging, the learning-rate schedule and the optimizer's 1 / tokens are those of one big batch), and whether any
// rank was asked to stop (a signal to any rank stops all after the same update). Every decision the trainer takes
// from these is then the same on every rank, so they stay in step. With one rank everything here is a no-op.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/model/model.h"
#include "core/train/gradient_sync.h"
#include "kernels/communicator.h"

namespace lseq {

class DataParallel {
 public:
  // comm: null for a single process.
  DataParallel(Model& model, kernels::Communicator* comm, GradientSyncOptions sync);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  bool active() const { return comm_ != nullptr; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  int ranks() const { return comm_ ? comm_->size() : 1; }
  kernels::Communicator* communicator() const { return comm_; }

  // Before the update's last forward_backward: its backward starts the gradient exchange.
  void arm();
  // After it: the rest of the exchange; the backend's later ops see the sums.
  void finish();

  struct Totals {
    double loss_sum = 0, nll_sum = 0;
    double target_tokens = 0, sentences = 0;
    bool stop = false;  // any rank was asked to stop
  };
  // This rank's share in, the job's totals out (the same on every rank).
  Totals sum(const Totals& mine);
  // Rank 0's values on every rank (validation scores: every rank then takes the same decisions).
  std::map<std::string, double> from_rank0(const std::map<std::string, double>& values);
  // Fails on this rank when it starts from another checkpoint than rank 0 (update; -1: a fresh start): on
  // several machines the model directory must be one that all of them see.
  void check_same_start(int64_t update);

  // Seconds the device stood waiting for communication so far (Communicator::waited_seconds).
  double comm_wait_seconds() const;

 private:
  Model& model_;
  kernels::Communicator* comm_;
  std::unique_ptr<GradientSync> sync_;
  float* window_ = nullptr;  // the store's gradients in the communicator's window (allocate_window), or null
};

}  // namespace lseq

#pragma once
// A thread that owns a StepModel (lsserve runs --decoders of them, each with its own backend and stream): it takes
// batches from the scheduler back to back, runs beam search or sampling on each, and hands every sentence's n-best
// list to its request. With continuous batching (beam search over a model that can admit sentences), a batch's
// search also takes the scheduler's waiting sentences of the same search as its own sentences finish
// (Scheduler::take_joining), so that requests arriving meanwhile do not wait for the batch's longest output. The
// model was planned for the largest batch the scheduler may form (--mini-batch sentences x --beam-size hypotheses,
// --max-length tokens), so serving allocates nothing on the device. A batch that fails (an lseq::Error, a device
// error) answers its sentences with the error, is logged, and the thread goes on. It ends when the scheduler is
// closed and empty.
#include <thread>

#include "core/search/step_model.h"
#include "core/serve/scheduler.h"
#include "core/serve/serve_metrics.h"

namespace lseq::serve {

class DecodeWorker {
 public:
  DecodeWorker(StepModel& model, Scheduler& scheduler, ServeMetrics& metrics, bool continuous = true);
  ~DecodeWorker();  // joins (close the scheduler first)
  DecodeWorker(const DecodeWorker&) = delete;
  DecodeWorker& operator=(const DecodeWorker&) = delete;

  void start();
  void join();

  // Decodes one batch and delivers its results (what the thread does with each batch; tests call it directly).
  void decode(ScheduledBatch& scheduled);
  // The same as one continuous search: starts with `first`, takes joining sentences while it runs, and returns when
  // it has run out.
  void decode_continuously(ScheduledBatch& first);

 private:
  void run();

  StepModel& model_;
  Scheduler& scheduler_;
  ServeMetrics& metrics_;
  const bool continuous_;
  std::thread thread_;
};

}  // namespace lseq::serve

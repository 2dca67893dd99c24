#pragma once
// A thread that owns a StepModel (lsserve runs --decoders of them, each with its own backend and stream): it takes
// batches from the scheduler back to back, runs beam search or sampling on each, and hands every sentence's n-best
// list to its request. The model was planned for the largest batch the scheduler may form (--mini-batch sentences x
// --beam-size hypotheses, --max-length tokens), so serving allocates nothing on the device. A batch that fails (an
// lseq::Error, a device error) answers its sentences with the error, is logged, and the thread goes on. It ends
// when the scheduler is closed and empty.
#include <thread>

#include "core/search/step_model.h"
#include "core/serve/scheduler.h"
#include "core/serve/serve_metrics.h"

namespace lseq::serve {

class DecodeWorker {
 public:
  DecodeWorker(StepModel& model, Scheduler& scheduler, ServeMetrics& metrics);
  ~DecodeWorker();  // joins (close the scheduler first)
  DecodeWorker(const DecodeWorker&) = delete;
  DecodeWorker& operator=(const DecodeWorker&) = delete;

  void start();
  void join();

  // Decodes one batch and delivers its results (what the thread does with each batch; tests call it directly).
  void decode(ScheduledBatch& scheduled);

 private:
  void run();

  StepModel& model_;
  Scheduler& scheduler_;
  ServeMetrics& metrics_;
  std::thread thread_;
};

}  // namespace lseq::serve

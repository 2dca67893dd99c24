#pragma once
// This process's place in a data-parallel job and everything that connects it to the others: the rendezvous with
// rank 0 (rendezvous.h), the rank-failure monitor (rank_monitor.h) and the communicator over the backend: NCCL on
// the GPU (rank 0 makes its unique id and the rendezvous hands it out), TCP between the processes on the CPU
// (tcp_communicator.h). When any rank fails, this one aborts its communicator (a collective in progress ends, the
// next call throws with the reason) and, should it not stop by itself within the grace time (stuck in a long
// computation or in the driver), ends the process with that reason on stderr: no rank outlives a failed job for long.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/dist/launch_env.h"
#include "core/dist/rank_monitor.h"
#include "core/dist/rendezvous.h"
#include "core/dist/socket.h"
#include "kernels/backend.h"
#include "kernels/communicator.h"

namespace lseq::dist {

struct ProcessGroupOptions {
  double connect_timeout_s = 300;  // the rendezvous: reaching rank 0, all ranks arriving
  double timeout_s = 600;          // a collective that moves nothing for this long fails (--dist-timeout)
  double grace_s = 20;             // after a rank failure, how long this process may take to stop by itself
                                   // (<= 0: no limit; tests that fail ranks on purpose)
  std::string fingerprint;         // must be equal on every rank (the version)
  // --sync-ctas: NCCL's blocks beside backward and when alone (kernels::NcclOptions); empty: the measured
  // numbers within one machine, NCCL's choice across machines.
  std::vector<int64_t> sync_ctas;
};

// Fails on a --sync-ctas that is not empty or two numbers.
void check_sync_ctas(const std::vector<int64_t>& sync_ctas);
// The NCCL options of this job's communicator; fails as check_sync_ctas does.
kernels::NcclOptions nccl_options(const LaunchEnv& env, const ProcessGroupOptions& options);

class ProcessGroup {
 public:
  // Joins the job `env` describes. kind: "cuda" (NCCL) or "cpu" (TCP); every rank must say the same.
  ProcessGroup(const LaunchEnv& env, const std::string& kind, ProcessGroupOptions options);
  ~ProcessGroup();  // a normal end says goodbye; during an exception, the others learn that this rank failed
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int size() const { return env_.world; }
  const LaunchEnv& env() const { return env_; }

  // The communicator over `backend` (a collective: every rank calls it once); null in a world of one rank.
  kernels::Communicator* connect(kernels::Backend& backend);
  kernels::Communicator* communicator() const { return communicator_.get(); }

  // Set-up that only rank 0 does (the model directory, vocabularies, the corpus cache): the others wait for it.
  void release_others();  // rank 0, when the files are ready
  void wait_for_rank0();  // the other ranks; throws when a rank fails first
  // This rank stops on an error: the others learn why (the first failure is what every rank reports).
  void report_failure(const std::string& message);
  // Whether another rank failed first (this one stops because of it), waiting up to `seconds` for the news: an
  // error of this rank's collective can come before the monitor has read why.
  bool failed_elsewhere(double seconds = 0) const {
    return monitor_ && monitor_->wait_for_failure_elsewhere(seconds);
  }

 private:
  void on_rank_failure(const std::string& reason);

  LaunchEnv env_;
  std::string kind_;
  ProcessGroupOptions options_;
  std::string payload_;  // the NCCL id
  Socket data_listener_;  // the CPU communicator's port
  std::vector<RankAddress> addresses_;
  std::unique_ptr<RankMonitor> monitor_;
  std::mutex communicator_mutex_;
  std::unique_ptr<kernels::Communicator> communicator_;
  std::atomic<bool> failed_{false};
};

}  // namespace lseq::dist

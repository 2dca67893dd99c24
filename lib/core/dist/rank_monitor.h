#pragma once
// Watches the other ranks of a job through the control sockets of the rendezvous (each rank's connection to rank 0)
// on a thread of its own, so that a rank that dies or fails stops the whole job within a bounded time wherever the
// others are (computing, in a collective, waiting for set-up):
// - a connection that closes without a goodbye means that rank stopped (crashed, was killed);
// - a rank that fails on an error tells rank 0 why before it exits (report_failure);
// rank 0 passes either on to every other rank, so that every rank's message names the rank that failed first, and
// each rank's handler runs once with that message (the process group aborts its communicator and exits).
// The same sockets carry rank 0's release after set-up (it prepares the files the others then read).
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/dist/socket.h"

namespace lseq::dist {

class RankMonitor {
 public:
  using Handler = std::function<void(const std::string& reason)>;
  // control: as Rendezvous::control. on_failure runs on the monitor's thread, at most once.
  RankMonitor(int rank, int world, std::vector<Socket> control, Handler on_failure);
  ~RankMonitor();  // says goodbye (a normal end) and stops the thread
  RankMonitor(const RankMonitor&) = delete;
  RankMonitor& operator=(const RankMonitor&) = delete;

  // Rank 0: set-up is done, the others may go on.
  void release();
  // Other ranks: blocks until rank 0 releases; throws lseq::Error when a rank fails first. No time-out: rank 0 may
  // take long (training vocabularies, encoding the corpus), and its failure or death ends the wait.
  void wait_for_release();
  // This rank stops on an error: tells the others why (best effort, bounded), before the process exits.
  void report_failure(const std::string& message);
  // Whether a failure was seen, and its reason; whether it was another rank's (not report_failure's).
  bool failed() const;
  std::string failure() const;
  bool failed_elsewhere() const;
  // Waits up to `seconds` for another rank's failure to arrive (an error here may be the echo of one that the
  // monitor has not read yet); returns failed_elsewhere().
  bool wait_for_failure_elsewhere(double seconds);

 private:
  void run();
  void send(int to, char type, const std::string& text);
  void fail_job(const std::string& reason);  // once: forward (rank 0), remember, run the handler

  int rank_, world_;
  std::vector<Socket> control_;
  Handler on_failure_;
  std::vector<bool> said_goodbye_;
  int wake_[2] = {-1, -1};  // a pipe that stops the thread
  mutable std::mutex mutex_;
  std::mutex send_mutex_;
  std::condition_variable changed_;
  bool released_ = false, failed_ = false, stopping_ = false, elsewhere_ = false;
  std::string failure_;
  std::thread thread_;
};

}  // namespace lseq::dist

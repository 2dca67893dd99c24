#include "core/dist/rank_monitor.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

#include "util/error.h"

namespace lseq::dist {

namespace {
constexpr char kGo = 'G', kBye = 'B', kFail = 'F';
constexpr double kMessageTimeout = 5.0;  // a message's bytes arrive together: a short limit
}  // namespace

RankMonitor::RankMonitor(int rank, int world, std::vector<Socket> control, Handler on_failure)
    : rank_(rank), world_(world), control_(std::move(control)), on_failure_(std::move(on_failure)),
      said_goodbye_(control_.size(), false) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) fail("cannot create a pipe for the rank monitor");
  thread_ = std::thread([this] { run(); });
}

RankMonitor::~RankMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  if (!failed()) {
    // A normal end: goodbye to rank 0, or from rank 0 to everyone.
    std::vector<bool> gone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gone = said_goodbye_;
    }
    for (std::size_t r = 0; r < control_.size(); ++r) {
      if (control_[r].valid() && !gone[r]) {
        try {
          send(static_cast<int>(r), kBye, "");
        } catch (const Error&) {
        }
      }
    }
  }
  const char stop = 1;
  ssize_t ignored = ::write(wake_[1], &stop, 1);
  (void)ignored;
  if (thread_.joinable()) thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void RankMonitor::send(int to, char type, const std::string& text) {
  std::lock_guard<std::mutex> lock(send_mutex_);
  const Socket& s = control_[static_cast<std::size_t>(to)];
  if (!s.valid()) return;
  const uint32_t n = static_cast<uint32_t>(text.size());
  std::string bytes(1, type);
  bytes.append(reinterpret_cast<const char*>(&n), sizeof n);
  bytes += text;
  send_exact(s, bytes.data(), bytes.size(), kMessageTimeout, to == 0 ? "rank 0" : fmt::format("rank {}", to));
}

void RankMonitor::release() {
  for (int r = 1; r < world_; ++r) send(r, kGo, "");
}

void RankMonitor::wait_for_release() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return released_ || failed_; });
  if (failed_) throw Error(failure_);
}

void RankMonitor::report_failure(const std::string& message) {
  if (failed()) return;  // the job already knows what failed first
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_ = true;  // this rank's own failure: no handler, the process is exiting
    failure_ = message;
  }
  const std::string text = fmt::format("rank {} failed: {}", rank_, message);
  for (std::size_t r = 0; r < control_.size(); ++r) {
    if (static_cast<int>(r) == rank_ || !control_[r].valid()) continue;
    try {
      send(static_cast<int>(r), kFail, text);
    } catch (const Error&) {
    }
  }
}

bool RankMonitor::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_;
}

std::string RankMonitor::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

bool RankMonitor::failed_elsewhere() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return elsewhere_;
}

bool RankMonitor::wait_for_failure_elsewhere(double seconds) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return failed_; });
  return elsewhere_;
}

void RankMonitor::fail_job(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || stopping_) return;
    failed_ = elsewhere_ = true;
    failure_ = reason;
  }
  changed_.notify_all();
  if (rank_ == 0) {
    std::vector<bool> gone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gone = said_goodbye_;
    }
    for (int r = 1; r < world_; ++r) {
      if (!control_[static_cast<std::size_t>(r)].valid() || gone[static_cast<std::size_t>(r)]) continue;
      try {
        send(r, kFail, reason);
      } catch (const Error&) {
      }
    }
  }
  if (on_failure_) on_failure_(reason);
}

void RankMonitor::run() {
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<int> ranks;
    fds.push_back({wake_[0], POLLIN, 0});
    ranks.push_back(-1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (std::size_t r = 0; r < control_.size(); ++r) {
        if (!control_[r].valid() || said_goodbye_[r] || static_cast<int>(r) == rank_) continue;
        fds.push_back({control_[r].fd(), POLLIN, 0});
        ranks.push_back(static_cast<int>(r));
      }
    }
    if (fds.size() == 1 && failed()) return;
    if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
    if (fds[0].revents != 0) return;
    for (std::size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int from = ranks[i];
      const std::size_t slot = static_cast<std::size_t>(from);
      const std::string who = fmt::format("rank {}", from);
      char type = 0;
      std::string text;
      try {
        uint32_t n = 0;
        recv_exact(control_[slot], &type, 1, kMessageTimeout, who);
        recv_exact(control_[slot], &n, sizeof n, kMessageTimeout, who);
        if (n > (1u << 16)) fail("{} sent a malformed message", who);
        text.resize(n);
        if (n > 0) recv_exact(control_[slot], text.data(), n, kMessageTimeout, who);
      } catch (const Error&) {
        bool stopping;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          said_goodbye_[slot] = true;  // no more reading from it
          stopping = stopping_;
        }
        if (!stopping) {
          fail_job(fmt::format("rank {} stopped unexpectedly (its connection closed: it crashed or was killed)", from));
        }
        continue;
      }
      if (type == kGo) {
        std::lock_guard<std::mutex> lock(mutex_);
        released_ = true;
        changed_.notify_all();
      } else if (type == kBye || type == kFail) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          said_goodbye_[slot] = true;
        }
        if (type == kFail) fail_job(text);
      }
    }
  }
}

}  // namespace lseq::dist

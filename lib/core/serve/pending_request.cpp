#include "core/serve/pending_request.h"

#include <algorithm>

#include "util/error.h"

namespace lseq::serve {

PendingRequest::PendingRequest(int sentences, TranslateSettings settings, Clock::time_point arrival)
    : settings_(std::move(settings)), arrival_(arrival), count_(sentences), entries_(static_cast<size_t>(sentences)),
      remaining_(sentences) {}

void PendingRequest::set_result(int index, NBestList list) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < 0 || index >= count_) fail("internal: result for sentence {} of a request of {}", index, count_);
  if (taken_) return;
  Entry& entry = entries_[static_cast<size_t>(index)];
  if (entry.done) return;
  entry.done = true;
  entry.list = std::move(list);
  if (--remaining_ == 0) changed_.notify_all();
}

void PendingRequest::set_error(int index, std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < 0 || index >= count_) fail("internal: error for sentence {} of a request of {}", index, count_);
  if (taken_) return;
  Entry& entry = entries_[static_cast<size_t>(index)];
  if (entry.done) return;
  entry.done = true;
  entry.error = std::move(message);
  if (--remaining_ == 0) changed_.notify_all();
}

PendingRequest::Outcome PendingRequest::wait(Clock::time_point deadline, const std::function<bool()>& connected,
                                             Clock::duration poll) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (remaining_ > 0) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return Outcome::timed_out;
    changed_.wait_until(lock, std::min(deadline, now + poll), [&] { return remaining_ == 0; });
    if (remaining_ == 0) break;
    if (connected) {
      lock.unlock();
      const bool alive = connected();
      lock.lock();
      if (!alive) return Outcome::disconnected;
    }
  }
  return Outcome::done;
}

std::vector<PendingRequest::Entry> PendingRequest::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  taken_ = true;
  return std::move(entries_);
}

}  // namespace lseq::serve

#include "core/serve/pending_request.h"

#include <algorithm>

#include "data/vocab.h"
#include "util/error.h"

namespace lseq::serve {

PendingRequest::PendingRequest(int sentences, TranslateSettings settings, Clock::time_point arrival, bool streaming)
    : settings_(std::move(settings)), arrival_(arrival), count_(sentences), entries_(static_cast<size_t>(sentences)),
      remaining_(sentences), streaming_(streaming) {
  if (streaming_) streamed_.resize(static_cast<size_t>(sentences));
}

void PendingRequest::set_result(int index, NBestList list) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < 0 || index >= count_) fail("internal: result for sentence {} of a request of {}", index, count_);
  if (taken_) return;
  Entry& entry = entries_[static_cast<size_t>(index)];
  if (entry.done) return;
  entry.done = true;
  entry.list = std::move(list);
  ++changes_;
  if (--remaining_ == 0 || streaming_) changed_.notify_all();
}

void PendingRequest::set_error(int index, std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < 0 || index >= count_) fail("internal: error for sentence {} of a request of {}", index, count_);
  if (taken_) return;
  Entry& entry = entries_[static_cast<size_t>(index)];
  if (entry.done) return;
  entry.done = true;
  entry.error = std::move(message);
  ++changes_;
  if (--remaining_ == 0 || streaming_) changed_.notify_all();
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

void PendingRequest::append_token(int index, int32_t token) {
  if (!streaming_ || token == data::kEosId) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < 0 || index >= count_) fail("internal: token for sentence {} of a request of {}", index, count_);
  if (taken_) return;
  streamed_[static_cast<size_t>(index)].push_back(token);
  ++changes_;
  changed_.notify_all();
}

PendingRequest::Outcome PendingRequest::wait_for_news(Clock::time_point deadline,
                                                      const std::function<bool()>& connected, Clock::duration poll,
                                                      uint64_t& seen) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (remaining_ > 0 && changes_ == seen) {
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return Outcome::timed_out;
    changed_.wait_until(lock, std::min(deadline, now + poll), [&] { return remaining_ == 0 || changes_ != seen; });
    if (remaining_ == 0 || changes_ != seen) break;
    if (connected) {
      lock.unlock();
      const bool alive = connected();
      lock.lock();
      if (!alive) return Outcome::disconnected;
    }
  }
  seen = changes_;
  return Outcome::done;
}

PendingRequest::Progress PendingRequest::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Progress p;
  p.tokens = streamed_;
  p.done.reserve(entries_.size());
  for (const Entry& entry : entries_) p.done.push_back(entry.done);
  p.all_done = remaining_ == 0;
  return p;
}

std::vector<PendingRequest::Entry> PendingRequest::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  taken_ = true;
  return std::move(entries_);
}

}  // namespace lseq::serve

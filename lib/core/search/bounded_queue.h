#pragma once
// A bounded FIFO between threads (translate_all's reader, decoders and writer). close(): no more items, but pop()
// still returns those queued; cancel(): the other side stopped, so queued items are dropped and push() and pop()
// return false from then on.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace lseq {

template <typename T>
class BoundedQueue {
 public:
  enum class Taken { item, none_yet, no_more };

  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}
  bool push(T item) {  // waits while full; false once cancelled
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return cancelled_ || items_.size() < capacity_; });
    if (cancelled_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }
  bool pop(T& item) {  // waits while empty and open; false once closed and empty, or cancelled
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return cancelled_ || closed_ || !items_.empty(); });
    return take_locked(item) == Taken::item;
  }
  Taken try_pop(T& item) {  // pop() without waiting: none_yet while empty and open
    std::lock_guard<std::mutex> lock(mutex_);
    return take_locked(item);
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    not_empty_.notify_all();
  }
  void cancel() {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    items_.clear();
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  Taken take_locked(T& item) {
    if (cancelled_) return Taken::no_more;
    if (items_.empty()) return closed_ ? Taken::no_more : Taken::none_yet;
    item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return Taken::item;
  }

  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool closed_ = false, cancelled_ = false;
};

}  // namespace lseq

#include "kernels/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace lseq::kernels::cpu {

namespace {

// How long a worker, or a caller waiting for its job's other parts, checks for news before it sleeps: a decoding
// step runs dozens of short jobs back to back (GEMMs of a few hundred rows), and a sleep and a wake-up between
// each cost more than the job. Short enough that an idle pool gives the cores back almost at once.
constexpr auto kSpin = std::chrono::microseconds(50);

// Spins until ready() or kSpin has passed (the caller then waits on its condition variable either way).
template <typename F>
void spin_until(F&& ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

class ThreadPool {
 public:
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void run(int parts, const std::function<void(int)>& body) {
    std::lock_guard<std::mutex> job_lock(job_mutex_);  // one job at a time
    grow(parts - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      parts_ = parts;
      next_part_ = 1;  // part 0 is the caller's
      pending_ = parts - 1;
      unfinished_.store(parts - 1, std::memory_order_relaxed);
      error_ = nullptr;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    try {
      body(0);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    spin_until([&] { return unfinished_.load(std::memory_order_acquire) == 0; });
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void grow(int workers) {
    while (static_cast<int>(workers_.size()) < workers) workers_.emplace_back([this] { work(); });
  }

  void work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      auto has_work = [&] { return stopping_ || (generation_ != seen && next_part_ < parts_); };
      if (!has_work()) {
        lock.unlock();
        spin_until([&] { return published_.load(std::memory_order_acquire) != seen; });
        lock.lock();
      }
      wake_.wait(lock, has_work);
      if (stopping_) return;
      seen = generation_;
      while (next_part_ < parts_) {
        const int part = next_part_++;
        const auto* body = body_;
        lock.unlock();
        try {
          (*body)(part);
        } catch (...) {
          lock.lock();
          if (!error_) error_ = std::current_exception();
          lock.unlock();
        }
        lock.lock();
        unfinished_.fetch_sub(1, std::memory_order_release);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  std::mutex job_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* body_ = nullptr;
  int parts_ = 0, next_part_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0};  // generation_, for workers that spin without the lock
  std::atomic<int> unfinished_{0};      // pending_, for a caller that spins without the lock
  bool stopping_ = false;
  std::exception_ptr error_;
};

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

}  // namespace

void run_parallel(int parts, const std::function<void(int)>& body) {
  if (parts <= 1) {
    body(0);
    return;
  }
  pool().run(parts, body);
}

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace lseq::kernels::cpu

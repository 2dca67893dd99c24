#include "kernels/cpu/thread_pool.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace lseq::kernels::cpu {

namespace {

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
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    try {
      body(0);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
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
      wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && next_part_ < parts_); });
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

#pragma once
// A bump allocator over one block of backend memory, planned once (from --mini-batch-words/--max-length) and
// reset every step, so the training and decoding steps never allocate. Asking for more than was planned throws
// an lseq::Error carrying the caller's hint (which option to raise).
#include <cstddef>
#include <string>

#include "kernels/backend.h"

namespace lseq::kernels {

class Workspace {
 public:
  Workspace(Backend& backend, std::size_t bytes, std::string overflow_hint);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  void* take(std::size_t bytes);  // 256-byte aligned
  template <typename T>
  T* take(std::size_t count) { return static_cast<T*>(take(count * sizeof(T))); }

  // Grows the buffer to at least `bytes` (rounded up to kGrowthGranularity) if it is smaller; the old contents
  // are lost. Synchronises the backend first, since steps still in flight may use the old buffer. Call only
  // between steps (after reset(), before the first take()).
  void ensure(std::size_t bytes);
  static constexpr std::size_t kGrowthGranularity = std::size_t(32) << 20;

  void reset() { used_ = 0; }
  std::size_t used() const { return used_; }
  std::size_t peak() const { return peak_; }
  std::size_t capacity() const { return capacity_; }

 private:
  Backend& backend_;
  char* base_ = nullptr;
  std::size_t capacity_ = 0, used_ = 0, peak_ = 0;
  std::string overflow_hint_;
};

}  // namespace lseq::kernels

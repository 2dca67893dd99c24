#include "core/step_memory.h"

#include <algorithm>

namespace lseq {

StepMemory::StepMemory(kernels::Workspace* ws) : ws_(ws) {
  if (ws_ == nullptr) return;
  capacity_ = ws_->capacity() - ws_->used();
  capacity_ = capacity_ / kAlignment * kAlignment;
  if (capacity_ > 0) base_ = static_cast<char*>(ws_->take(capacity_));
}

void StepMemory::check(std::size_t more) {
  if (ws_ == nullptr || bottom_ + top_ + more <= capacity_) return;
  // Out of planned memory: the workspace itself is full now, so asking it for the missing bytes raises its error,
  // which names the options that set the plan.
  ws_->take(bottom_ + top_ + more - capacity_);
}

void* StepMemory::keep(std::size_t bytes) {
  const std::size_t size = align(bytes);
  check(size);
  void* p = base_ ? base_ + bottom_ : nullptr;
  bottom_ += size;
  bottom_peak_ = std::max(bottom_peak_, bottom_);
  return p;
}

void StepMemory::release_kept(std::size_t mark) {
  if (mark <= bottom_) bottom_ = mark;
}

void* StepMemory::temp(std::size_t bytes) {
  const std::size_t size = align(bytes);
  check(size);
  top_ += size;
  top_peak_ = std::max(top_peak_, top_);
  return base_ ? base_ + capacity_ - top_ : nullptr;
}

}  // namespace lseq

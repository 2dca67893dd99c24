#include "core/model/step_memory.h"

#include <algorithm>
#include <cstdint>

#include "util/error.h"

namespace lseq {

namespace {
// Counting mode's block: addresses that nothing dereferences (the planning backend touches no memory), handed out as
// a workspace's are, so that planning offsets and tests its buffers as the real step does. Null buffers, as counting
// gave before, made every offset taken from them undefined behaviour (clang's UBSan stops on it).
constexpr std::uintptr_t kCountingBase = std::uintptr_t{1} << 46;
constexpr std::size_t kCountingCapacity = std::size_t{1} << 44;
}  // namespace

StepMemory::StepMemory(kernels::Workspace* ws) : ws_(ws) {
  if (ws_ == nullptr) {
    base_ = reinterpret_cast<char*>(kCountingBase);
    capacity_ = kCountingCapacity;
    return;
  }
  capacity_ = ws_->capacity() - ws_->used();
  capacity_ = capacity_ / kAlignment * kAlignment;
  if (capacity_ > 0) base_ = static_cast<char*>(ws_->take(capacity_));
}

void StepMemory::check(std::size_t more) {
  const std::size_t in_use = bottom_ + top_ + claimed_ + more;
  peak_ = std::max(peak_, in_use);
  if (ws_ == nullptr || in_use <= capacity_) return;
  // Out of planned memory: the workspace itself is full now, so asking it for the missing bytes raises its error,
  // which names the options that set the plan.
  ws_->take(in_use - capacity_);
}

void* StepMemory::keep(std::size_t bytes) {
  const std::size_t size = align(bytes);
  check(size);
  void* p = base_ ? base_ + bottom_ : nullptr;
  bottom_ += size;
  return p;
}

void StepMemory::release_kept(std::size_t mark) {
  if (mark <= bottom_) bottom_ = mark;
}

void* StepMemory::temp(std::size_t bytes) {
  const std::size_t size = align(bytes);
  check(size);
  top_ += size;
  return base_ ? base_ + capacity_ - claimed_ - top_ : nullptr;
}

void* StepMemory::reserve_top(std::size_t bytes) {
  if (region_ != 0 || top_ != 0) fail("internal error: the step's top region is reserved once, before temporaries");
  region_ = align(bytes);
  if (ws_ != nullptr && region_ > capacity_) ws_->take(region_ - capacity_);  // raises the plan's error
  return base_ ? base_ + capacity_ - region_ : nullptr;
}

void StepMemory::claim_top(std::size_t bytes) {
  if (top_ != 0) fail("internal error: the step's top region is claimed while temporaries are live");
  if (bytes > region_) fail("internal error: {} bytes claimed of a top region of {}", bytes, region_);
  if (bytes <= claimed_) return;
  check(bytes - claimed_);
  claimed_ = bytes;
}

}  // namespace lseq

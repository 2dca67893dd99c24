#include "kernels/workspace.h"

#include "util/error.h"

namespace lseq::kernels {

namespace {
constexpr std::size_t kSliceAlignment = 256;
std::size_t align_up(std::size_t n) { return (n + kSliceAlignment - 1) / kSliceAlignment * kSliceAlignment; }
}  // namespace

Workspace::Workspace(Backend& backend, std::size_t bytes, std::string overflow_hint)
    : backend_(backend), capacity_(align_up(bytes)), overflow_hint_(std::move(overflow_hint)) {
  if (capacity_ > 0) base_ = static_cast<char*>(backend_.allocate(capacity_));
}

Workspace::~Workspace() {
  if (base_) backend_.release(base_);
}

void Workspace::ensure(std::size_t bytes) {
  if (bytes <= capacity_) return;
  if (used_ != 0) fail("internal error: the workspace is grown while {} bytes of it are in use", used_);
  const std::size_t grown = (bytes + kGrowthGranularity - 1) / kGrowthGranularity * kGrowthGranularity;
  backend_.synchronize();
  if (base_) backend_.release(base_);
  base_ = nullptr;
  capacity_ = 0;
  try {
    base_ = static_cast<char*>(backend_.allocate(grown));
  } catch (const Error& e) {
    fail("cannot grow the workspace to {:.1f} MiB for this batch: {}; {}", grown / 1048576.0, e.what(),
         overflow_hint_);
  }
  capacity_ = grown;
}

void* Workspace::take(std::size_t bytes) {
  const std::size_t size = align_up(bytes);
  if (used_ + size > capacity_) {
    fail("workspace exhausted: needed {} more bytes with {} of {} in use; {}", size, used_, capacity_,
         overflow_hint_);
  }
  void* p = base_ + used_;
  used_ += size;
  if (used_ > peak_) peak_ = used_;
  return p;
}

}  // namespace lseq::kernels

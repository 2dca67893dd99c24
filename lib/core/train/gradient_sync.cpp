#include "core/train/gradient_sync.h"

#include <algorithm>

#include "util/error.h"

namespace lseq {

using kernels::DType;

GradientSync::GradientSync(kernels::Backend& backend, kernels::Communicator& comm, std::size_t size,
                           GradientSyncOptions options)
    : backend_(backend), comm_(comm), size_(size), options_(std::move(options)), issued_(size) {
  if (options_.wire != DType::f32 && options_.wire != DType::bf16) {
    fail("--sync-precision {} is not supported: use fp32 or bf16", kernels::dtype_name(options_.wire));
  }
  if (options_.bucket_elements == 0) fail("--sync-bucket-mib must be positive");
  if (sharded() && options_.shards.size() != static_cast<std::size_t>(comm_.size()) + 1) {
    fail("internal error: {} shard offsets for {} ranks", options_.shards.size(), comm_.size());
  }
  if (options_.wire != DType::f32) {
    const std::size_t bytes = std::max<std::size_t>(size_, 1) * kernels::dtype_size(options_.wire);
    wire_ = comm_.allocate_window(bytes);
    wire_is_window_ = wire_ != nullptr;
    if (!wire_) wire_ = backend_.allocate(bytes);
  }
}

GradientSync::~GradientSync() {
  if (wire_is_window_) {
    comm_.release_window(wire_);
  } else if (wire_) {
    backend_.release(wire_);
  }
}

void GradientSync::issue(float* grads, std::size_t begin, std::size_t end, bool alone) {
  if (begin >= end) return;
  const std::size_t n = end - begin;
  void* data = grads;
  if (wire_) {
    backend_.cast(DType::f32, grads + begin, options_.wire, static_cast<char*>(wire_) + begin * 2, n);
    data = wire_;
  }
  if (sharded()) {
    std::vector<std::size_t> ranges(options_.shards.size());
    for (std::size_t r = 0; r < ranges.size(); ++r) ranges[r] = std::clamp(options_.shards[r], begin, end);
    if (alone) {
      comm_.reduce_scatter_alone(options_.wire, data, ranges);
    } else {
      comm_.reduce_scatter(options_.wire, data, ranges);
    }
  } else {
    void* bucket = static_cast<char*>(data) + begin * kernels::dtype_size(options_.wire);
    if (alone) {
      comm_.all_reduce_alone(options_.wire, bucket, n);
    } else {
      comm_.all_reduce(options_.wire, bucket, n);
    }
  }
  ++buckets_;
}

void GradientSync::ready(float* grads, std::size_t first) {
  if (grads_ == nullptr) grads_ = grads;
  if (grads != grads_) fail("internal error: the gradient buffer moved during backward");
  const std::size_t bucket = options_.bucket_elements;
  while (issued_ > first && issued_ - first >= bucket) {
    issue(grads, issued_ - bucket, issued_, /*alone=*/first == 0);  // 0: backward is done
    issued_ -= bucket;
  }
  if (first == 0 && issued_ > 0) {  // backward is done: the rest now, not after the step's host synchronisation
    issue(grads, 0, issued_, true);
    issued_ = 0;
  }
}

void GradientSync::finish(float* grads) {
  if (grads_ != nullptr && grads != grads_) fail("internal error: the gradient buffer moved during backward");
  while (issued_ > 0) {
    const std::size_t begin = issued_ > options_.bucket_elements ? issued_ - options_.bucket_elements : 0;
    issue(grads, begin, issued_, true);
    issued_ = begin;
  }
  comm_.wait();
  if (wire_) {
    const int rank = comm_.rank();
    const std::size_t begin = sharded() ? options_.shards[rank] : 0;
    const std::size_t end = sharded() ? options_.shards[rank + 1] : size_;
    if (end > begin) {
      backend_.cast(options_.wire, static_cast<char*>(wire_) + begin * 2, DType::f32, grads + begin, end - begin);
    }
  }
  issued_ = size_;
  grads_ = nullptr;
  buckets_last_ = buckets_;
  buckets_ = 0;
}

}  // namespace lseq

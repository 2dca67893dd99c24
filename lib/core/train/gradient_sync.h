#pragma once
// Synchronous data parallelism's gradient exchange (Marian's --sync-sgd): the sum over ranks of each rank's
// gradients, in buckets that start while backward is still running. Backward reports the gradients from some
// table offset up as final (Model::set_gradients_ready); every whole bucket among them goes to the
// communicator at once, which runs it beside the rest of backward (its own stream on the GPU, its thread on the
// CPU); finish() sends the rest and makes the backend wait for all of it before the optimizer reads the sums.
// Buckets are cut from the top of the flat buffer down, the order in which backward finishes them.
// Without sharding each bucket is all-reduced: every rank ends with the whole sum and makes the same update. With
// sharding (ZeRO-1) each bucket is reduce-scattered over the shards it overlaps: each rank ends with the sum of its
// own shard only, the part its optimizer updates.
// In bf16 (--sync-precision bf16) a bucket is cast to a 16-bit copy first (a buffer of 2 bytes a parameter), sent
// and summed in bf16 (half the traffic; the sums lose precision), and cast back after the wait.
#include <cstddef>
#include <vector>

#include "kernels/backend.h"
#include "kernels/communicator.h"

namespace lseq {

struct GradientSyncOptions {
  kernels::DType wire = kernels::DType::f32;  // --sync-precision: fp32 or bf16
  std::size_t bucket_elements = std::size_t(25) << 18;  // --sync-bucket-mib 25 (PyTorch DDP's default)
  std::vector<std::size_t> shards;  // the optimizer's shards (shard.h); empty: all-reduce the whole buffer
};

class GradientSync {
 public:
  GradientSync(kernels::Backend& backend, kernels::Communicator& comm, std::size_t size, GradientSyncOptions options);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // The gradients from `first` to the end of `grads` (the flat buffer of this step) are final: issues every whole
  // bucket among them not issued yet (with first = 0, the end of backward: everything left).
  void ready(float* grads, std::size_t first);
  // After backward: issues what is left and orders the backend's later ops after all of it. Then `grads` holds the
  // sums over ranks: everywhere, or with shards in this rank's shard (the rest is left undefined).
  void finish(float* grads);

  int buckets_last_update() const { return buckets_last_; }
  bool sharded() const { return !options_.shards.empty(); }

 private:
  // alone: nothing of backward is left to run beside it (the communicator's *_alone collectives).
  void issue(float* grads, std::size_t begin, std::size_t end, bool alone);

  kernels::Backend& backend_;
  kernels::Communicator& comm_;
  std::size_t size_;
  GradientSyncOptions options_;
  void* wire_ = nullptr;     // the 16-bit copy, when the wire type is not fp32
  bool wire_is_window_ = false;  // wire_ is the communicator's window (allocate_window), else the backend's
  std::size_t issued_;       // from here to size_ is issued in this step
  float* grads_ = nullptr;   // this step's buffer
  int buckets_ = 0, buckets_last_ = 0;
};

}  // namespace lseq

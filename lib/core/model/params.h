#pragma once
// All parameters of a model in ONE flat fp32 buffer (the master copy) and their gradients in another, allocated
// once through the backend. A table names every tensor (name, shape, offset, count) in a fixed, documented order
// (docs/tensor-names.md); layers keep offsets into the buffers. Each tensor starts at a multiple of
// kParamAlignment elements so vectorised GPU kernels can read any of them; the gaps stay zero.
// Mixed precision (bf16/fp16) adds a working copy in the compute dtype with the same offsets, which the layers
// read; it is refreshed from the master by a cast after init/upload and by the optimizer's fused write after each
// update (Optimizer::step's working arguments). In fp32 the working pointer is the master pointer.
// A store for inference (decoding, scoring) holds only what the layers read: no gradients, and in bf16/fp16 no
// fp32 master either (uploads are cast into the working copy through a temporary), 2 bytes a parameter instead of 10.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace lseq {

enum class ParamInit {
  glorot_uniform,    // U(-a, a), a = sqrt(6 / (fan_in + fan_out)) of each [rows/blocks, cols] block
  normal_embedding,  // N(0, cols^-1/2): embedding rows, which are scaled by sqrt(dim) on input
  zeros,             // biases, LayerNorm beta
  ones,              // LayerNorm gamma
};

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;  // [out, in] for matrices (y = x W^T), [n] for vectors
  std::size_t offset = 0;      // in elements from the start of the flat buffers
  std::size_t count = 0;       // elements
  ParamInit init = ParamInit::zeros;
  int init_blocks = 1;  // fused matrices (qkv, kv) are initialised as this many separate blocks
};

constexpr std::size_t kParamAlignment = 64;  // elements (256 bytes of fp32)

enum class ParamUse { training, inference };

// A tensor's fp32 values where they lie on the host (a mapped weights file), and its place in the flat buffers.
struct HostTensor {
  std::size_t offset = 0;  // elements, as ParamInfo::offset
  const float* values = nullptr;
  std::size_t count = 0;
};

// Copies host fp32 values to dst (device, type dt): directly in fp32, else through a temporary fp32 buffer and the
// backend's cast (set-up only: it allocates).
void upload_as(kernels::Backend& backend, const std::vector<float>& host, kernels::DType dt, void* dst);

// Collects the tensors of a model in order; offsets are fixed when added.
class ParamTable {
 public:
  // Returns the new tensor's offset. Names must be unique.
  std::size_t add(const std::string& name, std::vector<int64_t> shape, ParamInit init, int init_blocks = 1);
  const std::vector<ParamInfo>& list() const { return params_; }
  std::size_t size() const { return size_; }             // elements of the flat buffer, alignment gaps included
  std::size_t next_offset() const;                       // where the next tensor added will start
  std::size_t count() const;                             // parameters proper (sum of counts)
  const ParamInfo& find(const std::string& name) const;  // throws lseq::Error when absent

 private:
  std::vector<ParamInfo> params_;
  std::size_t size_ = 0;
};

// The flat buffers on the backend's device.
class ParamStore {
 public:
  // working_dt: the compute dtype of the layers (fp32: no separate copy).
  ParamStore(ParamTable table, kernels::Backend& backend, kernels::DType working_dt = kernels::DType::f32,
             ParamUse use = ParamUse::training);
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  const ParamTable& table() const { return table_; }
  std::size_t size() const { return table_.size(); }
  bool trainable() const { return training_; }
  float* master() const { return master_; }  // null in a 16-bit inference store and after release_master
  // The flat gradients: the store's own buffer, or with gradients in step memory the last training step's (valid
  // until the workspace is used again). Null in an inference store.
  float* grads() const { return grads_; }
  kernels::DType working_dtype() const { return working_dt_; }
  // The weights the layers read: the master itself in fp32, else the separate copy.
  const void* working() const { return working_ ? working_ : master_; }
  // The separate working copy the optimizer writes, or null in fp32 (the update writes the master in place).
  void* separate_working() const { return working_; }

  // Views for layers: the working weight and the fp32 gradient of the tensor at `offset`.
  const void* weight(std::size_t offset) const {
    return static_cast<const char*>(working()) + offset * kernels::dtype_size(working_dtype());
  }
  // With gradients in step memory, tensors below side_end() have theirs in the side buffer during a step.
  float* grad(std::size_t offset) const {
    if (offset < side_end_) return side_grads_ + offset;
    return grads_ ? grads_ + offset : nullptr;
  }

  // Deterministic initialisation from `seed` on the host (std::mt19937_64), copied to the device once.
  void init(uint64_t seed);
  std::vector<float> initial_values(uint64_t seed) const;  // what init uploads
  // Sharded 16-bit training (Optimizer with own_master): the optimizer keeps each rank's shard of the fp32 master,
  // so the store frees its own; master() is then null, upload() writes the working copy, refresh_working() does
  // nothing.
  void release_master();
  // The master from host values (ParamTable layout, size() floats), working copy refreshed (loading weights).
  void upload(const std::vector<float>& host);
  // The same from each tensor where it lies (no flat host copy: loading a model directory); the tensors not given
  // are zeros.
  void upload(const std::vector<HostTensor>& tensors);
  // working = cast(master); a no-op in fp32 (and without a master). Call after writing the master other than
  // through the optimizer.
  void refresh_working();
  void zero_grads();  // a no-op without gradients of its own (or a sum of steps)

  // Gradients in step memory (StepGradients, training with one batch per update): on, the store frees its own
  // gradient buffer and keeps only the tensors below `side_end` (those backward writes out of order: the embedding
  // tables) in a persistent side buffer; each training step places the flat gradients in its workspace. Off, the
  // store owns a zeroed flat buffer again and steps accumulate into it.
  // sum_steps (with on; --optimizer-delay above 1 in one process): the store also keeps a flat sum that each step's
  // complete gradients are added to (add_step_grads), so an update's gradient is g1 + g2 + ... of whole batches, in
  // the order data parallelism adds the ranks' gradients; accumulating inside each op instead (off) rounds the
  // partial sums differently, and W ranks with batch B would then not make one process's update with
  // --optimizer-delay W bit for bit.
  void set_grads_in_step_memory(bool on, std::size_t side_end, bool sum_steps = false);
  // The store's gradients (not in step memory) live in `buffer` (size() floats, the caller's, zeroed here: data
  // parallelism's exchange window) instead of its own; null gives it a buffer of its own again (the placed one is
  // not touched: the caller may have freed it already).
  void place_grads(float* buffer);
  // sum += the step's gradients (after forward_backward's backward); grads() is then the sum. With sum_steps only.
  void add_step_grads();
  bool sums_steps() const { return step_sum_ != nullptr; }
  bool grads_in_step_memory() const { return training_ && own_grads_ == nullptr; }
  std::size_t side_end() const { return side_end_; }
  float* side_grads() const { return side_grads_; }
  // The step's flat gradient buffer (StepGradients); the side buffer's tensors are copied into it at the end.
  void set_step_grads(float* flat) { grads_ = flat; }

 private:
  ParamTable table_;
  kernels::Backend& backend_;
  bool training_ = false;
  float* master_ = nullptr;
  float* grads_ = nullptr;      // what grads() returns
  float* own_grads_ = nullptr;  // the store's own buffer (null with gradients in step memory)
  bool grads_placed_ = false;   // own_grads_ is a buffer placed by the caller (place_grads), not ours to free
  float* side_grads_ = nullptr;  // [side_end_] with gradients in step memory
  float* step_sum_ = nullptr;    // the sum of the steps' gradients (sum_steps)
  std::size_t side_end_ = 0;
  kernels::DType working_dt_ = kernels::DType::f32;
  void* working_ = nullptr;  // null in fp32
};

}  // namespace lseq

#pragma once
// Adam/AdamW over the flat parameter buffer: gradient norm and clipping on the device (no host round-trip),
// one fused update of every parameter, optional exponential smoothing of the weights (Marian's
// --exponential-smoothing). The state lives in device buffers allocated once.
// Sharded (ZeRO stage 1, --sharding): each rank keeps the moments, the smoothed weights and, in 16-bit precisions,
// the fp32 master weights of its shard only (shard.h), updates that shard from its reduced gradients (GradientSync)
// with the global gradient norm, and all-gathers the updated working weights (bf16/fp16; the fp32 master itself in
// fp32 training, where the layers read it). The optimizer state per rank falls by the number of ranks; checkpoints
// gather it back into the one format every world size reads.
#include <cstddef>
#include <vector>

#include "kernels/backend.h"
#include "kernels/communicator.h"

namespace lseq {

struct OptimizerOptions {
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;  // --optimizer-params
  float weight_decay = 0.0f;                       // --weight-decay (decoupled)
  float clip_norm = 1.0f;                          // --clip-norm; 0 disables clipping
  float smoothing = 0.0f;                          // --exponential-smoothing; 0 disables (see smoothing_factor)
};

struct OptimizerShard {
  kernels::Communicator* comm = nullptr;  // null: not sharded (every rank keeps and updates everything)
  std::vector<std::size_t> offsets;       // shard_offsets(size, ranks)
  // 16-bit training: the fp32 master lives only here, this rank's shard of it (ParamStore::release_master); the
  // updates write the working copy. fp32 training keeps the store's master, which is the working copy.
  bool own_master = false;
};

class Optimizer {
 public:
  Optimizer(kernels::Backend& backend, std::size_t size, OptimizerOptions options, OptimizerShard shard = {});
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of params from grads (multiplied by grad_scale, e.g. 1 / (loss scale * target tokens)) at
  // learning rate lr. A step whose gradient norm is not finite changes nothing (the kernel skips it; see
  // last_step_skipped). With `working` (a bf16/fp16 copy of params, ParamStore::separate_working) the update
  // writes it in the same pass. Sharded: grads need to hold the sums in this rank's shard only; params is the
  // store's master (null with own_master); the step ends with every rank's working weights complete.
  void step(float* params, const float* grads, float grad_scale, double lr,
            kernels::DType working_dt = kernels::DType::f32, void* working = nullptr);
  // Sharded: issues the gradient norm's exchange (this rank's shard norm, before grad_scale, to every rank) ahead
  // of step, which then only scales it. For the caller that still has a host round trip to make before step (the
  // job's totals): the exchange's launch then overlaps the gradients' last buckets instead of leaving the device
  // idle before the update. grads as step takes them. A no-op unsharded; step does it itself when not called.
  void start_norm(const float* grads);
  int64_t steps() const { return steps_; }
  // After a step the kernel skipped (last_step_skipped): it does not count toward Adam's bias correction, so the
  // next update uses the same step number (as if the skipped one had not been tried; fp16 overflows).
  void uncount_skipped_step() { --steps_; }

  // Host reads (they synchronise: call them at --disp-freq, not every step). The same on every rank.
  float last_grad_norm() const;  // before clipping, after grad_scale
  bool last_step_skipped() const;

  bool sharded() const { return shard_.comm != nullptr; }
  bool owns_master() const { return own_master_ != nullptr; }
  std::size_t shard_begin() const { return begin_; }
  std::size_t shard_size() const { return length_; }
  // Bytes of optimizer state on this device: moments, smoothed weights and their temporary, an owned master shard.
  std::size_t state_bytes() const;

  bool smoothing() const { return options_.smoothing > 0; }
  // The averaging factor of update `step` (1-based): max(--exponential-smoothing, 1 - step / (step + 9)), so
  // 0.9 at the first update, 0.01 near the 900th, and the option's value from 9 / value - 9 updates on (Marian's).
  float smoothing_factor(int64_t step) const;
  const float* smoothed() const { return smoothed_; }  // device; null when smoothing is off; the shard when sharded
  void start_smoothing_from(const float* params);      // smoothed = params (fresh runs; params ignored with own_master)
  // Exchanges params and the smoothed weights (device copies through the scratch buffer; a no-op without
  // smoothing): validation runs on the smoothed weights between two calls. The caller refreshes the working copy
  // (ParamStore::refresh_working); not for a sharded optimizer (the three-argument form).
  void swap_smoothed(float* params);
  // The same for any optimizer, the working copy included (refreshed from the exchanged weights; sharded: gathered).
  void swap_smoothed(float* params, kernels::DType working_dt, void* working);

  // With own_master: this rank's shard of the fp32 master from the full host values (a fresh start, a checkpoint).
  void load_master(const std::vector<float>& params);
  // The full fp32 master weights (smoothed: the smoothed weights) on the host, from params (the store's master) or,
  // sharded, gathered from every rank: a collective that every rank must call, and every rank gets them.
  void weights_to_host(const float* params, bool smoothed, std::vector<float>& out) const;

  // Host copies for checkpoints: full vectors (sharded: gathered, a collective; imported: each rank takes its shard).
  void export_state(std::vector<float>& m, std::vector<float>& v, std::vector<float>& smoothed) const;
  void import_state(const std::vector<float>& m, const std::vector<float>& v, const std::vector<float>& smoothed,
                    int64_t steps);

 private:
  void global_norm(float grad_scale);  // sharded: scalars_ from every rank's shard norm (after start_norm)
  void gather_to_host(const float* shard, std::vector<float>& out) const;
  float* shard_params(float* params) const;  // where this rank's shard of the master lives

  kernels::Backend& backend_;
  std::size_t size_;
  OptimizerOptions options_;
  OptimizerShard shard_;
  std::size_t begin_ = 0, length_ = 0;  // this rank's shard ([0, size) unsharded)
  int64_t steps_ = 0;
  bool norm_started_ = false;  // start_norm was called for the coming step
  float* m_ = nullptr;
  float* v_ = nullptr;
  float* smoothed_ = nullptr;
  float* scratch_ = nullptr;  // smoothing temporary [length]
  float* scalars_ = nullptr;  // [0] gradient norm, [1] gradient factor, [2..2+ranks) every rank's shard norm
  float* own_master_ = nullptr;  // [length] with own_master
};

}  // namespace lseq

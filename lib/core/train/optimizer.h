#pragma once
// Adam/AdamW over the flat parameter buffer: gradient norm and clipping on the device (no host round-trip),
// one fused update of every parameter, optional exponential smoothing of the weights (Marian's
// --exponential-smoothing). The state lives in device buffers allocated once.
#include <cstddef>
#include <vector>

#include "kernels/backend.h"

namespace lseq {

struct OptimizerOptions {
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;  // --optimizer-params
  float weight_decay = 0.0f;                       // --weight-decay (decoupled)
  float clip_norm = 1.0f;                          // --clip-norm; 0 disables clipping
  float smoothing = 0.0f;                          // --exponential-smoothing; 0 disables (see smoothing_factor)
};

class Optimizer {
 public:
  Optimizer(kernels::Backend& backend, std::size_t size, OptimizerOptions options);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of params from grads (multiplied by grad_scale, e.g. 1 / (loss scale * target tokens)) at
  // learning rate lr. A step whose gradient norm is not finite changes nothing (the kernel skips it; see
  // last_step_skipped). With `working` (a bf16/fp16 copy of params, ParamStore::separate_working) the update
  // writes it in the same pass.
  void step(float* params, const float* grads, float grad_scale, double lr,
            kernels::DType working_dt = kernels::DType::f32, void* working = nullptr);
  int64_t steps() const { return steps_; }
  // After a step the kernel skipped (last_step_skipped): it does not count toward Adam's bias correction, so the
  // next update uses the same step number (as if the skipped one had not been tried; fp16 overflows).
  void uncount_skipped_step() { --steps_; }

  // Host reads (they synchronise: call them at --disp-freq, not every step).
  float last_grad_norm() const;  // before clipping, after grad_scale
  bool last_step_skipped() const;

  bool smoothing() const { return options_.smoothing > 0; }
  // The averaging factor of update `step` (1-based): max(--exponential-smoothing, 1 - step / (step + 9)), so
  // 0.9 at the first update, 0.01 near the 900th, and the option's value from 9 / value - 9 updates on (Marian's).
  float smoothing_factor(int64_t step) const;
  const float* smoothed() const { return smoothed_; }  // device; null when smoothing is off
  void start_smoothing_from(const float* params);      // smoothed = params (fresh runs)
  // Exchanges params and the smoothed weights (device copies through the scratch buffer; a no-op without
  // smoothing): validation runs on the smoothed weights between two calls.
  void swap_smoothed(float* params);

  // Host copies for checkpoints.
  void export_state(std::vector<float>& m, std::vector<float>& v, std::vector<float>& smoothed) const;
  void import_state(const std::vector<float>& m, const std::vector<float>& v, const std::vector<float>& smoothed,
                    int64_t steps);

 private:
  kernels::Backend& backend_;
  std::size_t size_;
  OptimizerOptions options_;
  int64_t steps_ = 0;
  float* m_ = nullptr;
  float* v_ = nullptr;
  float* smoothed_ = nullptr;
  float* scratch_ = nullptr;  // smoothing temporary [size]
  float* scalars_ = nullptr;  // [0] gradient norm, [1] gradient factor
};

}  // namespace lseq

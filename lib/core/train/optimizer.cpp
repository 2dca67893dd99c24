#include "core/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace lseq {

using kernels::DType;

Optimizer::Optimizer(kernels::Backend& backend, std::size_t size, OptimizerOptions options)
    : backend_(backend), size_(size), options_(options) {
  m_ = static_cast<float*>(backend_.allocate(size_ * sizeof(float)));
  v_ = static_cast<float*>(backend_.allocate(size_ * sizeof(float)));
  backend_.fill(DType::f32, m_, size_, 0.0f);
  backend_.fill(DType::f32, v_, size_, 0.0f);
  if (smoothing()) {
    smoothed_ = static_cast<float*>(backend_.allocate(size_ * sizeof(float)));
    scratch_ = static_cast<float*>(backend_.allocate(size_ * sizeof(float)));
  }
  scalars_ = static_cast<float*>(backend_.allocate(2 * sizeof(float)));
  backend_.fill(DType::f32, scalars_, 2, 0.0f);
}

Optimizer::~Optimizer() {
  for (float* p : {m_, v_, smoothed_, scratch_, scalars_}) {
    if (p) backend_.release(p);
  }
}

void Optimizer::step(float* params, const float* grads, float grad_scale, double lr, DType working_dt,
                     void* working) {
  backend_.grad_norm(grads, size_, grad_scale, options_.clip_norm, scalars_, scalars_ + 1);
  ++steps_;
  kernels::AdamArgs args;
  args.lr = static_cast<float>(lr);
  args.beta1 = options_.beta1;
  args.beta2 = options_.beta2;
  args.eps = options_.eps;
  args.weight_decay = options_.weight_decay;
  args.bias_correction1 = static_cast<float>(1.0 - std::pow(double(options_.beta1), double(steps_)));
  args.bias_correction2 = static_cast<float>(1.0 - std::pow(double(options_.beta2), double(steps_)));
  backend_.adam_update(params, grads, m_, v_, size_, args, scalars_ + 1, working_dt, working);
  if (smoothing()) {
    // smoothed = (1 - a) * smoothed + a * params
    const float a = smoothing_factor(steps_);
    backend_.scale(DType::f32, params, size_, a, scratch_);
    backend_.scale(DType::f32, smoothed_, size_, 1.0f - a, smoothed_);
    backend_.add(DType::f32, smoothed_, scratch_, size_, smoothed_);
  }
}

float Optimizer::smoothing_factor(int64_t step) const {
  // Marian's warm-up: early averages follow the weights closely instead of keeping the initialisation for
  // 1 / factor updates (with a constant 1e-4, 37% of the initial weights would remain after 10k updates).
  const double t = static_cast<double>(step - 1);  // updates before this one
  return std::max(options_.smoothing, static_cast<float>(1.0 - (t + 1.0) / (t + 10.0)));
}

float Optimizer::last_grad_norm() const {
  float norm = 0;
  backend_.copy_to_host(&norm, scalars_, sizeof norm);
  return norm;
}

bool Optimizer::last_step_skipped() const {
  float factor = 0;
  backend_.copy_to_host(&factor, scalars_ + 1, sizeof factor);
  return !std::isfinite(factor);
}

void Optimizer::start_smoothing_from(const float* params) {
  if (smoothing()) backend_.copy(smoothed_, params, size_ * sizeof(float));
}

void Optimizer::swap_smoothed(float* params) {
  if (!smoothing()) return;
  const std::size_t bytes = size_ * sizeof(float);
  backend_.copy(scratch_, params, bytes);
  backend_.copy(params, smoothed_, bytes);
  backend_.copy(smoothed_, scratch_, bytes);
}

void Optimizer::export_state(std::vector<float>& m, std::vector<float>& v, std::vector<float>& smoothed) const {
  m.resize(size_);
  v.resize(size_);
  backend_.copy_to_host(m.data(), m_, size_ * sizeof(float));
  backend_.copy_to_host(v.data(), v_, size_ * sizeof(float));
  smoothed.clear();
  if (smoothing()) {
    smoothed.resize(size_);
    backend_.copy_to_host(smoothed.data(), smoothed_, size_ * sizeof(float));
  }
}

void Optimizer::import_state(const std::vector<float>& m, const std::vector<float>& v,
                             const std::vector<float>& smoothed, int64_t steps) {
  if (m.size() != size_ || v.size() != size_) fail("internal: optimizer state of the wrong size");
  backend_.copy_to_device(m_, m.data(), size_ * sizeof(float));
  backend_.copy_to_device(v_, v.data(), size_ * sizeof(float));
  if (smoothing()) {
    if (smoothed.size() != size_) {
      fail("the checkpoint has no smoothed weights but --exponential-smoothing is on; resume with the same "
           "--exponential-smoothing as the run that wrote it, or train with --overwrite");
    }
    backend_.copy_to_device(smoothed_, smoothed.data(), size_ * sizeof(float));
  }
  steps_ = steps;
}

}  // namespace lseq

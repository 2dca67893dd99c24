#include "core/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace lseq {

using kernels::DType;

namespace {
constexpr std::size_t kGatherChunk = std::size_t(4) << 20;  // floats per step of a gather to the host (16 MiB)
}

Optimizer::Optimizer(kernels::Backend& backend, std::size_t size, OptimizerOptions options, OptimizerShard shard)
    : backend_(backend), size_(size), options_(options), shard_(std::move(shard)), length_(size) {
  int ranks = 1;
  if (sharded()) {
    ranks = shard_.comm->size();
    const int rank = shard_.comm->rank();
    if (shard_.offsets.size() != static_cast<std::size_t>(ranks) + 1 || shard_.offsets.back() != size_) {
      fail("internal error: {} shard offsets for {} ranks over {} parameters", shard_.offsets.size(), ranks, size_);
    }
    begin_ = shard_.offsets[rank];
    length_ = shard_.offsets[rank + 1] - begin_;
  } else if (shard_.own_master) {
    fail("internal error: only a sharded optimizer keeps the master weights");
  }
  const std::size_t slots = std::max<std::size_t>(length_, 1);  // a rank of a tiny model may own nothing
  m_ = static_cast<float*>(backend_.allocate(slots * sizeof(float)));
  v_ = static_cast<float*>(backend_.allocate(slots * sizeof(float)));
  backend_.fill(DType::f32, m_, slots, 0.0f);
  backend_.fill(DType::f32, v_, slots, 0.0f);
  if (smoothing()) {
    smoothed_ = static_cast<float*>(backend_.allocate(slots * sizeof(float)));
    scratch_ = static_cast<float*>(backend_.allocate(slots * sizeof(float)));
  }
  if (shard_.own_master) {
    own_master_ = static_cast<float*>(backend_.allocate(slots * sizeof(float)));
    backend_.fill(DType::f32, own_master_, slots, 0.0f);
  }
  scalars_ = static_cast<float*>(backend_.allocate((2 + ranks) * sizeof(float)));
  backend_.fill(DType::f32, scalars_, 2 + ranks, 0.0f);
}

Optimizer::~Optimizer() {
  for (float* p : {m_, v_, smoothed_, scratch_, scalars_, own_master_}) {
    if (p) backend_.release(p);
  }
}

std::size_t Optimizer::state_bytes() const {
  const std::size_t vectors = 2 + (smoothing() ? 2 : 0) + (own_master_ ? 1 : 0);
  return vectors * length_ * sizeof(float);
}

float* Optimizer::shard_params(float* params) const {
  if (own_master_) return own_master_;
  if (params == nullptr) fail("internal error: the optimizer has no master weights to update");
  return params + begin_;
}

void Optimizer::start_norm(const float* grads) {
  if (!sharded()) return;
  // Each rank's shard norm into its slot, summed over ranks (exact: one nonzero per slot); global_norm takes the
  // norm of those norms. Unscaled: grad_scale is known only after the totals' exchange.
  const int ranks = shard_.comm->size();
  float* norms = scalars_ + 2;
  if (length_ > 0) {
    backend_.grad_norm(grads + begin_, length_, 1.0f, 0.0f, scalars_, scalars_ + 1);
  } else {
    backend_.fill(DType::f32, scalars_, 1, 0.0f);
  }
  backend_.fill(DType::f32, norms, static_cast<std::size_t>(ranks), 0.0f);
  backend_.copy(norms + shard_.comm->rank(), scalars_, sizeof(float));
  shard_.comm->all_reduce_alone(DType::f32, norms, static_cast<std::size_t>(ranks));
  norm_started_ = true;
}

void Optimizer::global_norm(float grad_scale) {
  // The whole gradient's norm after grad_scale, and its clip factor times grad_scale, the same on every rank.
  shard_.comm->wait();
  const auto ranks = static_cast<std::size_t>(shard_.comm->size());
  backend_.grad_norm(scalars_ + 2, ranks, grad_scale, options_.clip_norm, scalars_, scalars_ + 1);
  norm_started_ = false;
}

void Optimizer::step(float* params, const float* grads, float grad_scale, double lr, DType working_dt,
                     void* working) {
  if (sharded() && working != nullptr && !own_master_) {
    fail("internal error: sharded 16-bit training keeps the master in the optimizer (ParamStore::release_master)");
  }
  if (own_master_ && working == nullptr) fail("internal error: fp32 layers read the store's master weights");
  const float* g = grads + begin_;
  float* p = shard_params(params);
  if (sharded()) {
    if (!norm_started_) start_norm(grads);
    global_norm(grad_scale);
  } else {
    backend_.grad_norm(grads, size_, grad_scale, options_.clip_norm, scalars_, scalars_ + 1);
  }
  ++steps_;
  kernels::AdamArgs args;
  args.lr = static_cast<float>(lr);
  args.beta1 = options_.beta1;
  args.beta2 = options_.beta2;
  args.eps = options_.eps;
  args.weight_decay = options_.weight_decay;
  args.bias_correction1 = static_cast<float>(1.0 - std::pow(double(options_.beta1), double(steps_)));
  args.bias_correction2 = static_cast<float>(1.0 - std::pow(double(options_.beta2), double(steps_)));
  void* w = working ? static_cast<char*>(working) + begin_ * kernels::dtype_size(working_dt) : nullptr;
  if (length_ > 0) backend_.adam_update(p, g, m_, v_, length_, args, scalars_ + 1, working_dt, w);
  if (smoothing() && length_ > 0) {
    // smoothed = (1 - a) * smoothed + a * params
    const float a = smoothing_factor(steps_);
    backend_.scale(DType::f32, p, length_, a, scratch_);
    backend_.scale(DType::f32, smoothed_, length_, 1.0f - a, smoothed_);
    backend_.add(DType::f32, smoothed_, scratch_, length_, smoothed_);
  }
  if (sharded()) {
    // Every rank's updated shard to every rank: the working copy (or the fp32 master the layers read). Nothing
    // runs beside it: the next step needs the weights.
    if (working) {
      shard_.comm->all_gather_alone(working_dt, working, shard_.offsets);
    } else {
      shard_.comm->all_gather_alone(DType::f32, params, shard_.offsets);
    }
    shard_.comm->wait();
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
  if (!smoothing() || length_ == 0) return;
  const float* source = own_master_ ? own_master_ : params + begin_;
  backend_.copy(smoothed_, source, length_ * sizeof(float));
}

void Optimizer::swap_smoothed(float* params) {
  if (sharded()) fail("internal error: a sharded optimizer swaps the smoothed weights with the working copy");
  swap_smoothed(params, DType::f32, nullptr);
}

void Optimizer::swap_smoothed(float* params, DType working_dt, void* working) {
  if (!smoothing()) return;
  float* p = shard_params(params);
  const std::size_t bytes = length_ * sizeof(float);
  if (length_ > 0) {
    backend_.copy(scratch_, p, bytes);
    backend_.copy(p, smoothed_, bytes);
    backend_.copy(smoothed_, scratch_, bytes);
  }
  if (!sharded()) {
    if (working) backend_.cast(DType::f32, params, working_dt, working, size_);
    return;
  }
  if (working) {
    if (length_ > 0) {
      backend_.cast(DType::f32, p, working_dt, static_cast<char*>(working) + begin_ * kernels::dtype_size(working_dt),
                    length_);
    }
    shard_.comm->all_gather(working_dt, working, shard_.offsets);
  } else {
    shard_.comm->all_gather(DType::f32, params, shard_.offsets);
  }
  shard_.comm->wait();
}

void Optimizer::load_master(const std::vector<float>& params) {
  if (!own_master_) return;
  if (params.size() != size_) fail("internal error: {} master weights for {} parameters", params.size(), size_);
  if (length_ > 0) backend_.copy_to_device(own_master_, params.data() + begin_, length_ * sizeof(float));
}

void Optimizer::gather_to_host(const float* shard, std::vector<float>& out) const {
  out.assign(size_, 0.0f);
  const std::size_t chunk = std::min(kGatherChunk, std::max<std::size_t>(size_, 1));
  float* staging = static_cast<float*>(backend_.allocate(chunk * sizeof(float)));
  try {
    for (std::size_t c0 = 0; c0 < size_; c0 += chunk) {
      const std::size_t c1 = std::min(size_, c0 + chunk);
      std::vector<std::size_t> ranges(shard_.offsets.size());
      for (std::size_t r = 0; r < ranges.size(); ++r) ranges[r] = std::clamp(shard_.offsets[r], c0, c1) - c0;
      const std::size_t a = std::max(begin_, c0), b = std::min(begin_ + length_, c1);
      if (b > a) backend_.copy(staging + (a - c0), shard + (a - begin_), (b - a) * sizeof(float));
      shard_.comm->all_gather(DType::f32, staging, ranges);
      shard_.comm->wait();
      backend_.copy_to_host(out.data() + c0, staging, (c1 - c0) * sizeof(float));
    }
  } catch (...) {
    backend_.release(staging);
    throw;
  }
  backend_.release(staging);
}

void Optimizer::weights_to_host(const float* params, bool smoothed, std::vector<float>& out) const {
  if (smoothed && !smoothing()) fail("internal error: no smoothed weights without --exponential-smoothing");
  if (sharded() && (smoothed || own_master_)) {
    gather_to_host(smoothed ? smoothed_ : own_master_, out);
    return;
  }
  // Unsharded, or the fp32 master, which the all-gather after each step keeps complete on every rank.
  out.resize(size_);
  backend_.copy_to_host(out.data(), smoothed ? smoothed_ : params, size_ * sizeof(float));
}

void Optimizer::export_state(std::vector<float>& m, std::vector<float>& v, std::vector<float>& smoothed) const {
  smoothed.clear();
  if (sharded()) {
    gather_to_host(m_, m);
    gather_to_host(v_, v);
    if (smoothing()) gather_to_host(smoothed_, smoothed);
    return;
  }
  m.resize(size_);
  v.resize(size_);
  backend_.copy_to_host(m.data(), m_, size_ * sizeof(float));
  backend_.copy_to_host(v.data(), v_, size_ * sizeof(float));
  if (smoothing()) {
    smoothed.resize(size_);
    backend_.copy_to_host(smoothed.data(), smoothed_, size_ * sizeof(float));
  }
}

void Optimizer::import_state(const std::vector<float>& m, const std::vector<float>& v,
                             const std::vector<float>& smoothed, int64_t steps) {
  if (m.size() != size_ || v.size() != size_) fail("internal error: optimizer state of the wrong size");
  const std::size_t bytes = length_ * sizeof(float);
  if (length_ > 0) {
    backend_.copy_to_device(m_, m.data() + begin_, bytes);
    backend_.copy_to_device(v_, v.data() + begin_, bytes);
  }
  if (smoothing()) {
    if (smoothed.size() != size_) {
      fail("the checkpoint has no smoothed weights but --exponential-smoothing is on; resume with the same "
           "--exponential-smoothing as the run that wrote it, or train with --overwrite");
    }
    if (length_ > 0) backend_.copy_to_device(smoothed_, smoothed.data() + begin_, bytes);
  }
  steps_ = steps;
}

}  // namespace lseq

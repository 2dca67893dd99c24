#include "core/model/params.h"

#include <cmath>
#include <random>
#include <unordered_set>

#include "util/error.h"

namespace lseq {

void upload_as(kernels::Backend& backend, const std::vector<float>& host, kernels::DType dt, void* dst) {
  const std::size_t bytes = host.size() * sizeof(float);
  if (dt == kernels::DType::f32) {
    backend.copy_to_device(dst, host.data(), bytes);
    return;
  }
  void* staging = backend.allocate(bytes);
  backend.copy_to_device(staging, host.data(), bytes);
  backend.cast(kernels::DType::f32, staging, dt, dst, host.size());
  backend.synchronize();
  backend.release(staging);
}

std::size_t ParamTable::add(const std::string& name, std::vector<int64_t> shape, ParamInit init, int init_blocks) {
  for (const ParamInfo& p : params_) {
    if (p.name == name) fail("internal error: parameter {} declared twice", name);
  }
  std::size_t count = 1;
  for (int64_t d : shape) count *= static_cast<std::size_t>(d);
  ParamInfo info;
  info.name = name;
  info.shape = std::move(shape);
  info.offset = next_offset();
  info.count = count;
  info.init = init;
  info.init_blocks = init_blocks;
  size_ = info.offset + count;
  params_.push_back(std::move(info));
  return params_.back().offset;
}

std::size_t ParamTable::next_offset() const {
  return (size_ + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
}

std::size_t ParamTable::count() const {
  std::size_t n = 0;
  for (const ParamInfo& p : params_) n += p.count;
  return n;
}

const ParamInfo& ParamTable::find(const std::string& name) const {
  for (const ParamInfo& p : params_) {
    if (p.name == name) return p;
  }
  fail("the model has no parameter named {}", name);
}

ParamStore::ParamStore(ParamTable table, kernels::Backend& backend, kernels::DType working_dt, ParamUse use)
    : table_(std::move(table)), backend_(backend), working_dt_(working_dt) {
  const std::size_t bytes = table_.size() * sizeof(float);
  const bool separate = working_dt_ != kernels::DType::f32;
  if (use == ParamUse::training || !separate) {
    master_ = static_cast<float*>(backend_.allocate(bytes));
    backend_.fill(kernels::DType::f32, master_, table_.size(), 0.0f);
  }
  training_ = use == ParamUse::training;
  if (training_) grads_ = own_grads_ = static_cast<float*>(backend_.allocate(bytes));
  if (separate) {
    working_ = backend_.allocate(table_.size() * kernels::dtype_size(working_dt_));
    backend_.fill(working_dt_, working_, table_.size(), 0.0f);
  }
  zero_grads();
}

ParamStore::~ParamStore() {
  if (working_) backend_.release(working_);
  if (own_grads_ && !grads_placed_) backend_.release(own_grads_);
  if (side_grads_) backend_.release(side_grads_);
  if (step_sum_) backend_.release(step_sum_);
  if (master_) backend_.release(master_);
}

void ParamStore::place_grads(float* buffer) {
  if (!training_ || grads_in_step_memory()) {
    fail("internal error: gradients can be placed only in a training store that keeps its own");
  }
  // Allocated before anything changes: if it fails, the store still holds (and will not free) a placed buffer.
  float* next = buffer ? buffer : static_cast<float*>(backend_.allocate(table_.size() * sizeof(float)));
  if (own_grads_ && !grads_placed_) backend_.release(own_grads_);
  grads_placed_ = buffer != nullptr;
  grads_ = own_grads_ = next;
  zero_grads();
}

void ParamStore::set_grads_in_step_memory(bool on, std::size_t side_end, bool sum_steps) {
  if (!training_) fail("internal error: a model loaded for inference has no gradients to place");
  if (side_end > table_.size()) fail("internal error: a gradient side buffer beyond the table");
  if (sum_steps && !on) fail("internal error: a sum of step gradients needs the gradients in step memory");
  if (side_grads_) backend_.release(side_grads_);
  if (step_sum_) backend_.release(step_sum_);
  side_grads_ = step_sum_ = nullptr;
  side_end_ = 0;
  if (on) {
    if (grads_placed_) fail("internal error: placed gradients cannot move into step memory");
    if (own_grads_) backend_.release(own_grads_);
    grads_ = own_grads_ = nullptr;
    if (side_end > 0) side_grads_ = static_cast<float*>(backend_.allocate(side_end * sizeof(float)));
    side_end_ = side_end;
    if (sum_steps) {
      step_sum_ = static_cast<float*>(backend_.allocate(table_.size() * sizeof(float)));
      zero_grads();
    }
  } else if (own_grads_ == nullptr) {
    grads_ = own_grads_ = static_cast<float*>(backend_.allocate(table_.size() * sizeof(float)));
    zero_grads();
  }
}

void ParamStore::refresh_working() {
  if (working_ && master_) backend_.cast(kernels::DType::f32, master_, working_dt_, working_, table_.size());
}

void ParamStore::upload(const std::vector<float>& host) {
  if (host.size() != table_.size()) {
    fail("internal error: {} parameter values for a flat buffer of {}", host.size(), table_.size());
  }
  if (master_ == nullptr) {  // a 16-bit inference store: straight into the working copy
    upload_as(backend_, host, working_dt_, working_);
    return;
  }
  backend_.copy_to_device(master_, host.data(), host.size() * sizeof(float));
  refresh_working();
}

void ParamStore::upload(const std::vector<HostTensor>& tensors) {
  for (const HostTensor& t : tensors) {
    if (t.offset + t.count > table_.size())
      fail("internal error: a tensor of {} values at {} outside a flat buffer of {}", t.count, t.offset, table_.size());
  }
  // fp32 values land in the master, or in a staging buffer cast to the 16-bit working copy; zeroed first, so that
  // what no tensor covers is zero whatever the store held.
  float* target = master_;
  if (target == nullptr) target = static_cast<float*>(backend_.allocate(table_.size() * sizeof(float)));
  backend_.fill(kernels::DType::f32, target, table_.size(), 0.0f);
  for (const HostTensor& t : tensors) backend_.copy_to_device(target + t.offset, t.values, t.count * sizeof(float));
  if (target == master_) {
    refresh_working();
    return;
  }
  backend_.cast(kernels::DType::f32, target, working_dt_, working_, table_.size());
  backend_.synchronize();
  backend_.release(target);
}

void ParamStore::zero_grads() {
  if (own_grads_) backend_.fill(kernels::DType::f32, own_grads_, table_.size(), 0.0f);
  if (step_sum_) {
    backend_.fill(kernels::DType::f32, step_sum_, table_.size(), 0.0f);
    grads_ = step_sum_;
  }
}

void ParamStore::add_step_grads() {
  if (!step_sum_ || !grads_) fail("internal error: no sum of step gradients to add to");
  // 0 + g1 is g1 exactly, so the first step's gradients enter the sum unchanged.
  if (grads_ != step_sum_) backend_.add(kernels::DType::f32, step_sum_, grads_, table_.size(), step_sum_);
  grads_ = step_sum_;
}

void ParamStore::init(uint64_t seed) { upload(initial_values(seed)); }

void ParamStore::release_master() {
  if (!training_ || working_ == nullptr) fail("internal error: only a 16-bit training store can give its master away");
  if (master_) backend_.release(master_);
  master_ = nullptr;
}

std::vector<float> ParamStore::initial_values(uint64_t seed) const {
  std::vector<float> host(table_.size(), 0.0f);
  std::mt19937_64 rng(seed);
  for (const ParamInfo& p : table_.list()) {
    float* w = host.data() + p.offset;
    switch (p.init) {
      case ParamInit::zeros:
        break;
      case ParamInit::ones:
        std::fill(w, w + p.count, 1.0f);
        break;
      case ParamInit::normal_embedding: {
        const double cols = static_cast<double>(p.shape.back());
        std::normal_distribution<double> normal(0.0, 1.0 / std::sqrt(cols));
        for (std::size_t i = 0; i < p.count; ++i) w[i] = static_cast<float>(normal(rng));
        break;
      }
      case ParamInit::glorot_uniform: {
        const double fan_out = static_cast<double>(p.shape[0]) / p.init_blocks;
        const double fan_in = static_cast<double>(p.shape.back());
        const double limit = std::sqrt(6.0 / (fan_in + fan_out));
        std::uniform_real_distribution<double> uniform(-limit, limit);
        for (std::size_t i = 0; i < p.count; ++i) w[i] = static_cast<float>(uniform(rng));
        break;
      }
    }
  }
  return host;
}

}  // namespace lseq

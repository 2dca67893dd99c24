#include "core/model/step_gradients.h"

#include "util/error.h"

namespace lseq {

StepGradients::StepGradients(kernels::Backend& backend, StepMemory& memory, ParamStore& store, bool counting)
    : backend_(backend), memory_(memory), store_(store), size_(store.size()),
      region_(StepMemory::align(size_ * sizeof(float))), from_(size_) {
  void* region = memory_.reserve_top(region_);
  if (counting) return;
  flat_ = static_cast<float*>(region);
  store_.set_step_grads(flat_);
  if (store_.side_end() > 0) backend_.fill(kernels::DType::f32, store_.side_grads(), store_.side_end(), 0.0f);
}

void StepGradients::claim_from(std::size_t first) {
  if (first >= from_) return;
  memory_.claim_top(region_ - first * sizeof(float));
  if (flat_) backend_.fill(kernels::DType::f32, flat_ + first, from_ - first, 0.0f);
  from_ = first;
}

void StepGradients::finish() {
  const std::size_t side = store_.side_end();
  claim_from(side);
  memory_.claim_top(region_);
  if (flat_ && side > 0) backend_.copy(flat_, store_.side_grads(), side * sizeof(float));
  from_ = 0;
}

}  // namespace lseq

#pragma once
// One training step of a model from zeroed gradients, its gradients copied to the host: what the model tests that
// compare two ways of running the same step (recomputed FFN, packed source) run on each side.
#include <vector>

#include "core/model/model.h"
#include "kernels/workspace.h"

namespace lseq::test {

// Seed 9, step 4, grad scale 1 (the same dropout key for both sides of a comparison).
inline StepLoss training_step(kernels::Backend& backend, Model& model, const data::Batch& b,
                              kernels::Workspace& ws, std::vector<float>& grads) {
  model.zero_grads();
  const StepLoss loss = model.forward_backward(b, 9, 4, 1.0f, ws);
  grads.resize(model.num_params());
  backend.copy_to_host(grads.data(), model.grads(), grads.size() * sizeof(float));
  return loss;
}

}  // namespace lseq::test

#pragma once
// Parameter gradients placed in the step's memory (EncoderDecoderModel::set_gradients_in_step_memory; training with one
// batch per update). A flat fp32 gradient buffer that lives all the time costs 4 bytes a parameter beside the
// activations, while PyTorch's gradients exist only from backward on. Here the flat buffer lies at the top of the
// step's memory (StepMemory::reserve_top) and backward takes it from its end down, one stretch of tensors at a
// time (claim_from), as it reaches them. The table lists tensors in forward order (embeddings, encoder layers,
// decoder layers, output) and backward visits them in reverse, releasing what each layer kept once its backward
// is done (StepMemory::release_kept), so the upper layers' gradients take the room of activations backward has
// already given back.
// The embedding tables are the exception: the output layer (tied weights) and the decoder's embedding write
// gradients long before backward reaches the bottom of the table, so the tensors below ParamStore::side_end()
// accumulate in the store's persistent side buffer, copied into place by finish().
#include <cstddef>

#include "core/model/params.h"
#include "core/model/step_memory.h"
#include "kernels/backend.h"

namespace lseq {

class StepGradients {
 public:
  // Reserves the flat buffer in `memory` and zeroes the side buffer. counting: planning over the planning backend
  // (the store is left alone).
  StepGradients(kernels::Backend& backend, StepMemory& memory, ParamStore& store, bool counting);

  // Backward is about to write the gradients of the tensors from table offset `first` up: everything from there to
  // the part taken before is taken and zeroed. Offsets must come in decreasing order; no temporary may be live.
  void claim_from(std::size_t first);
  // After backward: the whole buffer taken and the side buffer's tensors copied in; grads() is then complete.
  void finish();

 private:
  kernels::Backend& backend_;
  StepMemory& memory_;
  ParamStore& store_;
  float* flat_ = nullptr;       // null when counting
  std::size_t size_ = 0;        // elements of the flat buffer
  std::size_t region_ = 0;      // its bytes in the step's memory (aligned)
  std::size_t from_ = 0;        // elements from here to size_ are taken
};

}  // namespace lseq

#pragma once
// What every layer call gets: the backend, the step's memory, the parameter views, the compute dtype and the
// dropout state of the step. Dropout sites are numbered so that every call site has its own key
// (kernels::dropout_key(seed, step, site)), which makes masks reproducible at any step and equal on any backend.
#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/model/params.h"
#include "core/model/step_gradients.h"
#include "core/model/step_memory.h"
#include "kernels/backend.h"
#include "kernels/dropout_rng.h"

namespace lseq {

// site = stack << 16 | layer << 8 | kind; stack 0 = embeddings, 1 = encoder, 2 = decoder. Layers from 0.
enum class DropoutKind : uint64_t {
  embedding = 0,
  self_attn_probs = 1,
  self_attn_residual = 2,
  cross_attn_probs = 3,
  cross_attn_residual = 4,
  ffn_activation = 5,
  ffn_residual = 6,
};
enum class Stack : uint64_t { embeddings = 0, encoder = 1, decoder = 2 };

inline uint64_t dropout_site(Stack stack, int layer, DropoutKind kind) {
  return static_cast<uint64_t>(stack) << 16 | static_cast<uint64_t>(layer) << 8 | static_cast<uint64_t>(kind);
}

// Data parallelism's hook (EncoderDecoderModel::set_gradients_ready): told where each block's backward starts
// (LayerContext::gradients_from, in decreasing table offsets), it reports the tensors from the previous start up as
// final, since the blocks above are done; the last report, 0, comes after the embeddings.
struct GradientReadiness {
  const std::function<void(std::size_t first)>& hook;
  std::size_t started = SIZE_MAX;
  void block_starts(std::size_t first) {
    if (first >= started) return;
    if (started != SIZE_MAX) hook(started);
    started = first;
  }
  void finish() { hook(0); }
};

struct LayerContext {
  kernels::Backend& backend;
  StepMemory& memory;
  const ParamStore& params;
  kernels::DType dt = kernels::DType::f32;  // activations
  bool train = false;                       // dropout on
  uint64_t seed = 0, step = 0;
  // Training under memory pressure: each feed-forward block keeps nothing of its hidden layer [rows, dim_ffn] and
  // recomputes it in backward (one more matrix product per block), see FeedForwardLayer.
  bool recompute_ffn = false;
  // Gradients in step memory (training steps with EncoderDecoderModel::set_gradients_in_step_memory), else null.
  StepGradients* gradients = nullptr;
  // The gradients-ready hook of a training step, else null.
  GradientReadiness* ready = nullptr;

  kernels::Dropout dropout(float p, uint64_t site) const {
    kernels::Dropout d;
    if (train && p > 0.0f) {
      d.p = p;
      d.key = kernels::dropout_key(seed, step, site);
    }
    return d;
  }
  std::size_t bytes(std::size_t elements) const { return elements * kernels::dtype_size(dt); }
  void* keep(std::size_t elements) const { return memory.keep(bytes(elements)); }
  void* temp(std::size_t elements) const { return memory.temp(bytes(elements)); }
  const void* w(std::size_t offset) const { return params.weight(offset); }
  float* g(std::size_t offset) const { return params.grad(offset); }
  // Backward is about to write the gradients of the tensors from table offset `first` up (StepGradients); those
  // above are final (GradientReadiness).
  void gradients_from(std::size_t first) const {
    if (gradients) gradients->claim_from(first);
    if (ready) ready->block_starts(first);
  }
  kernels::DType wdt() const { return params.working_dtype(); }
};

// Pointer arithmetic on activation buffers of the context's dtype.
inline void* offset_ptr(void* p, std::size_t elements, kernels::DType dt) {
  return static_cast<char*>(p) + elements * kernels::dtype_size(dt);
}
inline const void* offset_ptr(const void* p, std::size_t elements, kernels::DType dt) {
  return static_cast<const char*>(p) + elements * kernels::dtype_size(dt);
}

}  // namespace lseq

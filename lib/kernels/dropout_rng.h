#pragma once
// Counter-based dropout masks. Whether element i of a dropout site is kept is a pure function of
// (key, i), so forward and backward recompute the same mask without storing it, and the CPU and CUDA
// backends draw exactly the same masks. The caller derives one key per dropout site and step
// (dropout_key), which makes runs reproducible from --seed and resumable at any update.
#include <cstdint>

#include "util/host_device.h"
#include "util/splitmix64.h"

namespace lseq::kernels {

// The key of one dropout site (a layer's attention, ffn, ...) at one step of a run seeded with `seed`.
LSEQ_HOST_DEVICE uint64_t dropout_key(uint64_t seed, uint64_t step, uint64_t site) {
  return mix64(mix64(seed ^ mix64(step)) + site);
}

// Uniform in [0, 1) with 24 bits for element i under a key.
LSEQ_HOST_DEVICE float counter_uniform(uint64_t key, uint64_t i) {
  return static_cast<float>(mix64(key + i) >> 40) * (1.0f / 16777216.0f);
}

// Multiplier for element i: 0 when dropped, 1/(1-p) when kept (inverted dropout).
LSEQ_HOST_DEVICE float dropout_multiplier(uint64_t key, uint64_t i, float p) {
  return counter_uniform(key, i) < p ? 0.0f : 1.0f / (1.0f - p);
}

}  // namespace lseq::kernels

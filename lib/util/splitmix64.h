#pragma once
// SplitMix64, the one seeded generator of the project: sampling, shuffling, vocabulary sampling and dropout masks
// (as a counter-based generator, kernels/dropout_rng.h) all draw from it, so that every run gives the same result
// with every standard library (std::shuffle and the std distributions are implementation-defined) and on both
// backends.
#include <cstdint>

#include "util/host_device.h"

namespace lseq {

constexpr uint64_t kSplitMix64Increment = 0x9E3779B97F4A7C15ull;  // the golden ratio in 64 bits

// The output function: a cheap bijective mix with good avalanche.
LSEQ_HOST_DEVICE uint64_t splitmix64_finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One generator step from state x: what SplitMix64(x).next() returns. As a pure function of a counter it is a
// counter-based generator (dropout masks).
LSEQ_HOST_DEVICE uint64_t mix64(uint64_t x) { return splitmix64_finalize(x + kSplitMix64Increment); }

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64_finalize(state_ += kSplitMix64Increment); }
  // Uniform in [0, n), n > 0 (Lemire's multiply-shift; the tiny bias is irrelevant here).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  // Uniform in [0, 1) with 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// A seed for one purpose derived from a base seed and a few numbers (e.g. seed, epoch).
inline uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b = 0) {
  SplitMix64 g(seed ^ (a * 0xD1B54A32D192ED03ull) ^ (b * 0x8CB92BA72F3D8DD7ull));
  g.next();
  return g.next();
}

// Fisher-Yates shuffle of [first, first + n).
template <typename T>
void shuffle_in_place(T* first, uint64_t n, SplitMix64& rng) {
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = rng.below(i);
    T t = first[i - 1];
    first[i - 1] = first[j];
    first[j] = t;
  }
}

}  // namespace lseq

#pragma once
// Sampling's draw, written once for the host search (core/search/sampling.cpp) and Backend::draw_topk (the CPU
// loop and the CUDA kernel), so that a draw on the device gives the token the host would: the same candidates, the
// same tempered weights summed in the same order, the same uniform number of the line's SplitMix64 stream.
// (The exponential is the platform's: glibc's on the host, CUDA's on the device, both within one unit in the last
// place; a draw could differ only where the uniform number falls that close to a boundary between candidates.)
#include <cmath>
#include <cstdint>

#include "util/host_device.h"
#include "util/splitmix64.h"

namespace lseq::kernels {

// A log-probability search may draw: a number above -inf.
LSEQ_HOST_DEVICE bool drawable(float log_prob) { return log_prob == log_prob && log_prob > -INFINITY; }

// The candidates of one row of Backend::topk_log_softmax: its k best words (best first, equal values by id; the
// list ends at the first empty or undrawable slot) merged with eos, which precedes any word of its value (the lower
// id), cut at k. Writes them to kept / kept_log_probs (room for k) and returns how many.
LSEQ_HOST_DEVICE int topk_candidates(const float* values, const int32_t* ids, float eos_log_prob, int32_t eos_id, int k,
                                     int32_t* kept, float* kept_log_probs) {
  int n = 0;
  bool eos_placed = !drawable(eos_log_prob);
  for (int i = 0; i < k && n < k; ++i) {
    if (!eos_placed && eos_log_prob >= values[i]) {
      kept[n] = eos_id, kept_log_probs[n] = eos_log_prob, ++n, eos_placed = true;
      if (n == k) break;
    }
    if (ids[i] < 0 || !drawable(values[i])) break;
    kept[n] = ids[i], kept_log_probs[n] = values[i], ++n;
  }
  if (!eos_placed && n < k) kept[n] = eos_id, kept_log_probs[n] = eos_log_prob, ++n;
  return n;
}

// The candidate (0 .. n-1, n >= 1) that the uniform number u in [0, 1) draws: weights exp((lp - best) /
// temperature) relative to the best candidate, added in order in double precision.
LSEQ_HOST_DEVICE int draw_weighted(const float* log_probs, int n, double temperature, double u) {
  double best = -INFINITY;
  for (int i = 0; i < n; ++i) best = log_probs[i] > best ? static_cast<double>(log_probs[i]) : best;
  double total = 0;
  for (int i = 0; i < n; ++i) total += exp((log_probs[i] - best) / temperature);
  const double target = u * total;
  double acc = 0;
  for (int i = 0; i < n; ++i) {
    acc += exp((log_probs[i] - best) / temperature);
    if (target < acc) return i;
  }
  return n - 1;
}

// SplitMix64::uniform() on a bare state: advances it and returns a number in [0, 1) with 53 bits.
LSEQ_HOST_DEVICE double next_uniform(uint64_t& state) {
  state += kSplitMix64Increment;
  return static_cast<double>(splitmix64_finalize(state) >> 11) * 0x1.0p-53;
}

}  // namespace lseq::kernels

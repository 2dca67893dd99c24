#pragma once
// Helpers shared by the CPU backend's op files: dtype checks, typed views of raw pointers, and parallel loops
// whose results do not depend on how the work is split (no atomics; sums in a fixed order).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/dropout_rng.h"
#include "kernels/dtype.h"
#include "kernels/cpu/thread_pool.h"

namespace lseq::kernels::cpu {

// Throws lseq::Error when a compute op is asked for anything but fp32.
void require_f32(DType dt, const char* op);
// Throws lseq::Error unless 0 <= p < 1.
void require_dropout_p(float p, const char* op);

inline const float* f32(const void* p) { return static_cast<const float*>(p); }
inline float* f32(void* p) { return static_cast<float*>(p); }

// Keys [0, valid) of attention query row i of batch entry b take part: min(k_len, k_lengths[b]) (k_len without
// k_lengths), and at most i + 1 when causal (attention_softmax_forward and the fused attention core).
inline int attention_valid_keys(const int32_t* k_lengths, int64_t b, int i, int k_len, bool causal) {
  int valid = k_lengths ? std::clamp(k_lengths[b], 0, k_len) : k_len;
  if (causal) valid = std::min(valid, i + 1);
  return valid;
}

// Below this many elements a loop runs on one thread: forking costs more than it saves.
constexpr int64_t kParallelGrain = 16384;

// f(i) for i in [0, n), split into contiguous ranges over `threads` threads when the work (n * cost elements) is
// large enough.
template <typename F>
void parallel_for(int threads, int64_t n, int64_t cost, F&& f) {
  if (threads <= 1 || n <= 1 || n * cost < kParallelGrain) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  const int parts = static_cast<int>(n < threads ? n : threads);
  run_parallel(parts, [&](int part) {
    const int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

// acc[c] += sum over r of value(r, c) for a [rows, cols] array, summed in double, row by row. Threads own
// blocks of columns, so every sum is taken in the same order whatever the thread count.
template <typename F>
void accumulate_column_sums(int threads, int rows, int cols, float* acc, F&& value) {
  constexpr int kBlock = 64;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
  parallel_for(threads, blocks, static_cast<int64_t>(rows) * kBlock, [&](int64_t block) {
    const int c0 = static_cast<int>(block) * kBlock;
    const int width = cols - c0 < kBlock ? cols - c0 : kBlock;
    double sums[kBlock] = {};
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < width; ++j) sums[j] += value(r, c0 + j);
    for (int j = 0; j < width; ++j) acc[c0 + j] = static_cast<float>(acc[c0 + j] + sums[j]);
  });
}

// sum over i of value(i) in double, in fixed chunks whose partial sums are added in order.
template <typename F>
double deterministic_sum(int threads, std::size_t n, F&& value) {
  constexpr std::size_t kChunk = 8192;
  constexpr int64_t kMaxChunks = 4096;
  if (n == 0) return 0.0;
  const std::size_t chunk = (n + kMaxChunks * kChunk - 1) / (kMaxChunks * kChunk) * kChunk;  // >= kChunk
  const int64_t chunks = static_cast<int64_t>((n + chunk - 1) / chunk);
  double partial[kMaxChunks];
  parallel_for(threads, chunks, static_cast<int64_t>(chunk), [&](int64_t c) {
    const std::size_t begin = static_cast<std::size_t>(c) * chunk;
    const std::size_t end = begin + chunk < n ? begin + chunk : n;
    double s = 0.0;
    for (std::size_t i = begin; i < end; ++i) s += value(i);
    partial[c] = s;
  });
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

// dropout_multiplier(key, i, p) with the division hoisted out of the loop (bit-identical: the same fp32
// 1/(1-p)); 1 for every element when p == 0.
class DropoutMask {
 public:
  explicit DropoutMask(const Dropout& d) : key_(d.key), p_(d.p), keep_scale_(1.0f / (1.0f - d.p)) {}
  bool active() const { return p_ > 0.0f; }
  float operator()(int64_t i) const {
    if (p_ <= 0.0f) return 1.0f;
    return counter_uniform(key_, static_cast<uint64_t>(i)) < p_ ? 0.0f : keep_scale_;
  }

 private:
  uint64_t key_;
  float p_, keep_scale_;
};

// Activations on z = x + bias, and their derivatives.
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kGeluA = 0.044715;

inline float gelu(float z) {
  const float u = static_cast<float>(kGeluC) * (z + static_cast<float>(kGeluA) * z * z * z);
  return 0.5f * z * (1.0f + std::tanh(u));
}
inline float gelu_grad(float z) {
  const float t = std::tanh(static_cast<float>(kGeluC) * (z + static_cast<float>(kGeluA) * z * z * z));
  return 0.5f * (1.0f + t) +
         0.5f * z * (1.0f - t * t) * static_cast<float>(kGeluC) * (1.0f + 3.0f * static_cast<float>(kGeluA) * z * z);
}
inline float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

}  // namespace lseq::kernels::cpu

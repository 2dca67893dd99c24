// Label-smoothed cross-entropy fused with log-softmax; the gradient overwrites dlogits without a probability
// buffer.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::cross_entropy(DType dt, const void* logits, const void* bias, const int32_t* targets, int n,
                               int vocab, float label_smoothing, int ignore_index, float grad_scale, float* loss,
                               float* nll, void* dlogits, int ld) {
  cpu::require_f32(dt, "cross_entropy");
  if (vocab < 1) fail("cross_entropy: vocabulary size must be positive, got {}", vocab);
  ld = row_stride("cross_entropy", ld, vocab);
  for (int r = 0; r < n; ++r)
    if (targets[r] != ignore_index && (targets[r] < 0 || targets[r] >= vocab))
      fail("cross_entropy: target {} of row {} is outside the vocabulary [0, {})", targets[r], r, vocab);
  const float* px = f32(logits);
  const float* pb = static_cast<const float*>(bias);
  float* pd = static_cast<float*>(dlogits);
  const double ls = label_smoothing;
  cpu::parallel_for(threads_, n, vocab * 4, [&](int64_t r) {
    // With a bias the row is first copied as x + b (fp32): dlogits may alias the logits.
    std::vector<float> biased;
    const float* x = px + r * ld;
    if (pb) {
      biased.resize(static_cast<std::size_t>(vocab));
      for (int v = 0; v < vocab; ++v) biased[v] = x[v] + pb[v];
      x = biased.data();
    }
    float* d = pd ? pd + r * ld : nullptr;
    const int y = targets[r];
    if (y == ignore_index) {
      if (loss) loss[r] = 0.0f;
      if (nll) nll[r] = 0.0f;
      if (d) std::fill(d, d + vocab, 0.0f);
      return;
    }
    const float max = *std::max_element(x, x + vocab);
    double sum_exp = 0.0, sum_x = 0.0;
    for (int v = 0; v < vocab; ++v) {
      sum_exp += std::exp(x[v] - max);  // fp32 exp of a value <= 0, summed in double
      sum_x += x[v];
    }
    const double lse = max + std::log(sum_exp);
    const double logp_y = x[y] - lse;
    const double sum_logp = sum_x - vocab * lse;
    if (loss) loss[r] = static_cast<float>(-(1.0 - ls) * logp_y - ls / vocab * sum_logp);
    if (nll) nll[r] = static_cast<float>(-logp_y);
    if (d) {
      // d may alias x: every x[v] is read before d[v] is written.
      const float smooth = static_cast<float>(ls / vocab), lse_f = static_cast<float>(lse);
      const float target_y = static_cast<float>(1.0 - ls + ls / vocab);
      float dy = 0.0f;
      for (int v = 0; v < vocab; ++v) {
        const float p = std::exp(x[v] - lse_f);
        if (v == y) dy = p;
        d[v] = grad_scale * (p - smooth);
      }
      d[y] = grad_scale * (dy - target_y);
    }
  });
}

}  // namespace lseq::kernels

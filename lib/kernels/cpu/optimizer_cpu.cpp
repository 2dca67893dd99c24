// Gradient norm with clipping factor, and AdamW over the flat fp32 buffers (writing the working copy).
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/float_convert.h"
#include "util/error.h"

namespace lseq::kernels {

void CpuBackend::grad_norm(const float* grads, std::size_t n, float pre_scale, float max_norm, float* norm,
                           float* factor) {
  const double s = pre_scale;
  const double sq = cpu::deterministic_sum(threads_, n, [&](std::size_t i) {
    const double g = s * grads[i];
    return g * g;
  });
  const double total = std::sqrt(sq);
  norm[0] = static_cast<float>(total);
  if (!std::isfinite(total) || !std::isfinite(norm[0])) {
    factor[0] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const double clip = max_norm > 0.0f && total > max_norm ? max_norm / total : 1.0;
  factor[0] = static_cast<float>(s * clip);
}

void CpuBackend::adam_update(float* params, const float* grads, float* m, float* v, std::size_t n, const AdamArgs& args,
                             const float* factor, DType working_dt, void* working) {
  const float f = factor ? factor[0] : 1.0f;
  if (!std::isfinite(f)) return;  // a NaN/Inf step: leave parameters, moments and working copy as they are
  const float b1 = args.beta1, b2 = args.beta2;
  const float inv_bc1 = 1.0f / args.bias_correction1, inv_bc2 = 1.0f / args.bias_correction2;
  auto* w32 = static_cast<float*>(working);
  auto* w16 = static_cast<uint16_t*>(working);
  cpu::parallel_for(threads_, static_cast<int64_t>(n), 16, [&](int64_t i) {
    const float g = grads[i] * f;
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    const float update = (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + args.eps) + args.weight_decay * params[i];
    params[i] -= args.lr * update;
    if (working) {
      switch (working_dt) {
        case DType::f32: w32[i] = params[i]; break;
        case DType::f16: w16[i] = float_to_f16(params[i]); break;
        case DType::bf16: w16[i] = float_to_bf16(params[i]); break;
      }
    }
  });
}

}  // namespace lseq::kernels

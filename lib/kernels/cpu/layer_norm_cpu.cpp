// LayerNorm over the last dimension: statistics in double, saved as fp32 mean and rstd for the backward.
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::layer_norm_forward(DType dt, const void* x, const void* gamma, const void* beta, int rows, int cols,
                                    float eps, void* y, float* mean, float* rstd) {
  cpu::require_f32(dt, "layer_norm_forward");
  if (cols < 1) fail("layer_norm_forward: needs at least one column, got {}", cols);
  const float* px = f32(x);
  const float* pg = f32(gamma);
  const float* pb = f32(beta);
  float* py = f32(y);
  cpu::parallel_for(threads_, rows, cols * 3, [&](int64_t r) {
    const float* xr = px + r * cols;
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) sum += xr[c];
    const double mu = sum / cols;
    double sq = 0.0;
    for (int c = 0; c < cols; ++c) sq += (xr[c] - mu) * (xr[c] - mu);
    const double rs = 1.0 / std::sqrt(sq / cols + eps);
    float* yr = py + r * cols;
    for (int c = 0; c < cols; ++c) yr[c] = static_cast<float>((xr[c] - mu) * rs * pg[c] + pb[c]);
    if (mean) mean[r] = static_cast<float>(mu);
    if (rstd) rstd[r] = static_cast<float>(rs);
  });
}

// The two ops in sequence, through y when the sum is not wanted (LayerNorm in place is safe: a row's statistics are
// taken before any of it is written).
void CpuBackend::residual_layer_norm_forward(DType dt, const void* x, const void* bias, const void* residual, int rows,
                                             int cols, const Dropout& drop, const void* gamma, const void* beta,
                                             float eps, void* sum, void* y, float* mean, float* rstd) {
  void* s = sum ? sum : y;
  bias_dropout_residual_forward(dt, x, bias, residual, rows, cols, drop, s);
  layer_norm_forward(dt, s, gamma, beta, rows, cols, eps, y, mean, rstd);
}

void CpuBackend::layer_norm_backward(DType dt, const void* x, const void* gamma, const float* mean, const float* rstd,
                                     const void* dy, int rows, int cols, void* dx, float* dparam_gamma,
                                     float* dparam_beta) {
  cpu::require_f32(dt, "layer_norm_backward");
  const float* px = f32(x);
  const float* pg = f32(gamma);
  const float* pdy = f32(dy);
  float* pdx = f32(dx);
  // Parameter gradients first: dx may alias dy.
  if (dparam_gamma)
    cpu::accumulate_column_sums(threads_, rows, cols, dparam_gamma, [&](int r, int c) {
      const int64_t i = static_cast<int64_t>(r) * cols + c;
      return static_cast<double>(pdy[i]) * ((static_cast<double>(px[i]) - mean[r]) * rstd[r]);
    });
  if (dparam_beta)
    cpu::accumulate_column_sums(threads_, rows, cols, dparam_beta, [&](int r, int c) {
      return static_cast<double>(pdy[static_cast<int64_t>(r) * cols + c]);
    });
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma.
  cpu::parallel_for(threads_, rows, cols * 4, [&](int64_t r) {
    const float* xr = px + r * cols;
    const float* dyr = pdy + r * cols;
    const double mu = mean[r], rs = rstd[r];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * pg[c];
      sum_g += g;
      sum_gx += g * (xr[c] - mu) * rs;
    }
    const double mean_g = sum_g / cols, mean_gx = sum_gx / cols;
    float* dxr = pdx + r * cols;
    for (int c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * pg[c];
      const double xhat = (xr[c] - mu) * rs;
      dxr[c] = static_cast<float>(rs * (g - mean_g - xhat * mean_gx));
    }
  });
}

}  // namespace lseq::kernels

// LayerNorm over the last dimension: statistics in double, saved as fp32 mean and rstd for the backward.
#include <cmath>
#include <vector>

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

namespace {

// LayerNorm's backward given each element's xhat(r, c) (double): dparam_gamma += sum dy * xhat, dparam_beta += sum dy,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * gamma (added to dx with `accumulate`). Parameter
// gradients first: dx may alias dy.
template <typename Xhat>
void layer_norm_backward_rows(int threads, const float* gamma, const float* rstd, const float* dy, int rows, int cols,
                              float* dx, bool accumulate, float* dparam_gamma, float* dparam_beta, Xhat&& xhat) {
  if (dparam_gamma)
    cpu::accumulate_column_sums(threads, rows, cols, dparam_gamma, [&](int r, int c) {
      return static_cast<double>(dy[static_cast<int64_t>(r) * cols + c]) * xhat(r, c);
    });
  if (dparam_beta)
    cpu::accumulate_column_sums(threads, rows, cols, dparam_beta, [&](int r, int c) {
      return static_cast<double>(dy[static_cast<int64_t>(r) * cols + c]);
    });
  cpu::parallel_for(threads, rows, cols * 4, [&](int64_t r) {
    const float* dyr = dy + r * cols;
    const double rs = rstd[r];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * gamma[c];
      sum_g += g;
      sum_gx += g * xhat(static_cast<int>(r), c);
    }
    const double mean_g = sum_g / cols, mean_gx = sum_gx / cols;
    float* dxr = dx + r * cols;
    for (int c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * gamma[c];
      const double d = rs * (g - mean_g - xhat(static_cast<int>(r), c) * mean_gx);
      dxr[c] = static_cast<float>(accumulate ? dxr[c] + d : d);
    }
  });
}

}  // namespace

void CpuBackend::layer_norm_backward(DType dt, const void* x, const void* gamma, const float* mean, const float* rstd,
                                     const void* dy, int rows, int cols, void* dx, float* dparam_gamma,
                                     float* dparam_beta, bool accumulate_dx) {
  cpu::require_f32(dt, "layer_norm_backward");
  const float* px = f32(x);
  layer_norm_backward_rows(
      threads_, f32(gamma), rstd, f32(dy), rows, cols, f32(dx), accumulate_dx, dparam_gamma, dparam_beta,
      [&](int r, int c) { return (static_cast<double>(px[static_cast<int64_t>(r) * cols + c]) - mean[r]) * rstd[r]; });
}

void CpuBackend::layer_norm_backward_from_output(DType dt, const void* y, const void* gamma, const void* beta,
                                                 const float* rstd, const void* dy, int rows, int cols, void* dx,
                                                 float* dparam_gamma, float* dparam_beta) {
  cpu::require_f32(dt, "layer_norm_backward_from_output");
  if (cols < 1) fail("layer_norm_backward_from_output: needs at least one column, got {}", cols);
  const float* py = f32(y);
  const float* pg = f32(gamma);
  const float* pb = f32(beta);
  std::vector<double> inverse_gain(static_cast<std::size_t>(cols));
  for (int c = 0; c < cols; ++c) {
    const double g = std::fabs(pg[c]) >= kMinBackwardGain ? pg[c] : std::copysign(double(kMinBackwardGain), pg[c]);
    inverse_gain[c] = 1.0 / g;
  }
  layer_norm_backward_rows(threads_, pg, rstd, f32(dy), rows, cols, f32(dx), false, dparam_gamma, dparam_beta,
                           [&](int r, int c) {
                             const double v = py[static_cast<int64_t>(r) * cols + c];
                             return (v - pb[c]) * inverse_gain[c];
                           });
}

void CpuBackend::residual_layer_norm_backward(DType dt, const void* y, const void* gamma, const void* beta,
                                              const float* rstd, const void* dy, int rows, int cols,
                                              const Dropout& drop, void* ds, void* d_o, float* dparam_gamma,
                                              float* dparam_beta, float* dparam_bias) {
  layer_norm_backward_from_output(dt, y, gamma, beta, rstd, dy, rows, cols, ds, dparam_gamma, dparam_beta);
  bias_dropout_residual_backward(dt, ds, rows, cols, drop, d_o, dparam_bias);
}

}  // namespace lseq::kernels

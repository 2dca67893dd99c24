// Bias, activation and residual ops (with their dropout) and their backward, including bias gradients.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

namespace {

float activate(Activation act, float z) {
  switch (act) {
    case Activation::relu: return z > 0.0f ? z : 0.0f;
    case Activation::gelu: return cpu::gelu(z);
    case Activation::swish: return z * cpu::sigmoid(z);
  }
  return z;
}

float activation_grad(Activation act, float z) {
  switch (act) {
    case Activation::relu: return z > 0.0f ? 1.0f : 0.0f;
    case Activation::gelu: return cpu::gelu_grad(z);
    case Activation::swish: {
      const float s = cpu::sigmoid(z);
      return s + z * s * (1.0f - s);
    }
  }
  return 1.0f;
}

}  // namespace

void CpuBackend::add_bias(DType dt, const void* x, const void* bias, int rows, int cols, void* y) {
  cpu::require_f32(dt, "add_bias");
  const float* px = f32(x);
  const float* pb = f32(bias);
  float* py = f32(y);
  cpu::parallel_for(threads_, rows, cols, [&](int64_t r) {
    for (int c = 0; c < cols; ++c) py[r * cols + c] = px[r * cols + c] + pb[c];
  });
}

void CpuBackend::bias_grad(DType dt, const void* dy, int rows, int cols, float* dparam_bias, int ld) {
  cpu::require_f32(dt, "bias_grad");
  ld = row_stride("bias_grad", ld, cols);
  const float* g = f32(dy);
  cpu::accumulate_column_sums(threads_, rows, cols, dparam_bias,
                              [&](int r, int c) { return static_cast<double>(g[static_cast<int64_t>(r) * ld + c]); });
}

void CpuBackend::bias_activation_dropout_forward(DType dt, const void* x, const void* bias, int rows, int cols,
                                                 Activation act, const Dropout& drop, void* y) {
  cpu::require_f32(dt, "bias_activation_dropout_forward");
  cpu::require_dropout_p(drop.p, "bias_activation_dropout_forward");
  const cpu::DropoutMask mask(drop);
  const float* px = f32(x);
  const float* pb = static_cast<const float*>(bias);
  float* py = f32(y);
  cpu::parallel_for(threads_, rows, cols * 8, [&](int64_t r) {
    for (int c = 0; c < cols; ++c) {
      const float z = px[r * cols + c] + (pb ? pb[c] : 0.0f);
      py[r * cols + c] = activate(act, z) * mask(r * cols + c);
    }
  });
}

void CpuBackend::bias_activation_dropout_backward(DType dt, const void* x, const void* bias, const void* dy, int rows,
                                                  int cols, Activation act, const Dropout& drop, void* dx,
                                                  float* dparam_bias) {
  cpu::require_f32(dt, "bias_activation_dropout_backward");
  cpu::require_dropout_p(drop.p, "bias_activation_dropout_backward");
  const cpu::DropoutMask mask(drop);
  const float* px = f32(x);
  const float* pb = static_cast<const float*>(bias);
  const float* pdy = f32(dy);
  float* pdx = f32(dx);
  cpu::parallel_for(threads_, rows, cols * 8, [&](int64_t r) {
    for (int c = 0; c < cols; ++c) {
      const float z = px[r * cols + c] + (pb ? pb[c] : 0.0f);
      pdx[r * cols + c] = pdy[r * cols + c] * mask(r * cols + c) * activation_grad(act, z);
    }
  });
  if (dparam_bias) bias_grad(dt, dx, rows, cols, dparam_bias);
}

void CpuBackend::bias_dropout_residual_forward(DType dt, const void* x, const void* bias, const void* residual,
                                               int rows, int cols, const Dropout& drop, void* y) {
  cpu::require_f32(dt, "bias_dropout_residual_forward");
  cpu::require_dropout_p(drop.p, "bias_dropout_residual_forward");
  const cpu::DropoutMask mask(drop);
  const float* px = f32(x);
  const float* pb = static_cast<const float*>(bias);
  const float* pr = f32(residual);
  float* py = f32(y);
  cpu::parallel_for(threads_, rows, cols * 2, [&](int64_t r) {
    for (int c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      py[i] = pr[i] + (px[i] + (pb ? pb[c] : 0.0f)) * mask(r * cols + c);
    }
  });
}

void CpuBackend::bias_dropout_residual_backward(DType dt, const void* dy, int rows, int cols, const Dropout& drop,
                                                void* dx, float* dparam_bias) {
  cpu::require_f32(dt, "bias_dropout_residual_backward");
  cpu::require_dropout_p(drop.p, "bias_dropout_residual_backward");
  const cpu::DropoutMask mask(drop);
  const float* pdy = f32(dy);
  float* pdx = f32(dx);
  cpu::parallel_for(threads_, rows, cols * 2, [&](int64_t r) {
    for (int c = 0; c < cols; ++c) pdx[r * cols + c] = pdy[r * cols + c] * mask(r * cols + c);
  });
  if (dparam_bias) bias_grad(dt, dx, rows, cols, dparam_bias);
}

}  // namespace lseq::kernels

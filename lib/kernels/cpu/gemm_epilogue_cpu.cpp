// The feed-forward block's first layer with its bias and ReLU (forward) and the ReLU and bias gradients
// (backward) around the GEMM: the CPU twins of the CUDA backend's cuBLASLt epilogues, as a GEMM followed by one pass
// over its output. The mask holds bit c of row r at bit c % 8 of byte c / 8 of the row's relu_mask_ld(n) / 8 bytes.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::linear_bias_relu_forward(DType dt, const void* x, const void* w, const void* bias, int rows, int k,
                                          int n, void* y, void* relu_mask) {
  cpu::require_f32(dt, "linear_bias_relu_forward");
  check_linear_relu_shape("linear_bias_relu_forward", rows, k, n);
  if (rows == 0 || n == 0) return;
  GemmArgs g;  // y = x w^T
  g.trans_b = true;
  g.m = rows, g.n = n, g.k = k;
  g.a = x, g.lda = std::max(1, k);
  g.b = w, g.ldb = std::max(1, k);
  g.c = y, g.ldc = n;
  gemm(g);
  const float* pb = f32(bias);
  float* py = f32(y);
  auto* mask = static_cast<uint8_t*>(relu_mask);
  const int64_t mask_row_bytes = relu_mask_ld(n) / 8;
  cpu::parallel_for(threads_, rows, n, [&](int64_t r) {
    float* row = py + r * n;
    uint8_t* bits = mask ? mask + r * mask_row_bytes : nullptr;
    for (int64_t byte = 0; bits && byte < mask_row_bytes; ++byte) bits[byte] = 0;
    for (int c = 0; c < n; ++c) {
      const float z = row[c] + pb[c];
      row[c] = z > 0.0f ? z : 0.0f;
      if (bits && z > 0.0f) bits[c / 8] = static_cast<uint8_t>(bits[c / 8] | (1u << (c % 8)));
    }
  });
}

void CpuBackend::linear_drelu_bias_grad(DType dt, const void* dy, const void* w, const void* relu_mask, int rows,
                                        int m, int n, void* d_h, float* dparam_bias) {
  cpu::require_f32(dt, "linear_drelu_bias_grad");
  check_drelu_bias_grad_args(rows, m, n, relu_mask, dparam_bias);
  if (rows == 0 || n == 0) return;
  GemmArgs g;  // d_h = dy w
  g.m = rows, g.n = n, g.k = m;
  g.a = dy, g.lda = std::max(1, m);
  g.b = w, g.ldb = n;
  g.c = d_h, g.ldc = n;
  gemm(g);
  const auto* mask = static_cast<const uint8_t*>(relu_mask);
  const int64_t mask_row_bytes = relu_mask_ld(n) / 8;
  float* pd = f32(d_h);
  cpu::parallel_for(threads_, rows, n, [&](int64_t r) {
    const uint8_t* bits = mask + r * mask_row_bytes;
    for (int c = 0; c < n; ++c)
      if (!(bits[c / 8] >> (c % 8) & 1u)) pd[r * n + c] = 0.0f;
  });
  bias_grad(dt, d_h, rows, n, dparam_bias);
}

}  // namespace lseq::kernels

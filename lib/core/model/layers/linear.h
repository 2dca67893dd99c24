#pragma once
// Bias-free linear maps over the backend's GEMM: weights [out, in], y = x W^T (PyTorch's nn.Linear layout).
// Biases are applied by the fused ops that follow (split_heads, bias_activation_dropout, bias_dropout_residual).
#include <cstddef>

#include "core/model/layers/layer_context.h"

namespace lseq {

// y[rows, out] = x[rows, in] W^T; y's rows ld_y apart (0: out).
void linear_forward(const LayerContext& ctx, const void* x, int rows, int in, int out, std::size_t weight, void* y,
                    int ld_y = 0);
// dW += dy^T x (fp32 gradient); dx = dy W (overwritten, or added when accumulate_dx); dx may be null. dy's rows
// ld_dy apart (0: out).
void linear_backward(const LayerContext& ctx, const void* x, const void* dy, int rows, int in, int out,
                     std::size_t weight, void* dx, bool accumulate_dx, int ld_dy = 0);

}  // namespace lseq

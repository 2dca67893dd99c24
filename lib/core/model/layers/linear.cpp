#include "core/model/layers/linear.h"

namespace lseq {

void linear_forward(const LayerContext& ctx, const void* x, int rows, int in, int out, std::size_t weight, void* y,
                    int ld_y) {
  kernels::GemmArgs g;
  g.trans_b = true;
  g.m = rows, g.n = out, g.k = in;
  g.a = x, g.lda = in;
  g.b = ctx.w(weight), g.ldb = in;
  g.c = y, g.ldc = ld_y > 0 ? ld_y : out;
  g.ab = ctx.dt, g.c_type = ctx.dt;
  ctx.backend.gemm(g);
}

void linear_backward(const LayerContext& ctx, const void* x, const void* dy, int rows, int in, int out,
                     std::size_t weight, void* dx, bool accumulate_dx, int ld_dy) {
  linear_backward_weight(ctx, x, dy, rows, in, out, weight, ld_dy);
  if (dx != nullptr) linear_backward_input(ctx, dy, rows, in, out, weight, dx, accumulate_dx, ld_dy);
}

void linear_backward_weight(const LayerContext& ctx, const void* x, const void* dy, int rows, int in, int out,
                            std::size_t weight, int ld_dy) {
  kernels::GemmArgs dw;  // [out, in] += dy^T [out, rows] x [rows, in]
  dw.trans_a = true;
  dw.m = out, dw.n = in, dw.k = rows;
  dw.a = dy, dw.lda = ld_dy > 0 ? ld_dy : out;
  dw.b = x, dw.ldb = in;
  dw.c = ctx.g(weight), dw.ldc = in;
  dw.beta = 1.0f;
  dw.ab = ctx.dt, dw.c_type = kernels::DType::f32;
  ctx.backend.gemm(dw);
}

void linear_backward_input(const LayerContext& ctx, const void* dy, int rows, int in, int out, std::size_t weight,
                           void* dx, bool accumulate_dx, int ld_dy) {
  kernels::GemmArgs dxa;  // [rows, in] = dy [rows, out] x W [out, in]
  dxa.m = rows, dxa.n = in, dxa.k = out;
  dxa.a = dy, dxa.lda = ld_dy > 0 ? ld_dy : out;
  dxa.b = ctx.w(weight), dxa.ldb = in;
  dxa.c = dx, dxa.ldc = in;
  dxa.beta = accumulate_dx ? 1.0f : 0.0f;
  dxa.ab = ctx.dt, dxa.c_type = ctx.dt;
  ctx.backend.gemm(dxa);
}

}  // namespace lseq

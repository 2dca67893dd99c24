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
  const int ld = ld_dy > 0 ? ld_dy : out;
  kernels::GemmArgs dw;  // [out, in] += dy^T [out, rows] x [rows, in]
  dw.trans_a = true;
  dw.m = out, dw.n = in, dw.k = rows;
  dw.a = dy, dw.lda = ld;
  dw.b = x, dw.ldb = in;
  dw.c = ctx.g(weight), dw.ldc = in;
  dw.beta = 1.0f;
  dw.ab = ctx.dt, dw.c_type = kernels::DType::f32;
  ctx.backend.gemm(dw);
  if (dx == nullptr) return;
  kernels::GemmArgs dxa;  // [rows, in] = dy [rows, out] x W [out, in]
  dxa.m = rows, dxa.n = in, dxa.k = out;
  dxa.a = dy, dxa.lda = ld;
  dxa.b = ctx.w(weight), dxa.ldb = in;
  dxa.c = dx, dxa.ldc = in;
  dxa.beta = accumulate_dx ? 1.0f : 0.0f;
  dxa.ab = ctx.dt, dxa.c_type = ctx.dt;
  ctx.backend.gemm(dxa);
}

}  // namespace lseq

#include "core/model/layers/layer_norm_layer.h"

namespace lseq {

LayerNormLayer::LayerNormLayer(ParamTable& table, const std::string& name, int dim, float eps) : dim_(dim), eps_(eps) {
  gamma_ = table.add(name + ".weight", {dim}, ParamInit::ones);
  beta_ = table.add(name + ".bias", {dim}, ParamInit::zeros);
}

void LayerNormLayer::forward(const LayerContext& ctx, const void* x, int rows, void* y, Saved& saved) const {
  saved.x = x;
  saved.mean = ctx.memory.keep_n<float>(rows);
  saved.rstd = ctx.memory.keep_n<float>(rows);
  ctx.backend.layer_norm_forward(ctx.dt, x, ctx.w(gamma_), ctx.w(beta_), rows, dim_, eps_, y, saved.mean, saved.rstd);
}

void LayerNormLayer::forward_residual(const LayerContext& ctx, const void* o, const void* bias, const void* residual,
                                      int rows, const kernels::Dropout& drop, bool backward, void* y,
                                      Saved& saved) const {
  saved.x = nullptr;
  saved.y = backward ? y : nullptr;
  saved.mean = nullptr;
  saved.rstd = backward ? ctx.memory.keep_n<float>(rows) : nullptr;
  ctx.backend.residual_layer_norm_forward(ctx.dt, o, bias, residual, rows, dim_, drop, ctx.w(gamma_), ctx.w(beta_),
                                          eps_, nullptr, y, nullptr, saved.rstd);
}

void LayerNormLayer::forward_residual_sum(const LayerContext& ctx, const void* o, const void* bias,
                                          const void* residual, int rows, void* sum, void* y) const {
  ctx.backend.residual_layer_norm_forward(ctx.dt, o, bias, residual, rows, dim_, kernels::Dropout{}, ctx.w(gamma_),
                                          ctx.w(beta_), eps_, sum, y, nullptr, nullptr);
}

void LayerNormLayer::backward(const LayerContext& ctx, const Saved& saved, const void* dy, int rows, void* dx,
                              bool accumulate_dx) const {
  ctx.backend.layer_norm_backward(ctx.dt, saved.x, ctx.w(gamma_), saved.mean, saved.rstd, dy, rows, dim_, dx,
                                  ctx.g(gamma_), ctx.g(beta_), accumulate_dx);
}

void LayerNormLayer::backward_residual(const LayerContext& ctx, const Saved& saved, const void* dy, int rows,
                                       const kernels::Dropout& drop, std::size_t bias, void* ds, void* d_o) const {
  ctx.backend.residual_layer_norm_backward(ctx.dt, saved.y, ctx.w(gamma_), ctx.w(beta_), saved.rstd, dy, rows, dim_,
                                           drop, ds, d_o, ctx.g(gamma_), ctx.g(beta_), ctx.g(bias));
}

}  // namespace lseq

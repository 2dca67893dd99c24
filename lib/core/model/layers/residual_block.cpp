#include "core/model/layers/residual_block.h"

namespace lseq {

ResidualBlock::ResidualBlock(ParamTable& table, const std::string& norm_name, int dim, float eps,
                             NormPlacement placement)
    : norm_(table, norm_name, dim, eps), dim_(dim), placement_(placement) {}

const void* ResidualBlock::sublayer_input(const LayerContext& ctx, const void* x, int rows, Saved& saved) const {
  saved.rows = rows;
  if (placement_ == NormPlacement::post) return x;
  saved.normed = ctx.keep(static_cast<std::size_t>(rows) * dim_);
  norm_.forward(ctx, x, rows, saved.normed, saved.norm);
  return saved.normed;
}

void* ResidualBlock::output(const LayerContext& ctx, const void* x, const void* o, std::size_t bias, int rows,
                            const kernels::Dropout& drop, Saved& saved, bool backward) const {
  saved.drop = drop;
  const std::size_t count = static_cast<std::size_t>(rows) * dim_;
  void* out = ctx.keep(count);
  if (placement_ == NormPlacement::pre) {
    ctx.backend.bias_dropout_residual_forward(ctx.dt, o, ctx.w(bias), x, rows, dim_, drop, out);
    return out;
  }
  // Post-norm: the sum and its LayerNorm in one op; the sum is never stored (backward reads the LayerNorm's output).
  norm_.forward_residual(ctx, o, ctx.w(bias), x, rows, drop, backward, out, saved.norm);
  return out;
}

ResidualBlock::Grad ResidualBlock::begin_backward(const LayerContext& ctx, const Saved& s, void* g, void* spare,
                                                  std::size_t bias, void* d_o) const {
  Grad grad;
  if (placement_ == NormPlacement::post) {
    // The gradient of x + dropout(o + b) into spare, and of o (and b) from it, in one op.
    norm_.backward_residual(ctx, s.norm, g, s.rows, s.drop, bias, spare, d_o);
    grad.residual = spare;
    grad.sublayer_dy = d_o;
    grad.sublayer_dx = spare;
    grad.accumulate = true;
    return grad;
  }
  grad.residual = g;
  grad.sublayer_dx = ctx.temp(static_cast<std::size_t>(s.rows) * dim_);
  grad.accumulate = false;
  if (s.drop.p == 0.0f) {  // d_o = g: the sublayer reads g, which end_backward completes only after it
    ctx.backend.bias_grad(ctx.dt, g, s.rows, dim_, ctx.g(bias));
    grad.sublayer_dy = g;
    return grad;
  }
  ctx.backend.bias_dropout_residual_backward(ctx.dt, grad.residual, s.rows, dim_, s.drop, d_o, ctx.g(bias));
  grad.sublayer_dy = d_o;
  return grad;
}

void* ResidualBlock::end_backward(const LayerContext& ctx, const Saved& s, const Grad& grad) const {
  if (placement_ == NormPlacement::post) return grad.residual;
  // The residual's gradient is already in grad.residual: the LayerNorm's backward adds its share to it.
  norm_.backward(ctx, s.norm, grad.sublayer_dx, s.rows, grad.residual, true);
  return grad.residual;
}

}  // namespace lseq

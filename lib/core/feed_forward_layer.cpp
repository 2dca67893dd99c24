#include "core/feed_forward_layer.h"

#include "core/linear.h"

namespace lseq {

FeedForwardLayer::FeedForwardLayer(ParamTable& table, const std::string& prefix, int dim, int dim_ffn,
                                   kernels::Activation act)
    : dim_(dim), dim_ffn_(dim_ffn), act_(act) {
  w_in_ = table.add(prefix + ".in.weight", {dim_ffn, dim}, ParamInit::glorot_uniform);
  b_in_ = table.add(prefix + ".in.bias", {dim_ffn}, ParamInit::zeros);
  w_out_ = table.add(prefix + ".out.weight", {dim, dim_ffn}, ParamInit::glorot_uniform);
  b_out_ = table.add(prefix + ".out.bias", {dim}, ParamInit::zeros);
}

void FeedForwardLayer::forward(const LayerContext& ctx, const void* x, int rows, const kernels::Dropout& drop, void* o,
                               Saved& saved) const {
  saved.x = x;
  saved.rows = rows;
  saved.drop = drop;
  const std::size_t count = static_cast<std::size_t>(rows) * dim_ffn_;
  saved.h = saved.a = nullptr;  // a Saved may be reused: only this call's path may be set
  if (act_ == kernels::Activation::relu && drop.p == 0.0f) {
    saved.a = ctx.keep(count);
    ctx.backend.linear_bias_forward(ctx.dt, x, ctx.w(w_in_), ctx.w(b_in_), rows, dim_, dim_ffn_, true, saved.a);
    linear_forward(ctx, saved.a, rows, dim_ffn_, dim_, w_out_, o);
    return;
  }
  saved.h = ctx.keep(count);
  linear_forward(ctx, x, rows, dim_, dim_ffn_, w_in_, saved.h);
  TempScope scope(ctx.memory);
  void* a = ctx.temp(count);
  ctx.backend.bias_activation_dropout_forward(ctx.dt, saved.h, ctx.w(b_in_), rows, dim_ffn_, act_, drop, a);
  linear_forward(ctx, a, rows, dim_ffn_, dim_, w_out_, o);
}

void FeedForwardLayer::backward(const LayerContext& ctx, const Saved& s, const void* d_o, void* dx,
                                bool accumulate_dx) const {
  TempScope scope(ctx.memory);
  const std::size_t count = static_cast<std::size_t>(s.rows) * dim_ffn_;
  void* d_h = ctx.temp(count);
  if (s.a) {
    // relu'(x W_in^T + b_in) = (a > 0): the ReLU's gradient over a with no bias, the b_in gradient with it.
    void* d_a = ctx.temp(count);
    linear_backward(ctx, s.a, d_o, s.rows, dim_ffn_, dim_, w_out_, d_a, false);
    ctx.backend.bias_activation_dropout_backward(ctx.dt, s.a, nullptr, d_a, s.rows, dim_ffn_, act_, s.drop, d_h,
                                                 ctx.g(b_in_));
  } else {
    void* a = ctx.temp(count);
    ctx.backend.bias_activation_dropout_forward(ctx.dt, s.h, ctx.w(b_in_), s.rows, dim_ffn_, act_, s.drop, a);
    void* d_a = ctx.temp(count);
    linear_backward(ctx, a, d_o, s.rows, dim_ffn_, dim_, w_out_, d_a, false);
    ctx.backend.bias_activation_dropout_backward(ctx.dt, s.h, ctx.w(b_in_), d_a, s.rows, dim_ffn_, act_, s.drop, d_h,
                                                 ctx.g(b_in_));
  }
  linear_backward(ctx, s.x, d_h, s.rows, dim_, dim_ffn_, w_in_, dx, accumulate_dx);
}

}  // namespace lseq

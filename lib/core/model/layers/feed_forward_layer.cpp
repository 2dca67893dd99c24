#include "core/model/layers/feed_forward_layer.h"

#include "core/model/layers/linear.h"

namespace lseq {

FeedForwardLayer::FeedForwardLayer(ParamTable& table, const std::string& prefix, int dim, int dim_ffn,
                                   kernels::Activation act)
    : dim_(dim), dim_ffn_(dim_ffn), act_(act) {
  w_in_ = table.add(prefix + ".in.weight", {dim_ffn, dim}, ParamInit::glorot_uniform);
  b_in_ = table.add(prefix + ".in.bias", {dim_ffn}, ParamInit::zeros);
  w_out_ = table.add(prefix + ".out.weight", {dim, dim_ffn}, ParamInit::glorot_uniform);
  b_out_ = table.add(prefix + ".out.bias", {dim}, ParamInit::zeros);
}

void FeedForwardLayer::hidden_forward(const LayerContext& ctx, const void* x, int rows, bool fused_relu,
                                      void* hidden) const {
  if (fused_relu) {
    ctx.backend.linear_bias_forward(ctx.dt, x, ctx.w(w_in_), ctx.w(b_in_), rows, dim_, dim_ffn_,
                                    kernels::BiasActivation::relu, hidden);
  } else {
    linear_forward(ctx, x, rows, dim_, dim_ffn_, w_in_, hidden);
  }
}

void FeedForwardLayer::forward(const LayerContext& ctx, const void* x, int rows, const kernels::Dropout& drop, void* o,
                               Saved& saved) const {
  saved.x = x;
  saved.rows = rows;
  saved.drop = drop;
  saved.fused_relu = act_ == kernels::Activation::relu && drop.p == 0.0f;
  const std::size_t count = static_cast<std::size_t>(rows) * dim_ffn_;
  TempScope scope(ctx.memory);
  void* hidden = ctx.recompute_ffn ? ctx.temp(count) : ctx.keep(count);
  saved.recompute = ctx.recompute_ffn;
  saved.hidden = ctx.recompute_ffn ? nullptr : hidden;
  hidden_forward(ctx, x, rows, saved.fused_relu, hidden);
  if (saved.fused_relu) {
    linear_forward(ctx, hidden, rows, dim_ffn_, dim_, w_out_, o);
    return;
  }
  void* a = ctx.recompute_ffn ? ctx.temp(count) : ctx.keep(count);
  saved.activated = ctx.recompute_ffn ? nullptr : a;
  ctx.backend.bias_activation_dropout_forward(ctx.dt, hidden, ctx.w(b_in_), rows, dim_ffn_, act_, drop, a);
  linear_forward(ctx, a, rows, dim_ffn_, dim_, w_out_, o);
}

void FeedForwardLayer::infer(const LayerContext& ctx, const void* x, int rows, void* o) const {
  const std::size_t count = static_cast<std::size_t>(rows) * dim_ffn_;
  TempScope scope(ctx.memory);
  void* hidden = ctx.temp(count);
  if (act_ == kernels::Activation::swish) {
    linear_forward(ctx, x, rows, dim_, dim_ffn_, w_in_, hidden);
    void* a = ctx.temp(count);
    ctx.backend.bias_activation_dropout_forward(ctx.dt, hidden, ctx.w(b_in_), rows, dim_ffn_, act_, kernels::Dropout{},
                                                a);
    linear_forward(ctx, a, rows, dim_ffn_, dim_, w_out_, o);
    return;
  }
  const auto fused = act_ == kernels::Activation::relu ? kernels::BiasActivation::relu : kernels::BiasActivation::gelu;
  ctx.backend.linear_bias_forward(ctx.dt, x, ctx.w(w_in_), ctx.w(b_in_), rows, dim_, dim_ffn_, fused, hidden);
  linear_forward(ctx, hidden, rows, dim_ffn_, dim_, w_out_, o);
}

void FeedForwardLayer::backward(const LayerContext& ctx, const Saved& s, const void* d_o, void* dx,
                                bool accumulate_dx) const {
  TempScope scope(ctx.memory);
  const std::size_t count = static_cast<std::size_t>(s.rows) * dim_ffn_;
  const void* hidden = s.hidden;
  if (s.recompute) {
    void* again = ctx.temp(count);
    hidden_forward(ctx, s.x, s.rows, s.fused_relu, again);
    hidden = again;
  }
  // The gradient of the hidden layer overwrites that of its activation (elementwise, in place): one [rows,
  // dim_ffn] temporary fewer at the step's memory peak, the first feed-forward block of backward.
  void* d_h = ctx.temp(count);
  if (s.fused_relu) {
    // relu'(x W_in^T + b_in) = (a > 0): the ReLU's gradient over a with no bias, the b_in gradient with it.
    linear_backward(ctx, hidden, d_o, s.rows, dim_ffn_, dim_, w_out_, d_h, false);
    ctx.backend.bias_activation_dropout_backward(ctx.dt, hidden, nullptr, d_h, s.rows, dim_ffn_, act_, s.drop, d_h,
                                                 ctx.g(b_in_));
  } else {
    const void* a = s.activated;
    if (s.recompute) {  // the same pass as forward's, so the same values
      void* again = ctx.temp(count);
      ctx.backend.bias_activation_dropout_forward(ctx.dt, hidden, ctx.w(b_in_), s.rows, dim_ffn_, act_, s.drop, again);
      a = again;
    }
    linear_backward(ctx, a, d_o, s.rows, dim_ffn_, dim_, w_out_, d_h, false);
    ctx.backend.bias_activation_dropout_backward(ctx.dt, hidden, ctx.w(b_in_), d_h, s.rows, dim_ffn_, act_, s.drop,
                                                 d_h, ctx.g(b_in_));
  }
  linear_backward(ctx, s.x, d_h, s.rows, dim_, dim_ffn_, w_in_, dx, accumulate_dx);
}

}  // namespace lseq

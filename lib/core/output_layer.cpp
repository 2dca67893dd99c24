#include "core/output_layer.h"

#include "core/linear.h"

namespace lseq {

namespace {
constexpr int kPadId = 0;
}

OutputLayer::OutputLayer(ParamTable& table, const ModelConfig& config, std::size_t tied_weight)
    : dim_(config.dim_emb), vocab_(config.tgt_vocab), label_smoothing_(config.label_smoothing) {
  weight_ = tied_weight != kUntied
                ? tied_weight
                : table.add("output.weight", {config.tgt_vocab, config.dim_emb}, ParamInit::glorot_uniform);
  bias_ = table.add("output.bias", {config.tgt_vocab}, ParamInit::zeros);
}

void OutputLayer::forward(const LayerContext& ctx, const void* x, int rows, Saved& saved, bool loss_only) const {
  saved.x = x;
  saved.rows = rows;
  saved.logits = ctx.keep(static_cast<std::size_t>(rows) * vocab_);
  saved.bias_pending = loss_only;
  linear_forward(ctx, x, rows, dim_, vocab_, weight_, saved.logits);
  if (!loss_only) ctx.backend.add_bias(ctx.dt, saved.logits, ctx.w(bias_), rows, vocab_, saved.logits);
}

void OutputLayer::loss(const LayerContext& ctx, const Saved& saved, const int32_t* targets, bool gradients,
                       float grad_scale, float* row_loss, float* row_nll) const {
  const void* bias = saved.bias_pending ? ctx.w(bias_) : nullptr;
  ctx.backend.cross_entropy(ctx.dt, saved.logits, bias, targets, saved.rows, vocab_, label_smoothing_, kPadId,
                            grad_scale, row_loss, row_nll, gradients ? saved.logits : nullptr);
}

void OutputLayer::backward(const LayerContext& ctx, const Saved& saved, void* dx) const {
  ctx.backend.bias_grad(ctx.dt, saved.logits, saved.rows, vocab_, ctx.g(bias_));
  linear_backward(ctx, saved.x, saved.logits, saved.rows, dim_, vocab_, weight_, dx, false);
}

}  // namespace lseq

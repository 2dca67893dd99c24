#include "core/model/layers/output_layer.h"

#include <algorithm>

#include "core/model/layers/linear.h"

namespace lseq {

namespace {
constexpr int kPadId = 0;
}

OutputLayer::OutputLayer(ParamTable& table, const ModelConfig& config, std::size_t tied_weight)
    : param_begin_(table.next_offset()), dim_(config.dim_emb), vocab_(config.tgt_vocab),
      label_smoothing_(config.label_smoothing) {
  weight_ = tied_weight != kUntied
                ? tied_weight
                : table.add("output.weight", {config.tgt_vocab, config.dim_emb}, ParamInit::glorot_uniform);
  bias_ = table.add("output.bias", {config.tgt_vocab}, ParamInit::zeros);
}

void OutputLayer::forward(const LayerContext& ctx, const void* x, int rows, Saved& saved) const {
  saved.x = x;
  saved.rows = rows;
  saved.logits = ctx.keep(static_cast<std::size_t>(rows) * vocab_);
  ctx.backend.linear_bias_forward(ctx.dt, x, ctx.w(weight_), ctx.w(bias_), rows, dim_, vocab_, false, saved.logits);
}

void OutputLayer::loss(const LayerContext& ctx, const Saved& saved, const int32_t* targets, bool gradients,
                       float grad_scale, float* row_loss, float* row_nll) const {
  ctx.backend.cross_entropy(ctx.dt, saved.logits, nullptr, targets, saved.rows, vocab_, label_smoothing_, kPadId,
                            grad_scale, row_loss, row_nll, gradients ? saved.logits : nullptr);
}

void OutputLayer::backward(const LayerContext& ctx, const Saved& saved, void* dx) const {
  ctx.backend.bias_grad(ctx.dt, saved.logits, saved.rows, vocab_, ctx.g(bias_));
  linear_backward(ctx, saved.x, saved.logits, saved.rows, dim_, vocab_, weight_, dx, false);
}

int OutputLayer::default_chunk_rows(int rows) const {
  const int fit = static_cast<int>(std::max<std::size_t>(1, kChunkLogits / static_cast<std::size_t>(vocab_)));
  const int share = rows >= kHalfChunkRows ? (rows + 1) / 2 : (rows + 3) / 4;
  return std::max(1, std::min(fit, (share + 63) / 64 * 64));
}

void OutputLayer::loss_in_chunks(const LayerContext& ctx, const void* x, int rows, const int32_t* targets,
                                 float grad_scale, float* row_loss, float* row_nll, void* dx, int chunk_rows) const {
  if (rows <= 0) return;
  const int chunk = std::min(rows, chunk_rows > 0 ? chunk_rows : default_chunk_rows(rows));
  TempScope scope(ctx.memory);
  void* logits = ctx.temp(static_cast<std::size_t>(chunk) * vocab_);
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int n = std::min(chunk, rows - r0);
    const std::size_t at = static_cast<std::size_t>(r0) * dim_;
    const void* xc = offset_ptr(x, at, ctx.dt);
    linear_forward(ctx, xc, n, dim_, vocab_, weight_, logits);
    ctx.backend.cross_entropy(ctx.dt, logits, ctx.w(bias_), targets + r0, n, vocab_, label_smoothing_, kPadId,
                              grad_scale, row_loss + r0, row_nll + r0, dx ? logits : nullptr);
    if (dx) {
      ctx.backend.bias_grad(ctx.dt, logits, n, vocab_, ctx.g(bias_));
      linear_backward(ctx, xc, logits, n, dim_, vocab_, weight_, offset_ptr(dx, at, ctx.dt), false);
    }
  }
}

}  // namespace lseq

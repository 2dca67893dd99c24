#include "core/model/layers/output_layer.h"

#include <algorithm>

#include "core/model/layers/linear.h"

namespace lseq {

namespace {
constexpr int kPadId = 0;

// Training's logits chunks keep rows of 16 bytes (the vocabulary rounded up to 8 16-bit elements) and their GEMMs
// cut the vocabulary at a multiple of 8, the last vocab % 8 columns in products of their own: cuBLAS runs a product
// whose rows are not 16-byte aligned, or whose contiguous extent is no multiple of 8, on unaligned sm75-era
// kernels. With GPT-2's 50257 + 4 ids the three output-layer GEMMs took 31 of 73 ms a step of GPT-2 small at 16384
// tokens on an H100 (2026-11-26).
constexpr int kAlignedColumns = 8;
int logits_ld(int vocab) { return (vocab + kAlignedColumns - 1) / kAlignedColumns * kAlignedColumns; }

// Calls part(first, count) for the vocabulary's columns in products that stay aligned: the first vocab / 8 * 8, then
// the last vocab % 8 (each only when it has columns).
template <typename Part>
void for_aligned_parts(int vocab, const Part& part) {
  const int head = vocab / kAlignedColumns * kAlignedColumns;
  if (head > 0) part(0, head);
  if (head < vocab) part(head, vocab - head);
}
}  // namespace

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
  ctx.backend.linear_bias_forward(ctx.dt, x, ctx.w(weight_), ctx.w(bias_), rows, dim_, vocab_,
                                  kernels::BiasActivation::none, saved.logits);
}

OutputLayer::StepLogits OutputLayer::step_logits(const LayerContext& ctx, const void* x, int rows) const {
  const int ld = logits_ld(vocab_);
  void* logits = ctx.keep(static_cast<std::size_t>(rows) * ld);
  project_aligned(ctx, x, rows, logits, ld);
  return {logits, ld};
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

void OutputLayer::project_aligned(const LayerContext& ctx, const void* x, int rows, void* logits, int ld) const {
  for_aligned_parts(vocab_, [&](int first, int count) {
    const std::size_t at = static_cast<std::size_t>(first);
    ctx.backend.linear_bias_forward(ctx.dt, x, ctx.w(weight_ + at * dim_), ctx.w(bias_ + at), rows, dim_, count,
                                    kernels::BiasActivation::none, offset_ptr(logits, at, ctx.dt), ld);
  });
}

void OutputLayer::project_aligned_backward(const LayerContext& ctx, const void* x, const void* dlogits, int rows,
                                           int ld, void* dx) const {
  for_aligned_parts(vocab_, [&](int first, int count) {  // the tail's dx adds to the head's
    const std::size_t at = static_cast<std::size_t>(first);
    linear_backward(ctx, x, offset_ptr(dlogits, at, ctx.dt), rows, dim_, count, weight_ + at * dim_, dx, first > 0,
                    ld);
  });
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
  const int ld = logits_ld(vocab_);
  void* logits = ctx.temp(static_cast<std::size_t>(chunk) * ld);
  for (int r0 = 0; r0 < rows; r0 += chunk) {
    const int n = std::min(chunk, rows - r0);
    const std::size_t at = static_cast<std::size_t>(r0) * dim_;
    const void* xc = offset_ptr(x, at, ctx.dt);
    project_aligned(ctx, xc, n, logits, ld);
    ctx.backend.cross_entropy(ctx.dt, logits, nullptr, targets + r0, n, vocab_, label_smoothing_, kPadId, grad_scale,
                              row_loss + r0, row_nll + r0, dx ? logits : nullptr, ld);
    if (dx) {
      ctx.backend.bias_grad(ctx.dt, logits, n, vocab_, ctx.g(bias_), ld);
      project_aligned_backward(ctx, xc, logits, n, ld, offset_ptr(dx, at, ctx.dt));
    }
  }
}

}  // namespace lseq

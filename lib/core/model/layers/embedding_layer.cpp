#include "core/model/layers/embedding_layer.h"

#include <cmath>

namespace lseq {

std::vector<float> sinusoidal_positions(int max_len, int dim) {
  std::vector<float> table(static_cast<std::size_t>(max_len) * dim);
  for (int t = 0; t < max_len; ++t) {
    for (int c = 0; c < dim; ++c) {
      const int i = c / 2;
      const double angle = t / std::pow(10000.0, 2.0 * i / dim);
      table[static_cast<std::size_t>(t) * dim + c] = static_cast<float>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
    }
  }
  return table;
}

EmbeddingLayer::EmbeddingLayer(std::size_t table, int dim)
    : table_(table), dim_(dim), scale_(std::sqrt(static_cast<float>(dim))) {}

void EmbeddingLayer::forward(const LayerContext& ctx, const int32_t* tokens, int batch, int len, const void* positions,
                             const kernels::Dropout& drop, void* out) const {
  ctx.backend.embedding_forward(ctx.dt, tokens, batch, len, ctx.w(table_), dim_, scale_, positions, drop, out);
}

void EmbeddingLayer::backward(const LayerContext& ctx, const int32_t* tokens, int batch, int len,
                              const kernels::Dropout& drop, const void* d_out) const {
  ctx.backend.embedding_backward(ctx.dt, tokens, batch, len, dim_, scale_, drop, d_out, ctx.g(table_), nullptr);
}

}  // namespace lseq

#include "core/model/layers/embedding_layer.h"

#include <cmath>

namespace lseq {

namespace {

// Column c of row t: the angle in double and its sine or cosine, rounded once to float. interleaved pairs the
// sine and cosine of frequency i in columns 2i, 2i+1; concatenated puts all sines first (column i, then dim/2 + i).
float vaswani_value(int t, int c, int dim, bool interleaved) {
  const int half = dim / 2;
  const int i = interleaved ? c / 2 : (c < half ? c : c - half);
  const bool sine = interleaved ? c % 2 == 0 : c < half;
  const double angle = t / std::pow(10000.0, 2.0 * i / dim);
  return static_cast<float>(sine ? std::sin(angle) : std::cos(angle));
}

// Marian's table (SinusoidalPositionEmbeddings in its CPU tensor operators), in float exactly as it computes it.
float marian_value(int t, int c, int dim) {
  const float timescales = static_cast<float>(dim) / 2;
  const float log_increment = std::log(10000.f) / (timescales - 1.f);
  const int half = static_cast<int>(timescales);
  const float v = static_cast<float>(t) * std::exp(static_cast<float>(c % half) * -log_increment);
  return c < half ? std::sin(v) : std::cos(v);
}

}  // namespace

std::vector<float> sinusoidal_positions(int max_len, int dim, PositionLayout layout) {
  std::vector<float> table(static_cast<std::size_t>(max_len) * dim);
  for (int t = 0; t < max_len; ++t) {
    for (int c = 0; c < dim; ++c) {
      const bool interleaved = layout == PositionLayout::interleaved;
      table[static_cast<std::size_t>(t) * dim + c] =
          layout == PositionLayout::marian ? marian_value(t, c, dim) : vaswani_value(t, c, dim, interleaved);
    }
  }
  return table;
}

EmbeddingLayer::EmbeddingLayer(std::size_t table, int dim, std::size_t learned_positions, bool scale_by_sqrt_dim)
    : table_(table), dim_(dim), scale_(scale_by_sqrt_dim ? std::sqrt(static_cast<float>(dim)) : 1.0f),
      positions_(learned_positions) {}

void EmbeddingLayer::forward(const LayerContext& ctx, const int32_t* tokens, int batch, int len, const void* positions,
                             const kernels::Dropout& drop, void* out, const int32_t* position_ids) const {
  if (!position_ids || !positions) {
    ctx.backend.embedding_forward(ctx.dt, tokens, batch, len, ctx.w(table_), dim_, scale_, positions, drop, out);
    return;
  }
  // Each token's position row gathered first; the rows are then one sequence of batch*len positions, each token
  // taking its own row (the dropout mask is keyed by element, so it is the same as over [batch, len]).
  TempScope scope(ctx.memory);
  const int rows = batch * len;
  void* gathered = ctx.temp(static_cast<std::size_t>(rows) * dim_);
  ctx.backend.gather_rows(ctx.dt, positions, dim_, position_ids, rows, dim_, gathered, dim_, nullptr);
  ctx.backend.embedding_forward(ctx.dt, tokens, 1, rows, ctx.w(table_), dim_, scale_, gathered, drop, out);
}

void EmbeddingLayer::backward(const LayerContext& ctx, const int32_t* tokens, int batch, int len,
                              const kernels::Dropout& drop, const void* d_out, const int32_t* position_ids) const {
  float* d_positions = learned_positions() ? ctx.g(positions_) : nullptr;
  ctx.backend.embedding_backward(ctx.dt, tokens, batch, len, dim_, scale_, drop, d_out, ctx.g(table_),
                                 position_ids ? nullptr : d_positions);
  // Positions by id: their gradient is a table gradient over the ids (scale 1), summed as the tokens' is.
  if (position_ids && d_positions)
    ctx.backend.embedding_backward(ctx.dt, position_ids, 1, batch * len, dim_, 1.0f, drop, d_out, d_positions,
                                   nullptr);
}

}  // namespace lseq

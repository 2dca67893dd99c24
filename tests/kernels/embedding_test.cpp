// embedding_forward/backward: forward against a double reference; table and position gradients against
// finite differences of sum(w * forward); accumulation; thread-count independence.
#include "kernels/dropout_rng.h"
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

struct EmbeddingCase {
  int batch, len, dim, vocab;
  float p;
  bool with_positions;
};

std::vector<double> reference_embedding(const EmbeddingCase& c, const std::vector<int32_t>& tokens,
                                        const std::vector<double>& table, const std::vector<double>& pos, float scale,
                                        uint64_t key) {
  std::vector<double> out(std::size_t(c.batch) * c.len * c.dim);
  for (int b = 0; b < c.batch; ++b)
    for (int t = 0; t < c.len; ++t)
      for (int d = 0; d < c.dim; ++d) {
        const std::size_t i = (std::size_t(b) * c.len + t) * c.dim + d;
        double v = table[std::size_t(tokens[b * c.len + t]) * c.dim + d] * scale;
        if (c.with_positions) v += pos[std::size_t(t) * c.dim + d];
        out[i] = c.p > 0 ? v * dropout_multiplier(key, i, c.p) : v;
      }
  return out;
}

TEST_F(CpuKernels, EmbeddingForwardMatchesReference) {
  const std::vector<EmbeddingCase> cases = {
      {1, 1, 1, 3, 0.0f, false}, {2, 5, 7, 11, 0.1f, true}, {3, 4, 16, 5, 0.0f, true}, {8, 33, 96, 100, 0.3f, true}};
  uint64_t seed = 200;
  for (const auto& c : cases) {
    const auto tokens = random_ints(std::size_t(c.batch) * c.len, ++seed, 0, c.vocab - 1);
    const auto table = random_floats(std::size_t(c.vocab) * c.dim, ++seed);
    const auto pos = random_floats(std::size_t(c.len + 3) * c.dim, ++seed);  // max_len > len
    const float scale = 1.5f;
    auto out = poisoned(std::size_t(c.batch) * c.len * c.dim);
    backend.embedding_forward(DType::f32, tokens.data(), c.batch, c.len, table.data(), c.dim, scale,
                              c.with_positions ? pos.data() : nullptr, Dropout{c.p, 77}, out.data());
    const auto ref = reference_embedding(c, tokens, to_double(table), to_double(pos), scale, 77);
    EXPECT_TRUE(all_close(out, ref, 1e-6, 1e-6)) << "batch " << c.batch << " len " << c.len << " dim " << c.dim;
  }
}

TEST_F(CpuKernels, EmbeddingBackwardMatchesFiniteDifferencesAndAccumulates) {
  const std::vector<EmbeddingCase> cases = {
      {1, 1, 1, 2, 0.0f, true}, {2, 5, 3, 4, 0.2f, true}, {3, 2, 4, 6, 0.0f, false}};
  uint64_t seed = 300;
  for (const auto& c : cases) {
    const std::size_t rows = std::size_t(c.batch) * c.len;
    const auto tokens = random_ints(rows, ++seed, 0, c.vocab - 1);  // small vocab: tokens repeat
    const auto table = to_double(random_floats(std::size_t(c.vocab) * c.dim, ++seed));
    const auto pos = to_double(random_floats(std::size_t(c.len) * c.dim, ++seed));
    const auto w = random_floats(rows * c.dim, ++seed);
    const auto wd = to_double(w);
    const float scale = 0.7f;
    const uint64_t key = 5;
    auto fd_table = finite_difference(
        [&](const std::vector<double>& t) {
          return weighted_sum(wd, reference_embedding(c, tokens, t, pos, scale, key));
        },
        table);
    auto fd_pos = finite_difference(
        [&](const std::vector<double>& p) {
          return weighted_sum(wd, reference_embedding(c, tokens, table, p, scale, key));
        },
        pos);
    // Parameter gradients accumulate: start from random values, run twice.
    const auto start_table = random_floats(table.size(), ++seed);
    const auto start_pos = random_floats(pos.size(), ++seed);
    auto dtable = start_table, dpos = start_pos;
    for (int call = 0; call < 2; ++call)
      backend.embedding_backward(DType::f32, tokens.data(), c.batch, c.len, c.dim, scale, Dropout{c.p, key}, w.data(),
                                 dtable.data(), c.with_positions ? dpos.data() : nullptr);
    for (std::size_t i = 0; i < fd_table.size(); ++i) fd_table[i] = start_table[i] + 2 * fd_table[i];
    for (std::size_t i = 0; i < fd_pos.size(); ++i) fd_pos[i] = start_pos[i] + (c.with_positions ? 2 * fd_pos[i] : 0.0);
    EXPECT_TRUE(all_close(dtable, fd_table, 1e-4, 1e-5)) << "batch " << c.batch << " len " << c.len;
    EXPECT_TRUE(all_close(dpos, fd_pos, 1e-4, 1e-5)) << "batch " << c.batch << " len " << c.len;
  }
}

// Tokens repeated hundreds of times span many windows of the chunked summation (kernels/embedding_grad_order.h):
// the table gradient still equals the double sum of scale * dropout(dout) over each token's rows.
TEST_F(CpuKernels, EmbeddingBackwardOfLongTokenRunsMatchesDoubleSums) {
  const int batch = 20, len = 37, dim = 19, vocab = 4;  // ~185 rows per token, padding-like runs
  const float scale = 1.3f, p = 0.2f;
  const uint64_t key = 41;
  const auto tokens = random_ints(std::size_t(batch) * len, 501, 0, vocab - 1);
  const auto dout = random_floats(std::size_t(batch) * len * dim, 502);
  const auto start = random_floats(std::size_t(vocab) * dim, 503);
  auto table = start;
  backend.embedding_backward(DType::f32, tokens.data(), batch, len, dim, scale, Dropout{p, key}, dout.data(),
                             table.data(), nullptr);
  std::vector<double> ref(start.begin(), start.end());
  for (std::size_t row = 0; row < tokens.size(); ++row)
    for (int d = 0; d < dim; ++d) {
      const std::size_t i = row * dim + d;
      ref[std::size_t(tokens[row]) * dim + d] += double(scale) * dout[i] * dropout_multiplier(key, i, p);
    }
  EXPECT_TRUE(all_close(table, ref, 1e-5, 1e-5));
}

TEST_F(CpuKernels, EmbeddingBackwardIsTheSameOnOneAndTwoThreads) {
  CpuBackend one(1);
  const int batch = 16, len = 40, dim = 128, vocab = 50;
  const auto tokens = random_ints(batch * len, 9, 0, vocab - 1);
  const auto dout = random_floats(std::size_t(batch) * len * dim, 10);
  std::vector<float> t1(vocab * dim, 0.0f), t2 = t1, p1(len * dim, 0.0f), p2 = p1;
  one.embedding_backward(DType::f32, tokens.data(), batch, len, dim, 2.0f, Dropout{0.1f, 3}, dout.data(), t1.data(),
                         p1.data());
  backend.embedding_backward(DType::f32, tokens.data(), batch, len, dim, 2.0f, Dropout{0.1f, 3}, dout.data(), t2.data(),
                             p2.data());
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(p1, p2);
}

}  // namespace
}  // namespace lseq::kernels::test

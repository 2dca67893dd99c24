// Embedding lookup and its scatter-add backward on the device against the CPU backend: with and without
// positions and dropout (the CPU's masks), one token, the longest length, a 32000-entry vocabulary, and a tiny
// vocabulary whose tokens repeat a thousand times. Gradients accumulate, equal to the CPU's bit for bit.
#include <algorithm>
#include <cmath>
#include <map>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct EmbCase {
  int batch, len, dim, vocab;
};
const std::vector<EmbCase> kEmbeddingCases = {
    {1, 1, 1, 5}, {3, 7, 33, 50}, {2, 256, 512, 300}, {8, 40, 64, 32000}, {64, 50, 40, 3}};

TEST_F(GpuKernels, EmbeddingForwardMatchesCpu) {
  uint64_t seed = 9000;
  for (DType dt : dtypes())
    for (const auto& c : kEmbeddingCases)
      for (bool with_positions : {false, true})
        for (float p : {0.0f, 0.1f}) {
          const int rows = c.batch * c.len;
          const auto tokens = random_ints(rows, ++seed, 0, c.vocab - 1);
          const auto table = quantize(random_floats(std::size_t(c.vocab) * c.dim, ++seed), dt);
          const auto positions = quantize(random_floats(std::size_t(c.len + 3) * c.dim, ++seed), dt);
          const float scale = std::sqrt(static_cast<float>(c.dim));
          const Dropout drop{p, dropout_key(5, seed, 1)};
          std::vector<float> ref(std::size_t(rows) * c.dim);
          cpu.embedding_forward(DType::f32, tokens.data(), c.batch, c.len, table.data(), c.dim, scale,
                                with_positions ? positions.data() : nullptr, drop, ref.data());
          DeviceBuffer dtok(gpu(), tokens), dtab(gpu(), dt, table), dpos(gpu(), dt, positions),
              out(gpu(), dt, ref.size());
          out.poison();
          gpu().embedding_forward(dt, dtok.i32(), c.batch, c.len, dtab.get(), c.dim, scale,
                                  with_positions ? dpos.get() : nullptr, drop, out.get());
          const auto got = out.download();
          EXPECT_TRUE(within(got, ref, bound_for(dt, 1e-3 * scale)))
              << label(dt) << " batch " << c.batch << " len " << c.len << " dim " << c.dim << " p " << p;
          if (p > 0)
            for (std::size_t i = 0; i < got.size(); ++i)
              ASSERT_EQ(got[i] == 0.0f, ref[i] == 0.0f) << "dropout mask differs at " << i;
        }
}

TEST_F(GpuKernels, EmbeddingBackwardAccumulatesLikeCpu) {
  uint64_t seed = 9100;
  for (DType dt : dtypes())
    for (const auto& c : kEmbeddingCases)
      for (bool with_positions : {false, true})
        for (float p : {0.0f, 0.25f}) {
          const int rows = c.batch * c.len;
          const auto tokens = random_ints(rows, ++seed, 0, c.vocab - 1);
          const auto dout = quantize(random_floats(std::size_t(rows) * c.dim, ++seed), dt);
          const float scale = std::sqrt(static_cast<float>(c.dim));
          const Dropout drop{p, dropout_key(6, seed, 2)};
          auto ref_table = random_floats(std::size_t(c.vocab) * c.dim, ++seed);  // accumulated into
          auto ref_pos = random_floats(std::size_t(c.len) * c.dim, ++seed);
          DeviceBuffer dtok(gpu(), tokens), ddout(gpu(), dt, dout), dtab(gpu(), DType::f32, ref_table),
              dpos(gpu(), DType::f32, ref_pos);
          cpu.embedding_backward(DType::f32, tokens.data(), c.batch, c.len, c.dim, scale, drop, dout.data(),
                                 ref_table.data(), with_positions ? ref_pos.data() : nullptr);
          gpu().embedding_backward(dt, dtok.i32(), c.batch, c.len, c.dim, scale, drop, ddout.get(), dtab.f32(),
                                   with_positions ? dpos.f32() : nullptr);
          const std::string what = label(dt) + " batch " + std::to_string(c.batch) + " len " + std::to_string(c.len) +
                                   " vocab " + std::to_string(c.vocab) + " p " + std::to_string(p);
#if defined(__x86_64__)
          // Rows of a token are added in the CPU's order with the CPU's rounding (x86-64 has no implicit fused
          // multiply-add): the same bits.
          EXPECT_EQ(dtab.download(), ref_table) << what;
          EXPECT_EQ(dpos.download(), ref_pos) << what << " positions";
#else
          std::map<int, int> count;
          int most = 1;
          for (int t : tokens) most = std::max(most, ++count[t]);
          const double keep = 1.0 / (1.0 - p);
          EXPECT_TRUE(within(dtab.download(), ref_table, Bound{1e-5, 2e-7 * most * scale * keep + 1e-6})) << what;
          EXPECT_TRUE(within(dpos.download(), ref_pos, Bound{1e-5, 2e-7 * c.batch * keep + 1e-6})) << what;
#endif
        }
}

// The window partials of 16384 rows at dim 4096 (16 MiB) do not fit the scratch beside the sort: the windows are
// summed in several rounds, and the gradient is still the CPU's bit for bit (3 tokens: runs span every round).
TEST_F(GpuKernels, EmbeddingBackwardInSeveralRoundsOfWindowsEqualsCpu) {
  const int batch = 16, len = 1024, dim = 4096, vocab = 3;
  const auto tokens = random_ints(std::size_t(batch) * len, 9300, 0, vocab - 1);
  const auto dout = random_floats(std::size_t(batch) * len * dim, 9301);
  auto ref_table = random_floats(std::size_t(vocab) * dim, 9302);
  DeviceBuffer dtok(gpu(), tokens), ddout(gpu(), DType::f32, dout), dtab(gpu(), DType::f32, ref_table);
  const Dropout drop{0.1f, 78};
  cpu.embedding_backward(DType::f32, tokens.data(), batch, len, dim, 0.5f, drop, dout.data(), ref_table.data(),
                         nullptr);
  gpu().embedding_backward(DType::f32, dtok.i32(), batch, len, dim, 0.5f, drop, ddout.get(), dtab.f32(), nullptr);
#if defined(__x86_64__)
  EXPECT_EQ(dtab.download(), ref_table);
#else
  EXPECT_TRUE(within(dtab.download(), ref_table, Bound{1e-5, 1e-3}));
#endif
}

// 1.4M tokens: the sort no longer fits the CUDA backend's scratch, so the table gradient takes the atomic scatter.
TEST_F(GpuKernels, EmbeddingBackwardOfAHugeBatchStillMatchesCpu) {
  const int batch = 1400, len = 1000, dim = 2, vocab = 50;
  const int rows = batch * len;
  const auto tokens = random_ints(rows, 9200, 0, vocab - 1);
  const auto dout = random_floats(std::size_t(rows) * dim, 9201);
  auto ref_table = random_floats(std::size_t(vocab) * dim, 9202);
  DeviceBuffer dtok(gpu(), tokens), ddout(gpu(), DType::f32, dout), dtab(gpu(), DType::f32, ref_table);
  const Dropout drop{0.1f, 77};
  cpu.embedding_backward(DType::f32, tokens.data(), batch, len, dim, 1.5f, drop, dout.data(), ref_table.data(),
                         nullptr);
  gpu().embedding_backward(DType::f32, dtok.i32(), batch, len, dim, 1.5f, drop, ddout.get(), dtab.f32(), nullptr);
  // ~28000 rows per token summed in other orders: both sums carry fp32 rounding ~1e-3 at magnitude ~150.
  EXPECT_TRUE(within(dtab.download(), ref_table, Bound{1e-5, 2e-2}));
}

}  // namespace
}  // namespace lseq::kernels::test

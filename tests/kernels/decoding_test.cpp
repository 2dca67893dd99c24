// Ops of incremental decoding: the strided row gather, a step's query/key/value split with the cache append, and the
// fp32 log-softmax.
#include <algorithm>
#include <random>
#include <tuple>

#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

TEST_F(CpuKernels, GatherRowsCopiesTheIndexedRowsBetweenStridedLayouts) {
  uint64_t seed = 3100;
  struct Case {
    int rows, src_rows;
    int64_t row_elems, src_stride, dst_stride;
    bool indexed;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 1, 1, 1, true},
                                         {5, 3, 4, 4, 4, true},
                                         {6, 4, 3, 10, 7, true},
                                         {4, 4, 2, 2, 9, false},
                                         {40000, 40000, 1, 1, 1, true},  // large enough to run on two threads
                                         {0, 2, 3, 3, 3, true}}) {
    const auto src = random_floats(std::size_t(c.src_rows) * c.src_stride, ++seed);
    const auto index = random_ints(c.rows, ++seed, 0, c.src_rows - 1);
    auto dst = random_floats(std::size_t(c.rows) * c.dst_stride, ++seed);
    std::vector<double> expected(dst.begin(), dst.end());  // the gaps between rows stay as they were
    for (int r = 0; r < c.rows; ++r) {
      const int64_t i = c.indexed ? index[r] : r;
      for (int64_t e = 0; e < c.row_elems; ++e) expected[r * c.dst_stride + e] = src[i * c.src_stride + e];
    }
    backend.gather_rows(DType::f32, src.data(), c.src_stride, c.indexed ? index.data() : nullptr, c.rows, c.row_elems,
                        dst.data(), c.dst_stride, nullptr);
    EXPECT_TRUE(all_close(dst, expected, 0, 0)) << c.rows << " rows of " << c.row_elems;
  }
}

TEST_F(CpuKernels, GatherRowsScattersToTheDestinationIndex) {
  uint64_t seed = 3150;
  for (int rows : {1, 7, 300}) {
    const int src_rows = 5, dst_rows = 2 * rows + 3;
    const int64_t row_elems = 3, src_stride = 4, dst_stride = 5;
    const auto src = random_floats(std::size_t(src_rows) * src_stride, ++seed);
    const auto index = random_ints(rows, ++seed, 0, src_rows - 1);
    // Distinct destination rows in a shuffled order, some rows of dst left alone.
    std::vector<int32_t> dst_index(dst_rows);
    for (int r = 0; r < dst_rows; ++r) dst_index[r] = r;
    std::mt19937 rng(static_cast<uint32_t>(++seed));
    std::shuffle(dst_index.begin(), dst_index.end(), rng);
    dst_index.resize(rows);
    auto dst = random_floats(std::size_t(dst_rows) * dst_stride, ++seed);
    std::vector<double> expected(dst.begin(), dst.end());
    for (int r = 0; r < rows; ++r)
      for (int64_t e = 0; e < row_elems; ++e)
        expected[dst_index[r] * dst_stride + e] = src[index[r] * src_stride + e];
    backend.gather_rows(DType::f32, src.data(), src_stride, index.data(), rows, row_elems, dst.data(), dst_stride,
                        dst_index.data());
    EXPECT_TRUE(all_close(dst, expected, 0, 0)) << rows << " rows";
  }
}

TEST_F(CpuKernels, GatherRowsCopiesHalfPrecisionBitsAndRejectsBadArguments) {
  const std::vector<uint16_t> src = {1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> index = {2, 0};
  std::vector<uint16_t> dst(4, 0);
  backend.gather_rows(DType::bf16, src.data(), 2, index.data(), 2, 2, dst.data(), 2, nullptr);
  EXPECT_EQ(dst, (std::vector<uint16_t>{5, 6, 1, 2}));
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(backend.gather_rows(DType::bf16, src.data(), 2, negative.data(), 1, 2, dst.data(), 2, nullptr),
               lseq::Error);
  EXPECT_THROW(backend.gather_rows(DType::bf16, src.data(), 2, index.data(), 1, 2, dst.data(), 2, negative.data()),
               lseq::Error);
  EXPECT_THROW(backend.gather_rows(DType::bf16, src.data(), 1, nullptr, 1, 2, dst.data(), 2, nullptr), lseq::Error);
}

std::vector<double> ref_log_softmax(const std::vector<float>& x, int rows, int cols) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = x.data() + std::size_t(r) * cols;
    double max = row[0];
    for (int v = 1; v < cols; ++v) max = std::max(max, double(row[v]));
    double sum = 0;
    for (int v = 0; v < cols; ++v) sum += std::exp(row[v] - max);
    for (int v = 0; v < cols; ++v) y[std::size_t(r) * cols + v] = row[v] - max - std::log(sum);
  }
  return y;
}

// A step's q|k|v rows: queries (with their bias) to q, keys and values to the cache rows append_dst names (a
// shuffled set, as beam search's per-slice positions are), the rest of the cache untouched.
TEST_F(CpuKernels, SplitStepQkvSplitsTheQueriesAndAppendsKeysAndValues) {
  uint64_t seed = 3400;
  for (auto [rows, heads, head_dim] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {3, 2, 5}, {7, 4, 8}}) {
    const int64_t slices = int64_t(rows) * heads, width = 3 * int64_t(heads) * head_dim;
    const int cache_rows = int(2 * slices) + 5;
    const auto qkv = random_floats(std::size_t(rows) * width, ++seed);
    const auto bias = random_floats(width, ++seed);
    std::vector<int32_t> dst(cache_rows);
    for (int e = 0; e < cache_rows; ++e) dst[e] = e;
    std::shuffle(dst.begin(), dst.end(), std::mt19937(static_cast<uint32_t>(seed)));
    dst.resize(2 * slices);
    const auto before = random_floats(std::size_t(cache_rows) * head_dim, ++seed);
    auto cache = before;
    auto q = poisoned(std::size_t(slices) * head_dim);
    backend.split_step_qkv(DType::f32, qkv.data(), bias.data(), rows, heads, head_dim, q.data(), cache.data(),
                           dst.data());
    std::vector<double> want_q(q.size());
    std::vector<double> want_cache(before.begin(), before.end());
    for (int r = 0; r < rows; ++r)
      for (int p = 0; p < 3; ++p)
        for (int h = 0; h < heads; ++h)
          for (int d = 0; d < head_dim; ++d) {
            const int64_t col = (int64_t(p) * heads + h) * head_dim + d, slice = int64_t(r) * heads + h;
            const double v = double(qkv[r * width + col]) + bias[col];
            if (p == 0)
              want_q[slice * head_dim + d] = v;
            else
              want_cache[int64_t(dst[(p - 1) * slices + slice]) * head_dim + d] = v;
          }
    const std::string what = std::to_string(rows) + "x" + std::to_string(heads) + "x" + std::to_string(head_dim);
    EXPECT_TRUE(all_close(q, want_q, 1e-6, 1e-7)) << what << " queries";
    EXPECT_TRUE(all_close(cache, want_cache, 1e-6, 1e-7)) << what << " cache";
  }
  std::vector<float> a(64, 1.0f);
  const std::vector<int32_t> negative = {0, -1};
  EXPECT_THROW(backend.split_step_qkv(DType::f32, a.data(), nullptr, 1, 1, 2, a.data(), a.data(), negative.data()),
               lseq::Error);
  EXPECT_THROW(backend.split_step_qkv(DType::f32, a.data(), nullptr, -1, 1, 2, a.data(), a.data(), negative.data()),
               lseq::Error);
}

TEST_F(CpuKernels, LogSoftmaxMatchesDoubleReference) {
  uint64_t seed = 3200;
  for (auto [rows, cols, range] : std::vector<std::tuple<int, int, float>>{
           {1, 1, 1.0f}, {3, 7, 5.0f}, {17, 1000, 10.0f}, {2, 50, 1000.0f}}) {  // huge logits must not overflow
    const auto x = random_floats(std::size_t(rows) * cols, ++seed, -range, range);
    auto y = poisoned(x.size());
    backend.log_softmax(DType::f32, x.data(), rows, cols, y.data());
    EXPECT_TRUE(all_close(y, ref_log_softmax(x, rows, cols), 1e-6, 1e-5)) << rows << " x " << cols;
    for (int r = 0; r < rows; ++r) {  // probabilities sum to one
      double sum = 0;
      for (int v = 0; v < cols; ++v) sum += std::exp(double(y[std::size_t(r) * cols + v]));
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

// Logits rows ld apart (decoding's rows padded to 16 bytes): the packed rows' result, the padding (which would
// dominate the sum) never read; aliasing padded rows is refused.
TEST_F(CpuKernels, LogSoftmaxReadsRowsLdApart) {
  const int rows = 4, cols = 1001, ld = 1008;
  const auto packed = random_floats(std::size_t(rows) * cols, 3250, -6.0f, 6.0f);
  std::vector<float> padded(std::size_t(rows) * ld, 80.0f);
  for (int r = 0; r < rows; ++r) std::copy_n(&packed[std::size_t(r) * cols], cols, &padded[std::size_t(r) * ld]);
  auto y = poisoned(packed.size());
  backend.log_softmax(DType::f32, padded.data(), rows, cols, y.data(), ld);
  EXPECT_TRUE(all_close(y, ref_log_softmax(packed, rows, cols), 1e-6, 1e-5));
  EXPECT_THROW(backend.log_softmax(DType::f32, padded.data(), rows, cols, padded.data(), ld), lseq::Error);
  EXPECT_THROW(backend.log_softmax(DType::f32, padded.data(), rows, cols, y.data(), cols - 1), lseq::Error);
}

TEST_F(CpuKernels, LogSoftmaxMayOverwriteItsInputAndRejectsOtherTypes) {
  auto x = random_floats(3 * 11, 3300, -4.0f, 4.0f);
  const auto expected = ref_log_softmax(x, 3, 11);
  backend.log_softmax(DType::f32, x.data(), 3, 11, x.data());
  EXPECT_TRUE(all_close(x, expected, 1e-6, 1e-5));
  EXPECT_THROW(backend.log_softmax(DType::f16, x.data(), 3, 11, x.data()), lseq::Error);
  EXPECT_THROW(backend.log_softmax(DType::f32, x.data(), 3, 0, x.data()), lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

// Beam search's top-k of the log-softmax (topk_log_softmax) on the CPU backend, against a double reference that
// sorts every allowed id: the k best by log-probability, ties to the lower id, fewer than k allowed ids, eos apart.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

struct TopKCase {
  int rows, cols, k, first_allowed_id, eos_id;
};

struct TopKResult {
  std::vector<float> values;
  std::vector<int32_t> ids;
  std::vector<float> eos;
};

TopKResult run_topk(Backend& backend, const std::vector<float>& logits, const TopKCase& c) {
  TopKResult r{poisoned(std::size_t(c.rows) * c.k), std::vector<int32_t>(std::size_t(c.rows) * c.k, -7),
               poisoned(c.rows)};
  backend.topk_log_softmax(DType::f32, logits.data(), c.rows, c.cols, c.k, c.first_allowed_id, c.eos_id,
                           r.values.data(), r.ids.data(), r.eos.data());
  return r;
}

// Checks one case against the double log-softmax with every allowed id sorted (value desc, id asc). Logits on a
// grid of 1/8 (ties case) never have distinct values that round to the same float, so the orders agree exactly.
void expect_matches_reference(CpuBackend& backend, const std::vector<float>& logits, const TopKCase& c) {
  const TopKResult got = run_topk(backend, logits, c);
  std::vector<float> full(logits.size());
  backend.log_softmax(DType::f32, logits.data(), c.rows, c.cols, full.data());
  for (int r = 0; r < c.rows; ++r) {
    const float* x = logits.data() + std::size_t(r) * c.cols;
    double max = x[0], sum = 0;
    for (int v = 1; v < c.cols; ++v) max = std::max(max, double(x[v]));
    for (int v = 0; v < c.cols; ++v) sum += std::exp(x[v] - max);
    auto lp = [&](int v) { return x[v] - max - std::log(sum); };
    std::vector<int32_t> order;
    for (int v = c.first_allowed_id; v < c.cols; ++v) order.push_back(v);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return lp(a) > lp(b); });
    const std::string where = "row " + std::to_string(r) + " of " + std::to_string(c.cols) + " k " +
                              std::to_string(c.k) + " first " + std::to_string(c.first_allowed_id);
    for (int i = 0; i < c.k; ++i) {
      const std::size_t at = std::size_t(r) * c.k + i;
      if (i < static_cast<int>(order.size())) {
        ASSERT_EQ(got.ids[at], order[i]) << where << " rank " << i;
        EXPECT_NEAR(got.values[at], lp(order[i]), 1e-5) << where << " rank " << i;
        // Bit for bit the full log_softmax's value: beam search's scores must not depend on the path.
        EXPECT_EQ(got.values[at], full[std::size_t(r) * c.cols + order[i]]) << where << " rank " << i;
      } else {
        EXPECT_EQ(got.ids[at], -1) << where << " rank " << i;
        EXPECT_EQ(got.values[at], -std::numeric_limits<float>::infinity()) << where << " rank " << i;
      }
    }
    EXPECT_NEAR(got.eos[r], lp(c.eos_id), 1e-5) << where;
    EXPECT_EQ(got.eos[r], full[std::size_t(r) * c.cols + c.eos_id]) << where;
  }
}

const std::vector<TopKCase> kTopKCases = {
    {3, 11, 1, 4, 3},     // greedy
    {4, 37, 5, 4, 3},     // odd vocabulary
    {2, 1001, 32, 4, 3},  // the largest k
    {3, 7, 8, 4, 3},      // only 3 allowed ids: the rest is -inf / -1
    {2, 50, 6, 0, 3},     // eos among the ranked ids
    {2, 40, 4, 4, 39},    // eos in the last column
    {1, 5, 2, 9, 0},      // no allowed id at all
};

TEST_F(CpuKernels, TopKLogSoftmaxMatchesSortedDoubleReference) {
  uint64_t seed = 3300;
  for (const TopKCase& c : kTopKCases)
    expect_matches_reference(backend, random_floats(std::size_t(c.rows) * c.cols, ++seed, -6, 6), c);
}

TEST_F(CpuKernels, TopKLogSoftmaxBreaksTiesTowardsTheLowerId) {
  uint64_t seed = 3400;
  for (const TopKCase& c : kTopKCases) {
    // Values on a coarse grid: many exact ties, among them at the k-th place.
    auto grid = random_ints(std::size_t(c.rows) * c.cols, ++seed, -8, 3);
    std::vector<float> logits(grid.begin(), grid.end());
    for (float& v : logits) v /= 8.0f;
    expect_matches_reference(backend, logits, c);
  }
  // All equal: the first k allowed ids, in order.
  const std::vector<float> flat(30, 0.25f);
  const TopKResult got = run_topk(backend, flat, {1, 30, 4, 4, 3});
  EXPECT_EQ(got.ids, (std::vector<int32_t>{4, 5, 6, 7}));
}

TEST(TopKOrder, PutsNanAfterEveryNumberAndEmptySlotsLast) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> values(5, nan);
  std::vector<int32_t> ids(5, kNoTopKId);
  const std::vector<std::pair<float, int32_t>> offers = {{nan, 4}, {-inf, 9}, {-1.5f, 7}, {nan, 2}, {-1.5f, 3},
                                                         {-0.5f, 8}, {-3.0f, 1}};
  for (const auto& [v, id] : offers) topk_insert(values.data(), ids.data(), 5, v, id);
  EXPECT_EQ(ids, (std::vector<int32_t>{8, 3, 7, 1, 9}));
  std::vector<float> two(3, nan);
  std::vector<int32_t> two_ids(3, kNoTopKId);
  for (const auto& [v, id] : std::vector<std::pair<float, int32_t>>{{nan, 4}, {nan, 2}})
    topk_insert(two.data(), two_ids.data(), 3, v, id);
  EXPECT_EQ(two_ids, (std::vector<int32_t>{2, 4, kNoTopKId}));
}

TEST_F(CpuKernels, TopKLogSoftmaxOfANanRowTakesIdsInOrder) {
  std::vector<float> logits = random_floats(12, 3500, -2, 2);
  logits[7] = std::numeric_limits<float>::quiet_NaN();  // poisons the whole row's log-sum-exp
  std::vector<float> values(3), eos(1);
  std::vector<int32_t> ids(3);
  backend.topk_log_softmax(DType::f32, logits.data(), 1, 12, 3, 4, 3, values.data(), ids.data(), eos.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 5, 6}));
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_TRUE(std::isnan(eos[0]));
}

// Rows ld apart (logits padded to 16-byte rows) give the packed rows' result; the padding, which would win, is
// never read.
TEST_F(CpuKernels, TopKLogSoftmaxReadsRowsLdApart) {
  const int rows = 5, cols = 1001, ld = 1008, k = 50;
  const std::vector<float> packed = random_floats(std::size_t(rows) * cols, 3700, -4, 4);
  std::vector<float> padded(std::size_t(rows) * ld, 50.0f);
  for (int r = 0; r < rows; ++r) std::copy_n(&packed[std::size_t(r) * cols], cols, &padded[std::size_t(r) * ld]);
  std::vector<float> want_values(rows * k), got_values(rows * k), want_eos(rows), got_eos(rows);
  std::vector<int32_t> want_ids(rows * k), got_ids(rows * k);
  backend.topk_log_softmax(DType::f32, packed.data(), rows, cols, k, 4, 3, want_values.data(), want_ids.data(),
                           want_eos.data());
  backend.topk_log_softmax(DType::f32, padded.data(), rows, cols, k, 4, 3, got_values.data(), got_ids.data(),
                           got_eos.data(), ld);
  EXPECT_EQ(got_ids, want_ids);
  EXPECT_EQ(got_values, want_values);
  EXPECT_EQ(got_eos, want_eos);
  for (int32_t id : got_ids) EXPECT_LT(id, cols);
  EXPECT_THROW(backend.topk_log_softmax(DType::f32, padded.data(), rows, cols, k, 4, 3, got_values.data(),
                                        got_ids.data(), got_eos.data(), cols - 1),
               lseq::Error);
}

TEST_F(CpuKernels, TopKLogSoftmaxRejectsBadArguments) {
  const auto logits = random_floats(20, 3600);
  std::vector<float> values(40), eos(2);
  std::vector<int32_t> ids(40);
  auto call = [&](DType dt, int cols, int k, int first, int eos_id) {
    backend.topk_log_softmax(dt, logits.data(), 2, cols, k, first, eos_id, values.data(), ids.data(), eos.data());
  };
  EXPECT_NO_THROW(call(DType::f32, 10, 4, 4, 3));
  EXPECT_THROW(call(DType::f32, 10, 0, 4, 3), lseq::Error);
  EXPECT_THROW(call(DType::f32, 10, kMaxTopK + 1, 4, 3), lseq::Error);
  EXPECT_THROW(call(DType::f32, 10, 4, 4, 10), lseq::Error);
  EXPECT_THROW(call(DType::f32, 10, 4, -1, 3), lseq::Error);
  EXPECT_THROW(call(DType::f32, 0, 4, 4, 3), lseq::Error);
  EXPECT_THROW(call(DType::f16, 10, 4, 4, 3), lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

// The CUDA topk_log_softmax against the CPU backend's: on logits from a coarse grid (exact ties, no near-ties) the
// same ids in every dtype; on continuous logits the same values within rounding, and the same ids wherever the
// CPU's log-probabilities are separated by more than that rounding.
#include <algorithm>
#include <cmath>
#include <set>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct TopKShape {
  int rows, cols, k, first_allowed_id, eos_id;
};

const std::vector<TopKShape> kShapes = {
    {3, 32000, 8, 4, 3},  // a real vocabulary, beam 8
    {5, 1001, 32, 4, 3},  // the largest k
    {4, 37, 5, 4, 3},     // fewer columns than threads
    {2, 7, 8, 4, 3},      // fewer allowed ids than k
    {64, 500, 1, 4, 3},   // greedy
    {2, 300, 6, 0, 299},  // eos among the ranked ids, in the last column
    // Register-resident kernel (cols a multiple of the 16-byte pack, at most 32768) and its limits:
    {4, 32768, 4, 4, 3},    // the most columns it holds
    {2, 32776, 3, 4, 3},    // one pack more: the general kernel
    {5, 1024, 32, 4, 3},    // the largest k over few elements per thread
    {3, 16, 12, 4, 15},     // fewer allowed ids than k: filled with -inf / -1
    {300, 32000, 4, 4, 3},  // beam 4 over 75 sentences
    {260, 1003, 5, 4, 3},   // many rows of odd length: the general kernel
};

struct TopKOut {
  std::vector<float> values;
  std::vector<int32_t> ids;
  std::vector<float> eos;
};

TopKOut cpu_topk(CpuBackend& cpu, const std::vector<float>& logits, const TopKShape& s) {
  TopKOut r{std::vector<float>(std::size_t(s.rows) * s.k), std::vector<int32_t>(std::size_t(s.rows) * s.k),
            std::vector<float>(s.rows)};
  cpu.topk_log_softmax(DType::f32, logits.data(), s.rows, s.cols, s.k, s.first_allowed_id, s.eos_id,
                       r.values.data(), r.ids.data(), r.eos.data());
  return r;
}

TopKOut device_topk(Backend& gpu, DType dt, const std::vector<float>& logits, const TopKShape& s) {
  const std::size_t n = std::size_t(s.rows) * s.k;
  DeviceBuffer dl(gpu, dt, logits), values(gpu, DType::f32, n), ids(gpu, DType::f32, n), eos(gpu, DType::f32, s.rows);
  values.poison();
  ids.poison();
  eos.poison();
  gpu.topk_log_softmax(dt, dl.get(), s.rows, s.cols, s.k, s.first_allowed_id, s.eos_id, values.f32(),
                       static_cast<int32_t*>(ids.get()), eos.f32());
  TopKOut r{values.download(), std::vector<int32_t>(n), eos.download()};
  gpu.copy_to_host(r.ids.data(), ids.get(), n * sizeof(int32_t));
  return r;
}

std::string where(DType dt, const TopKShape& s, int row, int rank) {
  return label(dt) + " " + std::to_string(s.rows) + " x " + std::to_string(s.cols) + " k " + std::to_string(s.k) +
         " row " + std::to_string(row) + " rank " + std::to_string(rank);
}

TEST_F(GpuKernels, TopKLogSoftmaxChoosesTheCpusIdsOnTiedGridLogits) {
  uint64_t seed = 10500;
  for (DType dt : dtypes())
    for (const TopKShape& s : kShapes) {
      // Multiples of 1/16 in [-8, 8]: exact in bf16 and fp16, many exact ties, distinct values far apart.
      const auto grid = random_ints(std::size_t(s.rows) * s.cols, ++seed, -128, 128);
      std::vector<float> logits(grid.begin(), grid.end());
      for (float& v : logits) v /= 16.0f;
      const TopKOut ref = cpu_topk(cpu, logits, s), got = device_topk(gpu(), dt, logits, s);
      for (int r = 0; r < s.rows; ++r) {
        for (int i = 0; i < s.k; ++i) {
          const std::size_t at = std::size_t(r) * s.k + i;
          ASSERT_EQ(got.ids[at], ref.ids[at]) << where(dt, s, r, i);
          if (ref.ids[at] < 0)
            EXPECT_EQ(got.values[at], ref.values[at]) << where(dt, s, r, i);
          else
            EXPECT_NEAR(got.values[at], ref.values[at], 1e-5) << where(dt, s, r, i);
        }
        EXPECT_NEAR(got.eos[r], ref.eos[r], 1e-5) << where(dt, s, r, -1);
      }
    }
}

TEST_F(GpuKernels, TopKLogSoftmaxMatchesCpuOnContinuousLogits) {
  uint64_t seed = 10600;
  for (DType dt : dtypes())
    for (const TopKShape& s : kShapes) {
      const auto logits = quantize(random_floats(std::size_t(s.rows) * s.cols, ++seed, -8, 8), dt);
      const TopKOut ref = cpu_topk(cpu, logits, s), got = device_topk(gpu(), dt, logits, s);
      std::vector<float> full(logits.size());
      cpu.log_softmax(DType::f32, logits.data(), s.rows, s.cols, full.data());
      const double tol = 1e-5;  // fp32 arithmetic on the same (quantized) inputs: only the log-sum-exp differs
      for (int r = 0; r < s.rows; ++r) {
        std::set<int32_t> seen;
        for (int i = 0; i < s.k; ++i) {
          const std::size_t at = std::size_t(r) * s.k + i;
          const int32_t id = got.ids[at];
          if (ref.ids[at] < 0) {
            EXPECT_EQ(id, -1) << where(dt, s, r, i);
            continue;
          }
          ASSERT_TRUE(id >= s.first_allowed_id && id < s.cols) << where(dt, s, r, i) << " id " << id;
          EXPECT_TRUE(seen.insert(id).second) << where(dt, s, r, i) << " repeats id " << id;
          EXPECT_NEAR(got.values[at], ref.values[at], tol) << where(dt, s, r, i);
          // Another id only where the CPU itself sees (nearly) the same log-probability for both.
          if (id != ref.ids[at])
            EXPECT_NEAR(full[std::size_t(r) * s.cols + id], ref.values[at], 2 * tol)
                << where(dt, s, r, i) << " id " << id << " instead of " << ref.ids[at];
        }
        EXPECT_NEAR(got.eos[r], ref.eos[r], tol) << where(dt, s, r, -1);
      }
    }
}

TEST_F(GpuKernels, TopKLogSoftmaxRejectsKAboveTheLimit) {
  const auto logits = random_floats(20, 10700);
  DeviceBuffer dl(gpu(), DType::f32, logits), out(gpu(), DType::f32, 2 * (kMaxTopK + 1)), eos(gpu(), DType::f32, 2);
  EXPECT_THROW(gpu().topk_log_softmax(DType::f32, dl.get(), 2, 10, kMaxTopK + 1, 4, 3, out.f32(),
                                      static_cast<int32_t*>(out.get()), eos.f32()),
               lseq::Error);
  EXPECT_THROW(gpu().topk_log_softmax(DType::f32, dl.get(), 2, 10, 4, 4, 10, out.f32(),
                                      static_cast<int32_t*>(out.get()), eos.f32()),
               lseq::Error);
}

}  // namespace
}  // namespace lseq::kernels::test

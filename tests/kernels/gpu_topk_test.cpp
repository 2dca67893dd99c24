// The CUDA topk_log_softmax against the CPU backend's: on logits from a coarse grid (exact ties, no near-ties) the
// same ids in every dtype; on continuous logits the same values within rounding, and the same ids wherever the
// CPU's log-probabilities are separated by more than that rounding; on constructed rows (ties at the k-th place,
// NaN, infinities), which steer the register-resident and streaming kernels' threshold lists into being long, empty
// or overflowing, the same ids and the same values (NaN and infinities exactly).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "gpu_test_util.h"
#include "util/splitmix64.h"

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
    {2, 32776, 3, 4, 3},    // one pack more: the streaming kernel
    {5, 1024, 32, 4, 3},    // the largest k over few elements per thread
    {3, 16, 12, 4, 15},     // fewer allowed ids than k: filled with -inf / -1
    {300, 32000, 4, 4, 3},  // beam 4 over 75 sentences
    {260, 1003, 5, 4, 3},   // many rows of odd length: unaligned rows, element loads
    // The register-resident kernel's threshold (the k-th largest of the threads' maxima) and its fallback:
    {512, 32000, 8, 4, 3},     // the decoding case: beam 4 over 128 sentences
    {6, 32000, 8, 10000, 3},   // a third of the threads hold no allowed id
    {4, 32000, 8, 31996, 3},   // fewer allowed ids than k in a full row
    {3, 64, 8, 60, 63},        // fewer allowed ids than k, two warps
    {4, 2048, 32, 2000, 5},    // 48 allowed ids for k = 32
    {7, 32000, 32, 0, 31999},  // the largest k over a full row, every id allowed
    // k above 32 (top-k sampling): the streaming kernel alone, its threshold over several warps' full lists
    {3, 50257, 50, 4, 3},       // GPT-2's vocabulary (unaligned rows), Hugging Face's default top-k
    {128, 50257, 32, 4, 3},     // GPT-2's vocabulary, a batch of prompts
    {2, 32000, 128, 0, 31999},  // the largest k over a row the register-resident kernel would hold
    {4, 200, 100, 4, 3},        // fewer elements per thread than k
    {2, 60, 64, 4, 3},          // fewer allowed ids than k: filled with -inf / -1
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

// Continuous logits (already quantized to dt): the CPU's values within fp32 rounding, distinct allowed ids, and the
// CPU's id wherever the CPU's own log-probabilities are not (nearly) tied.
void expect_cpus_top_k(CpuBackend& cpu, Backend& gpu, DType dt, const TopKShape& s, const std::vector<float>& logits) {
  const TopKOut ref = cpu_topk(cpu, logits, s), got = device_topk(gpu, dt, logits, s);
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

TEST_F(GpuKernels, TopKLogSoftmaxMatchesCpuOnContinuousLogits) {
  uint64_t seed = 10600;
  for (DType dt : dtypes())
    for (const TopKShape& s : kShapes)
      expect_cpus_top_k(cpu, gpu(), dt, s, quantize(random_floats(std::size_t(s.rows) * s.cols, ++seed, -8, 8), dt));
}

// Logits shaped like a language model's: a normal bulk and a few tokens far above it, so that the threshold list is
// about k long (uniform logits put dozens of bf16 ties at the top instead).
TEST_F(GpuKernels, TopKLogSoftmaxMatchesCpuOnPeakedLogits) {
  uint64_t seed = 10800;
  const std::vector<TopKShape> shapes = {{512, 32000, 8, 4, 3}, {128, 32000, 1, 4, 3}, {64, 32000, 32, 4, 3},
                                         {32, 50257, 50, 4, 3}, {16, 32000, 128, 4, 3}};
  for (DType dt : dtypes())
    for (const TopKShape& s : shapes) {
      std::mt19937_64 rng(++seed);
      std::normal_distribution<float> bulk(0.0f, 2.0f);
      std::uniform_real_distribution<float> peak(6.0f, 14.0f);
      std::uniform_int_distribution<int> column(0, s.cols - 1), peaks(0, 2 * s.k);
      std::vector<float> logits(std::size_t(s.rows) * s.cols);
      for (float& v : logits) v = bulk(rng);
      for (int r = 0; r < s.rows; ++r)
        for (int p = peaks(rng); p > 0; --p) logits[std::size_t(r) * s.cols + column(rng)] = peak(rng);
      expect_cpus_top_k(cpu, gpu(), dt, s, quantize(logits, dt));
    }
}

// got equals ref within tol; NaN and infinities exactly.
::testing::AssertionResult same_value(float got, float ref, double tol) {
  if (std::isnan(ref) ? std::isnan(got) : std::isinf(ref) ? got == ref : std::fabs(double(got) - ref) <= tol)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", expected " << ref;
}

// Constructed rows: a grid bulk below 2 (multiples of 1/16 in [-8, 1], exact in every dtype) and one feature.
enum class RowKind {
  tied_best,        // `count` allowed ids at 2, the best value
  tied_at_kth,      // k / 2 allowed ids above 2, then `count` at 2: the tie straddles the k-th place
  nan_entries,      // `count` NaN: every log-probability is NaN, ranked by id
  plus_inf,         // one +inf: NaN as well
  few_finite,       // -inf except `count` allowed ids (none: a NaN row)
  half_minus_inf,   // a random half of the row at -inf
  best_disallowed,  // the ids below first_allowed_id far above the rest
};

struct RowCase {
  RowKind kind;
  int count;
};

// One row of the case: `allowed` is the allowed ids in a random order (positions of the features).
void build_row(const RowCase& c, int k, int first_allowed_id, std::mt19937_64& rng, std::vector<int>& allowed,
               float* row, int cols) {
  std::uniform_int_distribution<int> grid(-128, 16);
  for (int v = 0; v < cols; ++v) row[v] = grid(rng) / 16.0f;
  std::shuffle(allowed.begin(), allowed.end(), rng);
  const int n = static_cast<int>(allowed.size());
  const int count = std::min(c.count, n);
  const float inf = std::numeric_limits<float>::infinity();
  switch (c.kind) {
    case RowKind::tied_best:
      for (int i = 0; i < count; ++i) row[allowed[i]] = 2.0f;
      break;
    case RowKind::tied_at_kth: {
      const int above = std::min(k / 2, n);
      for (int i = 0; i < above; ++i) row[allowed[i]] = 3.0f + 0.5f * (i % 4);  // ties among these too
      for (int i = above; i < std::min(n, above + count); ++i) row[allowed[i]] = 2.0f;
      break;
    }
    case RowKind::nan_entries:
      for (int i = 0; i < count; ++i) row[allowed[i]] = std::numeric_limits<float>::quiet_NaN();
      break;
    case RowKind::plus_inf:
      row[allowed[0]] = inf;
      break;
    case RowKind::few_finite:
      for (int v = 0; v < cols; ++v) row[v] = -inf;
      for (int i = 0; i < count; ++i) row[allowed[i]] = grid(rng) / 16.0f;
      break;
    case RowKind::half_minus_inf:
      for (int v = 0; v < cols; ++v)
        if (rng() & 1) row[v] = -inf;
      break;
    case RowKind::best_disallowed:
      for (int v = 0; v < std::min(first_allowed_id, cols); ++v) row[v] = 6.0f;
      break;
  }
}

TEST_F(GpuKernels, TopKLogSoftmaxMatchesCpuOnTiesNanAndInfinities) {
  std::vector<RowCase> cases;
  // Tie counts around k and around capacities a shared candidate list might have, and beyond.
  for (int count : {1, 2, 7, 8, 9, 33, 100, 1000, 1019, 1020, 1024, 1025, 2040, 2043, 2044, 2048, 2049, 3000, 40000}) {
    cases.push_back({RowKind::tied_best, count});
    cases.push_back({RowKind::tied_at_kth, count});
  }
  for (int count : {1, 5, 3000}) cases.push_back({RowKind::nan_entries, count});
  cases.push_back({RowKind::plus_inf, 1});
  for (int count : {0, 1, 3, 7, 8, 9, 31, 32, 33, 50, 1500}) cases.push_back({RowKind::few_finite, count});
  for (int i = 0; i < 3; ++i) cases.push_back({RowKind::half_minus_inf, 0});
  cases.push_back({RowKind::best_disallowed, 0});
  // Once as they are, and repeated to 6 x as many rows: few rows take the register-resident kernel, many (from
  // two per multiprocessor) the streaming one, each with its own threshold list and fallback.
  for (const int copies : {1, 6}) {
    const int rows = static_cast<int>(cases.size()) * copies;
    const std::vector<TopKShape> shapes = {
        {rows, 32000, 8, 4, 3}, {rows, 32000, 32, 4, 5}, {rows, 32000, 1, 0, 31999}, {rows, 32000, 8, 20000, 3},
        {rows, 64, 8, 4, 3},    {rows, 64, 8, 60, 3},    {rows, 4096, 5, 100, 4095}, {rows, 1003, 8, 4, 3},
        {rows, 50257, 50, 4, 3}, {rows, 1003, 128, 4, 3}, {rows, 4096, 100, 0, 4095},
    };
    uint64_t seed = 10900;
    for (DType dt : dtypes())
      for (const TopKShape& s : shapes) {
        std::mt19937_64 rng(++seed);
        std::vector<int> allowed(s.cols - s.first_allowed_id);
        std::iota(allowed.begin(), allowed.end(), s.first_allowed_id);
        std::vector<float> logits(std::size_t(rows) * s.cols);
        for (int r = 0; r < rows; ++r)
          build_row(cases[r % cases.size()], s.k, s.first_allowed_id, rng, allowed, &logits[std::size_t(r) * s.cols],
                    s.cols);
        const TopKOut ref = cpu_topk(cpu, logits, s), got = device_topk(gpu(), dt, logits, s);
        for (int r = 0; r < rows; ++r) {
          const RowCase& c = cases[r % cases.size()];
          const std::string row_case =
              " case " + std::to_string(static_cast<int>(c.kind)) + " count " + std::to_string(c.count);
          for (int i = 0; i < s.k; ++i) {
            const std::size_t at = std::size_t(r) * s.k + i;
            ASSERT_EQ(got.ids[at], ref.ids[at]) << where(dt, s, r, i) << row_case;
            EXPECT_TRUE(same_value(got.values[at], ref.values[at], 1e-5)) << where(dt, s, r, i) << row_case;
          }
          EXPECT_TRUE(same_value(got.eos[r], ref.eos[r], 1e-5)) << where(dt, s, r, -1) << row_case;
        }
      }
  }
}

// Rows ld apart (an output layer's logits padded to 16-byte rows), aligned and not: the padding holds values that
// would win if it were read, and the result equals the CPU's over the same padded rows and over packed ones.
TEST_F(GpuKernels, TopKLogSoftmaxReadsRowsLdApart) {
  uint64_t seed = 11000;
  struct Strided {
    TopKShape shape;
    int ld;
  };
  for (const Strided& c : {Strided{{64, 50257, 50, 4, 3}, 50264}, Strided{{300, 1001, 8, 4, 3}, 1003},
                           Strided{{8, 32000, 4, 4, 3}, 32008}, Strided{{40, 4096, 128, 0, 4095}, 4104}})
    for (DType dt : dtypes()) {
      const TopKShape& s = c.shape;
      const auto packed = quantize(random_floats(std::size_t(s.rows) * s.cols, ++seed, -8, 8), dt);
      std::vector<float> padded(std::size_t(s.rows) * c.ld, 100.0f);
      for (int r = 0; r < s.rows; ++r)
        std::copy_n(&packed[std::size_t(r) * s.cols], s.cols, &padded[std::size_t(r) * c.ld]);
      const std::size_t n = std::size_t(s.rows) * s.k;
      TopKOut ref = cpu_topk(cpu, packed, s), cpu_strided{std::vector<float>(n), std::vector<int32_t>(n),
                                                          std::vector<float>(s.rows)};
      cpu.topk_log_softmax(DType::f32, padded.data(), s.rows, s.cols, s.k, s.first_allowed_id, s.eos_id,
                           cpu_strided.values.data(), cpu_strided.ids.data(), cpu_strided.eos.data(), c.ld);
      EXPECT_EQ(cpu_strided.ids, ref.ids);
      EXPECT_EQ(cpu_strided.values, ref.values);
      DeviceBuffer dl(gpu(), dt, padded), values(gpu(), DType::f32, n), ids(gpu(), DType::f32, n),
          eos(gpu(), DType::f32, s.rows);
      gpu().topk_log_softmax(dt, dl.get(), s.rows, s.cols, s.k, s.first_allowed_id, s.eos_id, values.f32(),
                             static_cast<int32_t*>(ids.get()), eos.f32(), c.ld);
      const std::vector<float> got_values = values.download(), got_eos = eos.download();
      std::vector<int32_t> got_ids(n);
      gpu().copy_to_host(got_ids.data(), ids.get(), n * sizeof(int32_t));
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(got_ids[i] >= s.first_allowed_id && got_ids[i] < s.cols) << label(dt) << " ld " << c.ld;
        EXPECT_NEAR(got_values[i], ref.values[i], 1e-5) << label(dt) << " ld " << c.ld << " at " << i;
      }
      for (int r = 0; r < s.rows; ++r) EXPECT_NEAR(got_eos[r], ref.eos[r], 1e-5) << label(dt) << " ld " << c.ld;
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

// Top-k sampling's draw on the device (draw_topk, kernels/topk_draw.h) against the CPU backend's: on the top-k of
// random logits (GPT-2's vocabulary, Hugging Face's k and the largest), with a mix of rows that may still draw and
// rows whose eos is forced, the same tokens and log-probabilities, streams and limits; the results come back through
// download_async, as sampling reads them.
TEST_F(GpuKernels, DrawTopKDrawsWhatTheCpuDraws) {
  const std::vector<TopKShape> shapes = {{128, 50257, 32, 4, 3}, {300, 1003, 5, 4, 3}, {7, 500, kMaxTopK, 4, 3}};
  uint64_t seed = 10800;
  for (const TopKShape& s : shapes)
    for (double temperature : {0.7, 1.0, 1.6}) {
      const auto logits = random_floats(std::size_t(s.rows) * s.cols, ++seed, -4.0f, 4.0f);
      const TopKOut top = cpu_topk(cpu, logits, s);
      std::vector<uint64_t> streams(s.rows);
      std::vector<int32_t> remaining(s.rows);
      SplitMix64 seeds(seed);
      for (int r = 0; r < s.rows; ++r) streams[r] = seeds.next(), remaining[r] = r % 5 - 1;
      std::vector<uint64_t> cpu_streams = streams;
      std::vector<int32_t> cpu_remaining = remaining, cpu_tokens(s.rows);
      std::vector<float> cpu_log_probs(s.rows);
      cpu.draw_topk(top.values.data(), top.ids.data(), top.eos.data(), s.rows, s.k, s.eos_id, temperature,
                    cpu_streams.data(), cpu_remaining.data(), cpu_tokens.data(), cpu_log_probs.data());

      DeviceBuffer values(gpu(), DType::f32, top.values), ids(gpu(), top.ids), eos(gpu(), DType::f32, top.eos);
      DeviceBuffer dev_streams(gpu(), DType::f32, 2 * std::size_t(s.rows)), dev_remaining(gpu(), remaining);
      DeviceBuffer drawn(gpu(), DType::f32, 2 * std::size_t(s.rows));
      drawn.poison();
      gpu().copy_to_device(dev_streams.get(), streams.data(), streams.size() * sizeof(uint64_t));
      auto* tokens = static_cast<int32_t*>(drawn.get());
      gpu().draw_topk(values.f32(), ids.i32(), eos.f32(), s.rows, s.k, s.eos_id, temperature,
                      static_cast<uint64_t*>(dev_streams.get()), static_cast<int32_t*>(dev_remaining.get()), tokens,
                      reinterpret_cast<float*>(tokens + s.rows));
      const int slot = gpu().download_async(drawn.get(), 2 * std::size_t(s.rows) * 4);
      std::vector<int32_t> got(2 * std::size_t(s.rows));
      gpu().collect_download(slot, got.data(), got.size() * 4);
      std::vector<uint64_t> got_streams(s.rows);
      std::vector<int32_t> got_remaining(s.rows);
      gpu().copy_to_host(got_streams.data(), dev_streams.get(), got_streams.size() * sizeof(uint64_t));
      gpu().copy_to_host(got_remaining.data(), dev_remaining.get(), got_remaining.size() * sizeof(int32_t));
      int words = 0;
      for (int r = 0; r < s.rows; ++r) {
        const std::string at = std::to_string(s.rows) + " x " + std::to_string(s.cols) + " k " + std::to_string(s.k) +
                               " T " + std::to_string(temperature) + " row " + std::to_string(r);
        EXPECT_EQ(got[r], cpu_tokens[r]) << at;
        float log_prob;
        std::memcpy(&log_prob, &got[s.rows + r], 4);
        EXPECT_EQ(log_prob, cpu_log_probs[r]) << at;
        EXPECT_EQ(got_streams[r], cpu_streams[r]) << at;
        EXPECT_EQ(got_remaining[r], cpu_remaining[r]) << at;
        words += cpu_tokens[r] != s.eos_id;
      }
      EXPECT_GT(words, s.rows / 3);
    }
}

}  // namespace
}  // namespace lseq::kernels::test

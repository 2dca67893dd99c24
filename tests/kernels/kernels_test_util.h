#pragma once
// Shared by the kernel tests: seeded random inputs, NaN poisoning of outputs, comparisons against double
// references, and central finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "util/error.h"

namespace lseq::kernels::test {

// Operand shapes the suites share: a matrix of rows x cols; a linear layer's x [rows, k], w [n, k], y [rows, n].
struct MatrixShape {
  int rows, cols;
};
struct LinearShape {
  int rows, k, n;
};

inline std::vector<float> random_floats(std::size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<int32_t> random_ints(std::size_t n, uint64_t seed, int lo, int hi) {  // [lo, hi]
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

inline std::vector<float> poisoned(std::size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

inline std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Every element within atol + rtol * |expected|; reports the first few that are not (NaN fails).
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<double>& expected,
                                            double rtol, double atol) {
  if (got.size() != expected.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << expected.size();
  int bad = 0;
  std::string report;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - expected[i]);
    if (!(err <= atol + rtol * std::abs(expected[i]))) {
      if (++bad <= 5)
        report += " [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " expected " +
                  std::to_string(expected[i]) + ";";
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ:" << report;
}

// d/dx_i of f at x by central differences, for every i, in double.
inline std::vector<double> finite_difference(const std::function<double(const std::vector<double>&)>& f,
                                             std::vector<double> x, double h = 1e-5) {
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = f(x);
    x[i] = saved - h;
    const double down = f(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

inline double weighted_sum(const std::vector<double>& w, const std::vector<double>& y) {
  double s = 0.0;
  for (std::size_t i = 0; i < y.size(); ++i) s += w[i] * y[i];
  return s;
}

// Rows of k_len values stored with row stride ld >= k_len; the padding columns hold NaN, so a kernel that reads
// them as keys spoils its row.
inline std::vector<float> with_stride(const std::vector<float>& x, int k_len, int ld) {
  const std::size_t rows = x.size() / k_len;
  std::vector<float> out(rows * ld, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t r = 0; r < rows; ++r) std::copy_n(x.begin() + r * k_len, k_len, out.begin() + r * ld);
  return out;
}

// Every test runs the backend on two threads, so the parallel paths are exercised on the CI box too.
class CpuKernels : public ::testing::Test {
 protected:
  CpuBackend backend{2};
};

}  // namespace lseq::kernels::test

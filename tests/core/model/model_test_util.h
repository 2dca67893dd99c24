#pragma once
// Helpers of the model tests: random batches with padding, random parameters, and a directional gradient check
// against central finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/model/params.h"
#include "data/batch.h"
#include "kernels/backend.h"

namespace lseq::test {

// Sentences of random length in [min_len, max_len] (eos/bos included) over ids [3, vocab); pad 0, eos 1, bos 2.
// tgt is src reversed when `reverse`, else copied; with `random_target` an unrelated random sentence.
inline data::Batch random_batch(std::mt19937_64& rng, int size, int min_len, int max_len, int vocab,
                                bool random_target = true, bool reverse = false) {
  std::uniform_int_distribution<int> len_dist(min_len, max_len), id(3, vocab - 1);
  std::vector<std::vector<int32_t>> src(size), tgt(size);
  data::Batch b;
  b.size = size;
  for (int s = 0; s < size; ++s) {
    const int n = len_dist(rng) - 1;  // words; eos or bos makes the length
    for (int i = 0; i < n; ++i) src[s].push_back(id(rng));
    if (random_target) {
      const int m = len_dist(rng) - 1;
      for (int i = 0; i < m; ++i) tgt[s].push_back(id(rng));
    } else {
      tgt[s] = src[s];
      if (reverse) std::reverse(tgt[s].begin(), tgt[s].end());
    }
    b.src_len = std::max(b.src_len, n + 1);
    b.tgt_len = std::max(b.tgt_len, static_cast<int>(tgt[s].size()) + 1);
  }
  b.src.assign(static_cast<std::size_t>(size) * b.src_len, 0);
  b.tgt_in.assign(static_cast<std::size_t>(size) * b.tgt_len, 0);
  b.tgt_out.assign(static_cast<std::size_t>(size) * b.tgt_len, 0);
  for (int s = 0; s < size; ++s) {
    int32_t* ps = b.src.data() + static_cast<std::size_t>(s) * b.src_len;
    std::copy(src[s].begin(), src[s].end(), ps);
    ps[src[s].size()] = 1;
    int32_t* pi = b.tgt_in.data() + static_cast<std::size_t>(s) * b.tgt_len;
    int32_t* po = b.tgt_out.data() + static_cast<std::size_t>(s) * b.tgt_len;
    pi[0] = 2;
    std::copy(tgt[s].begin(), tgt[s].end(), pi + 1);
    std::copy(tgt[s].begin(), tgt[s].end(), po);
    po[tgt[s].size()] = 1;
    b.src_lengths.push_back(static_cast<int32_t>(src[s].size()) + 1);
    b.tgt_lengths.push_back(static_cast<int32_t>(tgt[s].size()) + 1);
    b.line_ids.push_back(s);
  }
  return b;
}

// Two gradient vectors equal bit for bit, and the expected one mostly nonzero (else the comparison means nothing).
inline void expect_same_gradient_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  std::size_t differ = 0, nonzero = 0, first = got.size();
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      ++differ;
      first = std::min(first, i);
    }
    nonzero += want[i] != 0.0f;
  }
  EXPECT_GT(nonzero, want.size() / 2) << "the step must produce gradients for the comparison to mean anything";
  EXPECT_EQ(differ, 0u) << "first at " << first << ": " << (first < got.size() ? got[first] : 0.0f) << " vs "
                        << (first < want.size() ? want[first] : 0.0f);
}

inline std::vector<float> random_floats(std::mt19937_64& rng, std::size_t n, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(normal(rng));
  return v;
}

// Initialises the store, then moves every parameter off its special value (zero biases, unit gains) so that
// gradient checks see every term.
inline void randomize_params(kernels::Backend& backend, ParamStore& store, uint64_t seed, double noise = 0.2) {
  store.init(seed);
  std::vector<float> host(store.size());
  backend.copy_to_host(host.data(), store.master(), host.size() * sizeof(float));
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<double> normal(0.0, noise);
  for (const ParamInfo& p : store.table().list()) {
    for (std::size_t i = 0; i < p.count; ++i) host[p.offset + i] += static_cast<float>(normal(rng));
  }
  backend.copy_to_device(store.master(), host.data(), host.size() * sizeof(float));
}

// A scalar function of the parameters (and optionally of an input vector living on the device):
// run(input, backward, d_input) returns the loss in double; with backward it also accumulates parameter
// gradients into the store and writes d loss / d input into d_input.
using LossFn = std::function<double(const float* input, bool backward, float* d_input)>;

struct GradCheckOptions {
  double eps = 1e-2;  // step along a unit direction
  double rel = 1e-2;  // |fd - analytic| <= rel * max(|fd|, |analytic|) + abs
  double abs = 1e-3;
  int directions = 2;  // random directions per tensor
  uint64_t seed = 7;
};

struct GradCheckStats {
  int checks = 0;
  double worst_excess = -1e30;  // max of |fd - an| - bound (negative: all within)
};

// Compares, for every parameter tensor and for the input, the analytic directional derivative along random
// unit directions with the central difference (L(p + eps u) - L(p - eps u)) / (2 eps), plus directions over all
// parameters at once.
inline GradCheckStats check_gradients(kernels::Backend& backend, ParamStore& store, std::vector<float> input,
                                      const LossFn& loss, const GradCheckOptions& opt = {}) {
  GradCheckStats stats;
  const std::size_t n_in = input.size();
  float* dev_in = n_in ? static_cast<float*>(backend.allocate(n_in * sizeof(float))) : nullptr;
  float* dev_din = n_in ? static_cast<float*>(backend.allocate(n_in * sizeof(float))) : nullptr;
  if (n_in) backend.copy_to_device(dev_in, input.data(), n_in * sizeof(float));

  store.zero_grads();
  loss(dev_in, true, dev_din);
  std::vector<float> grads(store.size()), params(store.size()), d_input(n_in);
  backend.copy_to_host(grads.data(), store.grads(), grads.size() * sizeof(float));
  backend.copy_to_host(params.data(), store.master(), params.size() * sizeof(float));
  if (n_in) backend.copy_to_host(d_input.data(), dev_din, n_in * sizeof(float));

  std::mt19937_64 rng(opt.seed);
  auto unit = [&](std::size_t n) {
    std::vector<float> u = random_floats(rng, n, 1.0);
    double norm = 0;
    for (float x : u) norm += static_cast<double>(x) * x;
    for (float& x : u) x = static_cast<float>(x / std::sqrt(norm));
    return u;
  };
  auto compare = [&](const std::string& what, double analytic, double fd) {
    const double bound = opt.rel * std::max(std::fabs(fd), std::fabs(analytic)) + opt.abs;
    const double err = std::fabs(fd - analytic);
    if (std::getenv("LSEQ_GRADCHECK_VERBOSE"))
      std::printf("%-40s an %12.6g fd %12.6g err %.2g\n", what.c_str(), analytic, fd, err);
    stats.checks++;
    stats.worst_excess = std::max(stats.worst_excess, err - bound);
    EXPECT_LE(err, bound) << what << ": analytic " << analytic << " vs finite difference " << fd;
  };
  // Parameters: directions within one tensor (offset, count), or over the whole buffer (count = size).
  auto check_params = [&](const std::string& what, std::size_t offset, std::size_t count) {
    const std::vector<float> u = unit(count);
    double analytic = 0;
    for (std::size_t i = 0; i < count; ++i) analytic += static_cast<double>(grads[offset + i]) * u[i];
    std::vector<float> moved = params;
    double l[2];
    for (int side = 0; side < 2; ++side) {
      const double step = side == 0 ? opt.eps : -opt.eps;
      for (std::size_t i = 0; i < count; ++i) moved[offset + i] = static_cast<float>(params[offset + i] + step * u[i]);
      backend.copy_to_device(store.master(), moved.data(), moved.size() * sizeof(float));
      l[side] = loss(dev_in, false, nullptr);
    }
    backend.copy_to_device(store.master(), params.data(), params.size() * sizeof(float));
    compare(what, analytic, (l[0] - l[1]) / (2 * opt.eps));
  };
  for (const ParamInfo& p : store.table().list()) {
    for (int d = 0; d < opt.directions; ++d) check_params(p.name, p.offset, p.count);
  }
  for (int d = 0; d < opt.directions; ++d) check_params("all parameters", 0, store.size());
  for (int d = 0; d < opt.directions && n_in; ++d) {
    const std::vector<float> u = unit(n_in);
    double analytic = 0;
    for (std::size_t i = 0; i < n_in; ++i) analytic += static_cast<double>(d_input[i]) * u[i];
    std::vector<float> moved(n_in);
    double l[2];
    for (int side = 0; side < 2; ++side) {
      const double step = side == 0 ? opt.eps : -opt.eps;
      for (std::size_t i = 0; i < n_in; ++i) moved[i] = static_cast<float>(input[i] + step * u[i]);
      backend.copy_to_device(dev_in, moved.data(), n_in * sizeof(float));
      l[side] = loss(dev_in, false, nullptr);
    }
    backend.copy_to_device(dev_in, input.data(), n_in * sizeof(float));
    compare("input", analytic, (l[0] - l[1]) / (2 * opt.eps));
  }
  if (dev_in) backend.release(dev_in);
  if (dev_din) backend.release(dev_din);
  return stats;
}

// Source sentences (ids without eos) of 1..max_words words over ids [4, vocab).
inline std::vector<std::vector<int32_t>> random_sources(std::mt19937_64& rng, int count, int max_words, int vocab) {
  std::uniform_int_distribution<int> words(1, max_words), id(4, vocab - 1);
  std::vector<std::vector<int32_t>> sources(static_cast<std::size_t>(count));
  for (auto& s : sources) {
    s.resize(static_cast<std::size_t>(words(rng)));
    for (int32_t& w : s) w = id(rng);
  }
  return sources;
}

// The line ids 0..n-1 of n sentences fed in order.
inline std::vector<int64_t> line_ids(std::size_t n) {
  std::vector<int64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(i);
  return ids;
}

}  // namespace lseq::test

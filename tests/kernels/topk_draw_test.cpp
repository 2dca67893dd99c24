// Top-k sampling's draw on the CPU backend (draw_topk) against a reference written apart from kernels/topk_draw.h:
// every candidate (the k best words and eos) sorted by log-probability and id, cut at k, drawn by SplitMix64's own
// uniform() over weights exp((lp - best) / T) in double. Also: what `remaining` does (forced eos, the stream left
// alone), rows with nothing to draw, and that the draws follow the weights (frequencies over many streams).
#include "kernels/topk_draw.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "kernels_test_util.h"
#include "util/splitmix64.h"

namespace lseq::kernels::test {
namespace {

constexpr int32_t kEos = 2;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Rows {
  int rows, k;
  std::vector<float> values, eos;
  std::vector<int32_t> ids;
};

// Rows as topk_log_softmax leaves them: k distinct word ids (> eos) best first with log-probabilities below 0,
// sometimes fewer than k (value -inf, id -1), and eos's own log-probability, sometimes among or above the words.
Rows random_rows(int rows, int k, uint64_t seed) {
  SplitMix64 rng(seed);
  Rows r{rows, k, std::vector<float>(std::size_t(rows) * k), std::vector<float>(rows),
         std::vector<int32_t>(std::size_t(rows) * k)};
  for (int row = 0; row < rows; ++row) {
    const int filled = rng.below(5) == 0 ? static_cast<int>(rng.below(static_cast<uint64_t>(k) + 1)) : k;
    float v = -static_cast<float>(rng.uniform() * 2);
    for (int i = 0; i < k; ++i) {
      const std::size_t at = std::size_t(row) * k + i;
      if (i < filled) {
        r.values[at] = v, r.ids[at] = 3 + 1000 * i + static_cast<int32_t>(rng.below(1000));  // rising, > eos
        if (rng.below(4) != 0) v -= static_cast<float>(rng.uniform() * 1.5);                 // some exact ties
      } else {
        r.values[at] = kNegInf, r.ids[at] = -1;
      }
    }
    const uint64_t eos_kind = rng.below(6);
    r.eos[row] = eos_kind == 0   ? kNegInf
                 : eos_kind == 1 ? r.values[std::size_t(row) * k]  // ties the best word: eos comes first
                                 : -static_cast<float>(rng.uniform() * 6);
  }
  return r;
}

struct Drawn {
  int32_t token;
  float log_prob;
};

// The reference draw of one row: candidates sorted (value desc, id asc), the k best, weights in double.
Drawn reference_draw(const Rows& r, int row, double temperature, SplitMix64& stream) {
  std::vector<std::pair<float, int32_t>> candidates;
  for (int i = 0; i < r.k; ++i) {
    const std::size_t at = std::size_t(row) * r.k + i;
    if (r.ids[at] >= 0 && r.values[at] > kNegInf) candidates.push_back({r.values[at], r.ids[at]});
  }
  if (r.eos[row] > kNegInf) candidates.push_back({r.eos[row], kEos});
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (static_cast<int>(candidates.size()) > r.k) candidates.resize(r.k);
  if (candidates.empty()) return {kEos, r.eos[row]};
  const double best = candidates[0].first;
  std::vector<double> weights;
  double total = 0;
  for (const auto& c : candidates) total += weights.emplace_back(std::exp((c.first - best) / temperature));
  const double target = stream.uniform() * total;
  double acc = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    acc += weights[i];
    if (target < acc) return {candidates[i].second, candidates[i].first};
  }
  return {candidates.back().second, candidates.back().first};
}

struct DrawState {
  std::vector<uint64_t> streams;
  std::vector<int32_t> remaining, tokens;
  std::vector<float> log_probs;
};

DrawState draw(Backend& backend, const Rows& r, double temperature, std::vector<uint64_t> streams,
               std::vector<int32_t> remaining) {
  DrawState s{std::move(streams), std::move(remaining), std::vector<int32_t>(r.rows, -9), poisoned(r.rows)};
  backend.draw_topk(r.values.data(), r.ids.data(), r.eos.data(), r.rows, r.k, kEos, temperature, s.streams.data(),
                    s.remaining.data(), s.tokens.data(), s.log_probs.data());
  return s;
}

TEST(TopKDraw, EqualsTheReferenceDrawAndKeepsTheStreamsAndLimits) {
  CpuBackend cpu(1);
  for (int k : {1, 2, 5, 32, kMaxTopK}) {
    for (double temperature : {0.6, 1.0, 1.7}) {
      SCOPED_TRACE("k " + std::to_string(k) + " T " + std::to_string(temperature));
      const Rows r = random_rows(97, k, 100 + k);
      std::vector<uint64_t> streams(r.rows);
      std::vector<int32_t> remaining(r.rows);
      SplitMix64 seeds(k * 7 + 1);
      for (int row = 0; row < r.rows; ++row) streams[row] = seeds.next(), remaining[row] = row % 7 - 1;  // -1 .. 5
      const DrawState got = draw(cpu, r, temperature, streams, remaining);
      int drawn_words = 0, drawn_eos = 0;
      for (int row = 0; row < r.rows; ++row) {
        SplitMix64 stream(streams[row]);
        const Drawn want = remaining[row] > 0 ? reference_draw(r, row, temperature, stream) : Drawn{kEos, r.eos[row]};
        EXPECT_EQ(got.tokens[row], want.token) << "row " << row;
        EXPECT_EQ(got.log_probs[row], want.log_prob) << "row " << row;
        // The stream moves once for a draw that had candidates; what is left drops for a word only.
        const bool drew = remaining[row] > 0 && (r.eos[row] > kNegInf || r.ids[std::size_t(row) * k] >= 0);
        EXPECT_EQ(got.streams[row], drew ? streams[row] + kSplitMix64Increment : streams[row]) << "row " << row;
        EXPECT_EQ(got.remaining[row], remaining[row] - (drew && want.token != kEos ? 1 : 0)) << "row " << row;
        drawn_words += drew && want.token != kEos;
        drawn_eos += drew && want.token == kEos;
      }
      EXPECT_GT(drawn_words, 10);
      if (k > 1) EXPECT_GT(drawn_eos, 0);
    }
  }
}

TEST(TopKDraw, RowsWithNothingDrawableGiveEos) {
  CpuBackend cpu(1);
  // Row 0: no word and eos at -inf; row 1: NaN everywhere (topk_log_softmax ranks NaN after every number).
  const float nan = std::nanf("");
  Rows r{2, 3, {kNegInf, kNegInf, kNegInf, nan, nan, nan}, {kNegInf, nan}, {-1, -1, -1, 7, 8, 9}};
  const DrawState got = draw(cpu, r, 1.0, {11, 12}, {3, 3});
  EXPECT_EQ(got.tokens, (std::vector<int32_t>{kEos, kEos}));
  EXPECT_EQ(got.streams, (std::vector<uint64_t>{11, 12}));  // nothing drawn: the streams stay
  EXPECT_EQ(got.remaining, (std::vector<int32_t>{3, 3}));
  EXPECT_EQ(got.log_probs[0], kNegInf);
}

// Over many streams, a row's draws follow exp(lp / T) normalised over its candidates.
TEST(TopKDraw, FrequenciesFollowTheTemperedWeights) {
  CpuBackend cpu(1);
  const int rows = 20000;
  Rows r{rows, 3, {}, std::vector<float>(rows, std::log(0.1f)), {}};
  for (int row = 0; row < rows; ++row) {
    for (float p : {0.5f, 0.3f, 0.1f}) r.values.push_back(std::log(p));
    for (int32_t id : {10, 11, 12}) r.ids.push_back(id);
  }
  std::vector<uint64_t> streams(rows);
  SplitMix64 seeds(3);
  for (uint64_t& s : streams) s = seeds.next();
  const double temperature = 2.0;
  const DrawState got = draw(cpu, r, temperature, streams, std::vector<int32_t>(rows, 1));
  std::map<int32_t, int> counts;
  for (int32_t t : got.tokens) ++counts[t];
  // k = 3 keeps 0.5, 0.3 and the first of the two 0.1s by id: eos (2) before 12.
  const double w[3] = {std::pow(0.5, 1 / temperature), std::pow(0.3, 1 / temperature), std::pow(0.1, 1 / temperature)};
  const double total = w[0] + w[1] + w[2];
  EXPECT_EQ(counts.count(12), 0u);
  EXPECT_NEAR(counts[10] / double(rows), w[0] / total, 0.015);
  EXPECT_NEAR(counts[11] / double(rows), w[1] / total, 0.015);
  EXPECT_NEAR(counts[kEos] / double(rows), w[2] / total, 0.015);
}

TEST(TopKDraw, RefusesBadArguments) {
  CpuBackend cpu(1);
  const Rows r = random_rows(2, 4, 1);
  EXPECT_THROW(draw(cpu, r, 0.0, {1, 2}, {1, 1}), Error);
  Rows wide = r;
  wide.k = kMaxTopK + 1;
  EXPECT_THROW(draw(cpu, wide, 1.0, {1, 2}, {1, 1}), Error);
}

}  // namespace
}  // namespace lseq::kernels::test

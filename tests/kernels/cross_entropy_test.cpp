// Label-smoothed cross-entropy: loss and nll against a double reference, padding rows, the gradient against
// finite differences of grad_scale * sum(loss), in place, stability for large logits, bad targets.
#include <algorithm>

#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

constexpr int kIgnore = -1;

struct CeRef {
  std::vector<double> loss, nll;
};

CeRef ref_cross_entropy(const std::vector<double>& x, const std::vector<int32_t>& y, int n, int vocab, double ls) {
  CeRef r{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (int i = 0; i < n; ++i) {
    if (y[i] == kIgnore) continue;
    const double* row = &x[std::size_t(i) * vocab];
    double max = row[0];
    for (int v = 0; v < vocab; ++v) max = std::max(max, row[v]);
    double sum = 0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
    const double lse = max + std::log(sum);
    double sum_logp = 0;
    for (int v = 0; v < vocab; ++v) sum_logp += row[v] - lse;
    r.nll[i] = -(row[y[i]] - lse);
    r.loss[i] = (1 - ls) * r.nll[i] - ls / vocab * sum_logp;
  }
  return r;
}

struct CeCase {
  int n, vocab;
  float ls;
};

TEST_F(CpuKernels, CrossEntropyForwardMatchesReference) {
  uint64_t seed = 1600;
  for (const auto& c :
       std::vector<CeCase>{{1, 1, 0.0f}, {1, 5, 0.1f}, {7, 13, 0.0f}, {9, 31, 0.2f}, {64, 1000, 0.1f}}) {
    const auto logits = random_floats(std::size_t(c.n) * c.vocab, ++seed, -4, 4);
    auto targets = random_ints(c.n, ++seed, 0, c.vocab - 1);
    if (c.n > 2) targets[1] = kIgnore;
    auto loss = poisoned(c.n), nll = poisoned(c.n);
    backend.cross_entropy(DType::f32, logits.data(), nullptr, targets.data(), c.n, c.vocab, c.ls, kIgnore, 1.0f,
                          loss.data(), nll.data(), nullptr);
    const auto ref = ref_cross_entropy(to_double(logits), targets, c.n, c.vocab, c.ls);
    EXPECT_TRUE(all_close(loss, ref.loss, 1e-5, 1e-6)) << c.n << "x" << c.vocab;
    EXPECT_TRUE(all_close(nll, ref.nll, 1e-5, 1e-6)) << c.n << "x" << c.vocab;
    if (c.n > 2) {
      EXPECT_EQ(loss[1], 0.0f);
      EXPECT_EQ(nll[1], 0.0f);
    }
  }
}

TEST_F(CpuKernels, CrossEntropyGradientMatchesFiniteDifferences) {
  uint64_t seed = 1700;
  for (const auto& c : std::vector<CeCase>{{1, 1, 0.1f}, {1, 4, 0.0f}, {5, 6, 0.1f}, {4, 9, 0.3f}}) {
    const auto logits = random_floats(std::size_t(c.n) * c.vocab, ++seed, -3, 3);
    auto targets = random_ints(c.n, ++seed, 0, c.vocab - 1);
    if (c.n > 2) targets[2] = kIgnore;
    const float grad_scale = 0.37f;
    const auto fd = finite_difference(
        [&](const std::vector<double>& x) {
          const auto r = ref_cross_entropy(x, targets, c.n, c.vocab, c.ls);
          double s = 0;
          for (double l : r.loss) s += l;
          return grad_scale * s;
        },
        to_double(logits));
    auto loss = poisoned(c.n), nll = poisoned(c.n), dlogits = poisoned(logits.size());
    backend.cross_entropy(DType::f32, logits.data(), nullptr, targets.data(), c.n, c.vocab, c.ls, kIgnore, grad_scale,
                          loss.data(), nll.data(), dlogits.data());
    EXPECT_TRUE(all_close(dlogits, fd, 1e-4, 1e-6)) << c.n << "x" << c.vocab;
    if (c.n > 2)
      for (int v = 0; v < c.vocab; ++v) EXPECT_EQ(dlogits[2 * c.vocab + v], 0.0f);
    // In place: dlogits aliasing logits.
    auto inplace = logits;
    backend.cross_entropy(DType::f32, inplace.data(), nullptr, targets.data(), c.n, c.vocab, c.ls, kIgnore,
                          grad_scale, nullptr, nullptr, inplace.data());
    EXPECT_EQ(inplace, dlogits);
  }
}

// With a bias the result is that of logits + bias: loss against the double reference of the biased logits,
// gradient against its finite differences in the logits, also in place.
TEST_F(CpuKernels, CrossEntropyWithBiasIsThatOfBiasedLogits) {
  uint64_t seed = 1750;
  for (const auto& c : std::vector<CeCase>{{1, 1, 0.1f}, {5, 7, 0.1f}, {4, 12, 0.0f}}) {
    const auto logits = random_floats(std::size_t(c.n) * c.vocab, ++seed, -3, 3);
    const auto bias = random_floats(c.vocab, ++seed, -2, 2);
    auto targets = random_ints(c.n, ++seed, 0, c.vocab - 1);
    if (c.n > 2) targets[2] = kIgnore;
    const float grad_scale = 0.6f;
    auto biased = [&](const std::vector<double>& x) {
      std::vector<double> b(x);
      for (std::size_t i = 0; i < b.size(); ++i) b[i] += bias[i % c.vocab];
      return b;
    };
    const auto ref = ref_cross_entropy(biased(to_double(logits)), targets, c.n, c.vocab, c.ls);
    const auto fd = finite_difference(
        [&](const std::vector<double>& x) {
          double s = 0;
          for (double l : ref_cross_entropy(biased(x), targets, c.n, c.vocab, c.ls).loss) s += l;
          return grad_scale * s;
        },
        to_double(logits));
    auto loss = poisoned(c.n), nll = poisoned(c.n), dlogits = poisoned(logits.size());
    backend.cross_entropy(DType::f32, logits.data(), bias.data(), targets.data(), c.n, c.vocab, c.ls, kIgnore,
                          grad_scale, loss.data(), nll.data(), dlogits.data());
    EXPECT_TRUE(all_close(loss, ref.loss, 1e-5, 1e-6)) << c.n << "x" << c.vocab;
    EXPECT_TRUE(all_close(nll, ref.nll, 1e-5, 1e-6)) << c.n << "x" << c.vocab;
    EXPECT_TRUE(all_close(dlogits, fd, 1e-4, 1e-6)) << c.n << "x" << c.vocab;
    auto inplace = logits;
    backend.cross_entropy(DType::f32, inplace.data(), bias.data(), targets.data(), c.n, c.vocab, c.ls, kIgnore,
                          grad_scale, nullptr, nullptr, inplace.data());
    EXPECT_EQ(inplace, dlogits);
  }
}

// A row stride past the vocabulary (the output layer pads its logits rows to 16 bytes) gives the dense run's loss,
// gradient and bias gradient exactly, and leaves the padding columns as they were.
TEST_F(CpuKernels, CrossEntropyOverPaddedRowsIsTheDenseRun) {
  const int n = 4, vocab = 13, ld = 16;
  const auto logits = random_floats(std::size_t(n) * vocab, 4100, -5, 5);
  const auto bias = random_floats(vocab, 4101, -1, 1);
  const std::vector<int32_t> targets = {3, kIgnore, 12, 0};
  std::vector<float> loss(n), nll(n), d(std::size_t(n) * vocab);
  backend.cross_entropy(DType::f32, logits.data(), bias.data(), targets.data(), n, vocab, 0.1f, kIgnore, 0.5f,
                        loss.data(), nll.data(), d.data());
  std::vector<float> padded(std::size_t(n) * ld, 7.0f), got_loss(n), got_nll(n);
  for (int r = 0; r < n; ++r) std::copy_n(&logits[std::size_t(r) * vocab], vocab, &padded[std::size_t(r) * ld]);
  backend.cross_entropy(DType::f32, padded.data(), bias.data(), targets.data(), n, vocab, 0.1f, kIgnore, 0.5f,
                        got_loss.data(), got_nll.data(), padded.data(), ld);
  EXPECT_EQ(got_loss, loss);
  EXPECT_EQ(got_nll, nll);
  for (int r = 0; r < n; ++r)
    for (int v = 0; v < ld; ++v)
      EXPECT_EQ(padded[std::size_t(r) * ld + v], v < vocab ? d[std::size_t(r) * vocab + v] : 7.0f) << r << " " << v;
  std::vector<float> dense_bias(vocab, 0.25f), padded_bias(vocab, 0.25f);
  backend.bias_grad(DType::f32, d.data(), n, vocab, dense_bias.data());
  backend.bias_grad(DType::f32, padded.data(), n, vocab, padded_bias.data(), ld);
  EXPECT_EQ(padded_bias, dense_bias);
  EXPECT_THROW(backend.cross_entropy(DType::f32, padded.data(), nullptr, targets.data(), n, vocab, 0.1f, kIgnore, 1.0f,
                                     got_loss.data(), nullptr, nullptr, vocab - 1),
               lseq::Error);
}

TEST_F(CpuKernels, CrossEntropyIsStableForLargeLogits) {
  const int n = 3, vocab = 5;
  auto logits = random_floats(n * vocab, 1800, -1, 1);
  for (auto& x : logits) x += 1000.0f;
  logits[7] = 3000.0f;  // row 1, very confident
  const std::vector<int32_t> targets = {0, 2, 4};
  auto loss = poisoned(n), nll = poisoned(n), d = poisoned(n * vocab);
  backend.cross_entropy(DType::f32, logits.data(), nullptr, targets.data(), n, vocab, 0.1f, kIgnore, 1.0f,
                        loss.data(), nll.data(), d.data());
  const auto ref = ref_cross_entropy(to_double(logits), targets, n, vocab, 0.1);
  EXPECT_TRUE(all_close(loss, ref.loss, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(nll, ref.nll, 1e-5, 1e-5));
  for (float g : d) EXPECT_TRUE(std::isfinite(g));
}

TEST_F(CpuKernels, CrossEntropyRejectsTargetsOutsideTheVocabulary) {
  const auto logits = random_floats(2 * 4, 1900);
  const std::vector<int32_t> targets = {1, 4};
  std::vector<float> loss(2);
  try {
    backend.cross_entropy(DType::f32, logits.data(), nullptr, targets.data(), 2, 4, 0.0f, kIgnore, 1.0f, loss.data(),
                          nullptr, nullptr);
    FAIL() << "target 4 of a vocabulary of 4 accepted";
  } catch (const lseq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lseq::kernels::test

// split_heads/merge_heads layouts and bias gradient; the masked attention softmax and its backward.
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

struct HeadShape {
  int batch, len, heads, head_dim, parts;
  std::size_t size() const { return std::size_t(batch) * len * parts * heads * head_dim; }
  int width() const { return parts * heads * head_dim; }
};

// out[p][b][h][t][d] = qkv[b*len+t][(p*heads+h)*head_dim+d] + bias[...]
std::vector<double> ref_split(const std::vector<double>& qkv, const std::vector<double>& bias, HeadShape s) {
  std::vector<double> out(s.size());
  std::size_t o = 0;
  for (int p = 0; p < s.parts; ++p)
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int t = 0; t < s.len; ++t)
          for (int d = 0; d < s.head_dim; ++d) {
            const int col = (p * s.heads + h) * s.head_dim + d;
            out[o++] = qkv[(std::size_t(b) * s.len + t) * s.width() + col] + (bias.empty() ? 0.0 : bias[col]);
          }
  return out;
}

const std::vector<HeadShape> kHeadShapes = {{1, 1, 1, 1, 1}, {2, 3, 2, 4, 3}, {3, 5, 4, 2, 2}, {4, 33, 8, 16, 3}};

TEST_F(CpuKernels, SplitHeadsMatchesLayoutAndMergeHeadsInvertsIt) {
  uint64_t seed = 1100;
  for (const auto& s : kHeadShapes) {
    const auto qkv = random_floats(s.size(), ++seed), bias = random_floats(s.width(), ++seed);
    auto out = poisoned(s.size());
    backend.split_heads(DType::f32, qkv.data(), bias.data(), s.batch, s.len, s.heads, s.head_dim, s.parts, out.data());
    EXPECT_TRUE(all_close(out, ref_split(to_double(qkv), to_double(bias), s), 1e-7, 1e-7));
    backend.split_heads(DType::f32, qkv.data(), nullptr, s.batch, s.len, s.heads, s.head_dim, s.parts, out.data());
    const auto plain = ref_split(to_double(qkv), {}, s);  // a pure copy: exact
    EXPECT_EQ(out, std::vector<float>(plain.begin(), plain.end()));
    auto back = poisoned(s.size());
    backend.merge_heads(DType::f32, out.data(), s.batch, s.len, s.heads, s.head_dim, s.parts, back.data(), nullptr);
    EXPECT_EQ(back, qkv) << "parts " << s.parts;
  }
}

TEST_F(CpuKernels, MergeHeadsIsTheBackwardOfSplitHeads) {
  uint64_t seed = 1200;
  for (const auto& s : std::vector<HeadShape>{{1, 1, 1, 1, 1}, {2, 3, 2, 2, 3}}) {
    const auto qkv = to_double(random_floats(s.size(), ++seed)), bias = to_double(random_floats(s.width(), ++seed));
    const auto w = random_floats(s.size(), ++seed);
    const auto wd = to_double(w);
    const auto fd_x =
        finite_difference([&](const std::vector<double>& v) { return weighted_sum(wd, ref_split(v, bias, s)); }, qkv);
    auto fd_b =
        finite_difference([&](const std::vector<double>& v) { return weighted_sum(wd, ref_split(qkv, v, s)); }, bias);
    const auto db0 = random_floats(s.width(), ++seed);
    for (int c = 0; c < s.width(); ++c) fd_b[c] += db0[c];
    auto dx = poisoned(s.size());
    auto db = db0;
    backend.merge_heads(DType::f32, w.data(), s.batch, s.len, s.heads, s.head_dim, s.parts, dx.data(), db.data());
    EXPECT_TRUE(all_close(dx, fd_x, 1e-6, 1e-6));
    EXPECT_TRUE(all_close(db, fd_b, 1e-5, 1e-5));
  }
}

struct SoftmaxCase {
  int batch, heads, q_len, k_len;
  bool causal, with_lengths;
};

std::vector<double> ref_softmax(const std::vector<double>& s, const std::vector<int32_t>& k_lengths, SoftmaxCase c,
                                double scale) {
  std::vector<double> p(s.size(), 0.0);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.q_len; ++i) {
        const std::size_t row = ((std::size_t(b) * c.heads + h) * c.q_len + i) * c.k_len;
        auto allowed = [&](int j) { return (!c.with_lengths || j < k_lengths[b]) && (!c.causal || j <= i); };
        double max = -1e300, sum = 0;
        for (int j = 0; j < c.k_len; ++j)
          if (allowed(j)) max = std::max(max, scale * s[row + j]);
        for (int j = 0; j < c.k_len; ++j)
          if (allowed(j)) sum += std::exp(scale * s[row + j] - max);
        for (int j = 0; j < c.k_len; ++j) p[row + j] = allowed(j) ? std::exp(scale * s[row + j] - max) / sum : 0.0;
      }
  return p;
}

const std::vector<SoftmaxCase> kSoftmaxCases = {{1, 1, 1, 1, false, false},
                                                {2, 3, 4, 7, false, true},
                                                {2, 2, 5, 5, true, false},
                                                {3, 2, 6, 6, true, true},
                                                {4, 8, 33, 47, false, true}};

TEST_F(CpuKernels, AttentionSoftmaxForwardMasksAndNormalises) {
  uint64_t seed = 1300;
  for (const auto& c : kSoftmaxCases) {
    const std::size_t n = std::size_t(c.batch) * c.heads * c.q_len * c.k_len;
    const auto scores = random_floats(n, ++seed, -8, 8);
    auto k_lengths = random_ints(c.batch, ++seed, 1, c.k_len);
    k_lengths[0] = c.k_len;
    const float scale = 0.35f;
    auto probs = poisoned(n);
    backend.attention_softmax_forward(DType::f32, scores.data(), c.with_lengths ? k_lengths.data() : nullptr, c.batch,
                                      c.heads, c.q_len, c.k_len, scale, c.causal, probs.data());
    const auto ref = ref_softmax(to_double(scores), k_lengths, c, scale);
    EXPECT_TRUE(all_close(probs, ref, 1e-5, 1e-7)) << c.batch << "x" << c.heads << "x" << c.q_len << "x" << c.k_len;
    for (std::size_t i = 0; i < n; ++i)
      if (ref[i] == 0.0) ASSERT_EQ(probs[i], 0.0f) << "masked key " << i << " got probability";
    // In place (probs aliasing scores) gives the same result.
    auto inplace = scores;
    backend.attention_softmax_forward(DType::f32, inplace.data(), c.with_lengths ? k_lengths.data() : nullptr, c.batch,
                                      c.heads, c.q_len, c.k_len, scale, c.causal, inplace.data());
    EXPECT_EQ(inplace, probs);
  }
}

TEST_F(CpuKernels, AttentionSoftmaxRowWithoutKeysIsZeroNotNaN) {
  const std::vector<int32_t> k_lengths = {0, 3};
  const auto scores = random_floats(2 * 2 * 4, 1400);
  auto probs = poisoned(scores.size());
  backend.attention_softmax_forward(DType::f32, scores.data(), k_lengths.data(), 2, 1, 2, 4, 1.0f, false, probs.data());
  for (int j = 0; j < 8; ++j) EXPECT_EQ(probs[j], 0.0f);
  for (int row = 2; row < 4; ++row) {
    double sum = 0;
    for (int j = 0; j < 4; ++j) sum += probs[row * 4 + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_EQ(probs[row * 4 + 3], 0.0f);
  }
}

TEST_F(CpuKernels, AttentionSoftmaxBackwardMatchesFiniteDifferences) {
  uint64_t seed = 1500;
  for (const auto& c :
       std::vector<SoftmaxCase>{{1, 1, 1, 1, false, false}, {2, 1, 3, 5, true, true}, {1, 2, 2, 6, false, true}}) {
    const std::size_t n = std::size_t(c.batch) * c.heads * c.q_len * c.k_len;
    const auto scores = random_floats(n, ++seed, -3, 3);
    auto k_lengths = random_ints(c.batch, ++seed, 1, c.k_len);
    const float scale = 0.6f;
    const auto w = random_floats(n, ++seed);
    const auto wd = to_double(w);
    const auto fd = finite_difference(
        [&](const std::vector<double>& s) { return weighted_sum(wd, ref_softmax(s, k_lengths, c, scale)); },
        to_double(scores));
    auto probs = poisoned(n);
    backend.attention_softmax_forward(DType::f32, scores.data(), c.with_lengths ? k_lengths.data() : nullptr, c.batch,
                                      c.heads, c.q_len, c.k_len, scale, c.causal, probs.data());
    auto ds = poisoned(n);
    const int rows = c.batch * c.heads * c.q_len;
    backend.attention_softmax_backward(DType::f32, probs.data(), w.data(), rows, c.k_len, scale, ds.data());
    EXPECT_TRUE(all_close(ds, fd, 1e-4, 1e-6));
    // dscores may alias dprobs
    auto inplace = w;
    backend.attention_softmax_backward(DType::f32, probs.data(), inplace.data(), rows, c.k_len, scale, inplace.data());
    EXPECT_EQ(inplace, ds);
  }
}

}  // namespace
}  // namespace lseq::kernels::test

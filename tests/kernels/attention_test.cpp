// split_heads/merge_heads layouts and bias gradient; the masked attention softmax and its backward.
#include <algorithm>

#include "kernels_test_util.h"
#include "util/error.h"

namespace lseq::kernels::test {
namespace {

struct HeadShape {
  int batch, len, padded_len, heads, head_dim, parts;
  std::size_t tokens_size() const { return std::size_t(batch) * len * width(); }              // [batch*len, width]
  std::size_t heads_size() const { return std::size_t(batch) * padded_len * width(); }        // padded head layout
  int width() const { return parts * heads * head_dim; }
};

// out[p][b][h][t][d] = qkv[b*len+t][(p*heads+h)*head_dim+d] + bias[...] for t < len, 0 for t in [len, padded_len)
std::vector<double> ref_split(const std::vector<double>& qkv, const std::vector<double>& bias, HeadShape s) {
  std::vector<double> out(s.heads_size());
  std::size_t o = 0;
  for (int p = 0; p < s.parts; ++p)
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int t = 0; t < s.padded_len; ++t)
          for (int d = 0; d < s.head_dim; ++d) {
            const int col = (p * s.heads + h) * s.head_dim + d;
            if (t >= s.len) {
              out[o++] = 0.0;
              continue;
            }
            out[o++] = qkv[(std::size_t(b) * s.len + t) * s.width() + col] + (bias.empty() ? 0.0 : bias[col]);
          }
  return out;
}

// Unpadded and padded (training rounds the length up to a multiple of 8) head layouts.
const std::vector<HeadShape> kHeadShapes = {
    {1, 1, 1, 1, 1, 1}, {1, 1, 8, 1, 1, 1}, {2, 3, 8, 2, 4, 3}, {3, 5, 5, 4, 2, 2}, {4, 33, 40, 8, 16, 3}};

TEST_F(CpuKernels, SplitHeadsMatchesLayoutAndMergeHeadsInvertsIt) {
  uint64_t seed = 1100;
  for (const auto& s : kHeadShapes) {
    const auto qkv = random_floats(s.tokens_size(), ++seed), bias = random_floats(s.width(), ++seed);
    auto out = poisoned(s.heads_size());
    backend.split_heads(DType::f32, qkv.data(), bias.data(), s.batch, s.len, s.padded_len, s.heads, s.head_dim,
                        s.parts, out.data());
    EXPECT_TRUE(all_close(out, ref_split(to_double(qkv), to_double(bias), s), 1e-7, 1e-7));
    out = poisoned(s.heads_size());
    backend.split_heads(DType::f32, qkv.data(), nullptr, s.batch, s.len, s.padded_len, s.heads, s.head_dim, s.parts,
                        out.data());
    const auto plain = ref_split(to_double(qkv), {}, s);  // a pure copy (and zero padding rows): exact
    EXPECT_EQ(out, std::vector<float>(plain.begin(), plain.end()));
    auto back = poisoned(s.tokens_size());
    backend.merge_heads(DType::f32, out.data(), s.batch, s.len, s.padded_len, s.heads, s.head_dim, s.parts,
                        back.data(), nullptr);
    EXPECT_EQ(back, qkv) << "parts " << s.parts << " padded_len " << s.padded_len;
  }
}

TEST_F(CpuKernels, SplitAndMergeHeadsRejectAPaddedLengthBelowTheLength) {
  std::vector<float> buffer(64, 1.0f);
  EXPECT_THROW(backend.split_heads(DType::f32, buffer.data(), nullptr, 1, 4, 3, 1, 2, 1, buffer.data()), Error);
  EXPECT_THROW(backend.merge_heads(DType::f32, buffer.data(), 1, 4, 3, 1, 2, 1, buffer.data(), nullptr), Error);
}

// The padding rows of merge_heads' input hold random values: they must not reach dx or the bias gradient.
TEST_F(CpuKernels, MergeHeadsIsTheBackwardOfSplitHeads) {
  uint64_t seed = 1200;
  for (const auto& s : std::vector<HeadShape>{{1, 1, 1, 1, 1, 1}, {2, 3, 3, 2, 2, 3}, {2, 3, 8, 2, 2, 3}}) {
    const auto qkv = to_double(random_floats(s.tokens_size(), ++seed));
    const auto bias = to_double(random_floats(s.width(), ++seed));
    const auto w = random_floats(s.heads_size(), ++seed);
    const auto wd = to_double(w);
    const auto fd_x =
        finite_difference([&](const std::vector<double>& v) { return weighted_sum(wd, ref_split(v, bias, s)); }, qkv);
    auto fd_b =
        finite_difference([&](const std::vector<double>& v) { return weighted_sum(wd, ref_split(qkv, v, s)); }, bias);
    const auto db0 = random_floats(s.width(), ++seed);
    for (int c = 0; c < s.width(); ++c) fd_b[c] += db0[c];
    auto dx = poisoned(s.tokens_size());
    auto db = db0;
    backend.merge_heads(DType::f32, w.data(), s.batch, s.len, s.padded_len, s.heads, s.head_dim, s.parts, dx.data(),
                        db.data());
    EXPECT_TRUE(all_close(dx, fd_x, 1e-6, 1e-6));
    EXPECT_TRUE(all_close(db, fd_b, 1e-5, 1e-5));
  }
}

struct SoftmaxCase {
  int batch, heads, q_len, k_len;
  bool causal, with_lengths;
};

// key_starts (optional, [batch][q_len]): keys before a query's start are masked too.
std::vector<double> ref_softmax(const std::vector<double>& s, const std::vector<int32_t>& k_lengths, SoftmaxCase c,
                                double scale, const std::vector<int32_t>& key_starts = {}) {
  std::vector<double> p(s.size(), 0.0);
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.q_len; ++i) {
        const std::size_t row = ((std::size_t(b) * c.heads + h) * c.q_len + i) * c.k_len;
        const int first = key_starts.empty() ? 0 : key_starts[std::size_t(b) * c.q_len + i];
        auto allowed = [&](int j) {
          return (!c.with_lengths || j < k_lengths[b]) && (!c.causal || j <= i) && j >= first;
        };
        double max = -1e300, sum = 0;
        for (int j = 0; j < c.k_len; ++j)
          if (allowed(j)) max = std::max(max, scale * s[row + j]);
        for (int j = 0; j < c.k_len; ++j)
          if (allowed(j)) sum += std::exp(scale * s[row + j] - max);
        for (int j = 0; j < c.k_len; ++j)
          p[row + j] = allowed(j) && sum > 0 ? std::exp(scale * s[row + j] - max) / sum : 0.0;
      }
  return p;
}

const std::vector<SoftmaxCase> kSoftmaxCases = {{1, 1, 1, 1, false, false},
                                                {2, 3, 4, 7, false, true},
                                                {2, 2, 5, 5, true, false},
                                                {3, 2, 6, 6, true, true},
                                                {4, 8, 33, 47, false, true}};

// The first k_len columns of rows of stride ld; EXPECTs the padding columns to be exactly 0.
std::vector<float> real_columns(const std::vector<float>& x, int k_len, int ld) {
  const std::size_t rows = x.size() / ld;
  std::vector<float> out(rows * k_len);
  for (std::size_t r = 0; r < rows; ++r) {
    std::copy_n(x.begin() + r * ld, k_len, out.begin() + r * k_len);
    for (int j = k_len; j < ld; ++j) EXPECT_EQ(x[r * ld + j], 0.0f) << "padding column " << j << " of row " << r;
  }
  return out;
}

// Row strides to try: unpadded, odd padding, and the multiple of 8 that the attention layer uses.
std::vector<int> strides_for(int k_len) { return {k_len, k_len + 3, (k_len + 7) / 8 * 8}; }

TEST_F(CpuKernels, AttentionSoftmaxForwardMasksAndNormalises) {
  uint64_t seed = 1300;
  for (const auto& c : kSoftmaxCases)
    for (int ld : strides_for(c.k_len)) {
      const std::size_t n = std::size_t(c.batch) * c.heads * c.q_len * c.k_len;
      const std::size_t padded = n / c.k_len * ld;
      const auto scores = random_floats(n, ++seed, -8, 8);
      const auto strided = with_stride(scores, c.k_len, ld);
      auto k_lengths = random_ints(c.batch, ++seed, 1, c.k_len);
      k_lengths[0] = c.k_len;
      const float scale = 0.35f;
      auto probs_ld = poisoned(padded);
      backend.attention_softmax_forward(DType::f32, strided.data(), c.with_lengths ? k_lengths.data() : nullptr,
                                        c.batch, c.heads, c.q_len, c.k_len, ld, scale, c.causal, probs_ld.data());
      const auto probs = real_columns(probs_ld, c.k_len, ld);
      const auto ref = ref_softmax(to_double(scores), k_lengths, c, scale);
      EXPECT_TRUE(all_close(probs, ref, 1e-5, 1e-7))
          << c.batch << "x" << c.heads << "x" << c.q_len << "x" << c.k_len << " ld " << ld;
      for (std::size_t i = 0; i < n; ++i)
        if (ref[i] == 0.0) ASSERT_EQ(probs[i], 0.0f) << "masked key " << i << " got probability";
      // In place (probs aliasing scores) gives the same result.
      auto inplace = strided;
      backend.attention_softmax_forward(DType::f32, inplace.data(), c.with_lengths ? k_lengths.data() : nullptr,
                                        c.batch, c.heads, c.q_len, c.k_len, ld, scale, c.causal, inplace.data());
      EXPECT_EQ(inplace, probs_ld);
    }
}

// Document masks of a language model's packed blocks: causal rows that start at their document's first key.
TEST_F(CpuKernels, AttentionSoftmaxKeyStartsMaskEarlierKeys) {
  uint64_t seed = 1350;
  for (const SoftmaxCase& c : std::vector<SoftmaxCase>{{2, 3, 9, 9, true, true}, {1, 2, 20, 20, true, false}})
    for (int ld : strides_for(c.k_len)) {
      const std::size_t n = std::size_t(c.batch) * c.heads * c.q_len * c.k_len;
      const auto scores = random_floats(n, ++seed, -8, 8);
      auto k_lengths = random_ints(c.batch, ++seed, 1, c.k_len);
      // Documents of random lengths: each query starts at its document's first position.
      std::vector<int32_t> starts(std::size_t(c.batch) * c.q_len);
      const auto breaks = random_ints(starts.size(), ++seed, 0, 3);
      for (int b = 0; b < c.batch; ++b)
        for (int i = 0, start = 0; i < c.q_len; ++i) {
          if (i > 0 && breaks[std::size_t(b) * c.q_len + i] == 0) start = i;
          starts[std::size_t(b) * c.q_len + i] = start;
        }
      starts[1] = c.q_len + 4;  // past every key: a row of zeros
      auto probs_ld = poisoned(n / c.k_len * ld);
      backend.attention_softmax_forward(DType::f32, with_stride(scores, c.k_len, ld).data(),
                                        c.with_lengths ? k_lengths.data() : nullptr, c.batch, c.heads, c.q_len,
                                        c.k_len, ld, 0.4f, c.causal, probs_ld.data(), starts.data());
      const auto probs = real_columns(probs_ld, c.k_len, ld);
      const auto ref = ref_softmax(to_double(scores), k_lengths, c, 0.4f, starts);
      EXPECT_TRUE(all_close(probs, ref, 1e-5, 1e-7)) << "ld " << ld;
      for (std::size_t e = 0; e < n; ++e)
        if (ref[e] == 0.0) ASSERT_EQ(probs[e], 0.0f) << "masked key " << e << " got probability";
    }
}

TEST_F(CpuKernels, AttentionSoftmaxRowWithoutKeysIsZeroNotNaN) {
  const std::vector<int32_t> k_lengths = {0, 3};
  const auto scores = random_floats(2 * 2 * 4, 1400);
  auto probs = poisoned(scores.size());
  backend.attention_softmax_forward(DType::f32, scores.data(), k_lengths.data(), 2, 1, 2, 4, 4, 1.0f, false,
                                    probs.data());
  for (int j = 0; j < 8; ++j) EXPECT_EQ(probs[j], 0.0f);
  for (int row = 2; row < 4; ++row) {
    double sum = 0;
    for (int j = 0; j < 4; ++j) sum += probs[row * 4 + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_EQ(probs[row * 4 + 3], 0.0f);
  }
}

TEST_F(CpuKernels, AttentionSoftmaxRejectsRowStrideShorterThanKeys) {
  std::vector<float> x(16, 0.5f);
  EXPECT_THROW(backend.attention_softmax_forward(DType::f32, x.data(), nullptr, 1, 1, 2, 8, 7, 1.0f, false, x.data()),
               lseq::Error);
  EXPECT_THROW(backend.attention_softmax_backward(DType::f32, x.data(), x.data(), 2, 8, 7, 1.0f, x.data()), lseq::Error);
}

TEST_F(CpuKernels, AttentionSoftmaxBackwardMatchesFiniteDifferences) {
  uint64_t seed = 1500;
  for (const auto& c :
       std::vector<SoftmaxCase>{{1, 1, 1, 1, false, false}, {2, 1, 3, 5, true, true}, {1, 2, 2, 6, false, true}})
    for (int ld : strides_for(c.k_len)) {
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
      backend.attention_softmax_forward(DType::f32, scores.data(), c.with_lengths ? k_lengths.data() : nullptr,
                                        c.batch, c.heads, c.q_len, c.k_len, c.k_len, scale, c.causal, probs.data());
      // probs and dprobs with NaN padding: the backward must read only the first k_len columns.
      const auto probs_ld = with_stride(probs, c.k_len, ld), w_ld = with_stride(w, c.k_len, ld);
      auto ds_ld = poisoned(n / c.k_len * ld);
      const int rows = c.batch * c.heads * c.q_len;
      backend.attention_softmax_backward(DType::f32, probs_ld.data(), w_ld.data(), rows, c.k_len, ld, scale,
                                         ds_ld.data());
      EXPECT_TRUE(all_close(real_columns(ds_ld, c.k_len, ld), fd, 1e-4, 1e-6)) << "ld " << ld;
      // dscores may alias dprobs
      auto inplace = w_ld;
      backend.attention_softmax_backward(DType::f32, probs_ld.data(), inplace.data(), rows, c.k_len, ld, scale,
                                         inplace.data());
      EXPECT_EQ(inplace, ds_ld);
    }
}

}  // namespace
}  // namespace lseq::kernels::test

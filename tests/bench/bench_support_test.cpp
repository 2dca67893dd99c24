// The benchmark's own arithmetic (bench/wmt_batches.h, bench/bench_support.h): batches respect their budget and
// the documented length distribution, their rows are built as lstrain builds them, and the FLOPs per token that
// MFU divides by match a count from the model's shape written out independently.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "../../bench/bench_support.h"
#include "../../bench/wmt_batches.h"
#include "core/model/encoder_decoder_model.h"
#include "kernels/backend.h"

namespace lseq {
namespace {

TEST(BenchBatches, RespectTheTargetBudgetAndTheLengthBounds) {
  for (int64_t budget : {1024, 4096}) {
    const auto batches = bench::wmt_like_batches(budget, 8, 3);
    ASSERT_EQ(batches.size(), 8u);
    int64_t tokens = 0, sentences = 0;
    for (const auto& b : batches) {
      ASSERT_FALSE(b.sentences.empty());
      EXPECT_LE(static_cast<int64_t>(b.sentences.size()) * b.tgt_len(), budget);
      for (const auto& s : b.sentences) {
        EXPECT_GE(s.tgt, 1);
        EXPECT_LE(s.tgt, bench::kLongestSentence);
        EXPECT_GE(s.src, 1);
        EXPECT_LE(s.src, bench::kLongestSentence);
        // src = round(tgt * U[0.8, 1.25]), unless clipped at 1 or 250
        if (s.src > 1 && s.src < bench::kLongestSentence) {
          EXPECT_GE(s.src, std::floor(0.8 * s.tgt) - 1);
          EXPECT_LE(s.src, std::ceil(1.25 * s.tgt) + 1);
        }
        tokens += s.tgt + 1;
        ++sentences;
      }
    }
    // Mean target length about 28 before eos (lognormal mean 28): loose bounds for 8 sampled batches.
    const double mean = static_cast<double>(tokens) / static_cast<double>(sentences) - 1;
    EXPECT_GT(mean, 20.0) << budget;
    EXPECT_LT(mean, 36.0) << budget;
  }
}

TEST(BenchBatches, SameSeedSameBatchesOtherSeedOthers) {
  const auto a = bench::wmt_like_batches(2048, 4, 5), b = bench::wmt_like_batches(2048, 4, 5);
  const auto c = bench::wmt_like_batches(2048, 4, 6);
  auto lengths = [](const std::vector<bench::BatchShape>& v) {
    std::vector<int> out;
    for (const auto& batch : v)
      for (const auto& s : batch.sentences) out.push_back(s.tgt * 1000 + s.src);
    return out;
  };
  EXPECT_EQ(lengths(a), lengths(b));
  EXPECT_NE(lengths(a), lengths(c));
}

TEST(BenchBatches, RowsAreBuiltAsLstrainBuildsThem) {
  const auto shapes = bench::wmt_like_batches(1024, 2, 9);
  const int vocab = 50;
  const data::Batch b = bench::make_batch(shapes[0], vocab, vocab, 17);
  ASSERT_EQ(b.size, static_cast<int>(shapes[0].sentences.size()));
  EXPECT_EQ(b.tgt_tokens(), shapes[0].tgt_tokens());
  for (int r = 0; r < b.size; ++r) {
    const auto& s = shapes[0].sentences[r];
    ASSERT_EQ(b.src_lengths[r], s.src + 1);
    ASSERT_EQ(b.tgt_lengths[r], s.tgt + 1);
    for (int i = 0; i < b.src_len; ++i) {
      const int32_t id = b.src[static_cast<std::size_t>(r) * b.src_len + i];
      if (i < s.src) EXPECT_TRUE(id >= 4 && id < vocab);
      else EXPECT_EQ(id, i == s.src ? data::kEosId : data::kPadId);
    }
    const int32_t* in = b.tgt_in.data() + static_cast<std::size_t>(r) * b.tgt_len;
    const int32_t* out = b.tgt_out.data() + static_cast<std::size_t>(r) * b.tgt_len;
    EXPECT_EQ(in[0], data::kBosId);
    for (int i = 0; i < s.tgt; ++i) {
      EXPECT_TRUE(out[i] >= 4 && out[i] < vocab);
      EXPECT_EQ(in[i + 1], out[i]);  // the decoder input is the output shifted right
    }
    EXPECT_EQ(out[s.tgt], data::kEosId);
    for (int i = s.tgt + 1; i < b.tgt_len; ++i) EXPECT_EQ(out[i], data::kPadId);
  }
}

// 6 x (weights a target token passes through), counted from the shape by hand: matrices, biases and LayerNorms
// of every layer plus the output layer, embedding tables excluded, the (tied) output weight included.
double flops_from_shape(const ModelConfig& c) {
  const double d = c.dim_emb, f = c.dim_ffn, v = c.tgt_vocab;
  const double encoder_layer = 4 * d * d + 2 * d * f + (3 * d + d) + (f + d) + 2 * 2 * d;
  const double decoder_layer = 8 * d * d + 2 * d * f + (3 * d + d) + (d + 2 * d + d) + (f + d) + 3 * 2 * d;
  return 6 * (c.enc_depth * encoder_layer + c.dec_depth * decoder_layer + v * d + v);
}

TEST(BenchFlops, MatchACountFromTheShape) {
  auto backend = kernels::make_cpu_backend(1);
  for (TiedEmbeddings tied : {TiedEmbeddings::all, TiedEmbeddings::target, TiedEmbeddings::none}) {
    ModelConfig c;
    c.src_vocab = c.tgt_vocab = 97;
    c.dim_emb = 32;
    c.enc_depth = 2;
    c.dec_depth = 3;
    c.heads = 4;
    c.dim_ffn = 48;
    c.tied = tied;
    EncoderDecoderModel model(c, *backend);
    EXPECT_DOUBLE_EQ(bench::train_flops_per_token(model.params(), c), flops_from_shape(c))
        << static_cast<int>(tied);
  }
  // The figures for the presets' shapes (weights only): 0.3625 and 1.2536 GFLOP per target token.
  ModelConfig base;
  base.src_vocab = base.tgt_vocab = 32000;
  EXPECT_NEAR(flops_from_shape(base) / 1e9, 0.3625, 0.002);
}

}  // namespace
}  // namespace lseq

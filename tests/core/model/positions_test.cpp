// The sinusoidal position tables (transformer-positions): the default is the interleaved table lseq always had, the
// concatenated and marian layouts equal tables computed here the way Hugging Face MarianMT and Marian compute them,
// and the layout a config names reaches both the full forward pass and incremental decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/model/layers/embedding_layer.h"
#include "kernels/workspace.h"
#include "model_test_util.h"
#include "util/error.h"

namespace lseq {
namespace {

// Hugging Face's MarianSinusoidalPositionalEmbedding._init_weight, written out for one cell: the angle
// pos / 10000^(2*(j//2)/dim) of column j in double; sines of the even j fill the first half, cosines of the odd j
// the second half.
std::vector<float> huggingface_table(int len, int dim) {
  std::vector<float> table(static_cast<std::size_t>(len) * dim);
  for (int pos = 0; pos < len; ++pos) {
    for (int j = 0; j < dim; ++j) {
      const double angle = pos / std::pow(10000.0, static_cast<double>(2 * (j / 2)) / dim);
      const int column = j % 2 == 0 ? j / 2 : dim / 2 + j / 2;
      table[static_cast<std::size_t>(pos) * dim + column] = static_cast<float>(j % 2 == 0 ? std::sin(angle)
                                                                                            : std::cos(angle));
    }
  }
  return table;
}

// Marian's initializer (src/tensors/cpu/tensor_operators.cpp, SinusoidalPositionEmbeddings), in its float arithmetic.
std::vector<float> marian_table(int len, int dim) {
  std::vector<float> table(static_cast<std::size_t>(len) * dim);
  const float num_timescales = static_cast<float>(dim) / 2;
  const float log_timescale_increment = std::log(10000.f) / (num_timescales - 1.f);
  for (int j = 0; j < len; ++j) {
    for (int i = 0; i < dim; ++i) {
      const float v = static_cast<float>(j) *
                      std::exp(static_cast<float>(i % static_cast<int>(num_timescales)) * -log_timescale_increment);
      table[static_cast<std::size_t>(j) * dim + i] =
          i < static_cast<int>(num_timescales) ? std::sin(v) : std::cos(v);
    }
  }
  return table;
}

TEST(Positions, DefaultIsTheInterleavedTable) {
  EXPECT_EQ(ModelConfig().positions, PositionLayout::interleaved);
  const std::vector<float> table = sinusoidal_positions(50, 16);
  EXPECT_EQ(table, sinusoidal_positions(50, 16, PositionLayout::interleaved));
  for (int t = 0; t < 50; ++t) {
    for (int i = 0; i < 8; ++i) {
      const double angle = t / std::pow(10000.0, 2.0 * i / 16);
      EXPECT_EQ(table[t * 16 + 2 * i], static_cast<float>(std::sin(angle))) << t << " " << i;
      EXPECT_EQ(table[t * 16 + 2 * i + 1], static_cast<float>(std::cos(angle))) << t << " " << i;
    }
  }
}

TEST(Positions, SmallTablesByHand) {
  // dim 4, position 1: frequencies 1 and 10000^(-1/2) (Vaswani), 1 and 10000^(-1) (Marian: ln(10000) / (2 - 1)).
  const float s1 = std::sin(1.0f), c1 = std::cos(1.0f);
  auto row1 = [](PositionLayout layout) {
    const std::vector<float> t = sinusoidal_positions(2, 4, layout);
    return std::vector<float>(t.begin() + 4, t.end());
  };
  const std::vector<float> inter = row1(PositionLayout::interleaved), concat = row1(PositionLayout::concatenated),
                           marian = row1(PositionLayout::marian);
  EXPECT_NEAR(inter[0], s1, 1e-7);
  EXPECT_NEAR(inter[1], c1, 1e-7);
  EXPECT_NEAR(inter[2], std::sin(0.01), 1e-7);
  EXPECT_NEAR(inter[3], std::cos(0.01), 1e-7);
  EXPECT_EQ(concat, (std::vector<float>{inter[0], inter[2], inter[1], inter[3]}));
  EXPECT_NEAR(marian[0], s1, 1e-6);
  EXPECT_NEAR(marian[1], std::sin(1e-4), 1e-7);
  EXPECT_NEAR(marian[2], c1, 1e-6);
  EXPECT_NEAR(marian[3], std::cos(1e-4), 1e-7);
  // Row 0 is sin(0) = 0 and cos(0) = 1 in every layout.
  for (PositionLayout layout : {PositionLayout::interleaved, PositionLayout::concatenated, PositionLayout::marian}) {
    const std::vector<float> t = sinusoidal_positions(1, 6, layout);
    for (int c = 0; c < 6; ++c) {
      const bool cosine = layout == PositionLayout::interleaved ? c % 2 == 1 : c >= 3;
      EXPECT_EQ(t[c], cosine ? 1.0f : 0.0f) << position_layout_name(layout) << " column " << c;
    }
  }
}

TEST(Positions, ConcatenatedEqualsHuggingFacesTable) {
  for (int dim : {4, 8, 512}) {
    SCOPED_TRACE(dim);
    EXPECT_EQ(sinusoidal_positions(600, dim, PositionLayout::concatenated), huggingface_table(600, dim));
  }
}

TEST(Positions, MarianEqualsMariansTable) {
  for (int dim : {4, 8, 512}) {
    SCOPED_TRACE(dim);
    const std::vector<float> table = sinusoidal_positions(600, dim, PositionLayout::marian);
    EXPECT_EQ(table, marian_table(600, dim));
    // Marian's frequencies are not Hugging Face's: the two layouts differ beyond the first frequency.
    EXPECT_NE(table, sinusoidal_positions(600, dim, PositionLayout::concatenated));
  }
}

TEST(Positions, NamesAndYamlRoundTrip) {
  for (PositionLayout layout : {PositionLayout::interleaved, PositionLayout::concatenated, PositionLayout::marian}) {
    EXPECT_EQ(parse_position_layout(position_layout_name(layout)), layout);
    ModelConfig c;
    c.src_vocab = c.tgt_vocab = 10;
    c.positions = layout;
    const YAML::Node node = c.to_yaml();
    EXPECT_EQ(node["transformer-positions"].as<std::string>(), position_layout_name(layout));
    EXPECT_EQ(ModelConfig::from_yaml(YAML::Load(YAML::Dump(node))).positions, layout);
  }
  // A model config written before the option existed reads as the interleaved layout it was trained with.
  EXPECT_EQ(ModelConfig::from_yaml(YAML::Load("dim-emb: 64\n")).positions, PositionLayout::interleaved);
  std::string message;
  try {
    parse_position_layout("sine-first");
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("--transformer-positions"), std::string::npos) << message;
  EXPECT_NE(message.find("concatenated"), std::string::npos) << message;
}

TEST(Positions, SplitLayoutsNeedAnEvenWidth) {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 10;
  c.dim_emb = 6;
  c.heads = 3;
  c.positions = PositionLayout::marian;
  EXPECT_NO_THROW(c.validate());
  c.dim_emb = 3;
  c.heads = 1;
  c.positions = PositionLayout::concatenated;
  EXPECT_THROW(c.validate(), Error);
  c.positions = PositionLayout::interleaved;
  EXPECT_NO_THROW(c.validate());
}

ModelConfig tiny(PositionLayout layout) {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 17;
  c.dim_emb = 8;
  c.enc_depth = c.dec_depth = 1;
  c.heads = 2;
  c.dim_ffn = 16;
  c.tied = TiedEmbeddings::all;
  c.max_length = 12;
  c.positions = layout;
  return c;
}

// The layout changes what the full forward pass computes, and incremental decoding computes the same as the full
// pass in each layout: both build their tables from the config.
TEST(Positions, TheConfiguredLayoutReachesTheForwardPassAndDecoding) {
  std::mt19937_64 rng(3);
  const data::Batch batch = test::random_batch(rng, 3, 2, 9, 17);
  std::vector<std::vector<float>> logits;
  for (PositionLayout layout : {PositionLayout::interleaved, PositionLayout::concatenated, PositionLayout::marian}) {
    SCOPED_TRACE(position_layout_name(layout));
    auto backend = kernels::make_cpu_backend(1);
    EncoderDecoderModel model(tiny(layout), *backend);
    test::randomize_params(*backend, model.param_store(), 7, 0.5);
    kernels::Workspace ws(*backend, model.workspace_bytes(64, 12, false), "test");
    logits.push_back(model.forward_logits(batch, ws));

    const int n = batch.size, len = batch.tgt_len, vocab = 17;
    auto dec = make_encoder_decoder_step_model(model, n, batch.src_len, len);
    dec->start(batch.src, batch.src_lengths, n, batch.src_len);
    std::vector<float> log_probs;
    for (int t = 0; t < len; ++t) {
      std::vector<int32_t> tokens(n);
      for (int s = 0; s < n; ++s) tokens[s] = batch.tgt_in[static_cast<std::size_t>(s) * len + t];
      dec->step(tokens, log_probs);
      for (int s = 0; s < n; ++s) {
        if (t >= batch.tgt_lengths[s]) continue;
        const float* row = logits.back().data() + (static_cast<std::size_t>(s) * len + t) * vocab;
        double max = row[0], sum = 0;
        for (int v = 1; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
        for (int v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
        for (int v = 0; v < vocab; ++v) {
          const double expected = row[v] - max - std::log(sum);
          EXPECT_NEAR(log_probs[static_cast<std::size_t>(s) * vocab + v], expected, 1e-4 * (1 + std::abs(expected)))
              << "sentence " << s << " position " << t << " id " << v;
        }
      }
    }
  }
  EXPECT_NE(logits[0], logits[1]);
  EXPECT_NE(logits[1], logits[2]);
}

}  // namespace
}  // namespace lseq

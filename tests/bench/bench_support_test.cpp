// The benchmark's own arithmetic (bench/wmt_batches.h, bench/bench_support.h): batches respect their budget and
// the documented length distribution, their rows are built as lstrain builds them, and the FLOPs per token that
// MFU divides by match a count from the model's shape written out independently. And their options
// (bench/bench_options.h): read through the programs' one parser as App::bench, each benchmark's own defaults.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "../../bench/bench_options.h"
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

// parse_options(App::bench, ...) on `args`; the error line, if any, in `err`.
ParsedOptions parse_bench(const std::vector<std::string>& args, std::string* err = nullptr) {
  std::vector<const char*> argv{"bench_test"};
  for (const auto& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, errors;
  ParsedOptions parsed = parse_options(App::bench, static_cast<int>(argv.size()), argv.data(), out, errors);
  if (err) *err = errors.str();
  return parsed;
}

TEST(BenchOptions, ListsAreSpaceSeparatedAndTyposAreErrors) {
  ParsedOptions parsed = parse_bench({"--tokens", "4096", "8192", "--cpu-threads", "2", "--recompute-ffn"});
  ASSERT_FALSE(parsed.exit_now);
  EXPECT_EQ(parsed.options.get_ints("tokens"), (std::vector<int64_t>{4096, 8192}));
  EXPECT_EQ(parsed.options.get_int("cpu-threads"), 2);
  EXPECT_TRUE(parsed.options.get_bool("recompute-ffn"));
  EXPECT_EQ(parse_bench({}).options.get_ints("tokens"), (std::vector<int64_t>{4096, 8192, 16384}));

  std::string err;
  parsed = parse_bench({"--tokns", "1"}, &err);
  EXPECT_TRUE(parsed.exit_now);
  EXPECT_EQ(parsed.exit_code, 1);
  EXPECT_NE(err.find("did you mean '--tokens'"), std::string::npos) << err;
  // The old spellings are gone: a comma list, the hand-made parsers' --threads, a positional size.
  EXPECT_EQ(parse_bench({"--tokens", "4096,8192"}, &err).exit_code, 1);
  EXPECT_NE(err.find("'--tokens'"), std::string::npos) << err;
  EXPECT_EQ(parse_bench({"--threads", "2"}, &err).exit_code, 1);
  EXPECT_NE(err.find("did you mean '--cpu-threads'"), std::string::npos) << err;
  EXPECT_EQ(parse_bench({"256"}, &err).exit_code, 1);
  // Options of the products that mean nothing to a benchmark are refused.
  EXPECT_EQ(parse_bench({"--learn-rate", "0.1"}, &err).exit_code, 1);
  EXPECT_NE(err.find("not accepted by"), std::string::npos) << err;
}

TEST(BenchOptions, ABenchmarkNeedsNoModelDirectory) {
  ParsedOptions parsed = parse_bench({});
  ASSERT_FALSE(parsed.exit_now);
  EXPECT_FALSE(parsed.options.has("model"));
  EXPECT_EQ(parsed.options.get_int("seed"), 1);  // lstrain's is 1234
}

TEST(BenchOptions, EachBenchmarkKeepsItsOwnDefaults) {
  const Options defaults = parse_bench({}).options;
  EXPECT_EQ(bench::int_or(defaults, "steps", 32), 32);
  EXPECT_EQ(bench::int_or(defaults, "steps", 5), 5);
  EXPECT_EQ(bench::ints_or(defaults, "batch-sizes", {32, 64}), (std::vector<int64_t>{32, 64}));
  const Options given = parse_bench({"--steps", "7", "--batch-sizes", "3", "9"}).options;
  EXPECT_EQ(bench::int_or(given, "steps", 32), 7);
  EXPECT_EQ(bench::ints_or(given, "batch-sizes", {32, 64}), (std::vector<int64_t>{3, 9}));
}

TEST(BenchOptions, PrecisionDevicesAndVocabularySizes) {
  EXPECT_EQ(bench::precision(parse_bench({}).options), "bf16");
  EXPECT_EQ(bench::precision(parse_bench({"--cpu"}).options), "fp32");
  EXPECT_EQ(bench::precision(parse_bench({"--cpu", "--precision", "bfloat16"}).options), "bf16");
  EXPECT_EQ(bench::device(parse_bench({}).options), 0);
  EXPECT_EQ(bench::device(parse_bench({"--devices", "3", "1"}).options), 3);

  const bench::VocabSizes fallback = bench::vocab_sizes(parse_bench({}).options, 8000);
  EXPECT_EQ(fallback.src, 8000);
  EXPECT_EQ(fallback.tgt, 8000);
  const bench::VocabSizes one = bench::vocab_sizes(parse_bench({"--dim-vocabs", "1000"}).options, 8000);
  EXPECT_EQ(one.src, 1000);
  EXPECT_EQ(one.tgt, 1000);
  const bench::VocabSizes two = bench::vocab_sizes(parse_bench({"--dim-vocabs", "1000", "1200"}).options, 8000);
  EXPECT_EQ(two.src, 1000);
  EXPECT_EQ(two.tgt, 1200);
  EXPECT_THROW(bench::vocab_sizes(parse_bench({"--dim-vocabs", "1", "2", "3"}).options, 8000), Error);
}

TEST(BenchOptions, BackendOptionsReachTheModelsOptions) {
  const Options bench_options = parse_bench({"--cpu", "--cpu-threads", "3", "--devices", "2", "1"}).options;
  Options model_options = default_options(App::translate);
  bench::set_backend_options(model_options, bench_options, "fp32");
  EXPECT_TRUE(model_options.get_bool("cpu"));
  EXPECT_EQ(model_options.get_int("cpu-threads"), 3);
  EXPECT_EQ(model_options.get_ints("devices"), (std::vector<int64_t>{2}));  // one device: the first
  EXPECT_EQ(model_options.get_string("precision"), "fp32");
  auto backend = bench::make_backend(model_options, bench_options, "fp32");
  EXPECT_NE(backend->name().find("cpu"), std::string::npos);
}

TEST(BenchOptions, TheSmallModelOfTheStepBenchmarks) {
  const ModelConfig c = bench::model_config(parse_bench({"--dec-depth", "2", "--dim-vocabs", "500"}).options, 40);
  EXPECT_EQ(c.dim_emb, 256);
  EXPECT_EQ(c.enc_depth, 3);
  EXPECT_EQ(c.dec_depth, 2);
  EXPECT_EQ(c.heads, 4);
  EXPECT_EQ(c.dim_ffn, 1024);
  EXPECT_EQ(c.src_vocab, 500);
  EXPECT_EQ(c.tgt_vocab, 500);
  EXPECT_EQ(c.max_length, 40);
  EXPECT_THROW(bench::model_config(parse_bench({"--transformer-heads", "3"}).options, 40), Error);
}

}  // namespace
}  // namespace lseq

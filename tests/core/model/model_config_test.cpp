// ModelConfig: validation errors name the options; YAML with Marian's keys round-trips.
#include <gtest/gtest.h>

#include <string>

#include "core/model/encoder_decoder_model.h"
#include "core/model/model_config.h"
#include "util/error.h"

namespace lseq {
namespace {

ModelConfig valid() {
  ModelConfig c;
  c.src_vocab = 100;
  c.tgt_vocab = 120;
  return c;
}

// The error message of f(), or "" when it does not throw lseq::Error.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const ModelConfig& c, std::initializer_list<const char*> words) {
  const std::string message = error_of([&] { c.validate(); });
  ASSERT_FALSE(message.empty()) << "config accepted";
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const char* w : words) EXPECT_NE(message.find(w), std::string::npos) << w << " not in: " << message;
}

TEST(ModelConfig, DefaultsWithVocabulariesAreValid) { EXPECT_NO_THROW(valid().validate()); }

TEST(ModelConfig, InvalidModelsNameTheOption) {
  ModelConfig c = valid();
  c.heads = 6;  // 512 % 6 != 0
  expect_error(c, {"--transformer-heads", "--dim-emb"});
  c = valid(), c.dim_emb = 0;
  expect_error(c, {"--dim-emb"});
  c = valid(), c.enc_depth = -1;
  expect_error(c, {"--enc-depth"});
  c = valid(), c.dec_depth = 0;
  expect_error(c, {"--dec-depth"});
  c = valid(), c.dim_ffn = 0;
  expect_error(c, {"--transformer-dim-ffn"});
  c = valid(), c.tgt_vocab = 0;
  expect_error(c, {"--dim-vocabs"});
  c = valid(), c.max_length = 0;
  expect_error(c, {"--max-length"});
  c = valid(), c.dropout = 1.0f;
  expect_error(c, {"--transformer-dropout"});
  c = valid(), c.dropout_attention = -0.1f;
  expect_error(c, {"--transformer-dropout-attention"});
  c = valid(), c.dropout_ffn = 1.5f;
  expect_error(c, {"--transformer-dropout-ffn"});
  c = valid(), c.label_smoothing = 1.0f;
  expect_error(c, {"--label-smoothing"});
  c = valid(), c.tied = TiedEmbeddings::all;
  expect_error(c, {"--tied-embeddings-all", "100", "120"});
  c.tgt_vocab = 100;
  EXPECT_NO_THROW(c.validate());
  c = valid(), c.tied = TiedEmbeddings::source;
  expect_error(c, {"--tied-embeddings-src", "100", "120"});
}

TEST(ModelConfig, TheTransformerValidatesItsConfig) {
  auto backend = kernels::make_cpu_backend(1);
  ModelConfig c = valid();
  c.dim_emb = 10;
  c.heads = 4;
  EXPECT_NE(error_of([&] { EncoderDecoderModel t(c, *backend); }).find("--transformer-heads"), std::string::npos);
}

// A config read from a weights file never passed the option parser: the same limits hold there.
TEST(ModelConfig, SizesAboveTheLimitsAreRefused) {
  ModelConfig c = valid();
  c.enc_depth = kMaxDepth + 1;
  expect_error(c, {"--enc-depth", "limit"});
  c = valid(), c.dim_emb = c.heads * (kMaxModelDim / c.heads + 1);
  expect_error(c, {"--dim-emb", "limit"});
  c = valid(), c.max_length = kMaxLength + 1;
  expect_error(c, {"--max-length", "limit"});
  c = valid(), c.src_vocab = kMaxVocab + 1;
  expect_error(c, {"--dim-vocabs", "limit"});
  c = valid(), c.dec_depth = kMaxDepth;
  EXPECT_NO_THROW(c.validate());
}

TEST(ModelConfig, NormPlacementAcceptsMarianPairsOnly) {
  EXPECT_EQ(parse_norm_placement("", "dan"), NormPlacement::post);
  EXPECT_EQ(parse_norm_placement("n", "da"), NormPlacement::pre);
  for (const auto& pair : std::vector<std::pair<std::string, std::string>>{{"d", "an"}, {"", "da"}, {"n", "dan"}}) {
    const std::string message = error_of([&] { parse_norm_placement(pair.first, pair.second); });
    EXPECT_NE(message.find("--transformer-preprocess"), std::string::npos) << message;
    EXPECT_NE(message.find("--transformer-postprocess"), std::string::npos) << message;
  }
  EXPECT_NE(error_of([] { parse_activation("tanh"); }).find("--transformer-ffn-activation"), std::string::npos);
  EXPECT_TRUE(parse_embedding_postprocess("d"));
  EXPECT_FALSE(parse_embedding_postprocess(""));
  EXPECT_NE(error_of([] { parse_embedding_postprocess("dn"); }).find("--transformer-postprocess-emb"),
            std::string::npos);
}

TEST(ModelConfig, YamlRoundTripWithMarianKeys) {
  ModelConfig c = valid();
  c.dim_emb = 256;
  c.enc_depth = 3;
  c.dec_depth = 2;
  c.heads = 4;
  c.dim_ffn = 1024;
  c.activation = kernels::Activation::swish;
  c.dropout = 0.2f;
  c.dropout_attention = 0.05f;
  c.dropout_ffn = 0.15f;
  c.norm = NormPlacement::pre;
  c.tied = TiedEmbeddings::target;
  c.max_length = 123;
  c.label_smoothing = 0.2f;
  const YAML::Node node = c.to_yaml();
  EXPECT_EQ(node["dim-emb"].as<int>(), 256);
  EXPECT_EQ(node["transformer-heads"].as<int>(), 4);
  EXPECT_EQ(node["transformer-preprocess"].as<std::string>(), "n");
  EXPECT_EQ(node["transformer-postprocess"].as<std::string>(), "da");
  EXPECT_EQ(node["transformer-ffn-activation"].as<std::string>(), "swish");
  EXPECT_TRUE(node["tied-embeddings"].as<bool>());
  EXPECT_FALSE(node["tied-embeddings-all"].as<bool>());
  // Through text, as a checkpoint stores it.
  const ModelConfig back = ModelConfig::from_yaml(YAML::Load(YAML::Dump(node)));
  EXPECT_EQ(back.src_vocab, 100);
  EXPECT_EQ(back.tgt_vocab, 120);
  EXPECT_EQ(back.dim_emb, 256);
  EXPECT_EQ(back.enc_depth, 3);
  EXPECT_EQ(back.dec_depth, 2);
  EXPECT_EQ(back.heads, 4);
  EXPECT_EQ(back.dim_ffn, 1024);
  EXPECT_EQ(back.activation, kernels::Activation::swish);
  EXPECT_FLOAT_EQ(back.dropout, 0.2f);
  EXPECT_FLOAT_EQ(back.dropout_attention, 0.05f);
  EXPECT_FLOAT_EQ(back.dropout_ffn, 0.15f);
  EXPECT_EQ(back.norm, NormPlacement::pre);
  EXPECT_EQ(back.tied, TiedEmbeddings::target);
  EXPECT_EQ(back.max_length, 123);
  EXPECT_FLOAT_EQ(back.label_smoothing, 0.2f);
  // The default post-norm writes an empty preprocess string, which must read back as post-norm.
  const ModelConfig post = ModelConfig::from_yaml(YAML::Load(YAML::Dump(valid().to_yaml())));
  EXPECT_EQ(post.norm, NormPlacement::post);
  EXPECT_EQ(post.tied, TiedEmbeddings::none);
}

TEST(ModelConfig, FromYamlReadsMarianStyleOptions) {
  const ModelConfig c = ModelConfig::from_yaml(
      YAML::Load("dim-vocabs: [8000, 8000]\ndim-emb: 64\ntransformer-heads: 2\ntransformer-preprocess: n\n"
                 "transformer-postprocess: da\ntied-embeddings-all: true\nlearn-rate: 0.0003\n"));
  EXPECT_EQ(c.src_vocab, 8000);
  EXPECT_EQ(c.dim_emb, 64);
  EXPECT_EQ(c.heads, 2);
  EXPECT_EQ(c.norm, NormPlacement::pre);
  EXPECT_EQ(c.tied, TiedEmbeddings::all);
  EXPECT_EQ(c.enc_depth, ModelConfig().enc_depth);  // absent keys keep defaults
  EXPECT_NO_THROW(c.validate());
  // The options' shortcuts: transformer-prenorm, tied-embeddings-src (with tied-embeddings: all), no emb dropout.
  const ModelConfig s = ModelConfig::from_yaml(
      YAML::Load("transformer-prenorm: true\ntransformer-preprocess: ''\ntransformer-postprocess: dan\n"
                 "tied-embeddings-src: true\ntransformer-postprocess-emb: ''\n"));
  EXPECT_EQ(s.norm, NormPlacement::pre);
  EXPECT_EQ(s.tied, TiedEmbeddings::source);
  EXPECT_FALSE(s.embedding_dropout);
  EXPECT_EQ(ModelConfig::from_yaml(YAML::Load("tied-embeddings-src: true\ntied-embeddings: true\n")).tied,
            TiedEmbeddings::all);
  const ModelConfig s_back = ModelConfig::from_yaml(YAML::Load(YAML::Dump(s.to_yaml())));
  EXPECT_EQ(s_back.tied, TiedEmbeddings::source);
  EXPECT_FALSE(s_back.embedding_dropout);
  EXPECT_NE(error_of([] { ModelConfig::from_yaml(YAML::Load("dim-emb: wide\n")); }).find("dim-emb"), std::string::npos);
  EXPECT_NE(error_of([] { ModelConfig::from_yaml(YAML::Load("dim-vocabs: [8000]\n")); }).find("dim-vocabs"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ModelConfig::from_yaml(YAML::Load("transformer-postprocess: dna\n"));
            }).find("--transformer-postprocess"),
            std::string::npos);
}

// A language model's config: its own keys (one vocabulary, no encoder, learned positions), normalised on reading
// (the output always tied), Marian's lm-transformer spelling accepted, and an encoder-decoder config read as before.
TEST(ModelConfig, LanguageModelYamlRoundTrip) {
  ModelConfig c = ModelConfig::from_yaml(
      YAML::Load("type: lm-transformer\ndim-vocabs: [500, 500]\nenc-depth: 6\ndec-depth: 3\n"
                 "tied-embeddings: false\ntransformer-train-position-embeddings: true\nmax-length: 256\n"
                 "transformer-scale-embeddings: false\n"));
  EXPECT_EQ(c.type, ModelType::lm);
  EXPECT_TRUE(c.is_lm());
  EXPECT_EQ(c.src_vocab, 500);
  EXPECT_EQ(c.tgt_vocab, 500);
  EXPECT_EQ(c.enc_depth, 0) << "a language model has no encoder";
  EXPECT_EQ(c.dec_depth, 3);
  EXPECT_EQ(c.tied, TiedEmbeddings::target) << "the output is tied to the embeddings";
  EXPECT_TRUE(c.learned_positions);
  EXPECT_FALSE(c.scale_embeddings);
  EXPECT_NO_THROW(c.validate());
  const YAML::Node node = c.to_yaml();
  EXPECT_EQ(node["type"].as<std::string>(), "lm");
  EXPECT_EQ(node["dim-vocabs"].size(), 1u);
  EXPECT_FALSE(node["enc-depth"]);
  EXPECT_FALSE(node["tied-embeddings-all"]);
  EXPECT_TRUE(node["transformer-train-position-embeddings"].as<bool>());
  const ModelConfig back = ModelConfig::from_yaml(YAML::Load(YAML::Dump(node)));
  EXPECT_EQ(back.type, ModelType::lm);
  EXPECT_EQ(back.tgt_vocab, 500);
  EXPECT_EQ(back.max_length, 256);
  EXPECT_TRUE(back.learned_positions);
  EXPECT_FALSE(back.scale_embeddings);
  EXPECT_TRUE(ModelConfig::from_yaml(YAML::Load("type: lm\n")).scale_embeddings) << "scaled unless said otherwise";
  EXPECT_EQ(YAML::Dump(back.to_yaml()), YAML::Dump(node));
  EXPECT_EQ(ModelConfig::from_yaml(YAML::Load("type: lm\n")).type, ModelType::lm);
}

TEST(ModelConfig, EncoderDecoderConfigKeepsItsKeys) {
  const YAML::Node node = valid().to_yaml();
  EXPECT_EQ(node["type"].as<std::string>(), "transformer");
  EXPECT_EQ(node["dim-vocabs"].size(), 2u);
  EXPECT_TRUE(node["enc-depth"]);
  EXPECT_TRUE(node["tied-embeddings-src"]);
  EXPECT_FALSE(node["transformer-train-position-embeddings"]) << "the encoder-decoder config reads as before";
  EXPECT_FALSE(node["transformer-scale-embeddings"]);
  // A config without a type (written before there were two) is an encoder-decoder one.
  EXPECT_EQ(ModelConfig::from_yaml(YAML::Load("dim-emb: 64\n")).type, ModelType::transformer);
}

TEST(ModelConfig, LanguageModelOptionsAreRefusedWhereTheyDoNotApply) {
  ModelConfig c = valid();
  c.learned_positions = true;
  expect_error(c, {"--transformer-train-position-embeddings", "--type lm"});
  c = valid();
  c.scale_embeddings = false;
  expect_error(c, {"--transformer-scale-embeddings false", "--type lm"});
  EXPECT_NE(error_of([] { ModelConfig::from_yaml(YAML::Load("type: rnn\n")); }).find("transformer"),
            std::string::npos);
  EXPECT_NE(error_of([] { ModelConfig::from_yaml(YAML::Load("type: lm\ndim-vocabs: [1, 2, 3]\n")); })
                .find("dim-vocabs"),
            std::string::npos);
  ModelConfig lm = ModelConfig::from_yaml(YAML::Load("type: lm\ndim-vocabs: [50]\n"));
  lm.tgt_vocab = 0, lm.src_vocab = 0;
  expect_error(lm, {"--dim-vocabs"});
}

}  // namespace
}  // namespace lseq

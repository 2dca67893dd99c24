// --pretrained-model's weights: which config differences it accepts (training-only options) and refuses (anything
// the model computes with), and the loaded values.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "core/checkpoint/pretrained_weights.h"
#include "core/checkpoint/weights_file.h"
#include "core/model/encoder_decoder_model.h"
#include "kernels/backend.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {
namespace {

ModelConfig pretrained_config() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 17;
  c.dim_emb = 8;
  c.heads = 2;
  c.dim_ffn = 16;
  c.enc_depth = c.dec_depth = 1;
  c.max_length = 10;
  return c;
}

TEST(PretrainedWeights, TrainingOnlyOptionsMayDifferAndTheRestMayNot) {
  const ModelConfig base = pretrained_config();
  ModelConfig c = base;
  c.dropout = 0.3f;
  c.dropout_attention = 0.2f;
  c.label_smoothing = 0.0f;
  c.embedding_dropout = false;
  c.max_length = 200;  // sinusoidal positions: any length
  EXPECT_EQ(architecture_difference(base, c), "");

  ModelConfig other = base;
  other.activation = kernels::Activation::gelu;
  EXPECT_NE(architecture_difference(base, other).find("transformer-ffn-activation is relu"), std::string::npos)
      << architecture_difference(base, other);
  other = base;
  other.layer_norm_eps = 1e-5f;
  EXPECT_NE(architecture_difference(base, other).find("layer-norm-epsilon"), std::string::npos);
  other = base;
  other.norm = NormPlacement::pre;
  EXPECT_NE(architecture_difference(base, other).find("transformer-preprocess"), std::string::npos);

  // A language model with learned positions: their table is weights, so max-length must match.
  ModelConfig lm = base;
  lm.type = ModelType::lm;
  lm.learned_positions = true;
  lm.normalize_lm();
  ModelConfig longer = lm;
  longer.max_length = 20;
  EXPECT_NE(architecture_difference(lm, longer).find("max-length"), std::string::npos);
  ModelConfig unscaled = lm;
  unscaled.scale_embeddings = false;
  EXPECT_NE(architecture_difference(lm, unscaled).find("transformer-scale-embeddings"), std::string::npos);
  EXPECT_NE(architecture_difference(lm, base), "") << "a language model is not an encoder-decoder model";
  EXPECT_NE(architecture_difference(base, lm), "");
}

TEST(PretrainedWeights, LoadsTheFileOrNamesWhatDiffers) {
  const fs::path dir = fs::temp_directory_path() / ("lseq-pretrained-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(pretrained_config(), *backend);
  const ParamTable& table = model.param_store().table();
  std::vector<float> flat(table.size(), 0.0f);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const ParamInfo& p : table.list())
    for (std::size_t i = 0; i < p.count; ++i) flat[p.offset + i] = normal(rng);
  const std::string weights = (dir / "model.safetensors").string();
  save_weights(weights, table, pretrained_config(), flat, 7);

  EXPECT_EQ(pretrained_weights_path(dir.string()), weights) << "a model directory means its model.safetensors";
  EXPECT_EQ(pretrained_weights_path(weights), weights);
  ModelConfig run = pretrained_config();
  run.dropout = 0.25f;
  EXPECT_EQ(load_pretrained_weights(weights, table, run), flat);

  ModelConfig wider = pretrained_config();
  wider.dim_ffn = 32;
  try {
    load_pretrained_weights(weights, table, wider);
    ADD_FAILURE() << "another model was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transformer-dim-ffn is 16 in the pretrained model but 32 here"),
              std::string::npos)
        << e.what();
  }
  try {
    load_pretrained_weights((dir / "missing.safetensors").string(), table, run);
    ADD_FAILURE() << "a missing file was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.safetensors' not found"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lseq

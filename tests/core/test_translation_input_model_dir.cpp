// The model directory's layout and decoder.yml defaults under the command line.
#include <gtest/gtest.h>

#include <sstream>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/model_loader.h"
#include "util/error.h"

namespace lseq {
namespace {

namespace fs = std::filesystem;

class ModelDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lseq-model-dir-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void touch(const std::string& name, const std::string& text = "x") { std::ofstream(dir_ / name) << text; }
  std::string expect_error() {
    try {
      find_model_files(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
  fs::path dir_;
};

TEST_F(ModelDir, FindsJointOrSeparateVocabularies) {
  touch("model.safetensors");
  ModelFiles none = find_model_files(dir_.string());
  EXPECT_TRUE(none.source_vocab.empty());
  EXPECT_TRUE(none.decoder_config.empty());
  touch("vocab.spm");
  ModelFiles joint = find_model_files(dir_.string());
  EXPECT_EQ(joint.source_vocab, (dir_ / "vocab.spm").string());
  EXPECT_EQ(joint.target_vocab, joint.source_vocab);
  touch("vocab.src.spm");
  touch("vocab.tgt.spm");
  touch("decoder.yml", "beam-size: 6\n");
  ModelFiles split = find_model_files(dir_.string());
  EXPECT_EQ(split.source_vocab, (dir_ / "vocab.src.spm").string());
  EXPECT_EQ(split.target_vocab, (dir_ / "vocab.tgt.spm").string());
  EXPECT_EQ(split.decoder_config, (dir_ / "decoder.yml").string());
}

TEST_F(ModelDir, MissingPiecesAreNamed) {
  EXPECT_NE(expect_error().find("model.safetensors"), std::string::npos);
  touch("model.safetensors");
  touch("vocab.src.spm");
  EXPECT_NE(expect_error().find("vocab.tgt.spm"), std::string::npos);
  fs::remove_all(dir_);
  EXPECT_NE(expect_error().find("not found"), std::string::npos);
}

// lstranslate reads decoder.yml as the lowest config layer: it overrides built-in defaults, and any value given on
// the command line wins over it, even one that equals the default.
TEST_F(ModelDir, DecoderConfigIsTheLowestLayerUnderTheCommandLine) {
  touch("decoder.yml", "beam-size: 6\nnormalize: 1\nmax-length-factor: 2.5\n");
  const std::string dir = dir_.string();
  const char* argv[] = {"lstranslate", "-m", dir.c_str(), "--beam-size", "4"};
  std::ostringstream out, err;
  const ParsedOptions parsed = parse_options(App::translate, 5, argv, out, err);
  ASSERT_FALSE(parsed.exit_now) << err.str();
  EXPECT_EQ(parsed.options.get_int("beam-size"), 4);
  EXPECT_DOUBLE_EQ(parsed.options.get_float("normalize"), 1.0);
  EXPECT_DOUBLE_EQ(parsed.options.get_float("max-length-factor"), 2.5);
}

TEST_F(ModelDir, DecoderConfigWithAnUnknownKeyIsAnError) {
  touch("decoder.yml", "beam-size: 6\nbeam-sise: 3\n");
  const std::string dir = dir_.string();
  const char* argv[] = {"lstranslate", "-m", dir.c_str()};
  std::ostringstream out, err;
  const ParsedOptions parsed = parse_options(App::translate, 3, argv, out, err);
  EXPECT_TRUE(parsed.exit_now);
  EXPECT_EQ(parsed.exit_code, 1);
  EXPECT_NE(err.str().find("beam-sise"), std::string::npos) << err.str();
}


}  // namespace
}  // namespace lseq

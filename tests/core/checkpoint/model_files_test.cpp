// The model directory's layout as lstranslate and lsscore find it (find_model_files).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "core/checkpoint/model_files.h"
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

}  // namespace
}  // namespace lseq

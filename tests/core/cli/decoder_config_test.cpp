// decoder.yml in a model directory: lstranslate's lowest config layer, under config files and the command line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/cli/options.h"

namespace lseq {
namespace {

namespace fs = std::filesystem;

class DecoderConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lseq-decoder-config-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void touch(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

// lstranslate reads decoder.yml as the lowest config layer: it overrides built-in defaults, and any value given on
// the command line wins over it, even one that equals the default.
TEST_F(DecoderConfig, IsTheLowestLayerUnderTheCommandLine) {
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

TEST_F(DecoderConfig, WithAnUnknownKeyIsAnError) {
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

// exit_without_teardown: the process ends with the given code, and what the run wrote through spdlog, C's stdio and
// C++ streams reaches its files first (std::_Exit alone would drop whatever the buffers still held).
#include <gtest/gtest.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/cli/backend_select.h"
#include "core/cli/options.h"
#include "core/cli/process_end.h"

namespace lseq {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ProcessEnd, FlushesLogsAndStdioThenExitsWithTheCode) {
  const fs::path dir = fs::temp_directory_path() / ("lseq-process-end-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path log = dir / "run.log", table = dir / "table.txt";
  // The child (gtest forks for EXPECT_EXIT) writes less than a buffer's worth to each, so nothing reaches the files
  // unless exit_without_teardown flushes.
  EXPECT_EXIT(
      {
        auto logger = spdlog::basic_logger_mt("process-end-test", log.string());
        logger->info("the summary line");
        std::FILE* file = std::fopen(table.string().c_str(), "w");
        std::fputs("a line written through stdio\n", file);
        exit_without_teardown(3);
      },
      ::testing::ExitedWithCode(3), "");
  EXPECT_NE(read_file(log).find("the summary line"), std::string::npos);
  EXPECT_EQ(read_file(table), "a line written through stdio\n");
  fs::remove_all(dir);
}

Options parse_translate(std::vector<const char*> argv) {
  std::ostringstream out, err;
  argv.insert(argv.begin(), "lstranslate");
  ParsedOptions parsed = parse_options(App::translate, static_cast<int>(argv.size()), argv.data(), out, err);
  EXPECT_FALSE(parsed.exit_now) << err.str();
  return parsed.options;
}

// --decoders: what is asked for; by default 1 on the CPU and, on a GPU, 2 to 4 (the machine's cores).
TEST(DecoderCount, DefaultsByWhereTheWorkRuns) {
  EXPECT_EQ(decoder_count(parse_translate({"-m", "model", "--decoders", "3"})), 3);
  EXPECT_EQ(decoder_count(parse_translate({"-m", "model", "--cpu"})), 1);
  EXPECT_FALSE(runs_on_gpu(parse_translate({"-m", "model", "--cpu"})));
  const Options defaults = parse_translate({"-m", "model"});
  if (runs_on_gpu(defaults)) {
    EXPECT_GE(decoder_count(defaults), 2);
    EXPECT_LE(decoder_count(defaults), 4);
  } else {
    EXPECT_EQ(decoder_count(defaults), 1);
  }
}

}  // namespace
}  // namespace lseq

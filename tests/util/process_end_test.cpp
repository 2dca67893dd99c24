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

#include "util/process_end.h"

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

}  // namespace
}  // namespace lseq

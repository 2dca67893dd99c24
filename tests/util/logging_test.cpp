// setup_logging: a --log file in a directory that does not exist is refused in one line, and nothing is created.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "util/error.h"
#include "util/logging.h"

namespace lseq {
namespace {

TEST(Logging, LogFileInAMissingDirectoryIsRefusedAndNothingIsCreated) {
  const std::filesystem::path base =
      std::filesystem::temp_directory_path() / ("lseq-logging-" + std::to_string(::getpid()));
  std::filesystem::remove_all(base);
  LogOptions options;
  options.file = (base / "typo" / "train.log").string();
  try {
    setup_logging(options);
    ADD_FAILURE() << "accepted a log file in a missing directory";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("--log"), std::string::npos) << message;
    EXPECT_NE(message.find((base / "typo").string()), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(base));
}

TEST(Logging, LogFileInAnExistingDirectoryIsWritten) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("lseq-logging-ok-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  LogOptions options;
  options.file = (dir / "run.log").string();
  options.quiet = true;
  setup_logging(options);
  EXPECT_TRUE(std::filesystem::exists(options.file));
  setup_logging(LogOptions{});  // release the file before removing it
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lseq

// One lstrain per model directory: a second lock names the holder's pid, and the lock dies with its process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/checkpoint/model_dir_lock.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {
namespace {

class ModelDirLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("lseq-lock-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string error_of_second_lock() const {
    try {
      ModelDirLock second(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::string dir_;
};

TEST_F(ModelDirLockTest, ASecondLockIsRefusedNamingTheHolder) {
  {
    const ModelDirLock first(dir_);
    std::ifstream file(dir_ + "/.lock");
    std::string pid;
    file >> pid;
    EXPECT_EQ(pid, std::to_string(::getpid()));
    const std::string error = error_of_second_lock();
    EXPECT_NE(error.find("in use by another lstrain (pid " + std::to_string(::getpid()) + ","), std::string::npos)
        << error;
    EXPECT_NE(error.find(dir_), std::string::npos) << error;
  }
  EXPECT_EQ(error_of_second_lock(), "");  // released with the first
}

TEST_F(ModelDirLockTest, TheLockEndsWithAKilledProcess) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    try {
      ModelDirLock held(dir_);
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) ::_exit(2);
      ::pause();
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  const std::string error = error_of_second_lock();
  EXPECT_NE(error.find("pid " + std::to_string(child)), std::string::npos) << error;
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(fs::exists(dir_ + "/.lock"));  // left behind, and no obstacle
  EXPECT_EQ(error_of_second_lock(), "");
}

TEST_F(ModelDirLockTest, AMissingDirectoryIsNamed) {
  try {
    ModelDirLock lock(dir_ + "/missing");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_ + "/missing/.lock"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lseq

// write_file_atomic: content replaced, no temporary files left, failures reported with the OS error and the old
// file kept.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "util/atomic_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "lseq-atomic-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::size_t entries() const { return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir_), {})); }
  fs::path dir_;
};

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

TEST_F(AtomicFileTest, CreatesAndReplacesContentLeavingNoTemporaryFiles) {
  const fs::path target = dir_ / "weights.bin";
  const std::string first = random_bytes(1000, 1), second = random_bytes(70000, 2);
  lseq::write_file_atomic(target.string(), first);
  EXPECT_EQ(read(target), first);
  lseq::write_file_atomic(target.string(), second);
  EXPECT_EQ(read(target), second);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, PiecesAndStreamedChunksAreWrittenInOrder) {
  const std::string a = random_bytes(10, 3), b, c = random_bytes(100001, 4);
  const fs::path target = dir_ / "pieces.bin";
  lseq::write_file_atomic(target.string(),
                          std::vector<lseq::ConstBuffer>{{a.data(), a.size()}, {b.data(), 0}, {c.data(), c.size()}});
  EXPECT_EQ(read(target), a + c);
  lseq::write_file_atomic_streamed(target.string(), [&](const lseq::ChunkSink& sink) {
    for (std::size_t i = 0; i < c.size(); i += 4096) sink(c.data() + i, std::min<std::size_t>(4096, c.size() - i));
  });
  EXPECT_EQ(read(target), c);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, WritesARelativePathInTheCurrentDirectory) {
  const auto cwd = fs::current_path();
  fs::current_path(dir_);
  lseq::write_file_atomic("relative.txt", std::string_view("abc"));
  fs::current_path(cwd);
  EXPECT_EQ(read(dir_ / "relative.txt"), "abc");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, StaleTemporaryFilesOfAnEarlierProcessWithOurPidAreSkipped) {
  const fs::path target = dir_ / "w.bin";
  for (int i = 0; i < 50; ++i)
    std::ofstream(dir_ / (".w.bin.tmp." + std::to_string(::getpid()) + "." + std::to_string(i))) << "stale";
  lseq::write_file_atomic(target.string(), std::string_view("fresh"));
  EXPECT_EQ(read(target), "fresh");
  EXPECT_EQ(entries(), 51u) << "stale files are not ours to delete";
}

TEST_F(AtomicFileTest, ProducerExceptionKeepsOldFileAndRemovesTemporary) {
  const fs::path target = dir_ / "keep.txt";
  lseq::write_file_atomic(target.string(), std::string_view("old content"));
  EXPECT_THROW(lseq::write_file_atomic_streamed(target.string(),
                                                [](const lseq::ChunkSink& sink) {
                                                  sink("new", 3);
                                                  throw std::runtime_error("producer failed");
                                                }),
               std::runtime_error);
  EXPECT_EQ(read(target), "old content");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, MissingDirectoryGivesOneLineErrorWithPathAndOsError) {
  const std::string target = (dir_ / "no-such-dir" / "file.bin").string();
  try {
    lseq::write_file_atomic(target, std::string_view("x"));
    FAIL() << "expected lseq::Error";
  } catch (const lseq::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(target), std::string::npos) << msg;
    EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// A write that fails half-way (file size limit, EFBIG) must leave the old file and no temporary behind. This works
// even as root, where directory permissions do not stop writes.
TEST_F(AtomicFileTest, FailedWriteKeepsOldFileAndRemovesTemporary) {
  const fs::path target = dir_ / "big.bin";
  const std::string old_content = random_bytes(100, 5);
  lseq::write_file_atomic(target.string(), old_content);

  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  try {
    lseq::write_file_atomic(target.string(), random_bytes(10000, 6));
  } catch (const lseq::Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, saved_handler);

  EXPECT_NE(message.find(target.string()), std::string::npos) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read(target), old_content);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, UnwritableDirectoryGivesErrorAndKeepsOldFile) {
  const fs::path target = dir_ / "model.safetensors";
  lseq::write_file_atomic(target.string(), std::string_view("old"));
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec, fs::perm_options::replace);
  if (::access(dir_.c_str(), W_OK) == 0) {
    GTEST_SKIP() << "running with privileges that ignore directory permissions (root); covered by FailedWrite...";
  }
  try {
    lseq::write_file_atomic(target.string(), std::string_view("new"));
    FAIL() << "expected lseq::Error";
  } catch (const lseq::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(target.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("Permission denied"), std::string::npos) << msg;
  }
  EXPECT_EQ(read(target), "old");
  EXPECT_EQ(entries(), 1u);
}

}  // namespace

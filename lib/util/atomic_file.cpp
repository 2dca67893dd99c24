#include "util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "util/error.h"

namespace lseq {
namespace {

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Unique within the machine: pid plus a per-process counter (several threads may save at once).
std::string temporary_name_for(const std::string& path) {
  static std::atomic<unsigned long> counter{0};
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

[[noreturn]] void fail_os(const std::string& path, const char* step, int error) {
  fail("cannot write '{}': {} failed: {}; check that the directory exists, is writable and has free space", path,
       step, std::strerror(error));
}

// Owns the temporary file until it has been renamed into place; removes it on every failure path.
class TemporaryFile {
 public:
  explicit TemporaryFile(const std::string& target) : target_(target) {
    // A leftover of a crashed process that had our pid may hold the name: then take the next one.
    for (int attempt = 0; fd_ < 0; ++attempt) {
      name_ = temporary_name_for(target);
      fd_ = ::open(name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && !(errno == EEXIST && attempt < 100))
        fail_os(target_, ("creating the temporary file '" + name_ + "'").c_str(), errno);
    }
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(name_.c_str());
  }

  void write(const void* data, std::size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_os(target_, "write", errno);
      }
      p += n;
      size -= static_cast<std::size_t>(n);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail_os(target_, "fsync", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_os(target_, "close", errno);
    if (::rename(name_.c_str(), target_.c_str()) != 0) fail_os(target_, "rename", errno);
    committed_ = true;
    // The rename is durable only once the directory entry is on disk. Failing here would not undo the (already
    // visible) new file, so it is reported as an error all the same: the caller must not assume durability.
    const std::string dir = directory_of(target_);
    const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0) fail_os(target_, "opening its directory to fsync it", errno);
    const int rc = ::fsync(dir_fd);
    const int fsync_errno = errno;
    ::close(dir_fd);
    // Some file systems cannot fsync directories (EINVAL); the rename is then as durable as they allow.
    if (rc != 0 && fsync_errno != EINVAL) fail_os(target_, "fsync of its directory", fsync_errno);
  }

 private:
  std::string target_;
  std::string name_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace

void write_file_atomic_streamed(const std::string& path, const std::function<void(const ChunkSink& sink)>& produce) {
  if (path.empty()) fail("cannot write a file with an empty path; give a file name");
  TemporaryFile file(path);
  const ChunkSink sink = [&file](const void* data, std::size_t size) { file.write(data, size); };
  produce(sink);
  file.commit();
}

void write_file_atomic(const std::string& path, const std::vector<ConstBuffer>& pieces) {
  write_file_atomic_streamed(path, [&pieces](const ChunkSink& sink) {
    for (const auto& piece : pieces) sink(piece.data, piece.size);
  });
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic_streamed(path, [bytes](const ChunkSink& sink) { sink(bytes.data(), bytes.size()); });
}

}  // namespace lseq

#include "core/checkpoint/model_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/checkpoint/text_excerpt.h"
#include "util/error.h"

namespace lseq {

namespace {

// The pid the holder wrote, as text for the message ("unknown" while it has not written it yet).
std::string holder_pid(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : std::string();
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  if (pid.empty()) return "unknown";
  const bool digits = pid.find_first_not_of("0123456789") == std::string::npos;
  return digits ? pid : quoted_excerpt(pid, 20);
}

}  // namespace

ModelDirLock::ModelDirLock(const std::string& dir) : path_(dir + "/.lock") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    fail("cannot create the lock file '{}': {}; check that the model directory is writable", path_,
         std::strerror(errno));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    const std::string pid = holder_pid(fd_);
    ::close(fd_);
    fd_ = -1;
    if (e == EWOULDBLOCK) {
      fail("the model directory '{}' is in use by another lstrain (pid {}, lock file {}); wait for it to end or stop "
           "it, or train into another directory",
           dir, pid, path_);
    }
    fail("cannot lock '{}': {}", path_, std::strerror(e));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    fail("cannot write the lock file '{}': {}", path_, std::strerror(e));
  }
}

ModelDirLock::~ModelDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace lseq

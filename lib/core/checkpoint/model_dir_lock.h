#pragma once
// One lstrain per model directory: DIR/.lock is locked (flock, exclusive) for as long as the run lasts and holds
// its pid. The operating system releases the lock when the process ends, however it ends, so a crashed run never
// leaves a stale lock; the file itself stays (removing it could let two runs lock two different files).
#include <string>

namespace lseq {

class ModelDirLock {
 public:
  // Locks `dir`/.lock (the directory must exist). When another process holds it -> lseq::Error naming the directory
  // and that process's pid.
  explicit ModelDirLock(const std::string& dir);
  ~ModelDirLock();
  ModelDirLock(const ModelDirLock&) = delete;
  ModelDirLock& operator=(const ModelDirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace lseq

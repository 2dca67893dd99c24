#include "output_paths.h"

#include <unistd.h>

#include <filesystem>

#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {

void check_output_file(const std::string& path, const std::string& option) {
  std::error_code ec;
  if (path.empty()) fail("{} is empty; give a file path", option);
  if (fs::is_directory(path, ec)) fail("{} '{}' is a directory; give the path of a file", option, path);
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, ec)) {
    fail("{} '{}': the directory '{}' does not exist; create it or give another path", option, path,
         parent.string());
  }
  check_writable_directory(parent.string(), option + " '" + path + "': the directory");
}

void check_writable_directory(const std::string& dir, const std::string& what) {
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    fail("{} '{}' is not writable; give a directory you can write to, or change its permissions", what, dir);
  }
}

}  // namespace lseq

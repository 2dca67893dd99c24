#pragma once
// Helpers for the options tests: run parse_options on words, capture what it prints, write config files.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/cli/options.h"

namespace lseq::testing {

struct ParseRun {
  ParsedOptions parsed;
  std::string out;  // stdout: help, version, dump-config
  std::string err;  // stderr: the error line
};

inline ParseRun run_parse(App app, const std::vector<std::string>& args) {
  std::vector<const char*> argv{app_name(app)};
  for (const auto& arg : args) argv.push_back(arg.c_str());
  std::ostringstream out, err;
  ParseRun run;
  run.parsed = parse_options(app, static_cast<int>(argv.size()), argv.data(), out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

// A fresh directory for one test's config files, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("lseq_options_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::string file = (path_ / name).string();
    std::ofstream(file) << text;
    return file;
  }
  std::string path(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace lseq::testing

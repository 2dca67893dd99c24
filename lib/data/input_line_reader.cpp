#include "data/input_line_reader.h"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "util/error.h"

namespace lseq::data {

InputLineReader::InputLineReader(std::vector<std::string> paths, std::string option)
    : paths_(std::move(paths)), option_(std::move(option)) {
  if (paths_.empty()) paths_.push_back("stdin");
}

InputLineReader::InputLineReader(std::istream& in, std::string name) : in_(&in), name_(std::move(name)) {}

bool InputLineReader::open_next() {
  if (next_path_ >= paths_.size()) return false;
  const std::string& path = paths_[next_path_++];
  file_.reset();
  if (path == "stdin" || path == "-") {
    in_ = &std::cin;
    name_ = "stdin";
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      fail("{} '{}' is a directory; give a text file with one sentence per line", option_, path);
    file_ = std::make_unique<std::ifstream>(path, std::ios::binary);
    if (!*file_) {
      fail("cannot open {} file '{}': {}", option_, path,
           std::filesystem::exists(path, ec) ? "permission denied?" : "no such file; check the path");
    }
    in_ = file_.get();
    name_ = path;
  }
  line_in_file_ = 0;
  return true;
}

bool InputLineReader::next(std::string& line) {
  while (true) {
    if (in_ == nullptr && !open_next()) return false;
    if (std::getline(*in_, line)) break;
    if (in_->bad()) fail("reading '{}' failed after line {}", name_, line_in_file_);
    in_ = nullptr;
    if (paths_.empty()) return false;  // a single stream given directly
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++index_;
  ++line_in_file_;
  return true;
}

std::string InputLineReader::where() const { return fmt::format("{} line {}", name_, line_in_file_); }

}  // namespace lseq::data

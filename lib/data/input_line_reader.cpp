#include "data/input_line_reader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "data/utf8.h"
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

bool InputLineReader::read_line(std::string& line) {
  line.clear();
  truncated_ = false;
  bool any = false;
  char block[1 << 16];
  while (true) {
    in_->getline(block, sizeof block);
    if (in_->bad()) fail("reading '{}' failed after line {}", name_, line_in_file_);
    const auto got = static_cast<std::size_t>(in_->gcount());
    // The line's end: no bit set ('\n' counted in got). A full block without '\n': failbit alone. The stream's end:
    // eofbit (with failbit when nothing was left).
    const bool ended = !in_->fail() && !in_->eof();
    const bool block_full = in_->fail() && !in_->eof();
    const std::size_t stored = ended ? got - 1 : got;
    any = any || got > 0;
    const std::size_t room = kMaxLineBytes - line.size();
    line.append(block, std::min(stored, room));
    truncated_ = truncated_ || stored > room;
    if (!block_full) return any || ended;
    in_->clear();
  }
}

bool InputLineReader::next(std::string& line) {
  while (true) {
    if (in_ == nullptr && !open_next()) return false;
    if (read_line(line)) break;
    in_ = nullptr;
    if (paths_.empty()) return false;  // a single stream given directly
  }
  line.resize(without_carriage_returns(line).size());
  ++index_;
  ++line_in_file_;
  if (truncated_)
    spdlog::warn("{}: the line is longer than {} MiB; only its first {} MiB are read", where(), kMaxLineBytes >> 20,
                 kMaxLineBytes >> 20);
  return true;
}

std::string InputLineReader::where() const { return fmt::format("{} line {}", name_, line_in_file_); }

}  // namespace lseq::data

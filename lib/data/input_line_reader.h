#pragma once
// Lines of one or more text files read in order, as lstranslate reads its --input: "stdin" (or "-") is standard
// input; the numbering of lines continues across files, and each line also knows its file and line there (for
// warnings). The '\r's at a line's end (Windows line ends) are removed; a last line without '\n' is a line. Reading
// streams: one line at a time, and of a line longer than kMaxLineBytes only the first kMaxLineBytes are kept (with a
// warning naming the line), so that a file without line ends (a binary file given by mistake) cannot take all memory.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace lseq::data {

class InputLineReader {
 public:
  static constexpr std::size_t kMaxLineBytes = std::size_t{16} << 20;

  // Opens the files one after the other as they are reached; a missing file, a directory or an unreadable file
  // throws lseq::Error naming it and `option`, the option that gave it (for the message: "--input").
  explicit InputLineReader(std::vector<std::string> paths, std::string option = "--input");
  // Reads an already open stream (tests, or a caller's own stream); `name` appears in warnings.
  InputLineReader(std::istream& in, std::string name);

  bool next(std::string& line);  // false at the end of the last file
  int64_t index() const { return index_; }  // 0-based over all files, of the line last returned
  const std::string& file() const { return name_; }
  int64_t line_in_file() const { return line_in_file_; }  // 1-based, of the line last returned
  // "file:line" of the line last returned, for messages.
  std::string where() const;

 private:
  bool open_next();
  bool read_line(std::string& line);  // false at the end of the stream; sets truncated_

  std::vector<std::string> paths_;
  std::string option_;
  size_t next_path_ = 0;
  std::unique_ptr<std::ifstream> file_;
  std::istream* in_ = nullptr;
  std::string name_;
  int64_t index_ = -1;
  int64_t line_in_file_ = 0;
  bool truncated_ = false;
};

}  // namespace lseq::data

#pragma once
// Streaming readers for one-sentence-a-line text files, plain or gzip-compressed (detected by the magic bytes,
// not the name). Files are read in blocks, never loaded whole. Every problem is an lseq::Error naming the file
// (and line): missing or unreadable file, invalid UTF-8, parallel files of different lengths.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lseq::data {

// Lines of one file, without the trailing "\n" or "\r\n"; validated as UTF-8.
class CorpusFileReader {
 public:
  explicit CorpusFileReader(const std::string& path);  // throws naming the path when it cannot be opened
  ~CorpusFileReader();
  CorpusFileReader(const CorpusFileReader&) = delete;
  CorpusFileReader& operator=(const CorpusFileReader&) = delete;

  // The next line (valid until the next call), or false at the end of the file.
  bool next(std::string_view& line);
  int64_t line_number() const { return lines_; }  // 1-based number of the line last returned
  const std::string& path() const { return path_; }
  bool compressed() const;

 private:
  bool fill();  // reads the next block; false at end of file
  struct Source;
  std::string path_;
  std::unique_ptr<Source> source_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
  bool eof_ = false;
  int64_t lines_ = 0;
  std::string carry_;  // a line longer than the buffer is assembled here
};

// Parallel files read in lockstep: line i of every file forms pair i. Pairs with an empty side are skipped and
// counted; a file that ends before the others is an error naming both files and the line.
class CorpusReader {
 public:
  explicit CorpusReader(const std::vector<std::string>& paths);

  // The next pair whose sides are all non-empty (one view per file, valid until the next call); false at the end.
  bool next(std::vector<std::string_view>& sides);
  int64_t line_index() const { return line_ - 1; }     // 0-based line number of the pair last returned
  int64_t skipped_empty() const { return skipped_empty_; }
  int64_t lines_read() const { return line_; }           // lines read per file so far (kept or skipped)
  std::size_t streams() const { return readers_.size(); }

 private:
  std::vector<std::unique_ptr<CorpusFileReader>> readers_;
  int64_t line_ = 0;
  int64_t skipped_empty_ = 0;
};

// Number of pairs skipped for an empty side, as the one log line the readers' users print at the end.
void log_skipped_empty(int64_t skipped, const std::vector<std::string>& paths);

}  // namespace lseq::data

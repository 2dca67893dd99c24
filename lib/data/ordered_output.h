#pragma once
// Writes outputs in input order although they are produced in another (length-sorted batches): each output is
// held until all earlier ones have been written. Each output is one or more complete lines (a trailing newline
// is added). Holds at most what is out of order, i.e. one window of input.
#include <cstdint>
#include <map>
#include <ostream>
#include <string>

namespace lseq::data {

class OrderedOutput {
 public:
  explicit OrderedOutput(std::ostream& out, int64_t first_index = 0) : out_(out), next_(first_index) {}
  // Throws lseq::Error (internal) if `index` was already given or already written.
  void put(int64_t index, std::string text);
  int64_t written() const { return written_; }  // outputs written so far
  size_t pending() const { return pending_.size(); }
  // Throws lseq::Error (internal) when outputs before `end_index` are missing, so a lost line is never silent.
  void finish(int64_t end_index);

 private:
  std::ostream& out_;
  int64_t next_;
  int64_t written_ = 0;
  std::map<int64_t, std::string> pending_;
};

}  // namespace lseq::data

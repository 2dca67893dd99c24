#include "data/ordered_output.h"

#include "util/error.h"

namespace lseq::data {

void OrderedOutput::put(int64_t index, std::string text) {
  if (index < next_ || !pending_.emplace(index, std::move(text)).second)
    fail("internal: output for input line {} was produced twice", index + 1);
  for (auto it = pending_.begin(); it != pending_.end() && it->first == next_; it = pending_.erase(it)) {
    out_ << it->second << '\n';
    ++next_;
    ++written_;
  }
  if (!out_) fail("writing the output failed (disk full or output closed?)");
}

void OrderedOutput::finish(int64_t end_index) {
  out_.flush();
  if (next_ != end_index || !pending_.empty())
    fail("internal: wrote outputs for {} of {} input lines; output for line {} is missing", next_, end_index,
         next_ + 1);
}

}  // namespace lseq::data

#include "core/cli/app_io.h"

#include <iostream>

#include "util/error.h"

namespace lseq {

OutputStream::OutputStream(const std::string& path) : path_(path) {
  if (path == "stdout" || path == "-") {
    out_ = &std::cout;
    return;
  }
  file_ = std::make_unique<std::ofstream>(path, std::ios::binary | std::ios::trunc);
  if (!*file_) fail("cannot write --output file '{}': check the directory exists and is writable", path);
}

void OutputStream::close() {
  get().flush();
  if (!get()) fail("writing {} failed (disk full?)", file_ ? "'" + path_ + "'" : std::string("standard output"));
  if (file_) file_->close();
}

data::TranslationInputOptions input_options(const Options& options) {
  data::TranslationInputOptions o;
  o.mini_batch = static_cast<int>(options.get_int("mini-batch"));
  o.mini_batch_words = options.get_int("mini-batch-words");
  o.maxi_batch = static_cast<int>(options.get_int("maxi-batch"));
  o.max_length = static_cast<int>(options.get_int("max-length"));
  return o;
}

}  // namespace lseq

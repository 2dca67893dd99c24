#pragma once
// Small pieces lstranslate and lsscore share: the output stream named by --output, and the batching options.
#include <fstream>
#include <memory>
#include <ostream>
#include <string>

#include "core/cli/options.h"
#include "data/translation_input.h"

namespace lseq {

// std::cout for "stdout" (or "-"), else the file, opened for writing; throws lseq::Error naming it.
class OutputStream {
 public:
  explicit OutputStream(const std::string& path);
  std::ostream& get() { return file_ ? *file_ : *out_; }
  void close();  // flushes; throws lseq::Error naming the file when writing failed

 private:
  std::string path_;
  std::unique_ptr<std::ofstream> file_;
  std::ostream* out_ = nullptr;
};

// --mini-batch, --mini-batch-words, --maxi-batch, --max-length.
data::TranslationInputOptions input_options(const Options& options);

}  // namespace lseq

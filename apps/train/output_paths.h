#pragma once
// The places lstrain writes to, checked before training starts so that a bad path fails at once rather than at the
// first validation or save, hours later.
#include <string>

namespace lseq {

// A file that an option names: it must not be a directory, and its directory must exist and be writable.
void check_output_file(const std::string& path, const std::string& option);

// A directory lstrain writes into (the model directory): it must be writable.
void check_writable_directory(const std::string& dir, const std::string& what);

}  // namespace lseq

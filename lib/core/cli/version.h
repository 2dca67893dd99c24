#pragma once
#include <string>

namespace lseq {

// "lseq 0.1.0 (CUDA backend: built|not built)"
std::string version_string();

}  // namespace lseq

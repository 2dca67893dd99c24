#include "core/cli/version.h"

namespace lseq {

std::string version_string() {
#ifdef LSEQ_WITH_CUDA
  return "lseq 0.1.0 (CUDA backend: built)";
#else
  return "lseq 0.1.0 (CUDA backend: not built)";
#endif
}

}  // namespace lseq

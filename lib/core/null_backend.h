#pragma once
// A backend whose ops do nothing: running a step over it with a counting StepMemory measures the step's
// workspace without touching any memory (Transformer::workspace_bytes).
#include <memory>

#include "kernels/backend.h"

namespace lseq {

std::unique_ptr<kernels::Backend> make_null_backend();

}  // namespace lseq

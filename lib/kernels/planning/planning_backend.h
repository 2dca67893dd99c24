#pragma once
// A backend whose ops do nothing: running a step over it with a counting StepMemory measures the step's
// workspace without touching any memory (EncoderDecoderModel::workspace_bytes).
#include <memory>

#include "kernels/backend.h"

namespace lseq::kernels {

std::unique_ptr<Backend> make_planning_backend();

}  // namespace lseq::kernels

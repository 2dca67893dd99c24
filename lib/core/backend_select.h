#pragma once
// Picks the backend from --cpu, --devices and --cpu-threads: the GPU named by --devices where lseq was built with
// CUDA and a GPU is visible, otherwise the CPU backend (said in the log).
#include <memory>

#include "core/options.h"
#include "kernels/backend.h"

namespace lseq {

std::unique_ptr<kernels::Backend> select_backend(const Options& options);

}  // namespace lseq

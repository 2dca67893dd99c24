#pragma once
// Picks the backend from --cpu, --devices and --cpu-threads: the GPU named by --devices where lseq was built with
// CUDA and a GPU is visible, otherwise the CPU backend (said in the log).
#include <memory>

#include "core/cli/options.h"
#include "kernels/backend.h"

namespace lseq {

// Also checks --precision against the backend: the CPU backend computes in fp32 only (lseq::Error otherwise).
std::unique_ptr<kernels::Backend> select_backend(const Options& options);

// The compute dtype --precision names (the options normalise it to fp32, bf16 or fp16).
kernels::DType precision_dtype(const Options& options);

}  // namespace lseq

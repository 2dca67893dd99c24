// What the GPU model tests share (gpu_model_test.cpp, gpu_lm_test.cpp): whether a CUDA GPU runs them or the CPU
// stands in for it (LSEQ_TEST_GPU_WITH_CPU=1), the precisions to compare, and a training step's figures.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace lseq::test {

inline bool on_cuda() { return kernels::cuda_backend_available(); }

inline bool cpu_stands_in() {
  const char* env = std::getenv("LSEQ_TEST_GPU_WITH_CPU");
  return !on_cuda() && env && std::string(env) == "1";
}

// The 16-bit precisions to compare: only on a real GPU (the CPU backend computes in fp32 only).
inline std::vector<kernels::DType> sixteen_bits() {
  return on_cuda() ? std::vector<kernels::DType>{kernels::DType::bf16, kernels::DType::f16}
                   : std::vector<kernels::DType>{};
}

// One training step's figures.
struct StepResult {
  double loss = 0;       // per target token
  double grad_norm = 0;  // of the per-token mean gradient, from the host copy in double
};

inline double rel(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-30); }

}  // namespace lseq::test

#define SKIP_WITHOUT_GPU() \
  if (!lseq::test::on_cuda() && !lseq::test::cpu_stands_in()) GTEST_SKIP() << "no CUDA GPU visible"

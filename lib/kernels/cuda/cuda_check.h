#pragma once
// Checks of CUDA runtime and cuBLAS calls: a failed call throws lseq::Error naming the call (or the op) and
// CUDA's own message, so a GPU failure reads like any other lseq error instead of a crash or a silent result.
//
//   LSEQ_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
//   LSEQ_CUBLAS_CHECK(cublasGemmEx(...));
//   check_cuda(cudaGetLastError(), "layer_norm_forward");  // after a kernel launch
#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace lseq::kernels::cuda {

// Throw the lseq::Error of a failed call (defined in cuda_check.cpp, away from nvcc's view of fmt).
[[noreturn]] void throw_cuda_error(const char* what, const char* library, const char* message, const char* file,
                                   int line);

const char* cublas_status_text(cublasStatus_t status);

inline void check_cuda(cudaError_t status, const char* what, const char* file = nullptr, int line = 0) {
  if (status != cudaSuccess) throw_cuda_error(what, "CUDA", cudaGetErrorString(status), file, line);
}

inline void check_cublas(cublasStatus_t status, const char* what, const char* file = nullptr, int line = 0) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cuda_error(what, "cuBLAS", cublas_status_text(status), file, line);
}

}  // namespace lseq::kernels::cuda

#define LSEQ_CUDA_CHECK(call) ::lseq::kernels::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define LSEQ_CUBLAS_CHECK(call) ::lseq::kernels::cuda::check_cublas((call), #call, __FILE__, __LINE__)

#include "kernels/cuda/cuda_check.h"

#include <cstring>

#include "util/error.h"

namespace lseq::kernels::cuda {

void throw_cuda_error(const char* what, const char* library, const char* message, const char* file, int line) {
  if (file) {
    const char* slash = std::strrchr(file, '/');
    fail("{} call {} failed: {} ({}:{})", library, what, message, slash ? slash + 1 : file, line);
  }
  fail("{} call {} failed: {}", library, what, message);
}

const char* cublas_status_text(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialised (no usable GPU or driver?)";
    case CUBLAS_STATUS_ALLOC_FAILED: return "out of GPU memory inside cuBLAS";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value (a size, leading dimension or pointer)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the GPU lacks a feature this call needs";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error (GPU memory access)";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal cuBLAS error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported (type, layout or compute mode)";
    case CUBLAS_STATUS_LICENSE_ERROR: return "license error";
  }
  return "unknown cuBLAS status";
}

}  // namespace lseq::kernels::cuda

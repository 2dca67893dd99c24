// The CUDA backend's entry points. Until its ops exist (a later issue), asking for it says so clearly.
#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "util/error.h"

namespace lseq::kernels {

bool cuda_backend_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls do not report it
    return false;
  }
  return count > 0;
}

std::unique_ptr<Backend> make_cuda_backend(int /*device_index*/) {
  fail("the CUDA backend is not implemented in this version yet; run with --cpu");
}

}  // namespace lseq::kernels

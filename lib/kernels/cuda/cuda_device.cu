// The CUDA backend's entry points: is a GPU visible, and make the backend of one.
#include <cuda_runtime.h>

#include <memory>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
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

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    fail(
        "GPU device {} requested, but no CUDA GPU is visible ({}); check the driver and CUDA_VISIBLE_DEVICES, or "
        "run on the CPU with --cpu",
        device_index, status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
  }
  if (device_index < 0 || device_index >= count)
    fail("--devices {}: no such GPU; this machine has {} GPU{} (valid indices 0 to {}), or use --cpu", device_index,
         count, count == 1 ? "" : "s", count - 1);
  return std::make_unique<CudaBackend>(device_index);
}

}  // namespace lseq::kernels

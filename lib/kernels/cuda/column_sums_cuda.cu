// Stage 2 of the CUDA backend's column sums: acc[c] += the partials of every row chunk, added in chunk order.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

__global__ void finish_column_sums_kernel(const float* partials, int chunks, int cols, float* acc) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int k = 0; k < chunks; ++k) s += partials[static_cast<int64_t>(k) * cols + c];
  acc[c] += s;
}

}  // namespace
}  // namespace cuda

void CudaBackend::finish_column_sums(const float* partials, int chunks, int cols, float* acc, const char* op) {
  if (cols <= 0) return;
  cuda::finish_column_sums_kernel<<<(cols + 255) / 256, 256, 0, stream_>>>(partials, chunks, cols, acc);
  check_launch(op);
}

}  // namespace lseq::kernels

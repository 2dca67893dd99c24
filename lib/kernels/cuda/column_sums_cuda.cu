// Stage 2 of the CUDA backend's column sums: acc[c] += the partials of every row chunk. A block of (32, 8) threads
// takes 32 columns; row-lane j adds chunks j, j + 8, ... in order, then the 8 lane sums are added in order, so the
// result depends only on the shape (deterministic) while 8x more loads are in flight than with one thread per column.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device/column_pack.cuh"
#include "kernels/cuda/device/cuda_common.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kFinishCols = 32, kFinishLanes = 8;

__global__ void finish_column_sums_kernel(const float* partials, int chunks, int width, int cols, float* acc0,
                                          float* acc1, float* acc2) {
  __shared__ float shared[kFinishLanes][kFinishCols];
  const int c = blockIdx.x * kFinishCols + threadIdx.x;
  float s = 0.0f;
  if (c < width)
    for (int k = threadIdx.y; k < chunks; k += kFinishLanes) s += partials[static_cast<int64_t>(k) * width + c];
  shared[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= width) return;
  float total = 0.0f;
#pragma unroll
  for (int j = 0; j < kFinishLanes; ++j) total += shared[j][threadIdx.x];
  const int part = c / cols;
  float* acc = part == 0 ? acc0 : part == 1 ? acc1 : acc2;
  if (acc) acc[c - part * cols] += total;
}

}  // namespace

void launch_finish_column_sums(cudaStream_t stream, const float* partials, int chunks, int width, int cols, float* acc0,
                               float* acc1, float* acc2) {
  if (width <= 0) return;
  const dim3 grid(static_cast<unsigned>((width + kFinishCols - 1) / kFinishCols));
  finish_column_sums_kernel<<<grid, dim3(kFinishCols, kFinishLanes), 0, stream>>>(partials, chunks, width, cols, acc0,
                                                                                   acc1, acc2);
}

}  // namespace cuda

void CudaBackend::finish_column_sums(const float* partials, int chunks, int cols, float* acc, const char* op) {
  if (cols <= 0) return;
  cuda::launch_finish_column_sums(stream_, partials, chunks, cols, cols, acc, nullptr);
  check_launch(op);
}

}  // namespace lseq::kernels

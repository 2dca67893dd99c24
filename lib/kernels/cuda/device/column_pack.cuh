#pragma once
// Vectorized two-stage column sums for [rows, cols] elementwise ops whose columns are a multiple of a 16-byte pack
// (the scalar path is column_kernel in cuda_common.cuh). A block of (32, 8) threads covers 32 packs of columns
// (256 bf16 / 128 fp32 columns, 512 contiguous bytes per warp and row) and walks its chunk's rows 8 at a time; each
// thread keeps one fp32 sum per column of its pack. The 8 row-lanes are then added in a fixed order and the block
// writes one partial per (chunk, column), which finish_column_sums adds in chunk order. The plan depends only on
// the shape, so the sums are deterministic.
#include <cuda_runtime.h>

#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels::cuda {

constexpr int kPackColLanes = 32;  // threads across the columns of a block (one pack each)
constexpr int kPackRowLanes = 8;   // threads across the rows

// Row chunks for the packed column kernel: the plain plan with blocks covering kPackColLanes packs of columns.
inline ColumnPlan plan_pack_column_sums(int rows, int cols, int pack, int arrays, std::size_t scratch_floats) {
  return plan_column_sums(rows, cols, arrays, scratch_floats, kPackColLanes * pack);
}

inline dim3 pack_column_grid(int cols, int pack, const ColumnPlan& plan) {
  const int tile = kPackColLanes * pack;
  return dim3(static_cast<unsigned>((cols + tile - 1) / tile), static_cast<unsigned>(plan.chunks));
}
inline dim3 pack_column_block() { return dim3(kPackColLanes, kPackRowLanes); }

// Stage 1 for an op over packs: op.pack(i, c, g) handles the P elements starting at flat index i = r * cols + c
// (c a multiple of P; it may store them) and returns in g the values to sum. cols % P == 0 (the caller checks).
// partials may be null (the op's elementwise part only).
template <int P, typename Op>
__global__ void pack_column_kernel(Op op, int rows, int cols, int rows_per_chunk, float* partials) {
  __shared__ float shared[kPackRowLanes][kPackColLanes * P];
  const int c = (blockIdx.x * kPackColLanes + threadIdx.x) * P;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = min(rows, r0 + rows_per_chunk);
  float s[P];
#pragma unroll
  for (int k = 0; k < P; ++k) s[k] = 0.0f;
  if (c < cols)
#pragma unroll 4
    for (int r = r0 + threadIdx.y; r < r1; r += kPackRowLanes) {  // unrolled: several rows' loads in flight
      float g[P];
      op.pack(static_cast<int64_t>(r) * cols + c, c, g);
#pragma unroll
      for (int k = 0; k < P; ++k) s[k] += g[k];
    }
  if (!partials) return;  // uniform over the grid: no thread waits at the barrier below
#pragma unroll
  for (int k = 0; k < P; ++k) shared[threadIdx.y][threadIdx.x * P + k] = s[k];
  __syncthreads();
  // Thread t of the block adds the row-lanes of the tile's column t in order (P * 32 <= 256 threads).
  const int t = threadIdx.y * kPackColLanes + threadIdx.x;
  const int col = blockIdx.x * kPackColLanes * P + t;
  if (t < kPackColLanes * P && col < cols) {
    float total = 0.0f;
#pragma unroll
    for (int j = 0; j < kPackRowLanes; ++j) total += shared[j][t];
    partials[static_cast<int64_t>(blockIdx.y) * cols + col] = total;
  }
}

// Stage 2 over partials [chunks][width]: column c < cols goes to acc0[c], and when width is 2 or 3 times cols (two
// or three arrays summed in one launch) the next ranges to acc1[c - cols] and acc2[c - 2 cols]; a null accumulator
// is skipped. Defined in column_sums_cuda.cu; runs in `stream`.
void launch_finish_column_sums(cudaStream_t stream, const float* partials, int chunks, int width, int cols, float* acc0,
                               float* acc1, float* acc2 = nullptr);

}  // namespace lseq::kernels::cuda

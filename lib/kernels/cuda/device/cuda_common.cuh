#pragma once
// Device helpers shared by the CUDA backend's op files: element types (load as fp32, store rounded), dispatch on
// DType, launch shapes (and dynamic shared memory above 48 KiB), warp/block reductions, the dropout mask and the
// plan of two-stage column sums.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/dropout_rng.h"
#include "util/error.h"

namespace lseq::kernels::cuda {

// Exponentials as exp2 (one fma and one ex2 instruction): x natural units = x * kLog2e log2 units.
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// 2^x in one ex2 instruction, results below 2^-126 (and subnormal arguments) flushed to 0; in the normal range the
// same value as exp2f(), which adds instructions around the ex2 to keep subnormal results. Softmax weights that small
// never matter, and the attention and cross-entropy kernels are limited by their issue slots: the staged
// cross-entropy ran 6% faster with it, the tiled attention 9% with it and other cuts of its instructions
// (bench/results/attention-instructions-h100-2026-11-28.txt).
__device__ __forceinline__ float exp2_flush(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// ---- element types: storage T, math in fp32 ----
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// f(T{}) for the storage type of dt.
template <typename F>
void dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); return;
    case DType::f16: f(__half{}); return;
    case DType::bf16: f(__nv_bfloat16{}); return;
  }
  fail("unknown element type {}", static_cast<int>(dt));
}

// ---- launch shapes ----
constexpr int kThreads = 256;

// Dynamic shared memory above the default 48 KiB must be allowed per kernel before its launch (cheap; done at every
// such launch, as the attribute belongs to the current device).
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, unsigned bytes) {
  if (bytes > 48u * 1024u)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
               "cudaFuncSetAttribute (dynamic shared memory)");
}

// Blocks of kThreads for a grid-stride loop over n elements (capped: each thread then loops).
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65536)));
}

// f(I{}) with I = int32_t when every index of a grid-stride loop over n elements fits with room for the stride
// (32-bit division is several times cheaper than 64-bit in the index arithmetic of elementwise kernels), else
// int64_t.
template <typename F>
void dispatch_index(int64_t n, F&& f) {
  if (n < (int64_t(1) << 30))
    f(int32_t{});
  else
    f(int64_t{});
}

// ---- reductions (fixed order: deterministic for a given launch shape) ----
template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result. `shared` holds 32
// values of V. Ends with a barrier, so `shared` may be reused right after.
template <typename V>
__device__ V block_sum(V v, V* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  V total = lane < warps ? shared[lane] : V(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = lane < warps ? shared[lane] : -INFINITY;
  total = warp_max(total);
  __syncthreads();
  return total;
}

// ---- dropout: the CPU's mask bit for bit (1/(1-p) computed once on the host, as the CPU does) ----
struct DeviceMask {
  uint64_t key;
  float p, keep_scale;
  __device__ __forceinline__ float operator()(int64_t i) const {
    if (p <= 0.0f) return 1.0f;
    return counter_uniform(key, static_cast<uint64_t>(i)) < p ? 0.0f : keep_scale;
  }
};

inline DeviceMask make_mask(const Dropout& d, const char* op) {
  if (!(d.p >= 0.0f && d.p < 1.0f)) fail("{}: dropout probability {} is outside [0, 1)", op, d.p);
  return DeviceMask{d.key, d.p, 1.0f / (1.0f - d.p)};
}

// ---- two-stage column sums (bias, LayerNorm gamma/beta, merge_heads bias gradients) ----
// Stage 1: a grid of (column tiles of 32) x (row chunks); block (32, 8) walks its chunk's rows and writes one
// fp32 partial per (chunk, column). Stage 2 (finish_column_sums) adds the chunks in order into the fp32
// accumulator. The chunking depends only on the shape, so results are deterministic.
constexpr int kColTile = 32;
constexpr int kColRowsPerPass = 8;

struct ColumnPlan {
  int chunks = 1;
  int rows_per_chunk = 1;
};

// Row chunks: about 1024 blocks in all, at least 64 rows per chunk, and the partials of `arrays` arrays within
// the scratch; `tile` is how many columns one block covers.
inline ColumnPlan plan_column_sums(int rows, int cols, int arrays, std::size_t scratch_floats, int tile = kColTile) {
  ColumnPlan plan;
  const int tiles = (cols + tile - 1) / tile;
  int chunks = std::max(1, std::min((rows + 63) / 64, std::max(1, 1024 / std::max(1, tiles))));
  const std::size_t cap = scratch_floats / (static_cast<std::size_t>(arrays) * std::max(1, cols));
  if (cap < 1) fail("column sums over {} columns exceed the CUDA backend's scratch", cols);
  chunks = static_cast<int>(std::min<std::size_t>(chunks, cap));
  plan.rows_per_chunk = std::max(1, (rows + chunks - 1) / chunks);
  plan.chunks = std::max(1, (rows + plan.rows_per_chunk - 1) / plan.rows_per_chunk);
  return plan;
}

inline dim3 column_grid(int cols, const ColumnPlan& plan) {
  return dim3(static_cast<unsigned>((cols + kColTile - 1) / kColTile), static_cast<unsigned>(plan.chunks));
}
inline dim3 column_block() { return dim3(kColTile, kColRowsPerPass); }

// Reduces the 8 row-lanes of a (32, 8) block for its column and writes the partial of (chunk, column).
// `shared` holds kColTile * kColRowsPerPass floats.
__device__ __forceinline__ void write_column_partial(float sum, float* shared, float* partials, int cols) {
  const int col = blockIdx.x * kColTile + threadIdx.x;
  shared[threadIdx.y * kColTile + threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0) {
    float total = 0.0f;
    for (int j = 0; j < kColRowsPerPass; ++j) total += shared[j * kColTile + threadIdx.x];
    if (col < cols) partials[static_cast<int64_t>(blockIdx.y) * cols + col] = total;
  }
}

// ---- deterministic sums over n values (reduce_sum, grad_norm) ----
// Stage 1: `blocks` blocks each sum a contiguous range in double and write one partial; stage 2: one block adds
// the partials in a fixed order. The split depends on n only.
constexpr int kSumMaxBlocks = 1024;

inline int sum_blocks(std::size_t n) {
  const std::size_t per_block = 8 * kThreads;
  return static_cast<int>(
      std::max<std::size_t>(1, std::min<std::size_t>(kSumMaxBlocks, (n + per_block - 1) / per_block)));
}

template <typename Value>
__global__ void sum_partials_kernel(Value value, std::size_t n, double* partials) {
  __shared__ double shared[32];
  const std::size_t chunk = (n + gridDim.x - 1) / gridDim.x;
  const std::size_t begin = blockIdx.x * chunk;
  const std::size_t end = begin + chunk < n ? begin + chunk : n;
  double s = 0.0;
  for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x) s += value(i);
  s = block_sum(s, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// finish(total) runs on thread 0 of the single block with the sum of all partials.
template <typename Finish>
__global__ void sum_finish_kernel(const double* partials, int count, Finish finish) {
  __shared__ double shared[32];
  double s = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partials[i];
  s = block_sum(s, shared);
  if (threadIdx.x == 0) finish(s);
}

// Stage 1 of the column sums for an elementwise op over [rows, cols]: op(r, c) computes (and may store) the element
// and returns the value to sum. partials may be null (the op's elementwise part only).
template <typename Op>
__global__ void column_kernel(Op op, int rows, int cols, int rows_per_chunk, float* partials) {
  __shared__ float shared[kColTile * kColRowsPerPass];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = min(rows, r0 + rows_per_chunk);
  float s = 0.0f;
  if (col < cols)
    for (int r = r0 + threadIdx.y; r < r1; r += kColRowsPerPass) s += op(r, col);
  if (partials) write_column_partial(s, shared, partials, cols);
}

// Activations on z = x + bias and their derivatives, as the CPU computes them (fp32, tanh approximation of GELU).
__device__ __forceinline__ float activate(Activation act, float z) {
  switch (act) {
    case Activation::relu: return z > 0.0f ? z : 0.0f;
    case Activation::gelu: {
      const float u = 0.7978845608028654f * (z + 0.044715f * z * z * z);
      return 0.5f * z * (1.0f + tanhf(u));
    }
    case Activation::swish: return z * (1.0f / (1.0f + expf(-z)));
  }
  return z;
}

__device__ __forceinline__ float activation_grad(Activation act, float z) {
  switch (act) {
    case Activation::relu: return z > 0.0f ? 1.0f : 0.0f;
    case Activation::gelu: {
      const float c = 0.7978845608028654f, a = 0.044715f;
      const float t = tanhf(c * (z + a * z * z * z));
      return 0.5f * (1.0f + t) + 0.5f * z * (1.0f - t * t) * c * (1.0f + 3.0f * a * z * z);
    }
    case Activation::swish: {
      const float s = 1.0f / (1.0f + expf(-z));
      return s + z * s * (1.0f - s);
    }
  }
  return 1.0f;
}

}  // namespace lseq::kernels::cuda

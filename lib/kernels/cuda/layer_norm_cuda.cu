// LayerNorm of the CUDA backend: one block per row (two-pass statistics summed in double like the CPU's, from the
// row, which stays in L1), saved mean/rstd in fp32; the backward computes dx per row and the gamma/beta gradients as two-stage column sums.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

int row_threads(int cols) { return cols <= 128 ? 32 : cols <= 512 ? 128 : 256; }

template <typename T>
__global__ void layer_norm_forward_kernel(const T* x, const T* gamma, const T* beta, int cols, float eps, T* y,
                                          float* mean, float* rstd) {
  __shared__ double shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  double s = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += to_f32(xr[c]);
  const double mean_d = block_sum(s, shared) / cols;
  double sq = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const double d = to_f32(xr[c]) - mean_d;
    sq += d * d;
  }
  const float mu = static_cast<float>(mean_d);
  const float rs = static_cast<float>(1.0 / sqrt(block_sum(sq, shared) / cols + eps));
  T* yr = y + row * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = from_f32<T>((to_f32(xr[c]) - mu) * rs * to_f32(gamma[c]) + to_f32(beta[c]));
  if (threadIdx.x == 0) {
    if (mean) mean[row] = mu;
    if (rstd) rstd[row] = rs;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma. dx may alias dy: each thread reads its own
// elements again in the second pass before writing them.
template <typename T>
__global__ void layer_norm_dx_kernel(const T* x, const T* gamma, const float* mean, const float* rstd, const T* dy,
                                     int cols, T* dx) {
  __shared__ double shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  const T* dyr = dy + row * cols;
  const float mu = mean[row], rs = rstd[row];
  double sg = 0.0, sgx = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_f32(dyr[c]) * to_f32(gamma[c]);
    sg += g;
    sgx += g * (to_f32(xr[c]) - mu) * rs;
  }
  const float mean_g = static_cast<float>(block_sum(sg, shared) / cols);
  const float mean_gx = static_cast<float>(block_sum(sgx, shared) / cols);
  T* dxr = dx + row * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float g = to_f32(dyr[c]) * to_f32(gamma[c]);
    const float xhat = (to_f32(xr[c]) - mu) * rs;
    dxr[c] = from_f32<T>(rs * (g - mean_g - xhat * mean_gx));
  }
}

// Stage 1 of dgamma = sum dy * xhat and dbeta = sum dy (either partial array may be null).
template <typename T>
__global__ void layer_norm_param_partials_kernel(const T* x, const float* mean, const float* rstd, const T* dy,
                                                 int rows, int cols, int rows_per_chunk, float* gamma_partials,
                                                 float* beta_partials) {
  __shared__ float shared[kColTile * kColRowsPerPass];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = min(rows, r0 + rows_per_chunk);
  float sg = 0.0f, sb = 0.0f;
  if (col < cols)
    for (int r = r0 + threadIdx.y; r < r1; r += kColRowsPerPass) {
      const int64_t i = static_cast<int64_t>(r) * cols + col;
      const float g = to_f32(dy[i]);
      sg += g * ((to_f32(x[i]) - mean[r]) * rstd[r]);
      sb += g;
    }
  if (gamma_partials) write_column_partial(sg, shared, gamma_partials, cols);
  __syncthreads();
  if (beta_partials) write_column_partial(sb, shared, beta_partials, cols);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::layer_norm_forward(DType dt, const void* x, const void* gamma, const void* beta, int rows, int cols,
                                     float eps, void* y, float* mean, float* rstd) {
  if (cols < 1) fail("layer_norm_forward: needs at least one column, got {}", cols);
  if (rows < 0) fail("layer_norm_forward: invalid row count {}", rows);
  if (rows == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    layer_norm_forward_kernel<T><<<rows, row_threads(cols), 0, stream_>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta), cols, eps,
        static_cast<T*>(y), mean, rstd);
  });
  check_launch("layer_norm_forward");
}

void CudaBackend::layer_norm_backward(DType dt, const void* x, const void* gamma, const float* mean, const float* rstd,
                                      const void* dy, int rows, int cols, void* dx, float* dparam_gamma,
                                      float* dparam_beta) {
  if (cols < 1) fail("layer_norm_backward: needs at least one column, got {}", cols);
  if (rows < 0) fail("layer_norm_backward: invalid row count {}", rows);
  if (rows == 0) return;
  bind();
  // Parameter gradients first: dx may alias dy.
  const ColumnPlan plan = plan_column_sums(rows, cols, 2, scratch_float_count());
  float* gamma_partials = dparam_gamma ? scratch_floats() : nullptr;
  float* beta_partials = dparam_beta ? scratch_floats() + static_cast<std::size_t>(plan.chunks) * cols : nullptr;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    if (dparam_gamma || dparam_beta) {
      layer_norm_param_partials_kernel<T><<<column_grid(cols, plan), column_block(), 0, stream_>>>(
          static_cast<const T*>(x), mean, rstd, static_cast<const T*>(dy), rows, cols, plan.rows_per_chunk,
          gamma_partials, beta_partials);
      check_launch("layer_norm_backward (parameter gradients)");
    }
    if (dparam_gamma) finish_column_sums(gamma_partials, plan.chunks, cols, dparam_gamma, "layer_norm_backward");
    if (dparam_beta) finish_column_sums(beta_partials, plan.chunks, cols, dparam_beta, "layer_norm_backward");
    layer_norm_dx_kernel<T>
        <<<rows, row_threads(cols), 0, stream_>>>(static_cast<const T*>(x), static_cast<const T*>(gamma), mean, rstd,
                                                  static_cast<const T*>(dy), cols, static_cast<T*>(dx));
  });
  check_launch("layer_norm_backward");
}

}  // namespace lseq::kernels

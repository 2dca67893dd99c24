// Embedding lookup + scale + positions + dropout in one pass, and its backward. The table gradient is a
// scatter-add with fp32 atomics: tokens repeat in a batch, so when one does its row sums in an order that may
// differ from run to run (last-bit differences only; rows of tokens that occur once are exact and reproducible).
// The position gradient is deterministic: one thread per (position, column) adds the batch in order.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

template <typename T, typename I>
__global__ void embedding_forward_kernel(const int32_t* tokens, I n, I len, const T* table, I dim, float scale,
                                         const T* positions, DeviceMask mask, T* out) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const I row = i / dim;
    const int d = static_cast<int>(i % dim);
    const int t = static_cast<int>(row % len);
    // Rounded product (no fused multiply-add), as the CPU computes it: a position cancelling the token's
    // embedding then leaves the CPU's value, not a differently rounded one.
    float v = __fmul_rn(to_f32(table[static_cast<int64_t>(tokens[row]) * dim + d]), scale);
    if (positions) v = __fadd_rn(v, to_f32(positions[static_cast<int64_t>(t) * dim + d]));
    out[i] = from_f32<T>(v * mask(i));
  }
}

template <typename T, typename I>
__global__ void embedding_table_grad_kernel(const int32_t* tokens, I n, I dim, float scale, DeviceMask mask,
                                            const T* dout, float* dtable) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const I row = i / dim;
    const int d = static_cast<int>(i % dim);
    const float v = to_f32(dout[i]) * mask(i);
    atomicAdd(dtable + static_cast<int64_t>(tokens[row]) * dim + d, scale * v);
  }
}

template <typename T>
__global__ void embedding_position_grad_kernel(int batch, int len, int dim, DeviceMask mask, const T* dout,
                                               float* dpositions) {
  const int64_t n = static_cast<int64_t>(len) * dim;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int b = 0; b < batch; ++b) {
      const int64_t i = static_cast<int64_t>(b) * n + j;  // row b*len + t, column d: (b*len+t)*dim + d
      s += to_f32(dout[i]) * mask(i);
    }
    dpositions[j] += s;
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::embedding_forward(DType dt, const int32_t* tokens, int batch, int len, const void* table, int dim,
                                    float scale, const void* positions, const Dropout& drop, void* out) {
  const DeviceMask mask = make_mask(drop, "embedding_forward");
  if (batch < 0 || len < 0 || dim < 0) fail("embedding_forward: invalid shape batch={} len={} dim={}", batch, len, dim);
  const int64_t rows = static_cast<int64_t>(batch) * len;
  if (rows == 0 || dim == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(rows * dim, [&](auto index) {
      using I = decltype(index);
      embedding_forward_kernel<T, I><<<grid_for(rows * dim), kThreads, 0, stream_>>>(
          tokens, I(rows * dim), I(len), static_cast<const T*>(table), I(dim), scale, static_cast<const T*>(positions),
          mask, static_cast<T*>(out));
    });
  });
  check_launch("embedding_forward");
}

void CudaBackend::embedding_backward(DType dt, const int32_t* tokens, int batch, int len, int dim, float scale,
                                     const Dropout& drop, const void* dout, float* dparam_table,
                                     float* dparam_positions) {
  const DeviceMask mask = make_mask(drop, "embedding_backward");
  if (batch < 0 || len < 0 || dim < 0)
    fail("embedding_backward: invalid shape batch={} len={} dim={}", batch, len, dim);
  const int64_t rows = static_cast<int64_t>(batch) * len;
  if (rows == 0 || dim == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(dout);
    if (dparam_table)
      dispatch_index(rows * dim, [&](auto index) {
        using I = decltype(index);
        embedding_table_grad_kernel<T, I><<<grid_for(rows * dim), kThreads, 0, stream_>>>(
            tokens, I(rows * dim), I(dim), scale, mask, g, dparam_table);
      });
    if (dparam_positions)
      embedding_position_grad_kernel<T><<<grid_for(static_cast<int64_t>(len) * dim), kThreads, 0, stream_>>>(
          batch, len, dim, mask, g, dparam_positions);
  });
  check_launch("embedding_backward");
}

}  // namespace lseq::kernels

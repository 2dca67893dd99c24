// Bias, activation and residual ops of the CUDA backend, fused with their dropout; backward passes fuse the bias
// gradient's first reduction stage into the elementwise kernel (see cuda_common.cuh, column sums).
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/column_pack.cuh"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

template <typename T, typename I>
__global__ void add_bias_kernel(const T* x, const T* bias, I n, I cols, T* y) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(x[i]) + to_f32(bias[i % cols]));
}

template <typename T, typename I>
__global__ void bias_act_forward_kernel(const T* x, const T* bias, I n, I cols, Activation act, DeviceMask mask, T* y) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const float z = to_f32(x[i]) + (bias ? to_f32(bias[i % cols]) : 0.0f);
    y[i] = from_f32<T>(activate(act, z) * mask(i));
  }
}

template <typename T, typename I>
__global__ void bias_residual_forward_kernel(const T* x, const T* bias, const T* residual, I n, I cols, DeviceMask mask,
                                             T* y) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const float v = __fmul_rn(to_f32(x[i]) + (bias ? to_f32(bias[i % cols]) : 0.0f), mask(i));
    y[i] = from_f32<T>(__fadd_rn(to_f32(residual[i]), v));  // no fused multiply-add: the CPU's rounding
  }
}

// ---- the same three over 16-byte packs (cols % P == 0, every pointer 16-byte aligned): one thread per pack of P
// elements of one row, the same per-element math and dropout element indices as the scalar kernels above ----
template <typename T>
__device__ __forceinline__ void load_bias_pack(const T* bias, int64_t c, float (&b)[Pack<T>::size]) {
  if (bias) {
    load_pack(bias + c, b);
  } else {
#pragma unroll
    for (int k = 0; k < Pack<T>::size; ++k) b[k] = 0.0f;
  }
}

template <typename T, typename I>
__global__ void add_bias_pack_kernel(const T* x, const T* bias, I packs, I cols, T* y) {
  constexpr int P = Pack<T>::size;
  for (I q = blockIdx.x * I(blockDim.x) + threadIdx.x; q < packs; q += I(gridDim.x) * blockDim.x) {
    const I i = q * P;
    float v[P], b[P];
    load_pack(x + i, v);
    load_pack(bias + i % cols, b);
#pragma unroll
    for (int k = 0; k < P; ++k) v[k] = v[k] + b[k];
    store_pack(y + i, v);
  }
}

template <typename T, typename I>
__global__ void bias_act_forward_pack_kernel(const T* x, const T* bias, I packs, I cols, Activation act,
                                             DeviceMask mask, T* y) {
  constexpr int P = Pack<T>::size;
  for (I q = blockIdx.x * I(blockDim.x) + threadIdx.x; q < packs; q += I(gridDim.x) * blockDim.x) {
    const I i = q * P;
    float v[P], b[P];
    load_pack(x + i, v);
    load_bias_pack(bias, i % cols, b);
#pragma unroll
    for (int k = 0; k < P; ++k) v[k] = activate(act, v[k] + b[k]) * mask(static_cast<int64_t>(i) + k);
    store_pack(y + i, v);
  }
}

template <typename T, typename I>
__global__ void bias_residual_forward_pack_kernel(const T* x, const T* bias, const T* residual, I packs, I cols,
                                                  DeviceMask mask, T* y) {
  constexpr int P = Pack<T>::size;
  for (I q = blockIdx.x * I(blockDim.x) + threadIdx.x; q < packs; q += I(gridDim.x) * blockDim.x) {
    const I i = q * P;
    float v[P], b[P], res[P];
    load_pack(x + i, v);
    load_bias_pack(bias, i % cols, b);
    load_pack(residual + i, res);
#pragma unroll
    for (int k = 0; k < P; ++k)
      v[k] = __fadd_rn(res[k], __fmul_rn(v[k] + b[k], mask(static_cast<int64_t>(i) + k)));  // the CPU's rounding
    store_pack(y + i, v);
  }
}

// Column-sum ops: operator()(r, c) for column_kernel (any shape), pack(i, c, g) for pack_column_kernel (the P
// elements from flat index i = r * cols + c).
template <typename T>
struct ColumnValue {  // bias_grad: the value itself
  const T* dy;
  int ld;  // row stride (the pack path needs ld == cols)
  __device__ float operator()(int r, int c) const { return to_f32(dy[static_cast<int64_t>(r) * ld + c]); }
  __device__ void pack(int64_t i, int, float (&g)[Pack<T>::size]) const { load_pack(dy + i, g); }
};

template <typename T>
struct BiasActBackward {  // dx = dropout(dy) * act'(x + bias), summed unrounded
  const T *x, *bias, *dy;
  T* dx;
  int cols;
  Activation act;
  DeviceMask mask;
  __device__ float operator()(int r, int c) const {
    const int64_t i = static_cast<int64_t>(r) * cols + c;
    const float z = to_f32(x[i]) + (bias ? to_f32(bias[c]) : 0.0f);
    const float g = to_f32(dy[i]) * mask(i) * activation_grad(act, z);
    dx[i] = from_f32<T>(g);
    return g;
  }
  __device__ void pack(int64_t i, int c, float (&g)[Pack<T>::size]) const {
    constexpr int P = Pack<T>::size;
    float z[P], b[P];
    load_pack(x + i, z);
    load_bias_pack(bias, c, b);
    load_pack(dy + i, g);
#pragma unroll
    for (int k = 0; k < P; ++k) g[k] = g[k] * mask(i + k) * activation_grad(act, z[k] + b[k]);
    store_pack(dx + i, g);
  }
};

template <typename T>
struct DropoutBackward {  // dx = dropout(dy)
  const T* dy;
  T* dx;
  int cols;
  DeviceMask mask;
  __device__ float operator()(int r, int c) const {
    const int64_t i = static_cast<int64_t>(r) * cols + c;
    const float g = to_f32(dy[i]) * mask(i);
    dx[i] = from_f32<T>(g);
    return g;
  }
  __device__ void pack(int64_t i, int, float (&g)[Pack<T>::size]) const {
    load_pack(dy + i, g);
#pragma unroll
    for (int k = 0; k < Pack<T>::size; ++k) g[k] = g[k] * mask(i + k);
    store_pack(dx + i, g);
  }
};

// Stage 1 of an op's column sums into `scratch` (or the elementwise part only when !want_sums), over packs when
// `vectorize`, else with the scalar column_kernel. Returns the chunk count for finish_column_sums.
template <typename T, typename Op>
int launch_column_op(cudaStream_t stream, const Op& op, bool vectorize, int rows, int cols, float* scratch,
                     std::size_t scratch_count, bool want_sums) {
  float* partials = want_sums ? scratch : nullptr;
  if (vectorize) {
    constexpr int P = Pack<T>::size;
    const ColumnPlan plan = plan_pack_column_sums(rows, cols, P, 1, scratch_count);
    pack_column_kernel<P><<<pack_column_grid(cols, P, plan), pack_column_block(), 0, stream>>>(
        op, rows, cols, plan.rows_per_chunk, partials);
    return plan.chunks;
  }
  const ColumnPlan plan = plan_column_sums(rows, cols, 1, scratch_count);
  column_kernel<<<column_grid(cols, plan), column_block(), 0, stream>>>(op, rows, cols, plan.rows_per_chunk, partials);
  return plan.chunks;
}

void require_shape(int rows, int cols, const char* op) {
  if (rows < 0 || cols < 0) fail("{}: invalid shape rows={} cols={}", op, rows, cols);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::add_bias(DType dt, const void* x, const void* bias, int rows, int cols, void* y) {
  require_shape(rows, cols, "add_bias");
  const int64_t n = static_cast<int64_t>(rows) * cols;
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto* px = static_cast<const T*>(x);
    const auto* pb = static_cast<const T*>(bias);
    auto* py = static_cast<T*>(y);
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      if (can_vectorize<T>(cols, px, pb, py)) {
        const int64_t packs = n / Pack<T>::size;
        add_bias_pack_kernel<T, I><<<grid_for(packs), kThreads, 0, stream_>>>(px, pb, I(packs), I(cols), py);
      } else {
        add_bias_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(px, pb, I(n), I(cols), py);
      }
    });
  });
  check_launch("add_bias");
}

void CudaBackend::bias_grad(DType dt, const void* dy, int rows, int cols, float* dparam_bias, int ld) {
  require_shape(rows, cols, "bias_grad");
  ld = row_stride("bias_grad", ld, cols);
  if (rows == 0 || cols == 0) return;
  bind();
  int chunks = 1;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto* pdy = static_cast<const T*>(dy);
    const bool packs = ld == cols && can_vectorize<T>(cols, pdy);
    chunks = launch_column_op<T>(stream_, ColumnValue<T>{pdy, ld}, packs, rows, cols,
                                 scratch_floats(), scratch_float_count(), true);
  });
  check_launch("bias_grad");
  finish_column_sums(scratch_floats(), chunks, cols, dparam_bias, "bias_grad");
}

void CudaBackend::bias_activation_dropout_forward(DType dt, const void* x, const void* bias, int rows, int cols,
                                                  Activation act, const Dropout& drop, void* y) {
  require_shape(rows, cols, "bias_activation_dropout_forward");
  const DeviceMask mask = make_mask(drop, "bias_activation_dropout_forward");
  const int64_t n = static_cast<int64_t>(rows) * cols;
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto* px = static_cast<const T*>(x);
    const auto* pb = static_cast<const T*>(bias);
    auto* py = static_cast<T*>(y);
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      if (can_vectorize<T>(cols, px, pb, py)) {
        const int64_t packs = n / Pack<T>::size;
        bias_act_forward_pack_kernel<T, I>
            <<<grid_for(packs), kThreads, 0, stream_>>>(px, pb, I(packs), I(cols), act, mask, py);
      } else {
        bias_act_forward_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(px, pb, I(n), I(cols), act, mask, py);
      }
    });
  });
  check_launch("bias_activation_dropout_forward");
}

void CudaBackend::bias_activation_dropout_backward(DType dt, const void* x, const void* bias, const void* dy, int rows,
                                                   int cols, Activation act, const Dropout& drop, void* dx,
                                                   float* dparam_bias) {
  require_shape(rows, cols, "bias_activation_dropout_backward");
  const DeviceMask mask = make_mask(drop, "bias_activation_dropout_backward");
  if (rows == 0 || cols == 0) return;
  bind();
  int chunks = 1;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const BiasActBackward<T> op{static_cast<const T*>(x),
                                static_cast<const T*>(bias),
                                static_cast<const T*>(dy),
                                static_cast<T*>(dx),
                                cols,
                                act,
                                mask};
    chunks = launch_column_op<T>(stream_, op, can_vectorize<T>(cols, op.x, op.bias, op.dy, op.dx), rows, cols,
                                 scratch_floats(), scratch_float_count(), dparam_bias != nullptr);
  });
  check_launch("bias_activation_dropout_backward");
  if (dparam_bias)
    finish_column_sums(scratch_floats(), chunks, cols, dparam_bias, "bias_activation_dropout_backward");
}

void CudaBackend::bias_dropout_residual_forward(DType dt, const void* x, const void* bias, const void* residual,
                                                int rows, int cols, const Dropout& drop, void* y) {
  require_shape(rows, cols, "bias_dropout_residual_forward");
  const DeviceMask mask = make_mask(drop, "bias_dropout_residual_forward");
  const int64_t n = static_cast<int64_t>(rows) * cols;
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto* px = static_cast<const T*>(x);
    const auto* pb = static_cast<const T*>(bias);
    const auto* pr = static_cast<const T*>(residual);
    auto* py = static_cast<T*>(y);
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      if (can_vectorize<T>(cols, px, pb, pr, py)) {
        const int64_t packs = n / Pack<T>::size;
        bias_residual_forward_pack_kernel<T, I>
            <<<grid_for(packs), kThreads, 0, stream_>>>(px, pb, pr, I(packs), I(cols), mask, py);
      } else {
        bias_residual_forward_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(px, pb, pr, I(n), I(cols), mask, py);
      }
    });
  });
  check_launch("bias_dropout_residual_forward");
}

void CudaBackend::bias_dropout_residual_backward(DType dt, const void* dy, int rows, int cols, const Dropout& drop,
                                                 void* dx, float* dparam_bias) {
  require_shape(rows, cols, "bias_dropout_residual_backward");
  const DeviceMask mask = make_mask(drop, "bias_dropout_residual_backward");
  if (rows == 0 || cols == 0) return;
  bind();
  int chunks = 1;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const DropoutBackward<T> op{static_cast<const T*>(dy), static_cast<T*>(dx), cols, mask};
    chunks = launch_column_op<T>(stream_, op, can_vectorize<T>(cols, op.dy, op.dx), rows, cols, scratch_floats(),
                                 scratch_float_count(), dparam_bias != nullptr);
  });
  check_launch("bias_dropout_residual_backward");
  if (dparam_bias) finish_column_sums(scratch_floats(), chunks, cols, dparam_bias, "bias_dropout_residual_backward");
}

}  // namespace lseq::kernels

// Bias, activation and residual ops of the CUDA backend, fused with their dropout; backward passes fuse the bias
// gradient's first reduction stage into the elementwise kernel (see cuda_common.cuh, column sums).
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"

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

template <typename T>
struct ColumnValue {  // bias_grad: the value itself
  const T* dy;
  __device__ float operator()(int r, int c) const { return to_f32(dy[static_cast<int64_t>(r) * cols + c]); }
  int cols;
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
};

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
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      add_bias_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), I(n), I(cols), static_cast<T*>(y));
    });
  });
  check_launch("add_bias");
}

void CudaBackend::bias_grad(DType dt, const void* dy, int rows, int cols, float* dparam_bias) {
  require_shape(rows, cols, "bias_grad");
  if (rows == 0 || cols == 0) return;
  bind();
  const ColumnPlan plan = plan_column_sums(rows, cols, 1, scratch_float_count());
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    column_kernel<<<column_grid(cols, plan), column_block(), 0, stream_>>>(
        ColumnValue<T>{static_cast<const T*>(dy), cols}, rows, cols, plan.rows_per_chunk, scratch_floats());
  });
  check_launch("bias_grad");
  finish_column_sums(scratch_floats(), plan.chunks, cols, dparam_bias, "bias_grad");
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
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      bias_act_forward_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), I(n), I(cols), act, mask, static_cast<T*>(y));
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
  const ColumnPlan plan = plan_column_sums(rows, cols, 1, scratch_float_count());
  float* partials = dparam_bias ? scratch_floats() : nullptr;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const BiasActBackward<T> op{static_cast<const T*>(x),
                                static_cast<const T*>(bias),
                                static_cast<const T*>(dy),
                                static_cast<T*>(dx),
                                cols,
                                act,
                                mask};
    column_kernel<<<column_grid(cols, plan), column_block(), 0, stream_>>>(op, rows, cols, plan.rows_per_chunk,
                                                                           partials);
  });
  check_launch("bias_activation_dropout_backward");
  if (dparam_bias) finish_column_sums(partials, plan.chunks, cols, dparam_bias, "bias_activation_dropout_backward");
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
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      bias_residual_forward_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(
          static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<const T*>(residual), I(n), I(cols), mask,
          static_cast<T*>(y));
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
  const ColumnPlan plan = plan_column_sums(rows, cols, 1, scratch_float_count());
  float* partials = dparam_bias ? scratch_floats() : nullptr;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const DropoutBackward<T> op{static_cast<const T*>(dy), static_cast<T*>(dx), cols, mask};
    column_kernel<<<column_grid(cols, plan), column_block(), 0, stream_>>>(op, rows, cols, plan.rows_per_chunk,
                                                                           partials);
  });
  check_launch("bias_dropout_residual_backward");
  if (dparam_bias) finish_column_sums(partials, plan.chunks, cols, dparam_bias, "bias_dropout_residual_backward");
}

}  // namespace lseq::kernels

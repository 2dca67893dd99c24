// Label-smoothed cross-entropy fused with log-softmax (one block per row: an online max/sum pass, then the gradient
// pass), and the fp32 log-softmax of decoding. Probabilities are never stored. Targets live on the device and are
// not validated on the host: a row whose target is outside [0, vocab) (and not ignore_index) gets a NaN loss and
// NaN gradient, so the error shows instead of reading out of bounds.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kRowThreads = 256;

// Log-sum-exp of a row by an online max/sum per thread, combined over the block; also the plain sum of the row.
template <typename T>
__device__ void row_logsumexp(const T* x, int cols, float* shared, float& lse, float& sum_x) {
  float m = -INFINITY, s = 0.0f, sx = 0.0f;
  for (int v = threadIdx.x; v < cols; v += blockDim.x) {
    const float xv = to_f32(x[v]);
    sx += xv;
    if (xv > m) {
      s = s * expf(m - xv) + 1.0f;
      m = xv;
    } else {
      s += expf(xv - m);
    }
  }
  const float row_max = block_max(m, shared);
  const float scaled = m == -INFINITY ? 0.0f : s * expf(m - row_max);
  const float total = block_sum(scaled, shared);
  sum_x = block_sum(sx, shared);
  lse = row_max + logf(total);
}

template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const int32_t* targets, int vocab, float label_smoothing,
                                     int ignore_index, float grad_scale, float* loss, float* nll, T* dlogits) {
  __shared__ float shared[32];
  __shared__ float shared_x_y;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  T* d = dlogits ? dlogits + row * vocab : nullptr;
  const int y = targets[row];
  if (y == ignore_index) {
    if (threadIdx.x == 0) {
      if (loss) loss[row] = 0.0f;
      if (nll) nll[row] = 0.0f;
    }
    if (d)
      for (int v = threadIdx.x; v < vocab; v += blockDim.x) d[v] = from_f32<T>(0.0f);
    return;
  }
  if (y < 0 || y >= vocab) {
    if (threadIdx.x == 0) {
      if (loss) loss[row] = NAN;
      if (nll) nll[row] = NAN;
    }
    if (d)
      for (int v = threadIdx.x; v < vocab; v += blockDim.x) d[v] = from_f32<T>(NAN);
    return;
  }
  if (threadIdx.x == 0) shared_x_y = to_f32(x[y]);  // read before any thread writes d (which may alias x)
  float lse, sum_x;
  row_logsumexp(x, vocab, shared, lse, sum_x);  // ends with a barrier: shared_x_y is visible
  if (threadIdx.x == 0) {
    const double ls = label_smoothing;
    const double logp_y = static_cast<double>(shared_x_y) - lse;
    const double sum_logp = static_cast<double>(sum_x) - static_cast<double>(vocab) * lse;
    if (loss) loss[row] = static_cast<float>(-(1.0 - ls) * logp_y - ls / vocab * sum_logp);
    if (nll) nll[row] = static_cast<float>(-logp_y);
  }
  if (!d) return;
  const float smooth = static_cast<float>(static_cast<double>(label_smoothing) / vocab);
  const float target_y = static_cast<float>(1.0 - label_smoothing + static_cast<double>(label_smoothing) / vocab);
  // Each thread reads x[v] before writing d[v], for its own v only.
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float p = expf(to_f32(x[v]) - lse);
    d[v] = from_f32<T>(grad_scale * (p - (v == y ? target_y : smooth)));
  }
}

template <typename T>
__global__ void log_softmax_kernel(const T* logits, int cols, float* out) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  float lse, sum_x;
  row_logsumexp(x, cols, shared, lse, sum_x);
  float* o = out + row * cols;
  for (int v = threadIdx.x; v < cols; v += blockDim.x) o[v] = to_f32(x[v]) - lse;  // out may alias fp32 logits
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::cross_entropy(DType dt, const void* logits, const int32_t* targets, int n, int vocab,
                                float label_smoothing, int ignore_index, float grad_scale, float* loss, float* nll,
                                void* dlogits) {
  if (vocab < 1) fail("cross_entropy: vocabulary size must be positive, got {}", vocab);
  if (n < 0) fail("cross_entropy: invalid row count {}", n);
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_kernel<T><<<n, kRowThreads, 0, stream_>>>(static_cast<const T*>(logits), targets, vocab,
                                                            label_smoothing, ignore_index, grad_scale, loss, nll,
                                                            static_cast<T*>(dlogits));
  });
  check_launch("cross_entropy");
}

void CudaBackend::log_softmax(DType dt, const void* logits, int rows, int cols, float* out) {
  if (rows < 0 || cols < 1) fail("log_softmax: invalid shape rows={} cols={}", rows, cols);
  if (dt != DType::f32 && static_cast<const void*>(out) == logits)
    fail("log_softmax: the fp32 output may alias the logits only when they are fp32, not {}", dtype_name(dt));
  if (rows == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    log_softmax_kernel<T><<<rows, kRowThreads, 0, stream_>>>(static_cast<const T*>(logits), cols, out);
  });
  check_launch("log_softmax");
}

}  // namespace lseq::kernels

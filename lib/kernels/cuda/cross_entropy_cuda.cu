// Label-smoothed cross-entropy fused with log-softmax (one block per row; the row, plus an optional bias, read
// once into shared memory where it fits), and the fp32 log-softmax of decoding. Probabilities are never stored.
// Targets live on the device and are not validated on the host: a row whose target is outside [0, vocab) (and not
// ignore_index) gets a NaN loss and NaN gradient, so the error shows instead of reading out of bounds.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/async_copy.cuh"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kRowThreads = 256;

// Logit v of a row: x[v] (+ bias[v]) in fp32.
template <typename T>
__device__ __forceinline__ float biased(const T* x, const T* bias, int v) {
  return bias ? to_f32(x[v]) + to_f32(bias[v]) : to_f32(x[v]);
}

// Log-sum-exp of a row by an online max/sum per thread, combined over the block; also the plain sum of the row.
template <typename T>
__device__ void row_logsumexp(const T* x, const T* bias, int cols, float* shared, float& lse, float& sum_x) {
  float m = -INFINITY, s = 0.0f, sx = 0.0f;
  for (int v = threadIdx.x; v < cols; v += blockDim.x) {
    const float xv = biased(x, bias, v);
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

// Rows whose target is ignore_index (loss 0, gradient 0) or outside [0, vocab) (NaN): true when handled. P > 1
// writes the gradient row in 16-byte packs (vocab a multiple of P, d aligned): padding is a quarter of the rows.
template <typename T, int P = 1>
__device__ bool cross_entropy_special_row(int y, int vocab, int ignore_index, int64_t row, float* loss, float* nll,
                                          T* d) {
  if (y != ignore_index && y >= 0 && y < vocab) return false;
  const float value = y == ignore_index ? 0.0f : NAN;
  if (threadIdx.x == 0) {
    if (loss) loss[row] = value;
    if (nll) nll[row] = value;
  }
  if (d) {
    float pack[P];
#pragma unroll
    for (int j = 0; j < P; ++j) pack[j] = value;
    for (int v = threadIdx.x * P; v < vocab; v += blockDim.x * P) {
      if constexpr (P == 1)
        d[v] = from_f32<T>(value);
      else
        store_pack<T>(d + v, pack);
    }
  }
  return true;
}

// Loss and nll of a row from its log-sum-exp (thread 0 writes).
__device__ __forceinline__ void write_row_loss(int64_t row, float x_y, float lse, float sum_x, int vocab,
                                               float label_smoothing, float* loss, float* nll) {
  if (threadIdx.x != 0) return;
  const double ls = label_smoothing;
  const double logp_y = static_cast<double>(x_y) - lse;
  const double sum_logp = static_cast<double>(sum_x) - static_cast<double>(vocab) * lse;
  if (loss) loss[row] = static_cast<float>(-(1.0 - ls) * logp_y - ls / vocab * sum_logp);
  if (nll) nll[row] = static_cast<float>(-logp_y);
}

// Any vocabulary and alignment: one block per row, reading the row three times (the fallback of the fast kernel).
template <typename T>
__global__ void cross_entropy_kernel(const T* logits, const T* bias, const int32_t* targets, int vocab, int ld,
                                     float label_smoothing, int ignore_index, float grad_scale, float* loss,
                                     float* nll, T* dlogits) {
  __shared__ float shared[32];
  __shared__ float shared_x_y;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * ld;
  T* d = dlogits ? dlogits + row * ld : nullptr;
  const int y = targets[row];
  if (cross_entropy_special_row(y, vocab, ignore_index, row, loss, nll, d)) return;
  if (threadIdx.x == 0) shared_x_y = biased(x, bias, y);  // read before any thread writes d (which may alias x)
  float lse, sum_x;
  row_logsumexp(x, bias, vocab, shared, lse, sum_x);  // ends with a barrier: shared_x_y is visible
  write_row_loss(row, shared_x_y, lse, sum_x, vocab, label_smoothing, loss, nll);
  if (!d) return;
  const float smooth = static_cast<float>(static_cast<double>(label_smoothing) / vocab);
  const float target_y = static_cast<float>(1.0 - label_smoothing + static_cast<double>(label_smoothing) / vocab);
  // Each thread reads x[v] before writing d[v], for its own v only.
  for (int v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float p = expf(biased(x, bias, v) - lse);
    d[v] = from_f32<T>(grad_scale * (p - (v == y ? target_y : smooth)));
  }
}

// The training case (bf16 logits [16384 x 32000]): the row is copied once from memory into shared memory
// (cp.async, every 16-byte pack of the row in flight at once; each thread later reads only the packs it copied, so
// no barrier is needed for them), then two passes read it from there (the sums, then the gradient). Needs
// ld % P == 0, 16-byte aligned rows and packs * P * sizeof(T) <= kStagedRowBytes; a vocabulary that is no multiple
// of the pack (GPT-2's 50257 + 4) ends in a partial pack, whose columns past vocab are skipped (their gradient set
// to 0). A row held in registers instead (the kernel before this one) left one 512-thread row per SM and half of
// the memory bandwidth idle while the block reduced; a 64 KB bf16 row in shared memory leaves room for three.
constexpr int kStagedThreads = 512;
constexpr int kStagedRowBytes = 160 * 1024;

// Pack q of the staged row as fp32, plus the bias pack when there is one; columns from vocab on are -inf.
template <typename T>
__device__ __forceinline__ void staged_values(const T* row, const T* bias, int q, int vocab,
                                              float (&v)[Pack<T>::size]) {
  constexpr int P = Pack<T>::size;
  load_pack<T>(row + q * P, v);
  if (q * P + P > vocab) {  // the partial last pack: the bias has no element past vocab
#pragma unroll
    for (int j = 0; j < P; ++j) v[j] = q * P + j < vocab ? v[j] + (bias ? to_f32(bias[q * P + j]) : 0.0f) : -INFINITY;
    return;
  }
  if (bias) {
    float b[P];
    load_pack<T>(bias + q * P, b);
#pragma unroll
    for (int j = 0; j < P; ++j) v[j] += b[j];
  }
}

template <typename T>
__global__ void __launch_bounds__(kStagedThreads) cross_entropy_staged_kernel(
    const T* logits, const T* bias, const int32_t* targets, int vocab, int ld, float label_smoothing,
    int ignore_index, float grad_scale, float* loss, float* nll, T* dlogits) {
  constexpr int P = Pack<T>::size;
  extern __shared__ __align__(16) unsigned char staged_row[];
  __shared__ float shared[32];
  __shared__ float shared_x_y;
  T* row_copy = reinterpret_cast<T*>(staged_row);
  const int64_t row = blockIdx.x;
  const T* x = logits + row * ld;
  T* d = dlogits ? dlogits + row * ld : nullptr;
  const int y = targets[row];
  if (cross_entropy_special_row<T, P>(y, vocab, ignore_index, row, loss, nll, d)) return;
  const int packs = (vocab + P - 1) / P;
  for (int q = threadIdx.x; q < packs; q += kStagedThreads) copy_async_16(row_copy + q * P, x + q * P, true);
  if (threadIdx.x == 0) shared_x_y = biased(x, bias, y);  // read before any thread writes d (which may alias x)
  wait_async_copies();
  // One pass for the row's max and sum of exponentials (online per thread, in log2 units: one fma and one ex2 an
  // element) and its plain sum, a second for the gradient. Three passes with expf (max, sum, gradient) left the
  // kernel issue-bound at half the memory bandwidth (GPT-2's 50257 columns on an H100, 2026-11-28).
  float m = -INFINITY, s = 0.0f, sx = 0.0f;
  for (int q = threadIdx.x; q < packs; q += kStagedThreads) {
    float v[P];
    staged_values(row_copy, bias, q, vocab, v);
    float pack_max = v[0];
#pragma unroll
    for (int j = 1; j < P; ++j) pack_max = fmaxf(pack_max, v[j]);
    const float new_max = fmaxf(m, pack_max * kLog2e);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // nothing finite yet: every term stays 0
    float pack_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < P; ++j) pack_sum += exp2_flush(fmaf(v[j], kLog2e, -base));
    s = s * exp2_flush(m - base) + pack_sum;
    m = new_max;
    if (q * P + P <= vocab) {
#pragma unroll
      for (int j = 0; j < P; ++j) sx += v[j];
    } else {  // the partial last pack's columns past vocab are -inf
#pragma unroll
      for (int j = 0; j < P; ++j) sx += q * P + j < vocab ? v[j] : 0.0f;
    }
  }
  const float row_max = block_max(m, shared);
  const float sum_exp = block_sum(m == -INFINITY ? 0.0f : s * exp2_flush(m - row_max), shared);
  const float sum_x = block_sum(sx, shared);  // the barriers make shared_x_y visible
  const float lse2 = row_max + log2f(sum_exp);  // log-sum-exp in log2 units
  write_row_loss(row, shared_x_y, lse2 * kLn2, sum_x, vocab, label_smoothing, loss, nll);
  if (!d) return;
  const float smooth = static_cast<float>(static_cast<double>(label_smoothing) / vocab);
  const float target_y = static_cast<float>(1.0 - label_smoothing + static_cast<double>(label_smoothing) / vocab);
  // Every read of x happened before the barriers above, so d may alias x.
  for (int q = threadIdx.x; q < packs; q += kStagedThreads) {
    float g[P];
    staged_values(row_copy, bias, q, vocab, g);
#pragma unroll
    for (int j = 0; j < P; ++j)
      g[j] = q * P + j < vocab
                 ? grad_scale * (exp2_flush(fmaf(g[j], kLog2e, -lse2)) - (q * P + j == y ? target_y : smooth))
                 : 0.0f;
    store_pack<T>(d + q * P, g);
  }
}

// One block per row, V elements per access (V = 1, or the 16-byte pack of T when cols is a multiple of it and the
// pointers are aligned): an online max/sum pass, then out = x - lse. Each thread writes only the elements it
// reads, after every thread's first pass (the block reductions' barriers), so out may alias fp32 logits (rows ld
// apart in logits, cols apart in out).
template <typename T, int V>
__global__ void log_softmax_kernel(const T* logits, int cols, int64_t ld, float* out) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * ld;
  float* o = out + row * cols;
  float m = -INFINITY, s = 0.0f;
  for (int v = threadIdx.x * V; v < cols; v += blockDim.x * V) {
    float xs[V];
    if constexpr (V == 1)
      xs[0] = to_f32(x[v]);
    else
      load_pack<T>(x + v, xs);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (xs[j] > m) {
        s = s * expf(m - xs[j]) + 1.0f;
        m = xs[j];
      } else {
        s += expf(xs[j] - m);
      }
    }
  }
  const float row_max = block_max(m, shared);
  const float lse = row_max + logf(block_sum(m == -INFINITY ? 0.0f : s * expf(m - row_max), shared));
  for (int v = threadIdx.x * V; v < cols; v += blockDim.x * V) {
    if constexpr (V == 1) {
      o[v] = to_f32(x[v]) - lse;
    } else {
      float xs[V];
      load_pack<T>(x + v, xs);
#pragma unroll
      for (int q = 0; q < V; q += 4) {
        const float part[4] = {xs[q] - lse, xs[q + 1] - lse, xs[q + 2] - lse, xs[q + 3] - lse};
        store_pack<float>(o + v + q, part);
      }
    }
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::cross_entropy(DType dt, const void* logits, const void* bias, const int32_t* targets, int n,
                                int vocab, float label_smoothing, int ignore_index, float grad_scale, float* loss,
                                float* nll, void* dlogits, int ld) {
  if (vocab < 1) fail("cross_entropy: vocabulary size must be positive, got {}", vocab);
  ld = row_stride("cross_entropy", ld, vocab);
  if (n < 0) fail("cross_entropy: invalid row count {}", n);
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(logits);
    const T* b = static_cast<const T*>(bias);
    T* d = static_cast<T*>(dlogits);
    constexpr int P = Pack<T>::size;
    const int64_t row_bytes = static_cast<int64_t>((vocab + P - 1) / P * P) * static_cast<int64_t>(sizeof(T));
    if (can_vectorize<T>(ld, x, b, d) && row_bytes <= kStagedRowBytes) {
      const unsigned smem = static_cast<unsigned>(row_bytes);
      allow_shared_bytes(cross_entropy_staged_kernel<T>, smem);
      cross_entropy_staged_kernel<T><<<n, kStagedThreads, smem, stream_>>>(
          x, b, targets, vocab, ld, label_smoothing, ignore_index, grad_scale, loss, nll, d);
    } else {
      cross_entropy_kernel<T><<<n, kRowThreads, 0, stream_>>>(x, b, targets, vocab, ld, label_smoothing,
                                                              ignore_index, grad_scale, loss, nll, d);
    }
  });
  check_launch("cross_entropy");
}

void CudaBackend::log_softmax(DType dt, const void* logits, int rows, int cols, float* out, int ld) {
  if (rows < 0 || cols < 1) fail("log_softmax: invalid shape rows={} cols={}", rows, cols);
  const int stride = row_stride("log_softmax", ld, cols);
  if ((dt != DType::f32 || stride != cols) && static_cast<const void*>(out) == logits)
    fail("log_softmax: the fp32 output may alias the logits only when they are fp32 rows without padding, not {}",
         dtype_name(dt));
  if (rows == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(logits);
    if (can_vectorize<T>(cols, x, out) && stride % Pack<T>::size == 0)
      log_softmax_kernel<T, Pack<T>::size><<<rows, kRowThreads, 0, stream_>>>(x, cols, stride, out);
    else
      log_softmax_kernel<T, 1><<<rows, kRowThreads, 0, stream_>>>(x, cols, stride, out);
  });
  check_launch("log_softmax");
}

}  // namespace lseq::kernels

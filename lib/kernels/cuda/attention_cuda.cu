// Attention helpers of the CUDA backend: QKV bias + split into heads in one pass, the inverse with the bias
// gradient's first reduction stage fused in, and the masked, scaled softmax (one warp per row) with its backward.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // softmax: one warp per row

template <typename T, typename I>
__global__ void split_heads_kernel(const T* qkv, const T* bias, I n, int batch, int len, int heads, int head_dim,
                                   int parts, T* out) {
  const int width = parts * heads * head_dim;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % head_dim);
    I rest = i / head_dim;
    const int t = static_cast<int>(rest % len);
    rest /= len;
    const int h = static_cast<int>(rest % heads);
    rest /= heads;
    const int b = static_cast<int>(rest % batch);
    const int p = static_cast<int>(rest / batch);
    const int col = (p * heads + h) * head_dim + d;
    float v = to_f32(qkv[(static_cast<int64_t>(b) * len + t) * width + col]);
    if (bias) v += to_f32(bias[col]);
    out[i] = from_f32<T>(v);
  }
}

template <typename T>
struct MergeHeads {  // out[token, col] = in[p][b][h][t][d]; returns the value for the bias gradient
  const T* in;
  T* out;
  int batch, len, heads, head_dim, width;
  __device__ float operator()(int row, int col) const {
    const int b = row / len, t = row % len;
    const int p = col / (heads * head_dim), h = (col / head_dim) % heads, d = col % head_dim;
    const T v = in[(((static_cast<int64_t>(p) * batch + b) * heads + h) * len + t) * head_dim + d];
    out[static_cast<int64_t>(row) * width + col] = v;
    return to_f32(v);
  }
};

template <typename T>
__global__ void softmax_forward_kernel(const T* scores, const int32_t* k_lengths, int64_t rows, int heads, int q_len,
                                       int k_len, float scale, bool causal, T* probs) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // whole warps leave together
  const int64_t b = row / (static_cast<int64_t>(heads) * q_len);
  const int i = static_cast<int>(row % q_len);
  int valid = k_len;
  if (k_lengths) valid = max(0, min(k_lengths[b], k_len));
  if (causal) valid = min(valid, i + 1);
  const T* s = scores + row * k_len;
  T* p = probs + row * k_len;
  // Keys [0, valid) take part; the rest get exactly 0; a row without keys is all zeros, never NaN.
  float mx = -INFINITY;
  for (int j = lane; j < valid; j += 32) mx = fmaxf(mx, scale * to_f32(s[j]));
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = lane; j < valid; j += 32) sum += expf(scale * to_f32(s[j]) - mx);
  sum = warp_sum(sum);
  const float inv = valid > 0 ? 1.0f / sum : 0.0f;
  // probs may alias scores: each lane reads s[j] before writing p[j], for its own j only.
  for (int j = lane; j < k_len; j += 32) p[j] = from_f32<T>(j < valid ? expf(scale * to_f32(s[j]) - mx) * inv : 0.0f);
}

template <typename T>
__global__ void softmax_backward_kernel(const T* probs, const T* dprobs, int64_t rows, int k_len, float scale,
                                        T* dscores) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const T* p = probs + row * k_len;
  const T* dp = dprobs + row * k_len;
  T* ds = dscores + row * k_len;
  float dot = 0.0f;
  for (int j = lane; j < k_len; j += 32) dot += to_f32(p[j]) * to_f32(dp[j]);
  dot = warp_sum(dot);
  for (int j = lane; j < k_len; j += 32) ds[j] = from_f32<T>(scale * to_f32(p[j]) * (to_f32(dp[j]) - dot));
}

unsigned softmax_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::split_heads(DType dt, const void* qkv, const void* bias, int batch, int len, int heads, int head_dim,
                              int parts, void* out) {
  if (batch < 0 || len < 0 || heads < 0 || head_dim < 0 || parts < 1)
    fail("split_heads: invalid shape batch={} len={} heads={} head_dim={} parts={}", batch, len, heads, head_dim,
         parts);
  const int64_t n = static_cast<int64_t>(parts) * batch * heads * len * head_dim;
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      split_heads_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(static_cast<const T*>(qkv),
                                                                      static_cast<const T*>(bias), I(n), batch, len,
                                                                      heads, head_dim, parts, static_cast<T*>(out));
    });
  });
  check_launch("split_heads");
}

void CudaBackend::merge_heads(DType dt, const void* in, int batch, int len, int heads, int head_dim, int parts,
                              void* out, float* dparam_bias) {
  if (batch < 0 || len < 0 || heads < 0 || head_dim < 0 || parts < 1)
    fail("merge_heads: invalid shape batch={} len={} heads={} head_dim={} parts={}", batch, len, heads, head_dim,
         parts);
  const int tokens = batch * len, width = parts * heads * head_dim;
  if (tokens == 0 || width == 0) return;
  bind();
  const ColumnPlan plan = plan_column_sums(tokens, width, 1, scratch_float_count());
  float* partials = dparam_bias ? scratch_floats() : nullptr;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const MergeHeads<T> op{static_cast<const T*>(in), static_cast<T*>(out), batch, len, heads, head_dim, width};
    column_kernel<<<column_grid(width, plan), column_block(), 0, stream_>>>(op, tokens, width, plan.rows_per_chunk,
                                                                            partials);
  });
  check_launch("merge_heads");
  if (dparam_bias) finish_column_sums(partials, plan.chunks, width, dparam_bias, "merge_heads");
}

void CudaBackend::attention_softmax_forward(DType dt, const void* scores, const int32_t* k_lengths, int batch,
                                            int heads, int q_len, int k_len, float scale, bool causal, void* probs) {
  if (batch < 0 || heads < 0 || q_len < 0 || k_len < 0)
    fail("attention_softmax_forward: invalid shape batch={} heads={} q_len={} k_len={}", batch, heads, q_len, k_len);
  const int64_t rows = static_cast<int64_t>(batch) * heads * q_len;
  if (rows == 0 || k_len == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    softmax_forward_kernel<T><<<softmax_blocks(rows), 32 * kRowsPerBlock, 0, stream_>>>(
        static_cast<const T*>(scores), k_lengths, rows, heads, q_len, k_len, scale, causal, static_cast<T*>(probs));
  });
  check_launch("attention_softmax_forward");
}

void CudaBackend::attention_softmax_backward(DType dt, const void* probs, const void* dprobs, int rows, int k_len,
                                             float scale, void* dscores) {
  if (rows < 0 || k_len < 0) fail("attention_softmax_backward: invalid shape rows={} k_len={}", rows, k_len);
  if (rows == 0 || k_len == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    softmax_backward_kernel<T><<<softmax_blocks(rows), 32 * kRowsPerBlock, 0, stream_>>>(
        static_cast<const T*>(probs), static_cast<const T*>(dprobs), rows, k_len, scale, static_cast<T*>(dscores));
  });
  check_launch("attention_softmax_backward");
}

}  // namespace lseq::kernels

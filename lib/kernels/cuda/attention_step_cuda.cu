// Incremental decoding's attention on the GPU in one launch: one block per (row, head) slice walks the slice's
// keys in tiles of kStepThreads with an online softmax (a running max and sum; the partial context is rescaled
// when the max grows), so any k_len works with fixed shared memory. Per tile, each thread scores one key (the
// whole dot product, 16-byte loads where aligned); then groups of threads, each owning a run of head
// dimensions, accumulate p_j v_j over the tile's keys. The groups' partial contexts are added in a fixed order at
// the end: results depend only on the shape. Each key has its own base: with a position-origin table (beam
// search's re-indexed self-attention caches) key j of a slice may live in another row's slice; the scoring
// thread of key j computes its offset once and shares it with the value phase.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kStepThreads = 128;       // threads per block, and keys per tile
constexpr int kMaxChunksPerThread = 2;  // head_dim <= 256 over 128 threads (scalar path)

// A chunk of W elements widened to fp32: one element, or one 16-byte pack (aligned, checked by the caller).
template <typename T>
__device__ __forceinline__ void load_chunk(const T* p, float (&out)[1]) {
  out[0] = to_f32(p[0]);
}
template <typename T>
__device__ __forceinline__ void load_chunk(const T* p, float (&out)[Pack<T>::size]) {
  load_pack(p, out);
}

// W: elements per load (1, or Pack<T>::size when head_dim, slice_stride and k/v allow 16-byte loads).
template <typename T, int W>
__global__ void __launch_bounds__(kStepThreads)
    attention_step_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          int64_t slice_stride, const int32_t* __restrict__ kv_index,
                          const int32_t* __restrict__ origin, int origin_stride,
                          const int32_t* __restrict__ k_lengths, int heads, int head_dim, int k_len, float scale,
                          T* __restrict__ context) {
  __shared__ float q_s[Backend::kMaxStepHeadDim];
  __shared__ float p_s[kStepThreads];
  __shared__ int64_t offset_s[kStepThreads];  // element offset of the tile's key (and value) j in k (and v)
  __shared__ float reduce_s[32];
  // groups * head_dim <= kStepThreads * W when chunks <= kStepThreads, else groups == 1 and head_dim <= 256.
  __shared__ float partial_s[kStepThreads * kMaxChunksPerThread * W];

  const int64_t i = blockIdx.x;  // the slice (row, head)
  const int tid = threadIdx.x;
  const int64_t r = i / heads;
  const int64_t h = i - r * heads;
  const int valid = k_lengths ? min(max(k_lengths[r], 0), k_len) : k_len;
  const int64_t slice = kv_index ? kv_index[i] : i;
  const int32_t* row_origin = origin ? origin + r * origin_stride : nullptr;
  for (int d = tid; d < head_dim; d += kStepThreads) q_s[d] = to_f32(q[i * head_dim + d]);
  __syncthreads();

  // The value phase: thread tid owns chunks lane_chunk + c * span of head_dim for the keys j = group (mod groups).
  const int chunks = head_dim / W;
  const int span = min(chunks, kStepThreads);
  const int groups = kStepThreads / span;
  const int group = tid / span;  // >= groups: idle in the value phase
  const int lane_chunk = tid % span;
  float acc[kMaxChunksPerThread][W];
#pragma unroll
  for (int c = 0; c < kMaxChunksPerThread; ++c)
#pragma unroll
    for (int e = 0; e < W; ++e) acc[c][e] = 0.0f;

  float m = -INFINITY, l = 0.0f;  // running max of the scaled scores and sum of exp(score - m)
  for (int t0 = 0; t0 < valid; t0 += kStepThreads) {
    const int j = t0 + tid;
    float s = -INFINITY;
    if (j < valid) {
      const int64_t key_slice = row_origin ? static_cast<int64_t>(row_origin[j]) * heads + h : slice;
      const int64_t offset = key_slice * slice_stride + static_cast<int64_t>(j) * head_dim;
      offset_s[tid] = offset;
      const T* key = k + offset;
      float dot = 0.0f;
#pragma unroll 4
      for (int c = 0; c < chunks; ++c) {
        float kc[W];
        load_chunk(key + c * W, kc);
#pragma unroll
        for (int e = 0; e < W; ++e) dot = fmaf(q_s[c * W + e], kc[e], dot);
      }
      s = scale * dot;
    }
    // The tile holds at least one valid key, so m_new is finite for finite inputs; at the first tile m = -inf
    // and corr = 0.
    const float m_new = fmaxf(m, block_max(s, reduce_s));
    const float p = j < valid ? expf(s - m_new) : 0.0f;
    p_s[tid] = p;
    const float corr = expf(m - m_new);
    l = l * corr + block_sum(p, reduce_s);  // its barriers also publish p_s and offset_s
    m = m_new;
    const int tile = min(kStepThreads, valid - t0);
    if (group < groups) {
#pragma unroll
      for (int c = 0; c < kMaxChunksPerThread; ++c)
#pragma unroll
        for (int e = 0; e < W; ++e) acc[c][e] *= corr;
      for (int jj = group; jj < tile; jj += groups) {
        const float pj = p_s[jj];
        const T* value = v + offset_s[jj];
#pragma unroll
        for (int c = 0; c < kMaxChunksPerThread; ++c) {
          const int chunk = lane_chunk + c * span;
          if (chunk < chunks) {
            float vc[W];
            load_chunk(value + chunk * W, vc);
#pragma unroll
            for (int e = 0; e < W; ++e) acc[c][e] = fmaf(pj, vc[e], acc[c][e]);
          }
        }
      }
    }
    __syncthreads();  // the next tile rewrites p_s and offset_s
  }

  if (group < groups) {
#pragma unroll
    for (int c = 0; c < kMaxChunksPerThread; ++c) {
      const int chunk = lane_chunk + c * span;
      if (chunk < chunks)
#pragma unroll
        for (int e = 0; e < W; ++e) partial_s[group * head_dim + chunk * W + e] = acc[c][e];
    }
  }
  __syncthreads();
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // no valid keys: context 0
  for (int d = tid; d < head_dim; d += kStepThreads) {
    float sum = 0.0f;
    for (int g = 0; g < groups; ++g) sum += partial_s[g * head_dim + d];
    context[i * head_dim + d] = from_f32<T>(sum * inv);
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::attention_step(DType dt, const void* q, const void* k, const void* v, int64_t slice_stride,
                                 const int32_t* kv_index, const int32_t* origin, int origin_stride,
                                 const int32_t* k_lengths, int rows, int heads, int head_dim, int k_len, float scale,
                                 void* context) {
  using namespace cuda;
  check_attention_step_shape(rows, heads, head_dim, k_len, slice_stride, kv_index, origin, origin_stride);
  const int64_t slices = static_cast<int64_t>(rows) * heads;
  if (slices == 0) return;
  if (slices > 0x7FFFFFFF) fail("attention_step: {} slices exceed one launch's grid", slices);
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* tq = static_cast<const T*>(q);
    const T* tk = static_cast<const T*>(k);
    const T* tv = static_cast<const T*>(v);
    T* tc = static_cast<T*>(context);
    const auto grid = static_cast<unsigned>(slices);
    constexpr int P = Pack<T>::size;
    // Then every key's offset, key slice * slice_stride + j * head_dim, is a whole number of packs too.
    if (can_vectorize<T>(head_dim, tk, tv) && slice_stride % P == 0)
      attention_step_kernel<T, P><<<grid, kStepThreads, 0, stream_>>>(tq, tk, tv, slice_stride, kv_index, origin,
                                                                      origin_stride, k_lengths, heads, head_dim,
                                                                      k_len, scale, tc);
    else
      attention_step_kernel<T, 1><<<grid, kStepThreads, 0, stream_>>>(tq, tk, tv, slice_stride, kv_index, origin,
                                                                      origin_stride, k_lengths, heads, head_dim,
                                                                      k_len, scale, tc);
  });
  check_launch("attention_step");
}

}  // namespace lseq::kernels

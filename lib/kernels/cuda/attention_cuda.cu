// Attention helpers of the CUDA backend: QKV bias + split into heads in one pass, the inverse with the bias
// gradient's first reduction stage fused in, and the masked, scaled softmax with its backward.
//
// The fast paths move 16-byte packs (vector_access.cuh): a head's run of head_dim elements and a score row of stride
// ld are whole packs when head_dim and ld are multiples of the pack and the pointers are aligned (the attention
// layer pads ld to a multiple of 8). Other shapes take the scalar kernels, which give the same results.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // scalar softmax: one warp per row
constexpr int kSoftmaxThreads = 128;

// ---- split / merge heads ----
// The head layout of a pack: packs of the row [parts*heads*head_dim] never straddle a head when head_dim is a
// multiple of the pack, so (part, head, offset) follow from the pack's column.
struct HeadPos {
  int part, head, offset;
};

__device__ __forceinline__ HeadPos head_pos(int col, int heads, int head_dim) {
  const int ph = col / head_dim;
  const int part = ph / heads;
  return HeadPos{part, ph - part * heads, col - ph * head_dim};
}

// Index of element (token row b*len + t, head position) in [parts][batch][heads][padded_len][head_dim].
__device__ __forceinline__ int64_t head_index(int row, HeadPos pos, int batch, int len, int padded_len, int heads,
                                              int head_dim) {
  const int b = row / len, t = row - b * len;
  return (((static_cast<int64_t>(pos.part) * batch + b) * heads + pos.head) * padded_len + t) * head_dim +
         pos.offset;
}

template <typename T, typename I>
__global__ void split_heads_kernel(const T* qkv, const T* bias, I n, int batch, int len, int padded_len, int heads,
                                   int head_dim, int parts, T* out) {
  const int width = parts * heads * head_dim;
  // One thread per output element, padding rows included (written as 0).
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % head_dim);
    I rest = i / head_dim;
    const int t = static_cast<int>(rest % padded_len);
    rest /= padded_len;
    if (t >= len) {
      out[i] = from_f32<T>(0.0f);
      continue;
    }
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

// One thread per pack of the input [tokens, width], in input order (coalesced reads; each head's run of packs is
// a contiguous write). The bias is added in fp32 and rounded once, as in the scalar kernel.
template <typename T, typename I>
__global__ void split_heads_pack_kernel(const T* qkv, const T* bias, I packs, int batch, int len, int padded_len,
                                        int heads, int head_dim, int width, T* out) {
  constexpr int P = Pack<T>::size;
  const int row_packs = width / P;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < packs; i += I(gridDim.x) * blockDim.x) {
    const int row = static_cast<int>(i / row_packs);
    const int col = static_cast<int>(i - static_cast<I>(row) * row_packs) * P;
    float v[P];
    load_pack(qkv + static_cast<int64_t>(row) * width + col, v);
    if (bias) {
      float bv[P];
      load_pack(bias + col, bv);
#pragma unroll
      for (int k = 0; k < P; ++k) v[k] += bv[k];
    }
    store_pack(out + head_index(row, head_pos(col, heads, head_dim), batch, len, padded_len, heads, head_dim), v);
  }
}

template <typename T>
struct MergeHeads {  // out[token, col] = in[p][b][h][t][d]; returns the value for the bias gradient
  const T* in;
  T* out;
  int batch, len, padded_len, heads, head_dim, width;
  __device__ float operator()(int row, int col) const {
    const int b = row / len, t = row % len;
    const int p = col / (heads * head_dim), h = (col / head_dim) % heads, d = col % head_dim;
    const T v = in[(((static_cast<int64_t>(p) * batch + b) * heads + h) * padded_len + t) * head_dim + d];
    out[static_cast<int64_t>(row) * width + col] = v;
    return to_f32(v);
  }
};

// merge_heads without a bias gradient: one thread per pack of the output [tokens, width] (an exact copy).
template <typename T, typename I>
__global__ void merge_heads_pack_kernel(const T* in, I packs, int batch, int len, int padded_len, int heads,
                                        int head_dim, int width, T* out) {
  constexpr int P = Pack<T>::size;
  const int row_packs = width / P;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < packs; i += I(gridDim.x) * blockDim.x) {
    const int row = static_cast<int>(i / row_packs);
    const int col = static_cast<int>(i - static_cast<I>(row) * row_packs) * P;
    copy_pack(out + static_cast<int64_t>(row) * width + col,
              in + head_index(row, head_pos(col, heads, head_dim), batch, len, padded_len, heads, head_dim));
  }
}

// merge_heads with the bias gradient's first stage: block (kColTile, kColRowsPerPass) covers kColTile packs of
// columns and walks the rows of its chunk; each thread sums its pack's columns in fp32, the block adds its 8 row
// lanes in a fixed order and writes one partial per (chunk, column) for finish_column_sums.
template <typename T>
__global__ void merge_heads_pack_bias_kernel(const T* in, int tokens, int batch, int len, int padded_len, int heads,
                                             int head_dim, int width, int rows_per_chunk, T* out, float* partials) {
  constexpr int P = Pack<T>::size;
  constexpr int kTileCols = kColTile * P;
  __shared__ float shared[kColRowsPerPass][kTileCols];
  const int col = (blockIdx.x * kColTile + threadIdx.x) * P;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = min(tokens, r0 + rows_per_chunk);
  float sum[P];
#pragma unroll
  for (int k = 0; k < P; ++k) sum[k] = 0.0f;
  if (col < width) {
    const HeadPos pos = head_pos(col, heads, head_dim);
    for (int r = r0 + threadIdx.y; r < r1; r += kColRowsPerPass) {
      float v[P];  // bf16/fp16 -> fp32 -> bf16/fp16 is exact, so the stored copy equals the input
      load_pack(in + head_index(r, pos, batch, len, padded_len, heads, head_dim), v);
      store_pack(out + static_cast<int64_t>(r) * width + col, v);
#pragma unroll
      for (int k = 0; k < P; ++k) sum[k] += v[k];
    }
  }
#pragma unroll
  for (int k = 0; k < P; ++k) shared[threadIdx.y][threadIdx.x * P + k] = sum[k];
  __syncthreads();
  const int tid = threadIdx.y * kColTile + threadIdx.x;
  for (int c = tid; c < kTileCols; c += kColTile * kColRowsPerPass) {
    const int global = blockIdx.x * kTileCols + c;
    if (global >= width) continue;
    float total = 0.0f;
    for (int j = 0; j < kColRowsPerPass; ++j) total += shared[j][c];
    partials[static_cast<int64_t>(blockIdx.y) * width + global] = total;
  }
}

// ---- softmax ----
// Keys [0, valid) of a row take part: valid = min(k_lengths[b], k_len), and at most i + 1 when causal.
__device__ __forceinline__ int valid_keys(const int32_t* k_lengths, int64_t row, int heads, int q_len, int k_len,
                                          bool causal) {
  const int64_t b = row / (static_cast<int64_t>(heads) * q_len);
  const int i = static_cast<int>(row % q_len);
  int valid = k_len;
  if (k_lengths) valid = max(0, min(k_lengths[b], k_len));
  if (causal) valid = min(valid, i + 1);
  return valid;
}

// The first key of a row that takes part: key_starts[b*q_len + i] (0 without key_starts), at most `valid`.
__device__ __forceinline__ int first_key(const int32_t* key_starts, int64_t row, int heads, int q_len, int valid) {
  if (!key_starts) return 0;
  const int64_t b = row / (static_cast<int64_t>(heads) * q_len);
  const int i = static_cast<int>(row % q_len);
  return min(max(key_starts[b * q_len + i], 0), valid);
}

template <typename T>
__global__ void softmax_forward_kernel(const T* scores, const int32_t* k_lengths, int64_t rows, int heads, int q_len,
                                       int k_len, int ld, float scale, bool causal, const int32_t* key_starts,
                                       T* probs) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // whole warps leave together
  const int valid = valid_keys(k_lengths, row, heads, q_len, k_len, causal);
  const int first = first_key(key_starts, row, heads, q_len, valid);
  const T* s = scores + row * ld;
  T* p = probs + row * ld;
  // Keys [first, valid) take part; the rest and the padding up to ld get exactly 0; a row without keys is all
  // zeros, never NaN.
  float mx = -INFINITY;
  for (int j = first + lane; j < valid; j += 32) mx = fmaxf(mx, scale * to_f32(s[j]));
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int j = first + lane; j < valid; j += 32) sum += expf(scale * to_f32(s[j]) - mx);
  sum = warp_sum(sum);
  const float inv = valid > first ? 1.0f / sum : 0.0f;
  // probs may alias scores: each lane reads s[j] before writing p[j], for its own j only.
  for (int j = lane; j < ld; j += 32)
    p[j] = from_f32<T>(j >= first && j < valid ? expf(scale * to_f32(s[j]) - mx) * inv : 0.0f);
}

template <typename T>
__global__ void softmax_backward_kernel(const T* probs, const T* dprobs, int64_t rows, int k_len, int ld, float scale,
                                        T* dscores) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  const T* p = probs + row * ld;
  const T* dp = dprobs + row * ld;
  T* ds = dscores + row * ld;
  float dot = 0.0f;
  for (int j = lane; j < k_len; j += 32) dot += to_f32(p[j]) * to_f32(dp[j]);
  dot = warp_sum(dot);
  for (int j = lane; j < ld; j += 32)
    ds[j] = from_f32<T>(j < k_len ? scale * to_f32(p[j]) * (to_f32(dp[j]) - dot) : 0.0f);
}

// Packed softmax: `group` lanes (a power of two up to 32) per row, so that rows of a few packs (MT sentences of
// 10-100 keys) share a warp instead of leaving most lanes idle. Lane g of a group handles packs g, g + group, ...
// The group reductions use xor shuffles below `group`, which stay inside the group; every lane of the warp runs
// them (lanes past the last row with no keys), so the full mask is right.
__device__ __forceinline__ float group_max(float v, int group) {
  for (int offset = group >> 1; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float group_sum(float v, int group) {
  for (int offset = group >> 1; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void softmax_forward_pack_kernel(const T* scores, const int32_t* k_lengths, int64_t rows, int heads,
                                            int q_len, int k_len, int ld, int group, float scale, bool causal,
                                            const int32_t* key_starts, T* probs) {
  constexpr int P = Pack<T>::size;
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / group;
  const int lane = threadIdx.x & (group - 1);
  const bool live = row < rows;
  const int valid = live ? valid_keys(k_lengths, row, heads, q_len, k_len, causal) : 0;
  const int first = live ? first_key(key_starts, row, heads, q_len, valid) : 0;
  const auto in_row = [&](int j) { return j >= first && j < valid; };  // keys [first, valid) take part
  const int packs = ld / P;
  const T* s = scores + (live ? row : 0) * ld;
  T* p = probs + (live ? row : 0) * ld;
  // Values outside [first, valid) in a loaded pack (masked keys, padding that may hold anything) are never used.
  if (packs <= group) {  // rows of up to 32 packs (MT sentences): one pack per lane, read once, exp once
    const int c = lane;
    const bool has = c * P < valid;
    float v[P];
    float mx = -INFINITY;
    if (has) {
      load_pack(s + c * P, v);
#pragma unroll
      for (int k = 0; k < P; ++k)
        if (in_row(c * P + k)) mx = fmaxf(mx, scale * v[k]);
    }
    mx = group_max(mx, group);
    float sum = 0.0f;
    if (has) {
#pragma unroll
      for (int k = 0; k < P; ++k) {
        v[k] = in_row(c * P + k) ? expf(scale * v[k] - mx) : 0.0f;
        sum += v[k];
      }
    }
    sum = group_sum(sum, group);
    if (!live || c >= packs) return;
    const float inv = valid > first ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int k = 0; k < P; ++k) v[k] = has ? v[k] * inv : 0.0f;
    store_pack(p + c * P, v);
    return;
  }
  float mx = -INFINITY;
  for (int c = lane; c * P < valid; c += group) {
    float v[P];
    load_pack(s + c * P, v);
#pragma unroll
    for (int k = 0; k < P; ++k)
      if (in_row(c * P + k)) mx = fmaxf(mx, scale * v[k]);
  }
  mx = group_max(mx, group);
  float sum = 0.0f;
  for (int c = lane; c * P < valid; c += group) {
    float v[P];
    load_pack(s + c * P, v);
#pragma unroll
    for (int k = 0; k < P; ++k)
      if (in_row(c * P + k)) sum += expf(scale * v[k] - mx);
  }
  sum = group_sum(sum, group);
  if (!live) return;  // no shuffles below
  const float inv = valid > first ? 1.0f / sum : 0.0f;
  // probs may alias scores: a lane reads and then writes only its own packs.
  for (int c = lane; c < packs; c += group) {
    float v[P];
    if (c * P < valid) load_pack(s + c * P, v);
#pragma unroll
    for (int k = 0; k < P; ++k) v[k] = in_row(c * P + k) ? expf(scale * v[k] - mx) * inv : 0.0f;
    store_pack(p + c * P, v);
  }
}

template <typename T>
__global__ void softmax_backward_pack_kernel(const T* probs, const T* dprobs, int64_t rows, int k_len, int ld,
                                             int group, float scale, T* dscores) {
  constexpr int P = Pack<T>::size;
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / group;
  const int lane = threadIdx.x & (group - 1);
  const bool live = row < rows;
  const int keys = live ? k_len : 0;
  const int packs = ld / P;
  const T* p = probs + (live ? row : 0) * ld;
  const T* dp = dprobs + (live ? row : 0) * ld;
  T* ds = dscores + (live ? row : 0) * ld;
  if (packs <= group) {  // one pack per lane, read once
    const int c = lane;
    const bool has = c * P < keys;
    float pv[P], dv[P];
    float dot = 0.0f;
    if (has) {
      load_pack(p + c * P, pv);
      load_pack(dp + c * P, dv);
#pragma unroll
      for (int k = 0; k < P; ++k)
        if (c * P + k < keys) dot += pv[k] * dv[k];
    }
    dot = group_sum(dot, group);
    if (!live || c >= packs) return;
#pragma unroll
    for (int k = 0; k < P; ++k) pv[k] = has && c * P + k < keys ? scale * pv[k] * (dv[k] - dot) : 0.0f;
    store_pack(ds + c * P, pv);
    return;
  }
  float dot = 0.0f;
  for (int c = lane; c * P < keys; c += group) {
    float pv[P], dv[P];
    load_pack(p + c * P, pv);
    load_pack(dp + c * P, dv);
#pragma unroll
    for (int k = 0; k < P; ++k)
      if (c * P + k < keys) dot += pv[k] * dv[k];
  }
  dot = group_sum(dot, group);
  if (!live) return;
  // dscores may alias dprobs: a lane reads and then writes only its own packs.
  for (int c = lane; c < packs; c += group) {
    float pv[P], dv[P];
    if (c * P < keys) {
      load_pack(p + c * P, pv);
      load_pack(dp + c * P, dv);
    }
#pragma unroll
    for (int k = 0; k < P; ++k) pv[k] = c * P + k < keys ? scale * pv[k] * (dv[k] - dot) : 0.0f;
    store_pack(ds + c * P, pv);
  }
}

unsigned softmax_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// Lanes per row for the packed softmax: the smallest power of two covering the row's packs, at most a warp.
int softmax_group(int packs) {
  int group = 1;
  while (group < packs && group < 32) group *= 2;
  return group;
}

unsigned softmax_pack_blocks(int64_t rows, int group) {
  const int64_t rows_per_block = kSoftmaxThreads / group;
  return static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::split_heads(DType dt, const void* qkv, const void* bias, int batch, int len, int padded_len,
                              int heads, int head_dim, int parts, void* out) {
  if (batch < 0 || len < 0 || padded_len < len || heads < 0 || head_dim < 0 || parts < 1)
    fail("split_heads: invalid shape batch={} len={} padded_len={} heads={} head_dim={} parts={}", batch, len,
         padded_len, heads, head_dim, parts);
  const int64_t slices = static_cast<int64_t>(parts) * batch * heads;
  const int64_t n = slices * padded_len * head_dim;  // output elements, padding rows included
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(qkv);
    const T* b = static_cast<const T*>(bias);
    T* dst = static_cast<T*>(out);
    if (can_vectorize<T>(head_dim, src, b, dst)) {
      const int width = parts * heads * head_dim;
      const int64_t packs = static_cast<int64_t>(batch) * len * width / Pack<T>::size;  // of the input rows
      if (packs > 0)
        dispatch_index(packs, [&](auto index) {
          using I = decltype(index);
          split_heads_pack_kernel<T, I><<<grid_for(packs), kThreads, 0, stream_>>>(
              src, b, I(packs), batch, len, padded_len, heads, head_dim, width, dst);
        });
      if (padded_len > len) {  // the padding rows of every slice: one strided run of zero bytes each (0 in any type)
        const std::size_t pitch = static_cast<std::size_t>(padded_len) * head_dim * sizeof(T);
        LSEQ_CUDA_CHECK(cudaMemset2DAsync(dst + static_cast<int64_t>(len) * head_dim, pitch, 0,
                                          static_cast<std::size_t>(padded_len - len) * head_dim * sizeof(T),
                                          static_cast<std::size_t>(slices), stream_));
      }
      return;
    }
    dispatch_index(n, [&](auto index) {
      using I = decltype(index);
      split_heads_kernel<T, I><<<grid_for(n), kThreads, 0, stream_>>>(src, b, I(n), batch, len, padded_len, heads,
                                                                       head_dim, parts, dst);
    });
  });
  check_launch("split_heads");
}

void CudaBackend::merge_heads(DType dt, const void* in, int batch, int len, int padded_len, int heads, int head_dim,
                              int parts, void* out, float* dparam_bias) {
  if (batch < 0 || len < 0 || padded_len < len || heads < 0 || head_dim < 0 || parts < 1)
    fail("merge_heads: invalid shape batch={} len={} padded_len={} heads={} head_dim={} parts={}", batch, len,
         padded_len, heads, head_dim, parts);
  const int tokens = batch * len, width = parts * heads * head_dim;
  if (tokens == 0 || width == 0) return;
  bind();
  float* partials = dparam_bias ? scratch_floats() : nullptr;
  int chunks = 0;  // of the bias gradient's first stage
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    constexpr int P = Pack<T>::size;
    const T* src = static_cast<const T*>(in);
    T* dst = static_cast<T*>(out);
    if (can_vectorize<T>(head_dim, src, dst)) {
      if (!dparam_bias) {
        const int64_t packs = static_cast<int64_t>(tokens) * width / P;
        dispatch_index(packs, [&](auto index) {
          using I = decltype(index);
          merge_heads_pack_kernel<T, I><<<grid_for(packs), kThreads, 0, stream_>>>(
              src, I(packs), batch, len, padded_len, heads, head_dim, width, dst);
        });
        return;
      }
      // Planned as width / P columns of P values each: the scratch holds chunks * width floats either way.
      const ColumnPlan plan = plan_column_sums(tokens, width / P, P, scratch_float_count());
      chunks = plan.chunks;
      merge_heads_pack_bias_kernel<T><<<column_grid(width / P, plan), column_block(), 0, stream_>>>(
          src, tokens, batch, len, padded_len, heads, head_dim, width, plan.rows_per_chunk, dst, partials);
      return;
    }
    const ColumnPlan plan = plan_column_sums(tokens, width, 1, scratch_float_count());
    chunks = plan.chunks;
    const MergeHeads<T> op{src, dst, batch, len, padded_len, heads, head_dim, width};
    column_kernel<<<column_grid(width, plan), column_block(), 0, stream_>>>(op, tokens, width, plan.rows_per_chunk,
                                                                            partials);
  });
  check_launch("merge_heads");
  if (dparam_bias) finish_column_sums(partials, chunks, width, dparam_bias, "merge_heads");
}

void CudaBackend::attention_softmax_forward(DType dt, const void* scores, const int32_t* k_lengths, int batch,
                                            int heads, int q_len, int k_len, int ld, float scale, bool causal,
                                            void* probs, const int32_t* key_starts) {
  if (batch < 0 || heads < 0 || q_len < 0 || k_len < 0 || ld < k_len)
    fail("attention_softmax_forward: invalid shape batch={} heads={} q_len={} k_len={} ld={}", batch, heads, q_len,
         k_len, ld);
  const int64_t rows = static_cast<int64_t>(batch) * heads * q_len;
  if (rows == 0 || ld == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* s = static_cast<const T*>(scores);
    T* p = static_cast<T*>(probs);
    if (can_vectorize<T>(ld, s, p)) {
      const int group = softmax_group(ld / Pack<T>::size);
      softmax_forward_pack_kernel<T><<<softmax_pack_blocks(rows, group), kSoftmaxThreads, 0, stream_>>>(
          s, k_lengths, rows, heads, q_len, k_len, ld, group, scale, causal, key_starts, p);
      return;
    }
    softmax_forward_kernel<T><<<softmax_blocks(rows), 32 * kRowsPerBlock, 0, stream_>>>(
        s, k_lengths, rows, heads, q_len, k_len, ld, scale, causal, key_starts, p);
  });
  check_launch("attention_softmax_forward");
}

void CudaBackend::attention_softmax_backward(DType dt, const void* probs, const void* dprobs, int rows, int k_len,
                                             int ld, float scale, void* dscores) {
  if (rows < 0 || k_len < 0 || ld < k_len)
    fail("attention_softmax_backward: invalid shape rows={} k_len={} ld={}", rows, k_len, ld);
  if (rows == 0 || ld == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* p = static_cast<const T*>(probs);
    const T* dp = static_cast<const T*>(dprobs);
    T* ds = static_cast<T*>(dscores);
    if (can_vectorize<T>(ld, p, dp, ds)) {
      const int group = softmax_group(ld / Pack<T>::size);
      softmax_backward_pack_kernel<T><<<softmax_pack_blocks(rows, group), kSoftmaxThreads, 0, stream_>>>(
          p, dp, rows, k_len, ld, group, scale, ds);
      return;
    }
    softmax_backward_kernel<T><<<softmax_blocks(rows), 32 * kRowsPerBlock, 0, stream_>>>(p, dp, rows, k_len, ld,
                                                                                         scale, ds);
  });
  check_launch("attention_softmax_backward");
}

}  // namespace lseq::kernels

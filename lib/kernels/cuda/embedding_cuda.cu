// Embedding lookup + scale + positions + dropout in one pass, and its backward.
//
// The table gradient is deterministic and equals the CPU's bit for bit: both sum in the order of
// kernels/embedding_grad_order.h. The rows are stably sorted by token (CUB radix sort into the backend's scratch)
// and cut into windows of kEmbeddingGradWindow sorted rows; one block per window sums each token's rows of the
// window (rounded products, no fused multiply-add) and either adds the sum to the token's gradient row (the token
// lies within the window) or leaves it in scratch as a partial; a second pass adds the partials of tokens that
// span windows in window order. A token repeated thousands of times (padding) so costs thousands / 32 sequential
// additions instead of thousands. Only a batch too large for the scratch falls back to an fp32 atomicAdd scatter,
// whose sums over a repeated token may then differ in the last bits from run to run. The position gradient adds
// the batch in order per (position, column), as the CPU does.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"
#include "kernels/embedding_grad_order.h"

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

__global__ void iota_kernel(int32_t* values, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) values[i] = i;
}

constexpr int kWindow = kEmbeddingGradWindow;

// V consecutive fp32 values (V = 1, or a multiple of 4 as 16-byte packs).
template <int V>
__device__ __forceinline__ void load_floats(const float* src, float (&out)[V]) {
  if constexpr (V == 1) {
    out[0] = *src;
  } else {
#pragma unroll
    for (int q = 0; q < V; q += 4) {
      float part[4];
      load_pack<float>(src + q, part);
#pragma unroll
      for (int i = 0; i < 4; ++i) out[q + i] = part[i];
    }
  }
}

template <int V>
__device__ __forceinline__ void store_floats(float* dst, const float (&in)[V]) {
  if constexpr (V == 1) {
    *dst = in[0];
  } else {
#pragma unroll
    for (int q = 0; q < V; q += 4) {
      const float part[4] = {in[q], in[q + 1], in[q + 2], in[q + 3]};
      store_pack<float>(dst + q, part);
    }
  }
}

// V consecutive elements of T as fp32 (V = 1 or the 16-byte pack of T).
template <typename T, int V>
__device__ __forceinline__ void load_values(const T* src, float (&out)[V]) {
  if constexpr (V == 1)
    out[0] = to_f32(*src);
  else
    load_pack<T>(src, out);
}

// The windows are processed in rounds [w0, w1) whose partials fit the scratch (usually one round). Partial slots
// are per window of the round: slot 2(w - w0) holds the sum of the window's first token when that token continues
// from the previous window, slot 2(w - w0) + 1 that of its last token when it starts in the window and continues
// into the next. Rounds run in stream order, and each adds its partials to dtable in window order, so the sum of a
// token's rows is the same sequence of additions whatever the rounds.
//
// Pass 1: block b sums the sorted rows of window w = w0 + b, token by token; each thread owns V columns at a
// time. A token's sum goes straight into dtable when all its rows are in this window (this block is then the only
// writer of that row), else into its slot.
template <typename T, int V>
__global__ void embedding_table_grad_windows_kernel(const int32_t* sorted_tokens, const int32_t* sorted_rows,
                                                    int rows, int w0, int dim, float scale, DeviceMask mask,
                                                    const T* dout, float* dtable, float* partials) {
  __shared__ int32_t tok[kWindow], row[kWindow];
  const int begin = (w0 + static_cast<int>(blockIdx.x)) * kWindow;
  const int count = min(kWindow, rows - begin);
  for (int j = threadIdx.x; j < count; j += blockDim.x) {
    tok[j] = sorted_tokens[begin + j];
    row[j] = sorted_rows[begin + j];
  }
  __syncthreads();
  const int32_t before = begin > 0 ? sorted_tokens[begin - 1] : -1;
  const int32_t after = begin + count < rows ? sorted_tokens[begin + count] : -1;
  float* first_slot = partials + 2 * static_cast<int64_t>(blockIdx.x) * dim;
  float* last_slot = first_slot + dim;
  for (int d0 = threadIdx.x * V; d0 < dim; d0 += blockDim.x * V) {
    for (int j = 0; j < count;) {
      const int32_t token = tok[j];
      int end = j + 1;
      while (end < count && tok[end] == token) ++end;
      float acc[V];
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] = 0.0f;
#pragma unroll 4
      for (int r = j; r < end; ++r) {
        const int64_t e = static_cast<int64_t>(row[r]) * dim + d0;
        float v[V];
        load_values<T, V>(dout + e, v);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = __fadd_rn(acc[i], __fmul_rn(scale, __fmul_rn(v[i], mask(e + i))));
      }
      if (j == 0 && token == before) {
        store_floats<V>(first_slot + d0, acc);
      } else if (end == count && token == after) {
        store_floats<V>(last_slot + d0, acc);
      } else {
        float* dst = dtable + static_cast<int64_t>(token) * dim + d0;
        float old[V];
        load_floats<V>(dst, old);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = __fadd_rn(old[i], acc[i]);
        store_floats<V>(dst, acc);
      }
      j = end;
    }
  }
}

// dtable[token] += the slot `first` (a partial of window w), then the first-token slots of the following windows
// of the round that begin with the same token, in window order.
template <int V>
__device__ void add_token_partials(const int32_t* sorted_tokens, int w, int w0, int w1, int dim, int32_t token,
                                   const float* first, const float* partials, float* dtable) {
  // The windows after w that begin with this token are consecutive (sorted rows): count them with the whole
  // block, so that the summation below has no dependent loads.
  int more = 0;
  for (int base = w + 1;; base += blockDim.x) {
    const int x = base + threadIdx.x;
    const int same = __syncthreads_count(x < w1 && sorted_tokens[x * kWindow] == token);
    more += same;
    if (same < static_cast<int>(blockDim.x)) break;
  }
  for (int d0 = threadIdx.x * V; d0 < dim; d0 += blockDim.x * V) {
    float* dst = dtable + static_cast<int64_t>(token) * dim + d0;
    float acc[V], p[V];
    load_floats<V>(dst, acc);
    load_floats<V>(first + d0, p);
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = __fadd_rn(acc[i], p[i]);
#pragma unroll 8
    for (int k = 1; k <= more; ++k) {
      load_floats<V>(partials + 2 * static_cast<int64_t>(w + k - w0) * dim + d0, p);
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] = __fadd_rn(acc[i], p[i]);
    }
    store_floats<V>(dst, acc);
  }
}

// Pass 2: block b, window w = w0 + b, adds the round's partials of (a) the token continuing into the round from
// before it, when w == w0, and (b) the token starting in w and continuing past it. (a) and (b) are different
// tokens (different rows of dtable); every token with partials in the round is so handled by one block.
template <int V>
__global__ void embedding_table_grad_merge_kernel(const int32_t* sorted_tokens, int rows, int w0, int w1, int dim,
                                                  const float* partials, float* dtable) {
  const int w = w0 + static_cast<int>(blockIdx.x);
  const int begin = w * kWindow, end = min(begin + kWindow, rows);
  const float* slots = partials + 2 * static_cast<int64_t>(blockIdx.x) * dim;
  const int32_t first_token = sorted_tokens[begin];
  if (w == w0 && begin > 0 && sorted_tokens[begin - 1] == first_token)
    add_token_partials<V>(sorted_tokens, w, w0, w1, dim, first_token, slots, partials, dtable);
  const int32_t last_token = sorted_tokens[end - 1];
  if (end < rows && sorted_tokens[end] == last_token && (begin == 0 || sorted_tokens[begin - 1] != last_token))
    add_token_partials<V>(sorted_tokens, w, w0, w1, dim, last_token, slots + dim, partials, dtable);
}

// Both passes over all windows, in rounds of `round` windows (the partials that fit the scratch).
template <typename T, int V>
void launch_table_grad_windows(const int32_t* sorted_tokens, const int32_t* sorted_rows, int rows, int dim,
                               float scale, const DeviceMask& mask, const T* dout, float* dtable, float* partials,
                               int round, cudaStream_t stream) {
  const int windows = (rows + kWindow - 1) / kWindow;
  const int threads = std::min(256, ((dim / V) + 31) / 32 * 32);
  constexpr int MV = V == 1 ? 1 : 4;  // partials are fp32: 16-byte packs of 4
  const int merge_threads = std::min(256, ((dim / MV) + 31) / 32 * 32);
  for (int w0 = 0; w0 < windows; w0 += round) {
    const int w1 = std::min(windows, w0 + round);
    embedding_table_grad_windows_kernel<T, V><<<w1 - w0, threads, 0, stream>>>(
        sorted_tokens, sorted_rows, rows, w0, dim, scale, mask, dout, dtable, partials);
    embedding_table_grad_merge_kernel<MV><<<w1 - w0, merge_threads, 0, stream>>>(sorted_tokens, rows, w0, w1, dim,
                                                                                 partials, dtable);
  }
}

template <typename T>
__global__ void embedding_position_grad_kernel(int batch, int len, int dim, DeviceMask mask, const T* dout,
                                               float* dpositions) {
  const int64_t n = static_cast<int64_t>(len) * dim;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < n; j += int64_t(gridDim.x) * blockDim.x) {
    float acc = dpositions[j];
    for (int b = 0; b < batch; ++b) {
      const int64_t i = static_cast<int64_t>(b) * n + j;  // row b*len + t, column d: (b*len+t)*dim + d
      acc = __fadd_rn(acc, __fmul_rn(to_f32(dout[i]), mask(i)));
    }
    dpositions[j] = acc;
  }
}

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

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
  // Stable sort of (token, row) pairs into scratch: [sorted tokens][row ids][sorted row ids][CUB temporary]
  // [window partials].
  bool sorted = false;
  int32_t *sorted_tokens = nullptr, *sorted_rows = nullptr;
  float* partials = nullptr;
  int round = 0;
  if (dparam_table && rows <= INT32_MAX - kWindow) {
    const int n = static_cast<int>(rows);
    const std::size_t ids = align256(static_cast<std::size_t>(n) * sizeof(int32_t));
    std::size_t temp_bytes = 0;
    check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, static_cast<int32_t*>(nullptr),
                                               static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n,
                                               0, 31, stream_),
               "embedding_backward (sort size)");
    // The rest of the scratch holds the partials of a round of windows (two rows of dim floats per window).
    const std::size_t used = 3 * ids + align256(temp_bytes);
    const std::size_t slot_bytes = 2 * static_cast<std::size_t>(dim) * sizeof(float);
    const std::size_t windows = (static_cast<std::size_t>(n) + kWindow - 1) / kWindow;
    if (used < kScratchBytes && (kScratchBytes - used) / slot_bytes >= 1) {
      round = static_cast<int>(std::min(windows, (kScratchBytes - used) / slot_bytes));
      char* base = static_cast<char*>(scratch_);
      sorted_tokens = reinterpret_cast<int32_t*>(base);
      auto* row_ids = reinterpret_cast<int32_t*>(base + ids);
      sorted_rows = reinterpret_cast<int32_t*>(base + 2 * ids);
      void* sort_temp = base + 3 * ids;
      partials = reinterpret_cast<float*>(base + used);
      iota_kernel<<<grid_for(n), kThreads, 0, stream_>>>(row_ids, n);
      check_launch("embedding_backward (row ids)");
      check_cuda(cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, tokens, sorted_tokens, row_ids, sorted_rows,
                                                 n, 0, 31, stream_),
                 "embedding_backward (sort by token)");
      sorted = true;
    }
  }
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(dout);
    if (dparam_table && sorted) {
      const int n = static_cast<int>(rows);
      if (can_vectorize<T>(dim, g, dparam_table))
        launch_table_grad_windows<T, Pack<T>::size>(sorted_tokens, sorted_rows, n, dim, scale, mask, g, dparam_table,
                                                    partials, round, stream_);
      else
        launch_table_grad_windows<T, 1>(sorted_tokens, sorted_rows, n, dim, scale, mask, g, dparam_table, partials,
                                        round, stream_);
    }
    else if (dparam_table)
      dispatch_index(rows * dim, [&](auto index) {
        using I = decltype(index);
        embedding_table_grad_kernel<T, I><<<grid_for(rows * dim), kThreads, 0, stream_>>>(tokens, I(rows * dim), I(dim),
                                                                                          scale, mask, g, dparam_table);
      });
    if (dparam_positions)
      embedding_position_grad_kernel<T><<<grid_for(static_cast<int64_t>(len) * dim), kThreads, 0, stream_>>>(
          batch, len, dim, mask, g, dparam_positions);
  });
  check_launch("embedding_backward");
}

}  // namespace lseq::kernels

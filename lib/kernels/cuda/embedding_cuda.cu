// Embedding lookup + scale + positions + dropout in one pass, and its backward.
//
// The table gradient is deterministic and equals the CPU's bit for bit: the rows are stably sorted by token (CUB
// radix sort into the backend's scratch), and one block per distinct token adds its rows' contributions in the
// original row order with the CPU's rounding (no fused multiply-add), column by column. Only a batch too large for
// the scratch falls back to an fp32 atomicAdd scatter, whose sums over a repeated token may then differ in the
// last bits from run to run. The position gradient adds the batch in order per (position, column), as the CPU does.
#include <cub/device/device_radix_sort.cuh>

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

__global__ void iota_kernel(int32_t* values, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) values[i] = i;
}

// Block i of the sorted rows: if it starts a token's run, add that run's rows into the token's gradient row.
template <typename T>
__global__ void embedding_table_grad_sorted_kernel(const int32_t* sorted_tokens, const int32_t* sorted_rows, int rows,
                                                   int dim, float scale, DeviceMask mask, const T* dout,
                                                   float* dtable) {
  const int i = blockIdx.x;
  const int32_t token = sorted_tokens[i];
  if (i > 0 && sorted_tokens[i - 1] == token) return;
  int end = i + 1;
  while (end < rows && sorted_tokens[end] == token) ++end;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) {
    float* dst = dtable + static_cast<int64_t>(token) * dim + d;
    float acc = *dst;
#pragma unroll 4
    for (int j = i; j < end; ++j) {
      const int64_t e = static_cast<int64_t>(sorted_rows[j]) * dim + d;
      acc = __fadd_rn(acc, __fmul_rn(scale, __fmul_rn(to_f32(dout[e]), mask(e))));
    }
    *dst = acc;
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
  // Stable sort of (token, row) pairs into scratch: [sorted tokens][row ids][sorted row ids][CUB temporary].
  bool sorted = false;
  int32_t *sorted_tokens = nullptr, *sorted_rows = nullptr;
  if (dparam_table && rows <= INT32_MAX) {
    const int n = static_cast<int>(rows);
    const std::size_t ids = align256(static_cast<std::size_t>(n) * sizeof(int32_t));
    std::size_t temp_bytes = 0;
    check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, static_cast<int32_t*>(nullptr),
                                               static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n,
                                               0, 31, stream_),
               "embedding_backward (sort size)");
    if (3 * ids + temp_bytes <= kScratchBytes) {
      char* base = static_cast<char*>(scratch_);
      sorted_tokens = reinterpret_cast<int32_t*>(base);
      auto* row_ids = reinterpret_cast<int32_t*>(base + ids);
      sorted_rows = reinterpret_cast<int32_t*>(base + 2 * ids);
      iota_kernel<<<grid_for(n), kThreads, 0, stream_>>>(row_ids, n);
      check_launch("embedding_backward (row ids)");
      check_cuda(cub::DeviceRadixSort::SortPairs(base + 3 * ids, temp_bytes, tokens, sorted_tokens, row_ids,
                                                 sorted_rows, n, 0, 31, stream_),
                 "embedding_backward (sort by token)");
      sorted = true;
    }
  }
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(dout);
    if (dparam_table && sorted)
      embedding_table_grad_sorted_kernel<T>
          <<<static_cast<unsigned>(rows), std::min(256, (dim + 31) / 32 * 32), 0, stream_>>>(
              sorted_tokens, sorted_rows, static_cast<int>(rows), dim, scale, mask, g, dparam_table);
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

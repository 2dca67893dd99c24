// Elementwise ops of the CUDA backend: fill, add, scale, cast (bit-exact with the CPU), sum, dropout, and the
// strided row gather of decoding.
#include "kernels/cpu/float_convert.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/float_convert.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

template <typename U>
__global__ void fill_kernel(U* x, std::size_t n, U value) {
  for (std::size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    x[i] = value;
}

// The same over 16-byte stores when x is 16-byte aligned; block 0 writes the last n % (16 / sizeof(U)) elements.
template <typename U>
__global__ void fill_pack_kernel(U* x, std::size_t n, U value) {
  constexpr int per_pack = 16 / sizeof(U);
  uint4 pattern;
  U* lanes = reinterpret_cast<U*>(&pattern);
#pragma unroll
  for (int k = 0; k < per_pack; ++k) lanes[k] = value;
  const std::size_t packs = n / per_pack;
  uint4* x4 = reinterpret_cast<uint4*>(x);
  for (std::size_t q = blockIdx.x * size_t(blockDim.x) + threadIdx.x; q < packs; q += size_t(gridDim.x) * blockDim.x)
    x4[q] = pattern;
  if (blockIdx.x == 0 && threadIdx.x < n - packs * per_pack) x[packs * per_pack + threadIdx.x] = value;
}

template <typename U>
void launch_fill(cudaStream_t stream, U* x, std::size_t n, U value) {
  if (aligned16(x))
    fill_pack_kernel<U><<<grid_for(n / (16 / sizeof(U)) + 1), kThreads, 0, stream>>>(x, n, value);
  else
    fill_kernel<U><<<grid_for(n), kThreads, 0, stream>>>(x, n, value);
}

template <typename T>
__global__ void add_kernel(const T* a, const T* b, std::size_t n, T* y) {
  for (std::size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

template <typename T>
__global__ void scale_kernel(const T* x, std::size_t n, float alpha, T* y) {
  for (std::size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(alpha * to_f32(x[i]));
}

__device__ __forceinline__ float load_any(DType dt, const void* p, std::size_t i) {
  switch (dt) {
    case DType::f16: return f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16: return bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

// Widen to fp32 (exact), then narrow once with the CPU's rounding: every pair, fp16 <-> bf16 included.
__global__ void cast_kernel(DType src_dt, const void* src, DType dst_dt, void* dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float v = load_any(src_dt, src, i);
    switch (dst_dt) {
      case DType::f32: static_cast<float*>(dst)[i] = v; break;
      case DType::f16: static_cast<uint16_t*>(dst)[i] = f32_to_f16_bits(v); break;
      case DType::bf16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16_bits(v); break;
    }
  }
}

template <typename T>
__global__ void dropout_kernel(const T* x, std::size_t n, DeviceMask mask, T* y) {
  for (std::size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(to_f32(x[i]) * mask(static_cast<int64_t>(i)));
}

struct LoadValue {
  const float* x;
  __device__ double operator()(std::size_t i) const { return static_cast<double>(x[i]); }
};

struct StoreSum {
  float* out;
  bool accumulate;
  __device__ void operator()(double s) const { out[0] = static_cast<float>(accumulate ? out[0] + s : s); }
};

// Copies rows in units U of 2, 4, 8 or 16 bytes (the widest that the row length, both strides and both pointers allow;
// src_stride, dst_stride and row_units are in units). Block (x, y): threadIdx.y picks one of blockDim.y rows,
// threadIdx.x walks the units of that row, so short rows (a head's keys) still fill the block and no thread
// divides per element.
template <typename U>
__global__ void gather_rows_kernel(const U* src, int64_t src_stride, const int32_t* index, int rows, int64_t row_units,
                                   U* dst, int64_t dst_stride, const int32_t* dst_index) {
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < rows; r += int64_t(gridDim.y) * blockDim.y) {
    const int64_t i = index ? index[r] : r;
    const U* s = src + i * src_stride;
    U* d = dst + (dst_index ? dst_index[r] : r) * dst_stride;
    for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < row_units;
         e += int64_t(gridDim.x) * blockDim.x)
      d[e] = s[e];
  }
}

template <typename U>
void launch_gather_rows(cudaStream_t stream, const void* src, int64_t src_stride_bytes, const int32_t* index, int rows,
                        int64_t row_bytes, void* dst, int64_t dst_stride_bytes, const int32_t* dst_index) {
  const int64_t unit = sizeof(U), row_units = row_bytes / unit;
  int tx = 32;
  while (tx < kThreads && tx < row_units) tx *= 2;
  const int ty = kThreads / tx;
  const dim3 block(static_cast<unsigned>(tx), static_cast<unsigned>(ty));
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((row_units + tx - 1) / tx, 1024)),
                  static_cast<unsigned>(std::min<int64_t>((rows + ty - 1) / ty, 65535)));
  gather_rows_kernel<U><<<grid, block, 0, stream>>>(static_cast<const U*>(src), src_stride_bytes / unit, index, rows,
                                                    row_units, static_cast<U*>(dst), dst_stride_bytes / unit,
                                                    dst_index);
}

// The widest unit (16, 8, 4 or 2 bytes) that divides every byte count and aligns both pointers.
int gather_unit_bytes(const void* src, int64_t src_stride_bytes, int64_t row_bytes, const void* dst,
                      int64_t dst_stride_bytes) {
  const uint64_t bits = static_cast<uint64_t>(reinterpret_cast<std::uintptr_t>(src)) |
                        static_cast<uint64_t>(reinterpret_cast<std::uintptr_t>(dst)) |
                        static_cast<uint64_t>(src_stride_bytes) | static_cast<uint64_t>(dst_stride_bytes) |
                        static_cast<uint64_t>(row_bytes);
  for (int unit = 16; unit > 2; unit /= 2)
    if ((bits & static_cast<uint64_t>(unit - 1)) == 0) return unit;
  return 2;
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::fill(DType dt, void* x, std::size_t n, float value) {
  if (n == 0) return;
  bind();
  if (dt == DType::f32) {
    launch_fill<float>(stream_, static_cast<float*>(x), n, value);
  } else {
    const uint16_t bits = dt == DType::f16 ? float_to_f16(value) : float_to_bf16(value);  // the CPU's rounding
    launch_fill<uint16_t>(stream_, static_cast<uint16_t*>(x), n, bits);
  }
  check_launch("fill");
}

void CudaBackend::add(DType dt, const void* a, const void* b, std::size_t n, void* y) {
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_for(n), kThreads, 0, stream_>>>(static_cast<const T*>(a), static_cast<const T*>(b), n,
                                                         static_cast<T*>(y));
  });
  check_launch("add");
}

void CudaBackend::scale(DType dt, const void* x, std::size_t n, float alpha, void* y) {
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid_for(n), kThreads, 0, stream_>>>(static_cast<const T*>(x), n, alpha, static_cast<T*>(y));
  });
  check_launch("scale");
}

void CudaBackend::cast(DType src_dt, const void* src, DType dst_dt, void* dst, std::size_t n) {
  if (n == 0) return;
  if (src_dt == dst_dt) {
    copy(dst, src, n * dtype_size(src_dt));
    return;
  }
  bind();
  cast_kernel<<<grid_for(n), kThreads, 0, stream_>>>(src_dt, src, dst_dt, dst, n);
  check_launch("cast");
}

void CudaBackend::reduce_sum(const float* x, std::size_t n, float* out, bool accumulate) {
  bind();
  const int blocks = sum_blocks(n);
  auto* partials = static_cast<double*>(scratch_);
  sum_partials_kernel<<<blocks, kThreads, 0, stream_>>>(LoadValue{x}, n, partials);
  check_launch("reduce_sum");
  sum_finish_kernel<<<1, 1024, 0, stream_>>>(partials, blocks, StoreSum{out, accumulate});
  check_launch("reduce_sum");
}

void CudaBackend::dropout(DType dt, const void* x, std::size_t n, const Dropout& drop, void* y) {
  const DeviceMask mask = make_mask(drop, "dropout");
  if (drop.p == 0.0f) {
    copy(y, x, n * dtype_size(dt));
    return;
  }
  if (n == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    dropout_kernel<T><<<grid_for(n), kThreads, 0, stream_>>>(static_cast<const T*>(x), n, mask, static_cast<T*>(y));
  });
  check_launch("dropout");
}

// Indices live on the device: they are not validated here (that would need a host round-trip).
void CudaBackend::gather_rows(DType dt, const void* src, int64_t src_stride, const int32_t* index, int rows,
                              int64_t row_elems, void* dst, int64_t dst_stride, const int32_t* dst_index) {
  if (rows < 0 || row_elems < 0 || src_stride < row_elems || dst_stride < row_elems)
    fail("gather_rows: invalid shape rows={} row_elems={} src_stride={} dst_stride={}", rows, row_elems, src_stride,
         dst_stride);
  if (rows == 0 || row_elems == 0) return;
  bind();
  const int64_t elem = static_cast<int64_t>(dtype_size(dt));
  const int64_t src_bytes = src_stride * elem, dst_bytes = dst_stride * elem, row_bytes = row_elems * elem;
  auto launch = [&](auto unit) {
    launch_gather_rows<decltype(unit)>(stream_, src, src_bytes, index, rows, row_bytes, dst, dst_bytes, dst_index);
  };
  switch (gather_unit_bytes(src, src_bytes, row_bytes, dst, dst_bytes)) {
    case 16: launch(uint4{}); break;
    case 8: launch(uint2{}); break;
    case 4: launch(uint32_t{}); break;
    default: launch(uint16_t{}); break;
  }
  check_launch("gather_rows");
}

}  // namespace lseq::kernels

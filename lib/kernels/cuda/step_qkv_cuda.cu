// split_step_qkv: a decoding step's projected q|k|v rows split by head with their bias, the queries to their own
// buffer and the keys and values straight into the self-attention cache (one launch instead of split_heads and the
// append's gather_rows). One thread per 16-byte pack where head_dim allows, else per element.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

// A chunk of W elements (1, or a pack of P), widened to fp32 and stored back.
template <typename T, int W>
__device__ __forceinline__ void load_chunk(const T* p, float (&out)[W]) {
  if constexpr (W == 1)
    out[0] = to_f32(p[0]);
  else
    load_pack(p, out);
}
template <typename T, int W>
__device__ __forceinline__ void store_chunk(T* p, const float (&in)[W]) {
  if constexpr (W == 1)
    p[0] = from_f32<T>(in[0]);
  else
    store_pack(p, in);
}

template <typename T, int W>
__global__ void split_step_qkv_kernel(const T* qkv, const T* bias, int64_t chunks, int heads, int head_dim, T* q,
                                      T* cache, const int32_t* append_dst, int64_t slices) {
  const int dim = heads * head_dim, row_chunks = 3 * dim / W;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < chunks; g += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = g / row_chunks;
    const int col = static_cast<int>(g - r * row_chunks) * W;  // in [0, 3 dim)
    const int part = col / dim, h = (col - part * dim) / head_dim, e = col % head_dim;
    float v[W];
    load_chunk<T, W>(qkv + r * 3 * dim + col, v);
    if (bias) {
      float b[W];
      load_chunk<T, W>(bias + col, b);
#pragma unroll
      for (int k = 0; k < W; ++k) v[k] += b[k];
    }
    const int64_t slice = r * heads + h;
    T* dst = part == 0 ? q + slice * head_dim
                       : cache + static_cast<int64_t>(append_dst[(part - 1) * slices + slice]) * head_dim;
    store_chunk<T, W>(dst + e, v);
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::split_step_qkv(DType dt, const void* qkv, const void* bias, int rows, int heads, int head_dim,
                                 void* q, void* cache, const int32_t* append_dst) {
  using namespace cuda;
  if (rows < 0 || heads < 0 || head_dim < 0)
    fail("split_step_qkv: invalid shape rows={} heads={} head_dim={}", rows, heads, head_dim);
  const int64_t slices = static_cast<int64_t>(rows) * heads, elements = 3 * slices * head_dim;
  if (elements == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto* in = static_cast<const T*>(qkv);
    const auto* b = static_cast<const T*>(bias);
    auto* pq = static_cast<T*>(q);
    auto* pc = static_cast<T*>(cache);
    constexpr int P = Pack<T>::size;
    if (can_vectorize<T>(head_dim, in, b, pq, pc))
      split_step_qkv_kernel<T, P><<<grid_for(elements / P), kThreads, 0, stream_>>>(
          in, b, elements / P, heads, head_dim, pq, pc, append_dst, slices);
    else
      split_step_qkv_kernel<T, 1>
          <<<grid_for(elements), kThreads, 0, stream_>>>(in, b, elements, heads, head_dim, pq, pc, append_dst, slices);
  });
  check_launch("split_step_qkv");
}

}  // namespace lseq::kernels

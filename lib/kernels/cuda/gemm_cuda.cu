// GEMM of the CUDA backend through cuBLAS: row-major C = alpha op(A) op(B) + beta C is the column-major product
// C^T = op(B)^T op(A)^T, so A and B swap places. fp32 accumulation always (CUBLAS_COMPUTE_32F; TF32 only when the
// backend was made with allow_tf32). A single product runs through a cuBLASLt plan (matmul_plans_cuda.cpp: one
// algorithm per class of row counts); strided batches map to cublasGemmStridedBatchedEx; an index_b batch builds
// the pointer arrays on the device (no host round-trip) and calls cublasGemmBatchedEx.
#include <algorithm>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

// k == 0: C = beta * C (exact zeros when beta == 0, whatever C held).
template <typename T>
__global__ void scale_c_kernel(T* c, int m, int n, int ldc, int64_t stride_c, int batch, float beta) {
  const int64_t per = static_cast<int64_t>(m) * n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < per * batch;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / per, r = (i % per) / n, col = i % n;
    T& x = c[b * stride_c + r * ldc + col];
    x = beta == 0.0f ? from_f32<T>(0.0f) : from_f32<T>(beta * to_f32(x));
  }
}

// Column-major operands of the swapped product: first = B (indexed), second = A, out = C.
__global__ void pointer_arrays_kernel(const char* a, int64_t stride_a_bytes, const char* b, int64_t stride_b_bytes,
                                      const int32_t* index_b, char* c, int64_t stride_c_bytes, int batch,
                                      const void** first, const void** second, void** out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch) return;
  first[i] = b + static_cast<int64_t>(index_b[i]) * stride_b_bytes;
  second[i] = a + static_cast<int64_t>(i) * stride_a_bytes;
  out[i] = c + static_cast<int64_t>(i) * stride_c_bytes;
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::gemm(const GemmArgs& g) {
  const bool types_ok = g.ab == g.c_type || (g.ab != DType::f32 && g.c_type == DType::f32);
  if (!types_ok)
    fail("gemm: {} operands with a {} result are not supported (use {} or fp32 results)", dtype_name(g.ab),
         dtype_name(g.c_type), dtype_name(g.ab));
  check_gemm_shape(g);
  if (g.m == 0 || g.n == 0) return;
  bind();
  if (g.k == 0) {
    const int64_t total = static_cast<int64_t>(g.m) * g.n * g.batch;
    dispatch(g.c_type, [&](auto tag) {
      using T = decltype(tag);
      scale_c_kernel<T><<<grid_for(total), kThreads, 0, stream_>>>(static_cast<T*>(g.c), g.m, g.n, g.ldc, g.stride_c,
                                                                   g.batch, g.beta);
    });
    check_launch("gemm (k = 0)");
    return;
  }
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // B^T in column-major terms
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // A^T
  const cudaDataType_t ab = cuda_type(g.ab), ct = cuda_type(g.c_type);
  const cublasComputeType_t compute =
      allow_tf32_ && g.ab == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float alpha = g.alpha, beta = g.beta;
  if (!g.index_b && g.batch == 1) {
    single_gemm(g);
    return;
  }
  if (!g.index_b) {
    check_cublas(cublasGemmStridedBatchedEx(cublas_, op_first, op_second, g.n, g.m, g.k, &alpha, g.b, ab, g.ldb,
                                            g.stride_b, g.a, ab, g.lda, g.stride_a, &beta, g.c, ct, g.ldc, g.stride_c,
                                            g.batch, compute, CUBLAS_GEMM_DEFAULT),
                 "gemm (cublasGemmStridedBatchedEx)");
    return;
  }
  if (static_cast<std::size_t>(g.batch) * 3 * sizeof(void*) > kScratchBytes)
    fail("gemm: an indexed batch of {} products exceeds the CUDA backend's scratch", g.batch);
  auto** first = static_cast<const void**>(scratch_);
  auto** second = first + g.batch;
  auto** out = const_cast<void**>(second + g.batch);
  const int64_t ab_size = static_cast<int64_t>(dtype_size(g.ab)), c_size = static_cast<int64_t>(dtype_size(g.c_type));
  pointer_arrays_kernel<<<(g.batch + 127) / 128, 128, 0, stream_>>>(
      static_cast<const char*>(g.a), g.stride_a * ab_size, static_cast<const char*>(g.b), g.stride_b * ab_size,
      g.index_b, static_cast<char*>(g.c), g.stride_c * c_size, g.batch, first, second, out);
  check_launch("gemm (index_b pointer arrays)");
  check_cublas(cublasGemmBatchedEx(cublas_, op_first, op_second, g.n, g.m, g.k, &alpha, first, ab, g.ldb, second, ab,
                                   g.lda, &beta, out, ct, g.ldc, g.batch, compute, CUBLAS_GEMM_DEFAULT),
               "gemm (cublasGemmBatchedEx)");
}

}  // namespace lseq::kernels

// What programmatic dependent launch (PDL, sm_90) would save between a decoding step's small dependent kernels in a
// CUDA graph. A GPT-2 step at 128 prompts is 115 launches, most of them 3-7 us; each waits for the previous one to
// finish and drain before its blocks start. With PDL a kernel's blocks may start while the previous kernel runs and
// wait (griddepcontrol.wait) before reading its output. Not part of the build; on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/dependent_launch_gaps.cu -o /tmp/pdl -lcublasLt && /tmp/pdl
// Chains timed (CUDA graph, 24 launches, 40 replays, median per launch): a LayerNorm-sized kernel (128 rows x 768
// bf16, a warp a row) after itself, plain and with PDL; and a cuBLASLt product [128 x 768] x [768 x 768]^T
// followed by that kernel, plain and with the kernel launched with PDL.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_util.h"

constexpr int kRows = 128, kCols = 768;

// y = x normalised (a warp a row, fp32 sums): the shape of decoding's residual + LayerNorm. With kDependent the
// kernel lets its successor launch at once and waits for its predecessor before reading.
template <bool kDependent>
__global__ void row_norm(const __nv_bfloat16* x, __nv_bfloat16* y) {
  if constexpr (kDependent) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  const int row = blockIdx.x * 4 + threadIdx.x / 32, lane = threadIdx.x % 32;
  float v[kCols / 32], s = 0.0f, sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kCols / 32; ++i) s += v[i] = __bfloat162float(x[row * kCols + i * 32 + lane]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  const float mean = s / kCols;
#pragma unroll
  for (int i = 0; i < kCols / 32; ++i) sq += (v[i] - mean) * (v[i] - mean);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, o);
  const float rstd = rsqrtf(sq / kCols + 1e-5f);
#pragma unroll
  for (int i = 0; i < kCols / 32; ++i) y[row * kCols + i * 32 + lane] = __float2bfloat16((v[i] - mean) * rstd);
}

void launch_norm(bool dependent, const __nv_bfloat16* x, __nv_bfloat16* y, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kRows / 4);
  config.blockDim = dim3(128);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  if (dependent)
    CHECK(cudaLaunchKernelEx(&config, row_norm<true>, x, y));
  else
    CHECK(cudaLaunchKernelEx(&config, row_norm<false>, x, y));
}

int main() {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  __nv_bfloat16 *a, *b, *w;
  CHECK(cudaMalloc(&a, kRows * kCols * 2));
  CHECK(cudaMalloc(&b, kRows * kCols * 2));
  CHECK(cudaMalloc(&w, kCols * kCols * 2));
  fill_random(a, kRows * kCols, 1, 0.2f);
  fill_random(w, kCols * kCols, 2, 0.2f);
  CHECK(cudaDeviceSynchronize());
  constexpr int kChain = 24;
  for (bool dependent : {false, true}) {
    const float us =
        graph_launch_us(stream, kChain, [&](int i) { launch_norm(dependent, i % 2 ? b : a, i % 2 ? a : b, stream); });
    std::printf("norm after norm, %s: %.2f us a launch\n", dependent ? "PDL" : "plain", us);
  }

  cublasLtHandle_t handle;
  CHECK(cublasLtCreate(&handle));
  void* workspace;
  constexpr size_t kWorkspace = 32u << 20;
  CHECK(cudaMalloc(&workspace, kWorkspace));
  cublasLtMatmulDesc_t desc;
  CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transposed = CUBLAS_OP_T;
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)));
  cublasLtMatrixLayout_t lw, lx;
  CHECK(cublasLtMatrixLayoutCreate(&lw, CUDA_R_16BF, kCols, kCols, kCols));
  CHECK(cublasLtMatrixLayoutCreate(&lx, CUDA_R_16BF, kCols, kRows, kCols));
  const std::vector<cublasLtMatmulHeuristicResult_t> choices = heuristic_choices(handle, desc, lw, lx, lx, kWorkspace);
  if (choices.empty()) std::exit(1);
  const cublasLtMatmulHeuristicResult_t result = choices.front();
  const float alpha = 1.0f, beta = 0.0f;
  for (bool dependent : {false, true}) {
    const float us = graph_launch_us(stream, kChain, [&](int i) {
      if (i % 2 == 0)
        CHECK(cublasLtMatmul(handle, desc, &alpha, w, lw, a, lx, &beta, b, lx, b, lx, &result.algo, workspace,
                             kWorkspace, stream));
      else
        launch_norm(dependent, b, a, stream);
    });
    std::printf("product then norm, norm %s: %.2f us a launch\n", dependent ? "PDL" : "plain", us);
  }
  const float product = graph_launch_us(stream, kChain, [&](int) {
    CHECK(cublasLtMatmul(handle, desc, &alpha, w, lw, a, lx, &beta, b, lx, b, lx, &result.algo, workspace, kWorkspace,
                         stream));
  });
  std::printf("product after product: %.2f us a launch\n", product);
  return 0;
}

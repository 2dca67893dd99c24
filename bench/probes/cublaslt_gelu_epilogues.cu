// Would cuBLASLt's GELU epilogues speed up training's feed-forward block? Times, on GPT-2 small's shapes at 16 x 1024
// tokens, the first product without and with its epilogues (bias; GELU + bias; GELU + bias keeping the
// pre-activation for backward, GELU_AUX_BIAS) and backward's dA = dO W_out without and with the GELU gradient
// applied (DGELU) and the bias gradient summed too (DGELU_BGRAD, with a bf16 and an fp32 bias gradient). lseq runs
// the product plain and the bias and GELU in a pass of its own (Backend::bias_activation_dropout_forward/backward).
// Not part of the build (issue 25's one-off measurement); on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/cublaslt_gelu_epilogues.cu -o /tmp/gelu_epilogues -lcublasLt
//   /tmp/gelu_epilogues
// Each product timed as a CUDA graph of 4 launches, replayed 20 times, median per launch (probe_util.h). Results:
// bench/results/decode-attention-gemm-limits-h200-2026-11-28.txt, measured with this probe's first form (the same
// products, epilogues and timing); this tidied form was compiled, not run, before the session's device time ran out.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "probe_util.h"

namespace {

constexpr int kRows = 16384, kDim = 768, kFfn = 3072;
constexpr uint64_t kWorkspace = 32u << 20;

__nv_bfloat16* random_bf16(size_t n, unsigned seed) {
  __nv_bfloat16* p;
  CHECK(cudaMalloc(&p, n * sizeof(__nv_bfloat16)));
  fill_random(p, n, seed);
  return p;
}

struct Buffers {
  __nv_bfloat16* x = random_bf16(size_t(kRows) * kDim, 1);    // the block's input
  __nv_bfloat16* w_in = random_bf16(size_t(kFfn) * kDim, 2);  // [ffn, dim]
  __nv_bfloat16* b_in = random_bf16(kFfn, 3);
  __nv_bfloat16* d_out = random_bf16(size_t(kRows) * kDim, 4);  // the block output's gradient
  __nv_bfloat16* w_out = random_bf16(size_t(kFfn) * kDim, 5);   // [dim, ffn]
  __nv_bfloat16* aux = random_bf16(size_t(kRows) * kFfn, 6);    // the pre-activation
  __nv_bfloat16* out = random_bf16(size_t(kRows) * kFfn, 7);    // [rows, ffn]: the hidden layer or its gradient
  __nv_bfloat16* bias_grad16 = random_bf16(kFfn, 8);
  float* bias_grad32 = nullptr;
  void* workspace = nullptr;
  Buffers() {
    CHECK(cudaMalloc(&bias_grad32, kFfn * sizeof(float)));
    CHECK(cudaMalloc(&workspace, kWorkspace));
    CHECK(cudaDeviceSynchronize());
  }
};

// Forward: out^T (ffn x rows) = w_in^T (w_in as k x ffn, transposed) x^T (dim x rows). Backward: dA^T (ffn x rows) =
// w_out (ffn x dim, column-major) d_out^T (dim x rows). Both in cuBLASLt's column-major view of row-major arrays.
void time_product(cublasLtHandle_t handle, cudaStream_t stream, Buffers& b, const char* name, bool forward,
                  cublasLtEpilogue_t epilogue, cudaDataType_t bias_type) {
  cublasLtMatmulDesc_t desc;
  CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasLtMatrixLayout_t first, second, out;
  if (forward) {
    const cublasOperation_t transposed = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)));
    CHECK(cublasLtMatrixLayoutCreate(&first, CUDA_R_16BF, kDim, kFfn, kDim));
  } else {
    CHECK(cublasLtMatrixLayoutCreate(&first, CUDA_R_16BF, kFfn, kDim, kFfn));
  }
  CHECK(cublasLtMatrixLayoutCreate(&second, CUDA_R_16BF, kDim, kRows, kDim));
  CHECK(cublasLtMatrixLayoutCreate(&out, CUDA_R_16BF, kFfn, kRows, kFfn));
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  const bool has_bias = epilogue != CUBLASLT_EPILOGUE_DEFAULT && epilogue != CUBLASLT_EPILOGUE_DGELU;
  if (has_bias) {
    void* bias = forward                   ? static_cast<void*>(b.b_in)
                 : bias_type == CUDA_R_32F ? static_cast<void*>(b.bias_grad32)
                                           : static_cast<void*>(b.bias_grad16);
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  if (epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_DGELU ||
      epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
    void* aux = b.aux;
    const int64_t ld = kFfn;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
  }
  const std::vector<cublasLtMatmulHeuristicResult_t> choices =
      heuristic_choices(handle, desc, first, second, out, kWorkspace);
  const void* a = forward ? static_cast<const void*>(b.w_in) : static_cast<const void*>(b.w_out);
  const void* x = forward ? static_cast<const void*>(b.x) : static_cast<const void*>(b.d_out);
  const float alpha = 1.0f, beta = 0.0f;
  auto launch = [&] {
    return cublasLtMatmul(handle, desc, &alpha, a, first, x, second, &beta, b.out, out, b.out, out,
                          &choices.front().algo, b.workspace, kWorkspace, stream);
  };
  if (choices.empty()) {
    std::printf("%-30s not supported\n", name);
  } else if (launch() != CUBLAS_STATUS_SUCCESS || cudaStreamSynchronize(stream) != cudaSuccess) {
    std::printf("%-30s failed to run\n", name);
  } else {
    const float us = graph_launch_us(
        stream, 4, [&](int) { launch(); }, 20);
    std::printf("%-30s %8.1f us (%.0f TFLOP/s)\n", name, us, 2.0 * kRows * kDim * kFfn / (us * 1e-6) / 1e12);
  }
  CHECK(cublasLtMatrixLayoutDestroy(first));
  CHECK(cublasLtMatrixLayoutDestroy(second));
  CHECK(cublasLtMatrixLayoutDestroy(out));
  CHECK(cublasLtMatmulDescDestroy(desc));
}

}  // namespace

int main() {
  cublasLtHandle_t handle;
  CHECK(cublasLtCreate(&handle));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  Buffers b;
  time_product(handle, stream, b, "forward, plain", true, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_16BF);
  time_product(handle, stream, b, "forward, bias", true, CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF);
  time_product(handle, stream, b, "forward, GELU + bias", true, CUBLASLT_EPILOGUE_GELU_BIAS, CUDA_R_16BF);
  time_product(handle, stream, b, "forward, GELU_AUX_BIAS", true, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, CUDA_R_16BF);
  time_product(handle, stream, b, "backward dA, plain", false, CUBLASLT_EPILOGUE_DEFAULT, CUDA_R_16BF);
  time_product(handle, stream, b, "backward dA, DGELU", false, CUBLASLT_EPILOGUE_DGELU, CUDA_R_16BF);
  time_product(handle, stream, b, "backward dA, DGELU_BGRAD bf16", false, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_16BF);
  time_product(handle, stream, b, "backward dA, DGELU_BGRAD fp32", false, CUBLASLT_EPILOGUE_DGELU_BGRAD, CUDA_R_32F);
  return 0;
}

// A linear map with its bias (and ReLU) fused into one cuBLASLt matmul (the BIAS or RELU_BIAS epilogue): the
// feed-forward block's first layer, the output layer and the query projection in decoding. Row-major y = x w^T is the column-major y^T = w x^T (the operands swap, as in gemm_cuda.cu), so the
// column-major rows are the features: the bias runs along n. The descriptor, layouts and algorithm of a shape are
// made at its first call; later calls set the bias pointer and run one cublasLtMatmul.
//
// (A mask-writing forward, RELU_AUX_BIAS, and a DRELU_BGRAD backward were measured on an H100 at 16384 x 512 x 2048
// in bf16 and dropped: the mask made the forward 0.094 ms instead of 0.061 without it, and the backward epilogue
// took 0.28 ms against 0.19 for the unfused sequence, with a bias gradient only in bf16, since cuBLASLt refuses an
// fp32 one with 16-bit operands. The backward reads relu' off the saved output instead: FeedForwardLayer.)
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace lseq::kernels {

namespace {

// The largest power of two up to 256 dividing the address: what cuBLASLt may assume of a pointer.
int alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

}  // namespace

void CudaBackend::EpiloguePlan::release() noexcept {
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (d) cublasLtMatrixLayoutDestroy(d);
  if (desc) cublasLtMatmulDescDestroy(desc);
  *this = EpiloguePlan{};
}

void CudaBackend::release_epilogue_plans() noexcept {
  for (auto& entry : epilogue_plans_) entry.second.release();
  epilogue_plans_.clear();
}

CudaBackend::EpiloguePlan& CudaBackend::epilogue_plan(const EpilogueKey& key, const void* bias) {
  auto found = epilogue_plans_.find(key);
  if (found != epilogue_plans_.end()) return found->second;
  if (epilogue_plans_.size() >= kMaxEpiloguePlans) release_epilogue_plans();
  const auto [dt, rows, k, n, align, relu] = key;
  EpiloguePlan plan;
  cublasLtMatmulPreference_t preference = nullptr;
  auto check = [&](cublasStatus_t status, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    plan.release();
    fail("linear_bias_forward ({} rows {} k {} n {}): cuBLASLt {} failed: {}", dtype_name(dt), rows, k, n, call,
         cuda::cublas_status_text(status));
  };
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    check(cublasLtMatmulDescSetAttribute(plan.desc, attribute, &value, sizeof(value)),
          "cublasLtMatmulDescSetAttribute");
  };
  const cublasComputeType_t compute =
      allow_tf32_ && dt == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // A = w, row-major [n, k] = column-major k x n, transposed; B = x, row-major [rows, k] = column-major k x rows;
  // D = y^T, n x rows.
  set(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS);
  set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda::cuda_type(dt)));
  set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // the heuristic reads the pointer's alignment
  const cudaDataType_t type = cuda::cuda_type(dt);
  check(cublasLtMatrixLayoutCreate(&plan.a, type, k, n, k), "cublasLtMatrixLayoutCreate");
  check(cublasLtMatrixLayoutCreate(&plan.b, type, k, rows, k), "cublasLtMatrixLayoutCreate");
  check(cublasLtMatrixLayoutCreate(&plan.d, type, n, rows, n), "cublasLtMatrixLayoutCreate");
  check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kCublasWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof(workspace)),
        "cublasLtMatmulPreferenceSetAttribute");
  const uint32_t min_alignment = static_cast<uint32_t>(align);
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    check(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &min_alignment, sizeof(min_alignment)),
          "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  check(cublasLtMatmulAlgoGetHeuristic(cublas_lt_, plan.desc, plan.a, plan.b, plan.d, plan.d, preference, 1, &result,
                                       &found_count),
        "cublasLtMatmulAlgoGetHeuristic");
  cublasLtMatmulPreferenceDestroy(preference);
  preference = nullptr;
  if (found_count < 1) {
    plan.release();
    fail("linear_bias_forward: cuBLASLt has no algorithm for {} rows {} k {} n {}", dtype_name(dt), rows, k, n);
  }
  plan.algo = result.algo;
  return epilogue_plans_.emplace(key, plan).first->second;
}

void CudaBackend::linear_bias_forward(DType dt, const void* x, const void* w, const void* bias, int rows, int k, int n,
                                      bool relu, void* y) {
  check_linear_bias_shape(rows, k, n);
  if (rows == 0 || n == 0) return;
  bind();
  const int align = std::min({alignment_of(x), alignment_of(w), alignment_of(y), alignment_of(bias)});
  const EpiloguePlan& plan = epilogue_plan({dt, rows, k, n, align, relu}, bias);
  LSEQ_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float alpha = 1.0f, beta = 0.0f;
  LSEQ_CUBLAS_CHECK(cublasLtMatmul(cublas_lt_, plan.desc, &alpha, w, plan.a, x, plan.b, &beta, y, plan.d, y, plan.d,
                                   &plan.algo, cublas_workspace_, kCublasWorkspaceBytes, stream_));
}

}  // namespace lseq::kernels

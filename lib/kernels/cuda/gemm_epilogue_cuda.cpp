// The feed-forward block's first layer with its bias and ReLU fused into cuBLASLt matmuls: forward with the
// RELU_AUX_BIAS epilogue (RELU_BIAS when no mask is wanted), backward with DRELU_BGRAD. Row-major y = x w^T is the
// column-major y^T = op(w) x^T (the operands swap, as in gemm_cuda.cu), so the column-major rows are the features:
// the bias, the bias gradient and the ReLU bit-mask's leading dimension (relu_mask_ld(n) bits, a multiple of 128 as
// cuBLASLt requires) all run along n. The descriptor, layouts and algorithm of a shape are made at its first call;
// later calls set the bias and mask pointers and run one cublasLtMatmul. DRELU_BGRAD overwrites its bias gradient:
// it goes to the scratch in fp32 (in dt where cuBLASLt refuses an fp32 gradient with 16-bit operands) and is then
// added into dparam_bias.
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

bool refusal(cublasStatus_t status) {
  return status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE;
}

void destroy(CudaBackend::EpiloguePlan& plan) noexcept {
  if (plan.a) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.d) cublasLtMatrixLayoutDestroy(plan.d);
  if (plan.desc) cublasLtMatmulDescDestroy(plan.desc);
  plan = CudaBackend::EpiloguePlan{};
}

[[noreturn]] void no_algorithm(const CudaBackend::EpiloguePlan& plan, const char* op, DType dt, int rows, int k,
                               int n) {
  fail("{}: cuBLASLt has no algorithm for {} rows {} k {} n {} ({})", op, dtype_name(dt), rows, k, n,
       plan.refusal == CUBLAS_STATUS_SUCCESS ? "its heuristic returned none" : cuda::cublas_status_text(plan.refusal));
}

}  // namespace

void CudaBackend::release_epilogue_plans() noexcept {
  for (auto& entry : epilogue_plans_) destroy(entry.second);
  epilogue_plans_.clear();
}

// The plan of a key, made and cached at its first use. A plan cuBLASLt has no algorithm for is cached too, without
// a descriptor (desc == nullptr), so that a refused bias-gradient type is asked about once.
CudaBackend::EpiloguePlan& CudaBackend::epilogue_plan(const EpilogueKey& key, const void* bias, const void* aux,
                                                      const char* op) {
  auto found = epilogue_plans_.find(key);
  if (found != epilogue_plans_.end()) return found->second;
  const auto [dt, rows, k, n, epilogue_code, align, bias_type] = key;
  const auto epilogue = static_cast<cublasLtEpilogue_t>(epilogue_code);
  const bool backward = epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD;
  EpiloguePlan plan;
  plan.bias_type = bias_type;
  cublasLtMatmulPreference_t preference = nullptr;
  auto check = [&](cublasStatus_t status, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    destroy(plan);
    fail("{} ({} rows {} k {} n {}): cuBLASLt {} failed: {}", op, dtype_name(dt), rows, k, n, call,
         cuda::cublas_status_text(status));
  };
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    check(cublasLtMatmulDescSetAttribute(plan.desc, attribute, &value, sizeof(value)),
          "cublasLtMatmulDescSetAttribute");
  };
  const cublasComputeType_t compute =
      allow_tf32_ && dt == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Forward: A = w, row-major [n, k] = column-major k x n, transposed. Backward: A = w, row-major [k, n] = column-major
  // n x k as it is. B = x (dy), row-major [rows, k] = column-major k x rows. D = y^T (d_h^T), n x rows.
  set(CUBLASLT_MATMUL_DESC_TRANSA, backward ? CUBLAS_OP_N : CUBLAS_OP_T);
  set(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda::cuda_type(bias_type)));
  set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // the heuristic reads the pointers' alignment
  if (aux) {
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, relu_mask_ld(n));
  }
  const cudaDataType_t type = cuda::cuda_type(dt);
  check(backward ? cublasLtMatrixLayoutCreate(&plan.a, type, n, k, n)
                 : cublasLtMatrixLayoutCreate(&plan.a, type, k, n, k),
        "cublasLtMatrixLayoutCreate");
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
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cublas_lt_, plan.desc, plan.a, plan.b, plan.d, plan.d,
                                                               preference, 1, &result, &found_count);
  cublasLtMatmulPreferenceDestroy(preference);
  preference = nullptr;
  if (status != CUBLAS_STATUS_SUCCESS && !refusal(status)) check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (status == CUBLAS_STATUS_SUCCESS && found_count > 0) {
    plan.algo = result.algo;
  } else {  // no algorithm: the caller tries another bias-gradient type or fails
    cublasLtMatmulDescDestroy(plan.desc);
    plan.desc = nullptr;
    plan.refusal = status;
  }
  return epilogue_plans_.emplace(key, plan).first->second;
}

bool CudaBackend::run_epilogue(const EpiloguePlan& plan, const void* a, const void* b, void* d, const void* bias,
                               const void* aux, const char* op, bool may_refuse) {
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const void* pointer) {
    LSEQ_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, attribute, &pointer, sizeof(pointer)));
  };
  set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (aux) set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(cublas_lt_, plan.desc, &alpha, a, plan.a, b, plan.b, &beta, d, plan.d, d, plan.d, &plan.algo,
                     cublas_workspace_, kCublasWorkspaceBytes, stream_);
  if (status == CUBLAS_STATUS_SUCCESS) return true;
  if (may_refuse && refusal(status)) return false;
  cuda::check_cublas(status, op);
  return false;
}

void CudaBackend::linear_bias_relu_forward(DType dt, const void* x, const void* w, const void* bias, int rows, int k,
                                           int n, void* y, void* relu_mask) {
  const char* op = "linear_bias_relu_forward";
  check_linear_relu_shape(op, rows, k, n);
  if (rows == 0 || n == 0) return;
  bind();
  const int align = std::min({alignment_of(x), alignment_of(w), alignment_of(y), alignment_of(bias),
                              relu_mask ? alignment_of(relu_mask) : 256});
  const auto epilogue = relu_mask ? CUBLASLT_EPILOGUE_RELU_AUX_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS;
  EpiloguePlan& plan = epilogue_plan({dt, rows, k, n, epilogue, align, dt}, bias, relu_mask, op);
  if (!plan.desc) no_algorithm(plan, op, dt, rows, k, n);
  run_epilogue(plan, w, x, y, bias, relu_mask, op, false);
}

void CudaBackend::linear_drelu_bias_grad(DType dt, const void* dy, const void* w, const void* relu_mask, int rows,
                                         int m, int n, void* d_h, float* dparam_bias) {
  const char* op = "linear_drelu_bias_grad";
  check_drelu_bias_grad_args(rows, m, n, relu_mask, dparam_bias);
  if (rows == 0 || n == 0) return;
  // The epilogue's bias gradient [n] and, for a dt gradient, its fp32 copy, 256 bytes apart at least.
  const std::size_t slot = (static_cast<std::size_t>(n) * sizeof(float) + 255) / 256 * 256;
  if (2 * slot > kScratchBytes)
    fail("{}: {} features exceed the CUDA backend's scratch for the bias gradient", op, n);
  bind();
  float* grad = scratch_floats();
  const int align = std::min({alignment_of(dy), alignment_of(w), alignment_of(d_h), alignment_of(relu_mask)});
  // An fp32 bias gradient where cuBLASLt takes one, else one of dt (widened below).
  for (DType grad_type : {DType::f32, dt}) {
    EpiloguePlan& plan =
        epilogue_plan({dt, rows, m, n, CUBLASLT_EPILOGUE_DRELU_BGRAD, align, grad_type}, grad, relu_mask, op);
    const bool last = grad_type == dt;
    if (!plan.desc) {
      if (last) no_algorithm(plan, op, dt, rows, m, n);
      continue;
    }
    if (!run_epilogue(plan, w, dy, d_h, grad, relu_mask, op, !last)) {
      // cuBLASLt refused this gradient type at the call: forget the plan's algorithm, use the next type.
      cublasLtMatmulDescDestroy(plan.desc);
      plan.desc = nullptr;
      plan.refusal = CUBLAS_STATUS_NOT_SUPPORTED;
      continue;
    }
    if (grad_type != DType::f32) {
      float* wide = grad + slot / sizeof(float);
      cast(grad_type, grad, DType::f32, wide, n);
      grad = wide;
    }
    add(DType::f32, dparam_bias, grad, n, dparam_bias);
    return;
  }
}

}  // namespace lseq::kernels

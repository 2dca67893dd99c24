// cuBLASLt matmuls with their plans: the single products of gemm() (gemm_cuda.cu) and linear_bias_forward, a linear
// map with its bias (and ReLU or GELU) fused into the BIAS, RELU_BIAS or GELU_BIAS epilogue (the feed-forward
// block's first layer, the output layer and the query projection in decoding).
//
// Why plans, and why row-count classes: decoding meets a new row count at almost every batch (sentences x bucketed
// source length in the encoder, hypotheses in the steps). For each new shape cuBLAS runs its heuristic (~0.2 ms of
// host time on an H100) and, whenever the heuristic picks a kernel not used before in the process, loads that kernel
// (3-7 ms of host time each, lazy module loading or not). bench_decode_throughput's first pass over 2,000 lines at 64
// sentences a batch took 1.74x the time of a second pass over the same batches, mostly for these first uses.
// So the algorithm is chosen once per class of row counts (the next power of two in training; of 16 or 4 in
// decoding, set_matmul_row_class_growth) and reused, checked by cublasLtMatmulAlgoCheck, for every row count of the
// class: one heuristic and a few kernels per weight shape. The wider classes made lstranslate's search 7-33% faster
// and its whole run up to 12% shorter, translations unchanged (transformer-base on an H200,
// bench/results/translate-row-classes-h200-2026-11-28.txt).
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

// What cuBLASLt may assume of an operand: its pointer's alignment and that of every row after it.
int operand_alignment(const void* p, int ld, DType dt) {
  const int row_bytes = ld * static_cast<int>(dtype_size(dt));
  int a = alignment_of(p);
  while (a > 1 && row_bytes % a != 0) a /= 2;
  return a;
}

}  // namespace

// The row count whose algorithm serves m: the next power of the growth times 8.
int CudaBackend::row_class(int m) const {
  int c = 8;
  while (c < m) c *= row_class_growth_;
  return c;
}

void CudaBackend::set_matmul_row_class_growth(int growth) {
  if (growth < 2) fail("internal error: GEMM row classes growing by {}", growth);
  if (growth == row_class_growth_) return;
  row_class_growth_ = growth;
  class_algos_.clear();  // plans made before keep their algorithms; new shapes take the new classes'
}

void CudaBackend::MatmulPlan::release() noexcept {
  if (first) cublasLtMatrixLayoutDestroy(first);
  if (second) cublasLtMatrixLayoutDestroy(second);
  if (out) cublasLtMatrixLayoutDestroy(out);
  if (desc) cublasLtMatmulDescDestroy(desc);
  *this = MatmulPlan{};
}

void CudaBackend::release_matmul_plans() noexcept {
  for (auto& entry : matmul_plans_) entry.second.release();
  matmul_plans_.clear();
  class_algos_.clear();
}

void CudaBackend::fail_matmul(const MatmulKey& key, const char* call, cublasStatus_t status) const {
  fail("matmul ({} m {} n {} k {}): cuBLASLt {} failed: {}", dtype_name(key.ab), key.m, key.n, key.k, call,
       cuda::cublas_status_text(status));
}

// Descriptor and layouts of the column-major product out (n x m) = op(first) (n x k) op(second) (k x m).
CudaBackend::MatmulPlan CudaBackend::describe_matmul(const MatmulKey& key, const void* bias) const {
  MatmulPlan plan;
  auto check = [&](cublasStatus_t status, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    plan.release();
    fail_matmul(key, call, status);
  };
  auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
    check(cublasLtMatmulDescSetAttribute(plan.desc, attribute, &value, sizeof(value)),
          "cublasLtMatmulDescSetAttribute");
  };
  const cublasComputeType_t compute =
      allow_tf32_ && key.ab == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  set(CUBLASLT_MATMUL_DESC_TRANSA, key.trans_first ? CUBLAS_OP_T : CUBLAS_OP_N);
  set(CUBLASLT_MATMUL_DESC_TRANSB, key.trans_second ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (key.epilogue != MatmulEpilogue::none) {
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, key.epilogue == MatmulEpilogue::relu_bias   ? CUBLASLT_EPILOGUE_RELU_BIAS
                                       : key.epilogue == MatmulEpilogue::gelu_bias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                                                                   : CUBLASLT_EPILOGUE_BIAS);
    set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda::cuda_type(key.ab)));
    set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);  // the heuristic reads the pointer's alignment
  }
  const cudaDataType_t ab = cuda::cuda_type(key.ab), c = cuda::cuda_type(key.c_type);
  const int m = key.m, n = key.n, k = key.k;
  check(key.trans_first ? cublasLtMatrixLayoutCreate(&plan.first, ab, k, n, key.ld_first)
                        : cublasLtMatrixLayoutCreate(&plan.first, ab, n, k, key.ld_first),
        "cublasLtMatrixLayoutCreate");
  check(key.trans_second ? cublasLtMatrixLayoutCreate(&plan.second, ab, m, k, key.ld_second)
                         : cublasLtMatrixLayoutCreate(&plan.second, ab, k, m, key.ld_second),
        "cublasLtMatrixLayoutCreate");
  check(cublasLtMatrixLayoutCreate(&plan.out, c, n, m, key.ld_out), "cublasLtMatrixLayoutCreate");
  return plan;
}

bool CudaBackend::heuristic_algo(const MatmulKey& key, const MatmulPlan& plan, cublasLtMatmulAlgo_t& algo) const {
  cublasLtMatmulPreference_t preference = nullptr;
  auto check = [&](cublasStatus_t status, const char* call) {
    if (status == CUBLAS_STATUS_SUCCESS) return;
    if (preference) cublasLtMatmulPreferenceDestroy(preference);
    fail_matmul(key, call, status);
  };
  check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kCublasWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof(workspace)),
        "cublasLtMatmulPreferenceSetAttribute");
  const uint32_t min_alignment = static_cast<uint32_t>(key.align);
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    check(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &min_alignment, sizeof(min_alignment)),
          "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(cublas_lt_, plan.desc, plan.first, plan.second,
                                                                plan.out, plan.out, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  check(status, "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1) return false;
  algo = result.algo;
  return true;
}

const CudaBackend::MatmulPlan& CudaBackend::matmul_plan(const MatmulKey& key, const void* bias) {
  auto found = matmul_plans_.find(key);
  if (found != matmul_plans_.end()) return found->second;
  if (matmul_plans_.size() >= kMaxMatmulPlans) release_matmul_plans();
  MatmulPlan plan = describe_matmul(key, bias);
  // The class's algorithm, chosen at the class's row count (the rows' leading dimension must hold that many when
  // the operand is transposed; otherwise this shape is its own class).
  MatmulKey class_key = key;
  class_key.m = row_class(key.m);
  if (key.trans_second && key.ld_second < class_key.m) class_key.m = key.m;
  bool have_algo = false;
  auto known = class_algos_.find(class_key);
  if (known != class_algos_.end()) {
    plan.algo = known->second;
    have_algo = true;
  } else if (class_key.m != key.m) {
    MatmulPlan class_plan = describe_matmul(class_key, bias);
    have_algo = heuristic_algo(class_key, class_plan, plan.algo);
    class_plan.release();
    if (have_algo) class_algos_.emplace(class_key, plan.algo);
  }
  if (have_algo) {
    // The class's algorithm may not take this row count (a split or tile it needs); then this shape asks its own.
    cublasLtMatmulHeuristicResult_t checked{};
    have_algo = cublasLtMatmulAlgoCheck(cublas_lt_, plan.desc, plan.first, plan.second, plan.out, plan.out,
                                        &plan.algo, &checked) == CUBLAS_STATUS_SUCCESS &&
                checked.workspaceSize <= kCublasWorkspaceBytes;
  }
  if (!have_algo) {
    have_algo = heuristic_algo(key, plan, plan.algo);
    if (have_algo && class_key.m == key.m) class_algos_.emplace(class_key, plan.algo);
  }
  if (!have_algo) {
    plan.release();
    fail("matmul: cuBLASLt has no algorithm for {} m {} n {} k {}", dtype_name(key.ab), key.m, key.n, key.k);
  }
  return matmul_plans_.emplace(key, plan).first->second;
}

void CudaBackend::warm_up_matmuls() {
  // cuBLASLt's first heuristic query in a process took 87-117 ms on an H100 (its own set-up), whatever the shape.
  MatmulKey key;
  key.ab = key.c_type = DType::bf16;
  key.trans_first = true;
  key.m = key.n = key.k = key.ld_first = key.ld_second = key.ld_out = 64;
  key.align = 256;
  key.epilogue = MatmulEpilogue::bias;
  MatmulPlan plan = describe_matmul(key, scratch_);
  cublasLtMatmulAlgo_t algo{};
  heuristic_algo(key, plan, algo);
  plan.release();
}

void CudaBackend::run_matmul(const MatmulPlan& plan, float alpha, const void* first, const void* second, float beta,
                             void* out) {
  LSEQ_CUBLAS_CHECK(cublasLtMatmul(cublas_lt_, plan.desc, &alpha, first, plan.first, second, plan.second, &beta, out,
                                   plan.out, out, plan.out, &plan.algo, cublas_workspace_, kCublasWorkspaceBytes,
                                   stream_));
}

void CudaBackend::single_gemm(const GemmArgs& g) {
  // Row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T: B is the first operand, A the second.
  MatmulKey key;
  key.ab = g.ab, key.c_type = g.c_type;
  key.trans_first = g.trans_b, key.trans_second = g.trans_a;
  key.m = g.m, key.n = g.n, key.k = g.k;
  key.ld_first = g.ldb, key.ld_second = g.lda, key.ld_out = g.ldc;
  key.align = std::min({operand_alignment(g.a, g.lda, g.ab), operand_alignment(g.b, g.ldb, g.ab),
                        operand_alignment(g.c, g.ldc, g.c_type)});
  run_matmul(matmul_plan(key, nullptr), g.alpha, g.b, g.a, g.beta, g.c);
}

void CudaBackend::linear_bias_forward(DType dt, const void* x, const void* w, const void* bias, int rows, int k, int n,
                                      BiasActivation act, void* y, int ld_y) {
  check_linear_bias_shape(rows, k, n);
  const int ld = row_stride("linear_bias_forward", ld_y, n);
  if (rows == 0 || n == 0) return;
  bind();
  // first = w, row-major [n, k] = column-major k x n, transposed; second = x, row-major [rows, k] = column-major
  // k x rows; out = y^T, n x rows: the bias runs along n.
  MatmulKey key;
  key.ab = key.c_type = dt;
  key.trans_first = true, key.trans_second = false;
  key.m = rows, key.n = n, key.k = k;
  key.ld_first = key.ld_second = k, key.ld_out = ld;
  key.align = std::min({operand_alignment(x, k, dt), operand_alignment(w, k, dt), operand_alignment(y, ld, dt),
                        alignment_of(bias)});
  key.epilogue = act == BiasActivation::relu   ? MatmulEpilogue::relu_bias
                 : act == BiasActivation::gelu ? MatmulEpilogue::gelu_bias
                                               : MatmulEpilogue::bias;
  const MatmulPlan& plan = matmul_plan(key, bias);
  LSEQ_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  run_matmul(plan, 1.0f, w, x, 0.0f, y);
}

}  // namespace lseq::kernels

#pragma once
// What the one-off GPU probes in this folder share (they are not part of the build; each file's first lines give its
// nvcc command): a check that stops the probe on any failing CUDA or cuBLAS call, the median time a launch takes
// inside a replayed CUDA graph (decoding's steps run as graphs, so that is the time that counts there), inputs of
// random-looking bf16 values, cuBLASLt's heuristic choices for a product, and the decoding products' operands, their
// cuBLASLt description and an L2 flush between them.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    const int status_ = static_cast<int>(call);                                                     \
    if (status_ != 0) {                                                                             \
      std::fprintf(stderr, "probe: %s failed (%d) at %s:%d\n", #call, status_, __FILE__, __LINE__); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

// launch(i) for i < launches captured into one graph, replayed three times, then `replays` times timed by events:
// the median microseconds a launch.
template <typename Launch>
float graph_launch_us(cudaStream_t stream, int launches, Launch launch, int replays = 40) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) launch(i);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 3; ++r) CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<float> each;
  for (int r = 0; r < replays; ++r) {
    CHECK(cudaEventRecord(start, stream));
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    each.push_back(ms * 1000.0f / launches);
  }
  std::sort(each.begin(), each.end());
  CHECK(cudaEventDestroy(start));
  CHECK(cudaEventDestroy(stop));
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return each[each.size() / 2];
}

// Element i of p becomes a value in [-scale / 2, scale / 2) hashed from i and seed: the same values on every run and
// for any grid, never all zero.
__global__ void fill_random_kernel(__nv_bfloat16* p, size_t n, unsigned seed, float scale) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65536.0f - 0.5f) * scale);
  }
}

inline void fill_random(__nv_bfloat16* p, size_t n, unsigned seed, float scale = 0.1f) {
  fill_random_kernel<<<1024, 256>>>(p, n, seed, scale);
  CHECK(cudaGetLastError());
}

// Up to `count` of cuBLASLt's heuristic choices, best first, for d = a b (c and d laid out alike) with a workspace of
// `workspace` bytes; empty when it offers none or the query fails (a probe may ask about an epilogue it lacks).
inline std::vector<cublasLtMatmulHeuristicResult_t> heuristic_choices(cublasLtHandle_t handle,
                                                                      cublasLtMatmulDesc_t desc,
                                                                      cublasLtMatrixLayout_t a,
                                                                      cublasLtMatrixLayout_t b,
                                                                      cublasLtMatrixLayout_t c, uint64_t workspace,
                                                                      int count = 1) {
  cublasLtMatmulPreference_t preference;
  CHECK(cublasLtMatmulPreferenceCreate(&preference));
  CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof(workspace)));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, preference, count, results.data(), &found) !=
      CUBLAS_STATUS_SUCCESS)
    found = 0;
  CHECK(cublasLtMatmulPreferenceDestroy(preference));
  results.resize(static_cast<size_t>(found));
  return results;
}

// Random operands of a decoding product y[m, n] = x[m, k] w[n, k]^T (+ bias[n]), bf16: `copies` weight matrices one
// after another (a timed graph cycles through them, as a step does through its layers), x, y and the bias (elements
// hashed from seed, seed + 1 and seed + 2); freed with the object.
struct ProductOperands {
  size_t w_elems;  // elements of one weight matrix
  __nv_bfloat16 *w = nullptr, *x = nullptr, *y = nullptr, *bias = nullptr;
  ProductOperands(int m, int n, int k, int copies, unsigned seed = 1, float w_scale = 0.1f, float x_scale = 0.1f,
                  float bias_scale = 0.1f)
      : w_elems(static_cast<size_t>(n) * k) {
    CHECK(cudaMalloc(&w, w_elems * copies * 2));
    CHECK(cudaMalloc(&x, static_cast<size_t>(m) * k * 2));
    CHECK(cudaMalloc(&y, static_cast<size_t>(m) * n * 2));
    CHECK(cudaMalloc(&bias, static_cast<size_t>(n) * 2));
    fill_random(w, w_elems * copies, seed, w_scale);
    fill_random(x, static_cast<size_t>(m) * k, seed + 1, x_scale);
    fill_random(bias, n, seed + 2, bias_scale);
    CHECK(cudaDeviceSynchronize());
  }
  ~ProductOperands() {
    for (void* p : {static_cast<void*>(w), static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(bias)})
      cudaFree(p);
  }
  ProductOperands(const ProductOperands&) = delete;
  ProductOperands& operator=(const ProductOperands&) = delete;
  const __nv_bfloat16* weights(int copy) const { return w + w_elems * copy; }
};

// cuBLASLt's description of that product as the backend's linear_bias_forward gives it (bf16 with fp32 sums, w
// transposed, the epilogue applying `bias`, which may be null for CUBLASLT_EPILOGUE_DEFAULT): the descriptor and the
// layouts of w, x and y, freed with the object.
struct LtProduct {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, y = nullptr;
  LtProduct(int m, int n, int k, cublasLtEpilogue_t epilogue, const __nv_bfloat16* bias) {
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transposed = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      const int32_t bias_type = CUDA_R_16BF;
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    CHECK(cublasLtMatrixLayoutCreate(&w, CUDA_R_16BF, k, n, k));
    CHECK(cublasLtMatrixLayoutCreate(&x, CUDA_R_16BF, k, m, k));
    CHECK(cublasLtMatrixLayoutCreate(&y, CUDA_R_16BF, n, m, n));
  }
  ~LtProduct() {
    cublasLtMatrixLayoutDestroy(w);
    cublasLtMatrixLayoutDestroy(x);
    cublasLtMatrixLayoutDestroy(y);
    cublasLtMatmulDescDestroy(desc);
  }
  LtProduct(const LtProduct&) = delete;
  LtProduct& operator=(const LtProduct&) = delete;
};

// Overwrites a buffer larger than L2 on `stream`, as a decoding step's attention over its caches does between two
// layers' products, so that the next product reads its weights from DRAM.
class L2Flush {
 public:
  explicit L2Flush(size_t bytes) : bytes_(bytes) { CHECK(cudaMalloc(&buffer_, bytes)); }
  ~L2Flush() { cudaFree(buffer_); }
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;
  void operator()(cudaStream_t stream) { CHECK(cudaMemsetAsync(buffer_, ++value_ & 0xff, bytes_, stream)); }

 private:
  void* buffer_ = nullptr;
  size_t bytes_;
  int value_ = 0;
};

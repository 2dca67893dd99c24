#pragma once
// What the one-off GPU probes in this folder share (they are not part of the build; each file's first lines give its
// nvcc command): a check that stops the probe on any failing CUDA or cuBLAS call, the median time a launch takes
// inside a replayed CUDA graph (decoding's steps run as graphs, so that is the time that counts there), inputs of
// random-looking bf16 values, and cuBLASLt's heuristic choices for a product.
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

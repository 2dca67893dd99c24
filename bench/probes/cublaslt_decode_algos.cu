// How far is cuBLASLt's first heuristic choice from its best candidate on decoding's skinny products? A decoding
// step at 128 rows spends about 28 us a GPT-2-small layer on four products whose weights (14 MB) stream from DRAM in
// about 5 us at 3 TB/s. Not part of the build (issue 25's one-off measurement); on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/cublaslt_decode_algos.cu -o /tmp/decode_algos -lcublasLt
//   /tmp/decode_algos            # every shape below, bf16
// Each shape: y[m, n] = x[m, k] w[n, k]^T (+ bias or GELU + bias) as linear_bias_forward describes it; up to 64
// heuristic candidates; each timed as a CUDA graph of 12 launches over 12 weight copies (layers: the weights do not
// stay in L2 between steps), replayed 40 times, median per launch. Prints the heuristic's first and the fastest.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_util.h"

struct Shape {
  const char* name;
  int m, n, k;
  cublasLtEpilogue_t epilogue;
};

__global__ void fill(__nv_bfloat16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}

int config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  int value = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written);
  return value;
}

int main() {
  constexpr int kLayers = 12;
  constexpr uint64_t kWorkspace = 32u << 20;
  const std::vector<Shape> shapes = {
      {"gpt2-small qkv", 128, 2304, 768, CUBLASLT_EPILOGUE_BIAS},
      {"gpt2-small out", 128, 768, 768, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-small fc1", 128, 3072, 768, CUBLASLT_EPILOGUE_GELU_BIAS},
      {"gpt2-small fc2", 128, 768, 3072, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-small logits", 128, 50264, 768, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-small qkv x32", 32, 2304, 768, CUBLASLT_EPILOGUE_BIAS},
      {"gpt2-small fc2 x32", 32, 768, 3072, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-medium qkv", 128, 3072, 1024, CUBLASLT_EPILOGUE_BIAS},
      {"gpt2-medium out", 128, 1024, 1024, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-medium fc1", 128, 4096, 1024, CUBLASLT_EPILOGUE_GELU_BIAS},
      {"gpt2-medium fc2", 128, 1024, 4096, CUBLASLT_EPILOGUE_DEFAULT},
      {"base beam4x128 q", 512, 512, 512, CUBLASLT_EPILOGUE_BIAS},
      {"base beam4x128 fc1", 512, 2048, 512, CUBLASLT_EPILOGUE_RELU_BIAS},
      {"base beam4x128 fc2", 512, 512, 2048, CUBLASLT_EPILOGUE_DEFAULT},
  };
  cublasLtHandle_t handle;
  CHECK(cublasLtCreate(&handle));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* workspace;
  CHECK(cudaMalloc(&workspace, kWorkspace));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (const Shape& s : shapes) {
    const size_t wsize = static_cast<size_t>(s.n) * s.k;
    __nv_bfloat16 *w, *x, *y, *bias;
    CHECK(cudaMalloc(&w, wsize * kLayers * 2));
    CHECK(cudaMalloc(&x, static_cast<size_t>(s.m) * s.k * 2));
    CHECK(cudaMalloc(&y, static_cast<size_t>(s.m) * s.n * 2));
    CHECK(cudaMalloc(&bias, static_cast<size_t>(s.n) * 2));
    fill<<<1024, 256>>>(w, wsize * kLayers, 1);
    fill<<<256, 256>>>(x, static_cast<size_t>(s.m) * s.k, 2);
    fill<<<64, 256>>>(bias, s.n, 3);
    CHECK(cudaDeviceSynchronize());
    cublasLtMatmulDesc_t desc;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transposed = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof(s.epilogue)));
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      const int32_t bias_type = CUDA_R_16BF;
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    }
    cublasLtMatrixLayout_t lw, lx, ly;
    CHECK(cublasLtMatrixLayoutCreate(&lw, CUDA_R_16BF, s.k, s.n, s.k));
    CHECK(cublasLtMatrixLayoutCreate(&lx, CUDA_R_16BF, s.k, s.m, s.k));
    CHECK(cublasLtMatrixLayoutCreate(&ly, CUDA_R_16BF, s.n, s.m, s.n));
    cublasLtMatmulPreference_t preference;
    CHECK(cublasLtMatmulPreferenceCreate(&preference));
    CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                               sizeof(kWorkspace)));
    std::vector<cublasLtMatmulHeuristicResult_t> results(64);
    int found = 0;
    CHECK(cublasLtMatmulAlgoGetHeuristic(handle, desc, lw, lx, ly, ly, preference, 64, results.data(), &found));
    struct Timed {
      int index;
      float us;
    };
    std::vector<Timed> timed;
    const float alpha = 1.0f, beta = 0.0f;
    for (int i = 0; i < found; ++i) {
      const cublasLtMatmulAlgo_t& algo = results[i].algo;
      bool ok = true;
      for (int layer = 0; layer < kLayers && ok; ++layer)
        ok = cublasLtMatmul(handle, desc, &alpha, w + wsize * layer, lw, x, lx, &beta, y, ly, y, ly, &algo, workspace,
                            kWorkspace, stream) == CUBLAS_STATUS_SUCCESS;
      if (!ok) continue;
      const float us = graph_launch_us(stream, kLayers, [&](int layer) {
        cublasLtMatmul(handle, desc, &alpha, w + wsize * layer, lw, x, lx, &beta, y, ly, y, ly, &algo, workspace,
                       kWorkspace, stream);
      });
      timed.push_back({i, us});
    }
    const double bytes = 2.0 * wsize;
    std::printf("\n%s: m %d n %d k %d, %d candidates (%.2f MB of weights a launch)\n", s.name, s.m, s.n, s.k, found,
                bytes / 1e6);
    std::vector<Timed> by_time = timed;
    std::sort(by_time.begin(), by_time.end(), [](const Timed& a, const Timed& b) { return a.us < b.us; });
    for (const Timed& t : timed) {
      const cublasLtMatmulAlgo_t& algo = results[t.index].algo;
      const bool first = t.index == 0, best = t.index == by_time.front().index;
      if (!first && !best && t.index >= 12) continue;
      std::printf("  #%-2d %7.2f us %5.2f TB/s algo %d tile %d stages %d splitk %d reduction %d swizzle %d "
                  "cluster %d ws %zu%s%s\n",
                  t.index, t.us, bytes / (t.us * 1e-6) / 1e12, config(algo, CUBLASLT_ALGO_CONFIG_ID),
                  config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID), config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                  config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                  config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
                  results[t.index].workspaceSize, first ? "  <- heuristic's first" : "",
                  best ? "  <- fastest" : "");
    }
    CHECK(cublasLtMatmulPreferenceDestroy(preference));
    CHECK(cublasLtMatrixLayoutDestroy(lw));
    CHECK(cublasLtMatrixLayoutDestroy(lx));
    CHECK(cublasLtMatrixLayoutDestroy(ly));
    CHECK(cublasLtMatmulDescDestroy(desc));
    CHECK(cudaFree(w));
    CHECK(cudaFree(x));
    CHECK(cudaFree(y));
    CHECK(cudaFree(bias));
  }
  return 0;
}

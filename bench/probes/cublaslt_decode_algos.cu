// How far is cuBLASLt's first heuristic choice from its best candidate on decoding's skinny products? A decoding
// step at 128 rows spends about 28 us a GPT-2-small layer on four products whose weights (14 MB) stream from DRAM in
// about 5 us at 3 TB/s. Not part of the build (issue 25's one-off measurement); on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/cublaslt_decode_algos.cu -o /tmp/decode_algos -lcublasLt
//   /tmp/decode_algos            # every shape below, bf16
//   /tmp/decode_algos --all-ids  # also every algorithm id cuBLASLt has, each tile, 3 stage counts, split-k 1-8
// Each shape: y[m, n] = x[m, k] w[n, k]^T (+ bias or GELU + bias) as linear_bias_forward describes it; up to 64
// heuristic candidates; each timed as a CUDA graph of 12 launches over 12 weight copies (layers: the weights do not
// stay in L2 between steps), replayed 40 times, median per launch. Prints the heuristic's first and the fastest.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "probe_util.h"

constexpr int kLayers = 12;                 // weight copies a timed graph cycles through
constexpr uint64_t kWorkspace = 32u << 20;  // cuBLASLt's workspace

struct Shape {
  const char* name;
  int m, n, k;
  cublasLtEpilogue_t epilogue;
};

int config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  int value = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written);
  return value;
}

// --all-ids: every algorithm id cuBLASLt has for bf16 in, fp32 compute, each of its tiles, three of its stage counts
// (first, middle, last) and split-k 1, 2, 4, 8 where supported; the configurations cuBLASLt accepts for the shape are
// timed as above (10 replays) and the fastest six printed, then each id's fastest. 25 s of search a shape at most.
void time_every_algorithm(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t lw,
                          cublasLtMatrixLayout_t lx, cublasLtMatrixLayout_t ly, const __nv_bfloat16* w,
                          const __nv_bfloat16* x, __nv_bfloat16* y, size_t wsize, void* workspace,
                          cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  struct Found {
    float us;
    int id, tile, stages, splitk;
  };
  std::vector<Found> all;
  std::vector<int> ids(200);
  int id_count = 0;
  CHECK(cublasLtMatmulAlgoGetIds(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                                 CUDA_R_16BF, 200, ids.data(), &id_count));
  const auto began = std::chrono::steady_clock::now();
  for (int a = 0; a < id_count; ++a) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_16BF,
                               CUDA_R_16BF, ids[a], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    auto list = [&](cublasLtMatmulAlgoCapAttributes_t cap) {
      size_t bytes = 0;
      cublasLtMatmulAlgoCapGetAttribute(&algo, cap, nullptr, 0, &bytes);
      std::vector<uint32_t> values(bytes / sizeof(uint32_t));
      if (!values.empty()) cublasLtMatmulAlgoCapGetAttribute(&algo, cap, values.data(), bytes, &bytes);
      if (values.empty()) values.push_back(0);
      return values;
    };
    const std::vector<uint32_t> tiles = list(CUBLASLT_ALGO_CAP_TILE_IDS);
    std::vector<uint32_t> stages = list(CUBLASLT_ALGO_CAP_STAGES_IDS);
    if (stages.size() > 3) stages = {stages.front(), stages[stages.size() / 2], stages.back()};
    int splitk_support = 0;
    size_t written = 0;
    cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &splitk_support, sizeof(splitk_support),
                                      &written);
    for (uint32_t tile : tiles)
      for (uint32_t stage : stages)
        for (int splitk : {1, 2, 4, 8}) {
          if (splitk > 1 && !splitk_support) continue;
          cublasLtMatmulAlgo_t c = algo;
          cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile));
          cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stage, sizeof(stage));
          cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk));
          if (splitk > 1) {
            const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
            cublasLtMatmulAlgoConfigSetAttribute(&c, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof(scheme));
          }
          cublasLtMatmulHeuristicResult_t check{};
          if (cublasLtMatmulAlgoCheck(handle, desc, lw, lx, ly, ly, &c, &check) != CUBLAS_STATUS_SUCCESS ||
              check.workspaceSize > kWorkspace)
            continue;
          if (cublasLtMatmul(handle, desc, &alpha, w, lw, x, lx, &beta, y, ly, y, ly, &c, workspace, kWorkspace,
                             stream) != CUBLAS_STATUS_SUCCESS ||
              cudaStreamSynchronize(stream) != cudaSuccess)
            continue;
          const float us = graph_launch_us(
              stream, kLayers,
              [&](int layer) {
                cublasLtMatmul(handle, desc, &alpha, w + wsize * layer, lw, x, lx, &beta, y, ly, y, ly, &c, workspace,
                               kWorkspace, stream);
              },
              10);
          all.push_back({us, ids[a], static_cast<int>(tile), static_cast<int>(stage), splitk});
        }
    if (std::chrono::steady_clock::now() - began > std::chrono::seconds(25)) break;
  }
  std::sort(all.begin(), all.end(), [](const Found& a, const Found& b) { return a.us < b.us; });
  std::printf("  all ids (%d ids, %zu configurations timed), fastest:\n", id_count, all.size());
  for (size_t i = 0; i < all.size() && i < 6; ++i)
    std::printf("    %7.2f us algo %d tile %d stages %d splitk %d\n", all[i].us, all[i].id, all[i].tile, all[i].stages,
                all[i].splitk);
  std::vector<int> shown;
  for (const Found& f : all)  // the fastest of each id
    if (std::find(shown.begin(), shown.end(), f.id) == shown.end()) {
      shown.push_back(f.id);
      std::printf("    id %3d best %7.2f us (tile %d stages %d splitk %d)\n", f.id, f.us, f.tile, f.stages, f.splitk);
    }
}

int main(int argc, char** argv) {
  const bool all_ids = argc > 1 && std::string(argv[1]) == "--all-ids";
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
    // The full search only for the 128-row layer products (its run time grows with the shapes).
    if (all_ids && (std::string(s.name).find("x32") != std::string::npos || s.n > 10000)) continue;
    ProductOperands ops(s.m, s.n, s.k, kLayers);
    const size_t wsize = ops.w_elems;
    __nv_bfloat16 *w = ops.w, *x = ops.x, *y = ops.y;
    const LtProduct product(s.m, s.n, s.k, s.epilogue, ops.bias);
    const cublasLtMatmulDesc_t desc = product.desc;
    const cublasLtMatrixLayout_t lw = product.w, lx = product.x, ly = product.y;
    const std::vector<cublasLtMatmulHeuristicResult_t> results =
        heuristic_choices(handle, desc, lw, lx, ly, kWorkspace, 64);
    const int found = static_cast<int>(results.size());
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
      std::printf(
          "  #%-2d %7.2f us %5.2f TB/s algo %d tile %d stages %d splitk %d reduction %d swizzle %d "
          "cluster %d ws %zu%s%s\n",
          t.index, t.us, bytes / (t.us * 1e-6) / 1e12, config(algo, CUBLASLT_ALGO_CONFIG_ID),
          config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID), config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
          config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
          config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID),
          results[t.index].workspaceSize, first ? "  <- heuristic's first" : "", best ? "  <- fastest" : "");
    }
    if (all_ids) time_every_algorithm(handle, desc, lw, lx, ly, w, x, y, wsize, workspace, stream);
  }
  return 0;
}

// Does cuBLASLt's first launch of a GEMM kernel in a process (2-9 ms of host time each on an H100/H200) hold up
// other threads' CUDA work? If not, a decoder's warm-up could load its kernels while the model's weights are placed.
// Not part of the build (issue 23's one-off measurement, bench/results/translate-kernel-loads-h200-2026-11-28.txt);
// on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/cublaslt_first_launch.cu -o /tmp/first_launch -lcublasLt
//   for mode in load other both; do /tmp/first_launch $mode; done     # each mode in a fresh process
// load: 54 bf16 products (row counts 16/256/4096 x six transformer-base weight shapes x three epilogues), each the
// heuristic's first choice, launched and waited for one by one. other: what a model load does beside them (a stream,
// 200 MB uploaded from pageable memory in 4 MB pieces, 200 small kernels, a second cuBLASLt handle). both: the
// loads on a second thread while this one does the other work.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "probe_util.h"

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

__global__ void bump(float* p) { p[threadIdx.x] += 1.0f; }

struct Shape {
  int m, n, k;
  cublasLtEpilogue_t epilogue;
};

struct Operands {
  void *a, *b, *c, *bias, *workspace;
  static constexpr uint64_t kWorkspace = 32u << 20;
};

// y[m, n] = x[m, k] w[n, k]^T (+ bias, ReLU) in bf16, the heuristic's first algorithm; returns each call's seconds.
std::vector<double> run_products(cublasLtHandle_t handle, cudaStream_t stream, const std::vector<Shape>& shapes,
                                 const Operands& op) {
  std::vector<double> seconds;
  for (const Shape& s : shapes) {
    const auto start = Clock::now();
    cublasLtMatmulDesc_t desc;
    CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t transposed = CUBLAS_OP_T;
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transposed, sizeof(transposed)));
    CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof(s.epilogue)));
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &op.bias, sizeof(op.bias)));
    cublasLtMatrixLayout_t w, x, y;
    CHECK(cublasLtMatrixLayoutCreate(&w, CUDA_R_16BF, s.k, s.n, s.k));
    CHECK(cublasLtMatrixLayoutCreate(&x, CUDA_R_16BF, s.k, s.m, s.k));
    CHECK(cublasLtMatrixLayoutCreate(&y, CUDA_R_16BF, s.n, s.m, s.n));
    const uint64_t workspace = Operands::kWorkspace;
    const std::vector<cublasLtMatmulHeuristicResult_t> choices = heuristic_choices(handle, desc, w, x, y, workspace);
    if (choices.empty()) std::exit(1);
    const cublasLtMatmulHeuristicResult_t& result = choices.front();
    const float alpha = 1.0f, beta = 0.0f;
    CHECK(cublasLtMatmul(handle, desc, &alpha, op.a, w, op.b, x, &beta, op.c, y, op.c, y, &result.algo, op.workspace,
                         workspace, stream));
    CHECK(cudaStreamSynchronize(stream));
    seconds.push_back(seconds_since(start));
    cublasLtMatrixLayoutDestroy(w);
    cublasLtMatrixLayoutDestroy(x);
    cublasLtMatrixLayoutDestroy(y);
    cublasLtMatmulDescDestroy(desc);
  }
  return seconds;
}

double other_work(const std::vector<char>& host) {
  const auto start = Clock::now();
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  void* device;
  CHECK(cudaMalloc(&device, host.size()));
  constexpr std::size_t kPiece = 4u << 20;
  for (std::size_t at = 0; at < host.size(); at += kPiece)
    CHECK(cudaMemcpyAsync(static_cast<char*>(device) + at, host.data() + at, std::min(kPiece, host.size() - at),
                          cudaMemcpyHostToDevice, stream));
  float* counters;
  CHECK(cudaMalloc(&counters, 32 * sizeof(float)));
  CHECK(cudaMemsetAsync(counters, 0, 32 * sizeof(float), stream));
  for (int i = 0; i < 200; ++i) bump<<<1, 32, 0, stream>>>(counters);
  CHECK(cudaGetLastError());
  cublasLtHandle_t second;
  CHECK(cublasLtCreate(&second));
  CHECK(cudaStreamSynchronize(stream));
  return seconds_since(start);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "both";
  if (std::strcmp(mode, "load") && std::strcmp(mode, "other") && std::strcmp(mode, "both")) {
    std::fprintf(stderr, "usage: %s load|other|both\n", argv[0]);
    return 2;
  }
  auto start = Clock::now();
  CHECK(cudaFree(nullptr));
  const double context = seconds_since(start);
  cublasLtHandle_t handle;
  CHECK(cublasLtCreate(&handle));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  Operands op;
  const std::size_t a_bytes = 8192ull * 2048 * 2, b_bytes = 4096ull * 2048 * 2;
  CHECK(cudaMalloc(&op.a, a_bytes));
  CHECK(cudaMalloc(&op.b, b_bytes));
  CHECK(cudaMalloc(&op.c, 4096ull * 8192 * 2));
  CHECK(cudaMalloc(&op.bias, 8192 * 2));
  CHECK(cudaMalloc(&op.workspace, Operands::kWorkspace));
  // Values do not matter to which kernel runs or how long it takes to load: 0x3c3c is bf16 0.0115.
  CHECK(cudaMemset(op.a, 0x3c, a_bytes));
  CHECK(cudaMemset(op.b, 0x3c, b_bytes));
  CHECK(cudaMemset(op.bias, 0x3c, 8192 * 2));
  start = Clock::now();
  run_products(handle, stream, {{64, 64, 64, CUBLASLT_EPILOGUE_BIAS}}, op);  // cuBLASLt's own first-use set-up
  const double first_use = seconds_since(start);

  std::vector<Shape> shapes;
  for (int m : {16, 256, 4096})
    for (const auto& nk :
         std::vector<std::pair<int, int>>{{512, 512}, {1536, 512}, {2048, 512}, {512, 2048}, {8000, 512}, {1024, 512}})
      for (auto epilogue : {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS})
        shapes.push_back({m, nk.first, nk.second, epilogue});
  std::vector<char> host(200u << 20, 1);
  std::vector<double> first_calls;
  double loads = 0.0, other = 0.0;
  start = Clock::now();
  if (!std::strcmp(mode, "load")) {
    first_calls = run_products(handle, stream, shapes, op);
    loads = seconds_since(start);
  } else if (!std::strcmp(mode, "other")) {
    other = other_work(host);
  } else {
    std::thread loader([&] {
      const auto t = Clock::now();
      first_calls = run_products(handle, stream, shapes, op);
      loads = seconds_since(t);
    });
    other = other_work(host);
    loader.join();
  }
  const double phase = seconds_since(start);
  start = Clock::now();
  if (std::strcmp(mode, "other")) run_products(handle, stream, shapes, op);  // the same products, kernels loaded
  const double again = seconds_since(start);
  const int slow =
      static_cast<int>(std::count_if(first_calls.begin(), first_calls.end(), [](double s) { return s > 1e-3; }));
  const double longest = first_calls.empty() ? 0.0 : *std::max_element(first_calls.begin(), first_calls.end());
  std::printf(
      "mode %s: context %.3f s, cuBLASLt first use %.3f s, products %.3f s (%zu, %d over 1 ms, longest %.1f ms), "
      "other work %.3f s, the phase %.3f s, the products again %.3f s\n",
      mode, context, first_use, loads, shapes.size(), slow, longest * 1e3, other, phase, again);
  return 0;
}

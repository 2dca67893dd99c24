// What a process pays to start CUDA before lseq does anything: cuInit, the primary context (cudaFree(nullptr)), a
// cuBLASLt handle, a first device and a first pinned host allocation; cumulative seconds since main. Not part of the
// build (issue 23's one-off measurement of a short lstranslate run's fixed costs); on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/cuda_start.cu -o /tmp/cuda_start -lcublasLt -lcuda
//   /tmp/cuda_start
// Results: bench/results/translate-e2e-h200-2026-11-28.txt (its last part), measured with this probe's first form
// (the same calls without the checks); this form was compiled, not run, before the session's device time ran out.
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>

#include "probe_util.h"

int main() {
  const auto start = std::chrono::steady_clock::now();
  auto report = [&](const char* what) {
    std::printf("%-28s %.3f s\n", what,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  CHECK(cuInit(0));
  report("cuInit");
  CHECK(cudaFree(nullptr));
  report("+ primary context");
  cublasLtHandle_t handle;
  CHECK(cublasLtCreate(&handle));
  report("+ cublasLtCreate");
  void* device_memory;
  CHECK(cudaMalloc(&device_memory, size_t(1) << 30));
  report("+ cudaMalloc 1 GiB");
  void* pinned;
  CHECK(cudaMallocHost(&pinned, size_t(64) << 20));
  report("+ cudaMallocHost 64 MiB");
  return 0;
}

// What a process pays to end once it holds a CUDA context: lstranslate on the GPU printed its last line 0.12-0.16 s
// before it exited, though it ends with std::_Exit (util/process_end.h) and skips every destructor. This probe makes
// the context and ends the same way, after one of four set-ups, and prints "ready" just before; its caller times
// the gap from that line to the exit (the driver's teardown of the context). Not part of the build (issue 23's
// one-off measurement); on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/cuda_exit.cu -o /tmp/cuda_exit
//   /tmp/cuda_exit plain|memory|streams|reset     (timed from a parent: see the results file below)
// Results: bench/results/translate-fixed-costs-h200-2026-11-29.txt.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "probe_util.h"

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "plain";
  const size_t bytes = size_t{8} << 30;
  CHECK(cudaFree(nullptr));  // the primary context
  void* memory = nullptr;
  if (std::strcmp(mode, "memory") == 0 || std::strcmp(mode, "reset") == 0) {  // 8 GiB, written
    CHECK(cudaMalloc(&memory, bytes));
    CHECK(cudaMemset(memory, 1, bytes));
    CHECK(cudaDeviceSynchronize());
  }
  if (std::strcmp(mode, "streams") == 0) {  // as many streams as lstranslate's decoders and kernel preload
    for (int i = 0; i < 5; ++i) {
      cudaStream_t stream;
      CHECK(cudaStreamCreate(&stream));
    }
  }
  if (std::strcmp(mode, "reset") == 0) CHECK(cudaDeviceReset());  // the teardown done before the line instead
  std::fprintf(stderr, "ready\n");
  std::fflush(stderr);
  std::_Exit(0);
}

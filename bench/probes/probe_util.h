#pragma once
// What the one-off GPU probes in this folder share (they are not part of the build; each file's first lines give its
// nvcc command): a check that stops the probe on any failing CUDA or cuBLAS call, and the median time a launch takes
// inside a replayed CUDA graph (decoding's steps run as graphs, so that is the time that counts there).
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

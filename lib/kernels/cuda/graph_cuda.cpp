// Recording on the CUDA backend: the ops that `ops` issues are captured from the backend's stream into a CUDA
// graph, instantiated once; a replay is one cudaGraphLaunch instead of one host call (and one cuBLAS heuristic
// lookup) per op. Capture is thread-local, so work that other threads issue on other streams is not affected.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace lseq::kernels {

namespace {

class CudaGraph : public OpGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream, int device) : exec_(exec), stream_(stream), device_(device) {}
  ~CudaGraph() override {
    cudaSetDevice(device_);
    cudaGraphExecDestroy(exec_);
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay() override {
    LSEQ_CUDA_CHECK(cudaSetDevice(device_));
    LSEQ_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
  }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  int device_;
};

}  // namespace

std::unique_ptr<OpGraph> CudaBackend::record(const std::function<void()>& ops) {
  bind();
  LSEQ_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    ops();
  } catch (...) {
    // End the capture whatever happened, so that the stream is usable again, and report the op's own error.
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  LSEQ_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  LSEQ_CUDA_CHECK(status);
  return std::make_unique<CudaGraph>(exec, stream_, device_);
}

}  // namespace lseq::kernels

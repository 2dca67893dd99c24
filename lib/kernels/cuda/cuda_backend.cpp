// Construction of the CUDA backend: device, stream, cuBLAS and cuBLASLt handles with their shared workspace, and the
// op scratch, all made once here (no op allocates).
#include "kernels/cuda/cuda_backend.h"

#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace lseq::kernels {

CudaBackend::CudaBackend(int device, bool allow_tf32) : device_(device), allow_tf32_(allow_tf32) {
  LSEQ_CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  LSEQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  name_ = fmt::format("cuda:{} {}", device_, prop.name);
  sm_count_ = prop.multiProcessorCount;
  try {
    LSEQ_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    LSEQ_CUBLAS_CHECK(cublasCreate(&cublas_));
    LSEQ_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    LSEQ_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes));
    LSEQ_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
    LSEQ_CUBLAS_CHECK(cublasLtCreate(&cublas_lt_));
    // Pointers to alpha/beta come from the host; TF32 only when asked (CUBLAS_COMPUTE_32F stays exact fp32 then).
    LSEQ_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
    LSEQ_CUBLAS_CHECK(cublasSetMathMode(cublas_, allow_tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    LSEQ_CUDA_CHECK(cudaMalloc(&scratch_, kScratchBytes));
    void* staging = nullptr;
    LSEQ_CUDA_CHECK(cudaMallocHost(&staging, kUploadSlots * kUploadSlotBytes));
    upload_staging_ = static_cast<char*>(staging);
    LSEQ_CUDA_CHECK(cudaMallocHost(&staging, kDownloadBytes));
    download_staging_ = static_cast<char*>(staging);
    for (cudaEvent_t& done : upload_done_) LSEQ_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    LSEQ_CUDA_CHECK(cudaMallocHost(&staging, kAsyncDownloadSlots * kAsyncDownloadBytes));
    async_download_staging_ = static_cast<char*>(staging);
    for (cudaEvent_t& done : async_download_done_)
      LSEQ_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    warm_up_matmuls();
  } catch (...) {
    release_resources();  // a constructor that throws runs no destructor
    throw;
  }
}

CudaBackend::~CudaBackend() { release_resources(); }

void CudaBackend::release_resources() noexcept {
  // No throwing here: a failing GPU at shutdown must not turn into std::terminate.
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_);
  release_matmul_plans();
  if (cublas_lt_) cublasLtDestroy(cublas_lt_);
  if (cublas_) cublasDestroy(cublas_);
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (scratch_) cudaFree(scratch_);
  if (upload_staging_) cudaFreeHost(upload_staging_);
  if (download_staging_) cudaFreeHost(download_staging_);
  download_staging_ = nullptr;
  for (cudaEvent_t& done : upload_done_) {
    if (done) cudaEventDestroy(done);
    done = nullptr;
  }
  upload_staging_ = nullptr;
  if (async_download_staging_) cudaFreeHost(async_download_staging_);
  async_download_staging_ = nullptr;
  for (cudaEvent_t& done : async_download_done_) {
    if (done) cudaEventDestroy(done);
    done = nullptr;
  }
  if (stream_) cudaStreamDestroy(stream_);
  cublas_ = nullptr;
  cublas_lt_ = nullptr;
  cublas_workspace_ = scratch_ = nullptr;
  stream_ = nullptr;
}

void CudaBackend::bind() const { LSEQ_CUDA_CHECK(cudaSetDevice(device_)); }

void CudaBackend::check_launch(const char* op) const {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) cuda::check_cuda(status, fmt::format("{} (kernel launch on {})", op, name_).c_str());
}

}  // namespace lseq::kernels

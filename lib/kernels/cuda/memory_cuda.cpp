// Device memory and copies of the CUDA backend. The host buffer of a copy may be reused as soon as the call
// returns: copies to the host wait for completion; small copies to the device are staged in pinned memory and
// queued without waiting (larger ones wait); device-to-device copies stay in stream order.
#include <cstring>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace lseq::kernels {

void* CudaBackend::allocate(std::size_t bytes) {
  bind();
  void* p = nullptr;
  // A zero-byte request still gets a valid, distinct block (as on the CPU). cudaMalloc aligns to 256 bytes.
  const cudaError_t status = cudaMalloc(&p, bytes == 0 ? 256 : bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    cudaGetLastError();
    fail(
        "cannot allocate {} bytes ({:.2f} GiB) on {} ({}; {:.2f} GiB free of {:.2f} GiB); lower the batch or model "
        "size",
        bytes, static_cast<double>(bytes) / (1u << 30), name_, cudaGetErrorString(status),
        static_cast<double>(free_bytes) / (1u << 30), static_cast<double>(total_bytes) / (1u << 30));
  }
  return p;
}

void CudaBackend::release(void* p) {
  if (!p) return;
  bind();
  LSEQ_CUDA_CHECK(cudaFree(p));
}

void CudaBackend::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (!bytes) return;
  bind();
  if (bytes <= kUploadSlotBytes) {
    const int slot = upload_next_;
    upload_next_ = (upload_next_ + 1) % kUploadSlots;
    LSEQ_CUDA_CHECK(cudaEventSynchronize(upload_done_[slot]));  // the slot's previous copy has been read
    char* staging = upload_staging_ + static_cast<std::size_t>(slot) * kUploadSlotBytes;
    std::memcpy(staging, host_src, bytes);
    LSEQ_CUDA_CHECK(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyHostToDevice, stream_));
    LSEQ_CUDA_CHECK(cudaEventRecord(upload_done_[slot], stream_));
    return;
  }
  LSEQ_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  LSEQ_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (!bytes) return;
  bind();
  if (bytes <= kDownloadBytes) {
    LSEQ_CUDA_CHECK(cudaMemcpyAsync(download_staging_, src, bytes, cudaMemcpyDeviceToHost, stream_));
    LSEQ_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(host_dst, download_staging_, bytes);
    return;
  }
  LSEQ_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  LSEQ_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

int CudaBackend::download_async(const void* src, std::size_t bytes) {
  if (bytes > kAsyncDownloadBytes) fail("internal error: an asynchronous download of {} bytes", bytes);
  bind();
  const int slot = async_download_next_;
  async_download_next_ = (async_download_next_ + 1) % kAsyncDownloadSlots;
  // A slot not collected yet still holds its copy: its next one waits for the previous to land.
  LSEQ_CUDA_CHECK(cudaEventSynchronize(async_download_done_[slot]));
  char* staging = async_download_staging_ + static_cast<std::size_t>(slot) * kAsyncDownloadBytes;
  if (bytes) LSEQ_CUDA_CHECK(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToHost, stream_));
  LSEQ_CUDA_CHECK(cudaEventRecord(async_download_done_[slot], stream_));
  return slot;
}

void CudaBackend::collect_download(int slot, void* host_dst, std::size_t bytes) {
  if (slot < 0 || slot >= kAsyncDownloadSlots || bytes > kAsyncDownloadBytes)
    fail("internal error: collecting {} bytes from download slot {}", bytes, slot);
  bind();
  LSEQ_CUDA_CHECK(cudaEventSynchronize(async_download_done_[slot]));
  if (bytes)
    std::memcpy(host_dst, async_download_staging_ + static_cast<std::size_t>(slot) * kAsyncDownloadBytes, bytes);
}

void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (!bytes || dst == src) return;
  bind();
  LSEQ_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::synchronize() {
  bind();
  LSEQ_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace lseq::kernels

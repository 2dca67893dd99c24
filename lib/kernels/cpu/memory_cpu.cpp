// Host memory for the CPU backend: 256-byte aligned blocks (the workspace's alignment) and plain copies.
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "util/error.h"

namespace lseq::kernels {

namespace {
constexpr std::size_t kHostAlignment = 256;
}

void* CpuBackend::allocate(std::size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a valid, distinct block.
  const std::size_t rounded =
      bytes == 0 ? kHostAlignment : (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  if (rounded < bytes) fail("cannot allocate {} bytes of host memory: the size overflows", bytes);
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  if (!p)
    fail(
        "cannot allocate {} bytes ({:.2f} GiB) of host memory for the CPU backend; lower the batch or "
        "model size",
        bytes, static_cast<double>(bytes) / (1u << 30));
  return p;
}

void CpuBackend::release(void* p) { std::free(p); }

void CpuBackend::copy_to_device(void* dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}

void CpuBackend::copy_to_host(void* host_dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}

int CpuBackend::download_async(const void* src, std::size_t bytes) {
  if (bytes > kAsyncDownloadBytes) fail("internal error: an asynchronous download of {} bytes", bytes);
  const int slot = download_next_;
  download_next_ = (download_next_ + 1) % kAsyncDownloadSlots;
  const auto* from = static_cast<const unsigned char*>(src);
  download_slots_[slot].assign(from, from + bytes);
  return slot;
}

void CpuBackend::collect_download(int slot, void* host_dst, std::size_t bytes) {
  if (slot < 0 || slot >= kAsyncDownloadSlots || bytes > download_slots_[slot].size())
    fail("internal error: collecting {} bytes from download slot {}", bytes, slot);
  if (bytes) std::memcpy(host_dst, download_slots_[slot].data(), bytes);
}

void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes && dst != src) std::memmove(dst, src, bytes);
}

}  // namespace lseq::kernels

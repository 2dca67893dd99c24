#pragma once
// Asynchronous global -> shared copies (sm_80+ cp.async): a thread issues all of its 16-byte copies before waiting on
// any, so a block that stages a tile keeps every load in flight at once instead of paying one memory latency per
// load-then-store. The copies bypass registers and L1 (.cg).
#include <cstdint>

namespace lseq::kernels::cuda {

// Copies 16 bytes from global src to shared dst when `fill` holds, else writes 16 zero bytes to dst (src is not
// read, but must still be a valid address). Both 16-byte aligned.
__device__ __forceinline__ void copy_async_16(void* dst, const void* src, bool fill) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int bytes = fill ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src), "r"(bytes) : "memory");
#else
  *static_cast<uint4*>(dst) = fill ? *static_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);
#endif
}

// Waits until every copy this thread issued has landed; a __syncthreads() after it makes them visible block-wide.
__device__ __forceinline__ void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
#endif
}

// Pipelined staging: commit_async_copies() closes the group of copies issued since the last commit, and
// wait_async_copy_groups<N>() waits until at most N committed groups are still in flight (N = 1: the previous
// tile has landed while the next one flies).
__device__ __forceinline__ void commit_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void wait_async_copy_groups() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace lseq::kernels::cuda

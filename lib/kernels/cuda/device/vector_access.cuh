#pragma once
// 16-byte vector access for the memory-bound kernels: a thread loads or stores one "pack" (8 bf16/fp16 or 4 fp32
// elements) with a single 128-bit instruction and does its math in fp32. The H100/H200 reach their memory
// bandwidth only with wide, coalesced accesses; 2-byte loads leave most of it unused.
//
// Callers check can_vectorize() (pointer alignment and a row length that is a multiple of the pack) and keep a
// scalar path for the rest.
#include <cstdint>

#include "kernels/cuda/device/cuda_common.cuh"

namespace lseq::kernels::cuda {

template <typename T>
struct Pack {
  static constexpr int size = 16 / static_cast<int>(sizeof(T));  // elements per 16 bytes
};

template <typename T>
__device__ __forceinline__ void load_pack(const T* src, float (&out)[Pack<T>::size]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  const T* v = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < Pack<T>::size; ++i) out[i] = to_f32(v[i]);
}

template <typename T>
__device__ __forceinline__ void store_pack(T* dst, const float (&in)[Pack<T>::size]) {
  uint4 raw;
  T* v = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < Pack<T>::size; ++i) v[i] = from_f32<T>(in[i]);
  *reinterpret_cast<uint4*>(dst) = raw;
}

// Copies one pack without conversion (gathers, layout changes).
template <typename T>
__device__ __forceinline__ void copy_pack(T* dst, const T* src) {
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// True when every pointer is 16-byte aligned (nullptr counts as aligned) and `inner` (the contiguous run each
// vector stays within: a row length, a head dimension) is a multiple of the pack of T.
template <typename T, typename... P>
inline bool can_vectorize(int64_t inner, const P*... ptrs) {
  return inner % Pack<T>::size == 0 && (aligned16(ptrs) && ...);
}

}  // namespace lseq::kernels::cuda

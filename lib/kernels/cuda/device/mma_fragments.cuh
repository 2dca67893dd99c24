#pragma once
// Warp-wide tensor-core products through PTX mma.sync m16n8k16 (sm_80+, 16-bit inputs, fp32 accumulation) and
// ldmatrix loads of their operands from shared memory. Unlike WMMA's opaque fragments, these layouts are fixed by
// the PTX ISA ("Matrix fragments for mma.m16n8k16"), so a kernel can work on a product's result in registers and
// feed it to the next product without a trip through shared memory:
//   - a 16x8 fp32 accumulator tile: lane l holds row l/4 at columns 2(l%4), 2(l%4)+1 (c[0], c[1]) and row l/4 + 8
//     at the same columns (c[2], c[3]);
//   - a 16x16 A operand (row-major, 16-bit pairs): a[0] row l/4, columns 2(l%4)+{0,1}; a[1] row l/4 + 8, same
//     columns; a[2], a[3] the same rows at columns + 8;
//   - so two accumulator tiles side by side (16 columns), packed to pairs, are the A operand of a product over those
//     16 columns: a = {pack(c0[0], c0[1]), pack(c0[2], c0[3]), pack(c1[0], c1[1]), pack(c1[2], c1[3])}.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace lseq::kernels::cuda {

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit elements from shared memory: lane l passes the address of row l % 8 of matrix l / 8
// (16 contiguous bytes, 16-byte aligned). r[m] then holds, of matrix m, row l / 4 at elements 2(l%4) and 2(l%4)+1.
__device__ __forceinline__ void load_matrices(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}

// The same with each matrix transposed: r[m] holds, of matrix m, elements [2(l%4)][l/4] and [2(l%4)+1][l/4].
__device__ __forceinline__ void load_matrices_transposed(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}

// d += a b for a 16x16 A (row-major fragment), a 16x8 B (b0: rows 2(l%4)+{0,1} of column l/4; b1: rows + 8).
template <typename T>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16x8x16<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                           uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16x8x16<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                    uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two values rounded to T in one 32-bit register, lo in the lower half (the lower column of a fragment pair).
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi);

template <>
__device__ __forceinline__ uint32_t pack_pair<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <>
__device__ __forceinline__ uint32_t pack_pair<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The pair's two values (lower half first).
template <typename T>
__device__ __forceinline__ float2 unpack_pair(uint32_t bits);

template <>
__device__ __forceinline__ float2 unpack_pair<__nv_bfloat16>(uint32_t bits) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
}

template <>
__device__ __forceinline__ float2 unpack_pair<__half>(uint32_t bits) {
  return __half22float2(*reinterpret_cast<const __half2*>(&bits));
}

}  // namespace lseq::kernels::cuda

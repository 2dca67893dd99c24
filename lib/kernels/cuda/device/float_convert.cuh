#pragma once
// Device twins of cpu/float_convert.h, bit for bit: round to nearest even, NaN kept quiet with the same payload
// bits, fp16 overflow to infinity and subnormals. Used where bits must equal the CPU's (cast, working copies).
#include <cstdint>

namespace lseq::kernels::cuda {

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ uint16_t f32_to_f16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t x = u & 0x7FFFFFFFu;
  if (x >= 0x7F800000u)
    return static_cast<uint16_t>(sign | 0x7C00u | (x > 0x7F800000u ? 0x0200u | ((x >> 13) & 0x3FFu) : 0u));
  if (x >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (x < 0x38800000u) {
    const uint32_t exponent = x >> 23;
    const int shift = 126 - static_cast<int>(exponent);
    if (shift > 24) return static_cast<uint16_t>(sign);
    const uint32_t mantissa = (x & 0x7FFFFFu) | 0x800000u;
    uint32_t q = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t rebiased = x - (112u << 23);
  return static_cast<uint16_t>(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
}

__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return __uint_as_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace lseq::kernels::cuda

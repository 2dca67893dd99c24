#pragma once
// Bit-exact conversions between fp32 and the 16-bit float formats (IEEE fp16, bfloat16), rounding to nearest
// even, keeping NaN a (quiet) NaN, and handling infinities and fp16 subnormals. Host code; used by the CPU
// backend's cast and by anything that reads or writes 16-bit tensors on the host.
#include <cstdint>
#include <cstring>

namespace lseq::kernels {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest even; a carry into the exponent is the right
  // result (up to infinity for the largest finite floats).
  const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t x = u & 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {  // infinity or NaN (NaN stays quiet and keeps its top payload bits)
    return static_cast<uint16_t>(sign | 0x7C00u | (x > 0x7F800000u ? 0x0200u | ((x >> 13) & 0x3FFu) : 0u));
  }
  if (x >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {  // below 2^-14: an fp16 subnormal (or zero), in units of 2^-24
    const uint32_t exponent = x >> 23;
    const int shift = 126 - static_cast<int>(exponent);  // value = mantissa * 2^(exponent-150)
    if (shift > 24) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    const uint32_t mantissa = (x & 0x7FFFFFu) | 0x800000u;
    uint32_t q = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;  // may carry into the smallest normal: still right
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t rebiased = x - (112u << 23);  // exponent bias 127 -> 15
  return static_cast<uint16_t>(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // exact: mantissa * 2^-24
    return sign ? -magnitude : magnitude;
  }
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace lseq::kernels

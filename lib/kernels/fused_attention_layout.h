#pragma once
// The token-major layout of the fused attention core's operands (Backend::attention_forward/backward), shared by
// the CPU and CUDA backends. Padded: sentence b's position i, head h sits at (b*len + i)*ld + h*head_dim of an
// operand with `len` rows per sentence and row stride ld. Packed (padding-free, `offsets` a device array of
// batch + 1 row offsets): at (offsets[b] + i)*ld + h*head_dim for i < offsets[b+1] - offsets[b] (at most len);
// positions past a sentence's rows do not exist there.
#include <cstdint>

#include "util/host_device.h"

namespace lseq::kernels {

// The first row of sentence b.
LSEQ_HOST_DEVICE int64_t fused_attention_first_row(int64_t b, int len, const int32_t* offsets) {
  return offsets ? static_cast<int64_t>(offsets[b]) : b * len;
}

// The rows of sentence b: len when padded, its own count (clamped to [0, len]) when packed.
LSEQ_HOST_DEVICE int fused_attention_rows(int64_t b, int len, const int32_t* offsets) {
  if (!offsets) return len;
  const int n = offsets[b + 1] - offsets[b];
  return n < 0 ? 0 : n > len ? len : n;
}

// Where slice s (sentence s / heads, head s % heads) starts; its position i is at that offset + i*ld.
LSEQ_HOST_DEVICE int64_t fused_attention_slice_at(int64_t s, int heads, int len, int head_dim, int64_t ld,
                                                  const int32_t* offsets = nullptr) {
  return fused_attention_first_row(s / heads, len, offsets) * ld + (s % heads) * head_dim;
}

}  // namespace lseq::kernels

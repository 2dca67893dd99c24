#pragma once
// The token-major layout of the fused attention core's operands (Backend::attention_forward/backward), shared by
// the CPU and CUDA backends: sentence b's position i, head h sits at (b*len + i)*ld + h*head_dim of an operand with
// `len` rows per sentence and row stride ld.
#include <cstdint>

#include "kernels/host_device.h"

namespace lseq::kernels {

// Where slice s (sentence s / heads, head s % heads) starts; its position i is at that offset + i*ld.
LSEQ_HOST_DEVICE int64_t fused_attention_slice_at(int64_t s, int heads, int len, int head_dim, int64_t ld) {
  return (s / heads) * len * ld + (s % heads) * head_dim;
}

}  // namespace lseq::kernels

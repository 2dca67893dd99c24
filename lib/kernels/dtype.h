#pragma once
// Element types of activations and working weights. Master weights, gradients, optimizer moments and
// statistics (LayerNorm mean/rstd, losses) are always fp32.
#include <cstddef>
#include <string>

namespace lseq::kernels {

enum class DType { f32, f16, bf16 };

inline std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

}  // namespace lseq::kernels

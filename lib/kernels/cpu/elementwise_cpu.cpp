// Elementwise ops of the CPU backend: fill, add, scale, cast between float formats, sum, dropout.
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/float_convert.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::fill(DType dt, void* x, std::size_t n, float value) {
  const auto count = static_cast<int64_t>(n);
  switch (dt) {
    case DType::f32: {
      float* y = f32(x);
      cpu::parallel_for(threads_, count, 1, [&](int64_t i) { y[i] = value; });
      break;
    }
    case DType::f16:
    case DType::bf16: {
      const uint16_t bits = dt == DType::f16 ? float_to_f16(value) : float_to_bf16(value);
      auto* y = static_cast<uint16_t*>(x);
      cpu::parallel_for(threads_, count, 1, [&](int64_t i) { y[i] = bits; });
      break;
    }
  }
}

void CpuBackend::add(DType dt, const void* a, const void* b, std::size_t n, void* y) {
  cpu::require_f32(dt, "add");
  const float* pa = f32(a);
  const float* pb = f32(b);
  float* py = f32(y);
  cpu::parallel_for(threads_, static_cast<int64_t>(n), 1, [&](int64_t i) { py[i] = pa[i] + pb[i]; });
}

void CpuBackend::scale(DType dt, const void* x, std::size_t n, float alpha, void* y) {
  cpu::require_f32(dt, "scale");
  const float* px = f32(x);
  float* py = f32(y);
  cpu::parallel_for(threads_, static_cast<int64_t>(n), 1, [&](int64_t i) { py[i] = alpha * px[i]; });
}

void CpuBackend::cast(DType src_dt, const void* src, DType dst_dt, void* dst, std::size_t n) {
  const auto count = static_cast<int64_t>(n);
  if (src_dt == dst_dt) {
    copy(dst, src, n * dtype_size(src_dt));
    return;
  }
  const auto* s16 = static_cast<const uint16_t*>(src);
  auto* d16 = static_cast<uint16_t*>(dst);
  // Widen to fp32 (exact), then narrow (one rounding): correct for every pair, fp16 <-> bf16 included.
  auto load = [&](int64_t i) {
    switch (src_dt) {
      case DType::f16: return f16_to_float(s16[i]);
      case DType::bf16: return bf16_to_float(s16[i]);
      default: return f32(src)[i];
    }
  };
  switch (dst_dt) {
    case DType::f32: {
      float* d = f32(dst);
      cpu::parallel_for(threads_, count, 1, [&](int64_t i) { d[i] = load(i); });
      break;
    }
    case DType::f16: cpu::parallel_for(threads_, count, 1, [&](int64_t i) { d16[i] = float_to_f16(load(i)); }); break;
    case DType::bf16: cpu::parallel_for(threads_, count, 1, [&](int64_t i) { d16[i] = float_to_bf16(load(i)); }); break;
  }
}

void CpuBackend::reduce_sum(const float* x, std::size_t n, float* out, bool accumulate) {
  const double sum = cpu::deterministic_sum(threads_, n, [&](std::size_t i) { return static_cast<double>(x[i]); });
  out[0] = static_cast<float>(accumulate ? out[0] + sum : sum);
}

void CpuBackend::dropout(DType dt, const void* x, std::size_t n, const Dropout& drop, void* y) {
  cpu::require_f32(dt, "dropout");
  cpu::require_dropout_p(drop.p, "dropout");
  const float* px = f32(x);
  float* py = f32(y);
  if (drop.p == 0.0f) {
    copy(y, x, n * sizeof(float));
    return;
  }
  const cpu::DropoutMask mask(drop);
  cpu::parallel_for(threads_, static_cast<int64_t>(n), 4, [&](int64_t i) { py[i] = px[i] * mask(i); });
}

}  // namespace lseq::kernels

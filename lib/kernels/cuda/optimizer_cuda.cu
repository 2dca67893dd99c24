// Gradient norm with the clipping factor (two-stage deterministic sum; norm and factor stay on the device) and
// AdamW over the flat fp32 buffers, writing the working copy in the same pass. Adam's arithmetic uses explicitly
// rounded fp32 operations (no fused multiply-add), in the CPU's order, so both backends take the same step.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/float_convert.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

struct ScaledSquare {
  const float* g;
  double s;
  __device__ double operator()(std::size_t i) const {
    const double v = s * g[i];
    return v * v;
  }
};

struct NormAndFactor {
  float *norm, *factor;
  double s;
  float max_norm;
  __device__ void operator()(double sq) const {
    const double total = sqrt(sq);
    norm[0] = static_cast<float>(total);
    if (!isfinite(total) || !isfinite(norm[0])) {
      factor[0] = NAN;
      return;
    }
    const double clip = max_norm > 0.0f && total > max_norm ? max_norm / total : 1.0;
    factor[0] = static_cast<float>(s * clip);
  }
};

__global__ void adam_kernel(float* params, const float* grads, float* m, float* v, std::size_t n, AdamArgs a,
                            float inv_bc1, float inv_bc2, const float* factor, DType working_dt, void* working) {
  const float f = factor ? factor[0] : 1.0f;
  if (!isfinite(f)) return;  // a NaN/Inf step: leave parameters, moments and working copy as they are
  const float one_b1 = __fsub_rn(1.0f, a.beta1), one_b2 = __fsub_rn(1.0f, a.beta2);
  for (std::size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float g = __fmul_rn(grads[i], f);
    const float mi = __fadd_rn(__fmul_rn(a.beta1, m[i]), __fmul_rn(one_b1, g));
    const float vi = __fadd_rn(__fmul_rn(a.beta2, v[i]), __fmul_rn(__fmul_rn(one_b2, g), g));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, inv_bc2)), a.eps);
    const float update = __fadd_rn(__fdiv_rn(__fmul_rn(mi, inv_bc1), denom), __fmul_rn(a.weight_decay, params[i]));
    const float p = __fsub_rn(params[i], __fmul_rn(a.lr, update));
    params[i] = p;
    if (working) {
      switch (working_dt) {
        case DType::f32: static_cast<float*>(working)[i] = p; break;
        case DType::f16: static_cast<uint16_t*>(working)[i] = f32_to_f16_bits(p); break;
        case DType::bf16: static_cast<uint16_t*>(working)[i] = f32_to_bf16_bits(p); break;
      }
    }
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::grad_norm(const float* grads, std::size_t n, float pre_scale, float max_norm, float* norm,
                            float* factor) {
  bind();
  const int blocks = sum_blocks(n);
  auto* partials = static_cast<double*>(scratch_);
  sum_partials_kernel<<<blocks, kThreads, 0, stream_>>>(ScaledSquare{grads, pre_scale}, n, partials);
  check_launch("grad_norm");
  sum_finish_kernel<<<1, 1024, 0, stream_>>>(partials, blocks, NormAndFactor{norm, factor, pre_scale, max_norm});
  check_launch("grad_norm");
}

void CudaBackend::adam_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                              const AdamArgs& args, const float* factor, DType working_dt, void* working) {
  if (n == 0) return;
  bind();
  // The host computes the reciprocals exactly as the CPU backend does.
  const float inv_bc1 = 1.0f / args.bias_correction1, inv_bc2 = 1.0f / args.bias_correction2;
  adam_kernel<<<grid_for(n), kThreads, 0, stream_>>>(params, grads, m, v, n, args, inv_bc1, inv_bc2, factor, working_dt,
                                                     working);
  check_launch("adam_update");
}

}  // namespace lseq::kernels

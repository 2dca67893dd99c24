// Top-k sampling's draw on the GPU (Backend::draw_topk): one thread a row runs kernels/topk_draw.h, the function the
// host search and the CPU backend run, so the device draws what the host would. A step's few rows (one per prompt)
// make this a few microseconds; what it buys is that a step's tokens stay on the device for the next step, which
// the search can then queue before it reads them (core/search/sampling.cpp).
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/topk_draw.h"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kDrawThreads = 128;

__global__ void __launch_bounds__(kDrawThreads)
    draw_topk_kernel(const float* __restrict__ values, const int32_t* __restrict__ ids,
                     const float* __restrict__ eos_log_probs, int rows, int k, int32_t eos_id, double temperature,
                     uint64_t* __restrict__ streams, int32_t* __restrict__ remaining, int32_t* __restrict__ tokens,
                     float* __restrict__ token_log_probs) {
  const int r = blockIdx.x * kDrawThreads + threadIdx.x;
  if (r >= rows) return;
  int32_t token = eos_id;
  float token_log_prob = eos_log_probs[r];
  if (remaining[r] > 0) {
    int32_t kept[kMaxTopK];
    float kept_log_probs[kMaxTopK];
    const int n = topk_candidates(values + static_cast<int64_t>(r) * k, ids + static_cast<int64_t>(r) * k,
                                  token_log_prob, eos_id, k, kept, kept_log_probs);
    if (n > 0) {
      uint64_t stream = streams[r];
      const int chosen = draw_weighted(kept_log_probs, n, temperature, next_uniform(stream));
      streams[r] = stream;
      token = kept[chosen], token_log_prob = kept_log_probs[chosen];
      if (token != eos_id) remaining[r] -= 1;
    }
  }
  tokens[r] = token;
  token_log_probs[r] = token_log_prob;
}

}  // namespace
}  // namespace cuda

void CudaBackend::draw_topk(const float* values, const int32_t* ids, const float* eos_log_probs, int rows, int k,
                            int32_t eos_id, double temperature, uint64_t* streams, int32_t* remaining, int32_t* tokens,
                            float* token_log_probs) {
  check_draw_topk_args(rows, k, temperature);
  if (rows == 0) return;
  bind();
  const auto blocks = static_cast<unsigned>((rows + cuda::kDrawThreads - 1) / cuda::kDrawThreads);
  cuda::draw_topk_kernel<<<blocks, cuda::kDrawThreads, 0, stream_>>>(
      values, ids, eos_log_probs, rows, k, eos_id, temperature, streams, remaining, tokens, token_log_probs);
  check_launch("draw_topk");
}

}  // namespace lseq::kernels

// Beam search's top-k of the next-token log-probabilities (Backend::topk_log_softmax), one block per row: an online
// max/sum pass for the log-sum-exp, then every thread keeps the k best of its strided slice (sorted, in local
// memory) and k block-wide rounds take the best head among the threads. Only rows x (2k + 1) values are written.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/topk_order.h"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kTopKThreads = 256;

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fffffff); }

template <typename T>
__device__ float row_lse(const T* x, int cols, float* shared) {
  float m = -INFINITY, s = 0.0f;
  for (int v = threadIdx.x; v < cols; v += blockDim.x) {
    const float xv = to_f32(x[v]);
    if (xv > m) {
      s = s * expf(m - xv) + 1.0f;
      m = xv;
    } else {
      s += expf(xv - m);
    }
  }
  const float row_max = block_max(m, shared);
  const float scaled = m == -INFINITY ? 0.0f : s * expf(m - row_max);
  return row_max + logf(block_sum(scaled, shared));
}

// The best (value, id) over the block by topk_better (a total order, so every lane of the butterfly agrees); every
// thread gets it. Ends with a barrier, so the shared arrays may be reused right after.
__device__ void block_best(float& v, int32_t& id, float* shared_v, int32_t* shared_id) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int32_t oid = __shfl_xor_sync(0xffffffffu, id, offset);
    if (topk_better(ov, oid, v, id)) v = ov, id = oid;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) shared_v[warp] = v, shared_id[warp] = id;
  __syncthreads();
  v = lane < warps ? shared_v[lane] : nan_f32();
  id = lane < warps ? shared_id[lane] : kNoTopKId;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int32_t oid = __shfl_xor_sync(0xffffffffu, id, offset);
    if (topk_better(ov, oid, v, id)) v = ov, id = oid;
  }
  __syncthreads();
}

template <typename T>
__global__ void topk_log_softmax_kernel(const T* logits, int cols, int k, int first_allowed_id, int eos_id,
                                        float* values, int32_t* ids, float* eos_log_prob) {
  __shared__ float shared[32];
  __shared__ float shared_v[32];
  __shared__ int32_t shared_id[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  const float lse = row_lse(x, cols, shared);
  float top_v[kMaxTopK];
  int32_t top_id[kMaxTopK];
  for (int i = 0; i < k; ++i) top_v[i] = nan_f32(), top_id[i] = kNoTopKId;
  for (int v = first_allowed_id + threadIdx.x; v < cols; v += blockDim.x)
    topk_insert(top_v, top_id, k, to_f32(x[v]) - lse, v);
  int head = 0;  // this thread's best candidate not yet taken
  for (int i = 0; i < k; ++i) {
    float best_v = head < k ? top_v[head] : nan_f32();
    int32_t best_id = head < k ? top_id[head] : kNoTopKId;
    block_best(best_v, best_id, shared_v, shared_id);
    if (threadIdx.x == 0) {
      const bool empty = best_id == kNoTopKId;
      values[row * k + i] = empty ? -INFINITY : best_v;
      ids[row * k + i] = empty ? -1 : best_id;
    }
    // Ids are unique across threads, so exactly the owner advances (nobody once only empty slots remain).
    if (head < k && best_id != kNoTopKId && top_id[head] == best_id) ++head;
  }
  if (threadIdx.x == 0) eos_log_prob[row] = to_f32(x[eos_id]) - lse;
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::topk_log_softmax(DType dt, const void* logits, int rows, int cols, int k, int first_allowed_id,
                                   int eos_id, float* values, int32_t* ids, float* eos_log_prob) {
  if (rows < 0 || cols < 1) fail("topk_log_softmax: invalid shape rows={} cols={}", rows, cols);
  if (k < 1 || k > kMaxTopK) fail("topk_log_softmax: k = {} is outside [1, {}]", k, kMaxTopK);
  if (eos_id < 0 || eos_id >= cols) fail("topk_log_softmax: eos id {} is outside the {} columns", eos_id, cols);
  if (first_allowed_id < 0) fail("topk_log_softmax: first allowed id {} is negative", first_allowed_id);
  if (rows == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    topk_log_softmax_kernel<T><<<rows, kTopKThreads, 0, stream_>>>(static_cast<const T*>(logits), cols, k,
                                                                   first_allowed_id, eos_id, values, ids,
                                                                   eos_log_prob);
  });
  check_launch("topk_log_softmax");
}

}  // namespace lseq::kernels

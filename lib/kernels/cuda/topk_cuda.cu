// Beam search's top-k of the next-token log-probabilities (Backend::topk_log_softmax), one block per row, in two
// passes over the row: the log-sum-exp (online max and sum per thread, then the block's), then every thread keeps
// the k best log-probabilities of its strided part of the row, sorted, behind a register copy of its worst kept
// one (most elements are rejected by one comparison), and k block-wide rounds take the best head among the
// threads. The second pass mostly reads L2 (a 32000-column bf16 row is 64 KB). Rows are read in 16-byte packs
// where the row start and length allow, else element by element. Only rows x (2k + 1) values are written.
//
// (Until 2026-11-24 a decoding row was held in registers by a 1024-thread block and the k rounds ran over 32
// warps: 118 us for 512 rows x 32000 on an H100, 10x the time its bytes take.)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/vector_access.cuh"
#include "kernels/topk_order.h"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kChunksInFlight = 4;  // loads issued before the first is used

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fffffff); }

// W elements from p widened to fp32: one element, or one 16-byte pack.
template <typename T, int W>
__device__ __forceinline__ void load_elements(const T* p, float (&out)[W]) {
  if constexpr (W == 1)
    out[0] = to_f32(p[0]);
  else
    load_pack(p, out);
}

// Calls visit(chunk, values) for this thread's chunks of W elements (chunk c covers columns c*W .. c*W + W - 1),
// kChunksInFlight loads at a time.
template <typename T, int W, typename Visit>
__device__ __forceinline__ void for_my_chunks(const T* x, int chunks, Visit&& visit) {
  const int step = blockDim.x;
  int c = threadIdx.x;
  for (; c + (kChunksInFlight - 1) * step < chunks; c += kChunksInFlight * step) {
    float v[kChunksInFlight][W];
#pragma unroll
    for (int u = 0; u < kChunksInFlight; ++u) load_elements<T, W>(x + (c + u * step) * W, v[u]);
#pragma unroll
    for (int u = 0; u < kChunksInFlight; ++u) visit(c + u * step, v[u]);
  }
  for (; c < chunks; c += step) {
    float v[W];
    load_elements<T, W>(x + c * W, v);
    visit(c, v);
  }
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

// cols % W == 0 (W = 1, or the pack with a 16-byte aligned row start).
template <typename T, int W>
__global__ void topk_log_softmax_kernel(const T* logits, int cols, int k, int first_allowed_id, int eos_id,
                                        float* values, int32_t* ids, float* eos_log_prob) {
  __shared__ float shared[32];
  __shared__ float shared_v[32];
  __shared__ int32_t shared_id[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  const int chunks = cols / W;

  // Pass 1: log-sum-exp. A NaN anywhere makes it NaN (as on the CPU); -inf entries add nothing.
  float m = -INFINITY, s = 0.0f;
  for_my_chunks<T, W>(x, chunks, [&](int, const float(&v)[W]) {
    float chunk_max = v[0];
#pragma unroll
    for (int j = 1; j < W; ++j) chunk_max = fmaxf(chunk_max, v[j]);
    if (chunk_max > m) {
      s *= expf(m - chunk_max);
      m = chunk_max;
    }
#pragma unroll
    for (int j = 0; j < W; ++j) s += expf(v[j] - m);
  });
  const float row_max = block_max(m, shared);
  const float scaled = m == -INFINITY ? s : s * expf(m - row_max);  // s is 0 or NaN when m is -inf
  const float lse = row_max + logf(block_sum(scaled, shared));

  // Pass 2: this thread's k best, sorted best first; (worst_v, worst_id) mirrors the last slot.
  float top_v[kMaxTopK];
  int32_t top_id[kMaxTopK];
  for (int i = 0; i < k; ++i) top_v[i] = nan_f32(), top_id[i] = kNoTopKId;
  float worst_v = nan_f32();
  int32_t worst_id = kNoTopKId;
  for_my_chunks<T, W>(x, chunks, [&](int c, const float(&v)[W]) {
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const int32_t id = c * W + j;
      const float lp = v[j] - lse;
      if (id >= first_allowed_id && topk_better(lp, id, worst_v, worst_id)) {
        topk_insert(top_v, top_id, k, lp, id);
        worst_v = top_v[k - 1], worst_id = top_id[k - 1];
      }
    }
  });

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
  // Enough blocks to keep the memory system busy: many rows share the SMs, few rows get wider blocks.
  const int threads = rows >= 256 ? 128 : rows >= 64 ? 256 : 512;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(logits);
    constexpr int P = Pack<T>::size;
    if (can_vectorize<T>(cols, x))
      topk_log_softmax_kernel<T, P><<<rows, threads, 0, stream_>>>(x, cols, k, first_allowed_id, eos_id, values, ids,
                                                                   eos_log_prob);
    else
      topk_log_softmax_kernel<T, 1><<<rows, threads, 0, stream_>>>(x, cols, k, first_allowed_id, eos_id, values, ids,
                                                                   eos_log_prob);
  });
  check_launch("topk_log_softmax");
}

}  // namespace lseq::kernels

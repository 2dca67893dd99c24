// Beam search's top-k of the next-token log-probabilities (Backend::topk_log_softmax), one block per row. Rows that
// fit (cols <= 32768, 16-byte aligned) are read once into registers (topk_log_softmax_resident_kernel); others take
// the general kernel: an online max/sum pass for the log-sum-exp, then every thread keeps the k best of its strided
// slice (sorted, in local memory) and k block-wide rounds take the best head among the threads. Only
// rows x (2k + 1) values are written.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/vector_access.cuh"
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

// The decoding case (rows = hypotheses, cols = 32000): the row is read once with 16-byte loads into registers
// (kPacks packs of P per thread, pack q at slot q / blockDim.x), so the log-sum-exp and the top-k work on registers.
// The top-k then takes k block-wide rounds of "best remaining": each thread offers its best element worse than
// the last one taken (topk_better is a total order over (value, id) with unique ids, so "worse than the last
// taken" is exactly "not taken yet"), and only the thread that owned the winner looks for its next best. Needs
// cols % P == 0, a 16-byte aligned row start and cols <= kPacks * P * blockDim.x.
constexpr int kResidentTopKThreads = 1024;

template <typename T>
constexpr int topk_resident_packs() {
  return 32 / Pack<T>::size;  // 32 values per thread: 32768 columns at 1024 threads
}

template <typename T>
__global__ void __launch_bounds__(kResidentTopKThreads) topk_log_softmax_resident_kernel(
    const T* logits, int cols, int k, int first_allowed_id, int eos_id, float* values, int32_t* ids,
    float* eos_log_prob) {
  constexpr int P = Pack<T>::size, kPacks = topk_resident_packs<T>();
  __shared__ float shared[32];
  __shared__ float shared_v[32];
  __shared__ int32_t shared_id[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  const int packs = cols / P;
  float val[kPacks][P];
  float m = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int q = threadIdx.x + i * blockDim.x;
    if (q < packs) {
      load_pack<T>(x + q * P, val[i]);
#pragma unroll
      for (int j = 0; j < P; ++j) m = fmaxf(m, val[i][j]);
    } else {
#pragma unroll
      for (int j = 0; j < P; ++j) val[i][j] = 0.0f;  // past the row: never offered (id >= cols)
    }
  }
  const float row_max = block_max(m, shared);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
    if (threadIdx.x + i * blockDim.x < packs)
#pragma unroll
      for (int j = 0; j < P; ++j) s += expf(val[i][j] - row_max);
  const float lse = row_max + logf(block_sum(s, shared));
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
#pragma unroll
    for (int j = 0; j < P; ++j) val[i][j] -= lse;  // log p
  // This thread's best allowed element worse than (last_v, last_id); (NaN, kNoTopKId) when none.
  auto next_best = [&](float last_v, int32_t last_id, float& best_v, int32_t& best_id) {
    best_v = nan_f32(), best_id = kNoTopKId;
#pragma unroll
    for (int i = 0; i < kPacks; ++i)
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int32_t id = (threadIdx.x + i * blockDim.x) * P + j;
        if (id >= first_allowed_id && id < cols && topk_better(last_v, last_id, val[i][j], id) &&
            topk_better(val[i][j], id, best_v, best_id))
          best_v = val[i][j], best_id = id;
      }
  };
  // Nothing taken yet: (+inf, -1) is better than every element (+inf ties go to the lower id, NaN comes last).
  float my_v;
  int32_t my_id;
  next_best(INFINITY, -1, my_v, my_id);
  for (int i = 0; i < k; ++i) {
    float best_v = my_v;
    int32_t best_id = my_id;
    block_best(best_v, best_id, shared_v, shared_id);
    if (threadIdx.x == 0) {
      const bool empty = best_id == kNoTopKId;
      values[row * k + i] = empty ? -INFINITY : best_v;
      ids[row * k + i] = empty ? -1 : best_id;
    }
    // Ids are unique, so only the owner looks further (nobody once only empty slots remain).
    if (best_id != kNoTopKId && my_id == best_id) next_best(best_v, best_id, my_v, my_id);
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
    const T* x = static_cast<const T*>(logits);
    constexpr int P = Pack<T>::size;
    const int64_t threads = (static_cast<int64_t>(cols / P) + topk_resident_packs<T>() - 1) / topk_resident_packs<T>();
    if (can_vectorize<T>(cols, x) && threads <= kResidentTopKThreads) {
      // Just enough threads for the row (multiple of 32, at least 64).
      const int block = static_cast<int>(std::max<int64_t>(64, (threads + 31) / 32 * 32));
      topk_log_softmax_resident_kernel<T><<<rows, block, 0, stream_>>>(x, cols, k, first_allowed_id, eos_id, values,
                                                                      ids, eos_log_prob);
    } else {
      topk_log_softmax_kernel<T><<<rows, kTopKThreads, 0, stream_>>>(x, cols, k, first_allowed_id, eos_id, values,
                                                                     ids, eos_log_prob);
    }
  });
  check_launch("topk_log_softmax");
}

}  // namespace lseq::kernels

// Beam search's and top-k sampling's top-k of the next-token log-probabilities (Backend::topk_log_softmax), one
// block per row, through a threshold that narrows the row to a short list of candidates. Few rows of 16-byte packs
// (cols <= 32768, k <= 32) read the row once into the registers of a 1024-thread block
// (topk_log_softmax_resident_kernel); every other row (many rows, long or odd-length rows such as GPT-2's 50257,
// k up to kMaxTopK) is streamed twice by a small block (topk_log_softmax_streaming_kernel). Only rows x (2k + 1)
// values are written.
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"
#include "kernels/topk_order.h"

namespace lseq::kernels {

namespace cuda {
namespace {

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fffffff); }

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

// The decoding case (rows = hypotheses, cols = 32000): the row is read once with 16-byte loads into registers
// (kPacks packs of P per thread, pack q at slot q / blockDim.x), so the log-sum-exp and the top-k work on registers.
// The top-k goes through a threshold: tau, the k-th largest of the threads' best allowed log-probabilities, is at
// most the row's k-th best value (k threads each own an element at least that good), so the elements >= tau (a few
// more than k on real logits) hold the top-k. They go to a shared list, of which one warp takes the exact top-k.
// Rows whose list is shorter than k (NaN rows, fewer than k numbers among the allowed ids) or longer than
// kTopKCandidates (large ties at tau, rows of -inf) take k block-wide rounds of "best remaining" instead: each
// thread offers its best element worse than the last one taken (topk_better is a total order over (value, id) with
// unique ids, so "worse than the last taken" is exactly "not taken yet"), and only the thread that owned the winner
// looks for its next best. Both give the same ids and values. Needs cols % P == 0, 16-byte aligned rows,
// cols <= kPacks * P * blockDim.x and k <= kResidentMaxK.
constexpr int kResidentTopKThreads = 1024;
constexpr int kResidentMaxK = 32;      // its blocks may have two warps, which offer 64 keys to the threshold
constexpr int kTopKCandidates = 2048;  // the shared list of elements >= tau
constexpr int kWarpLanes = 32;

template <typename T>
constexpr int topk_resident_packs() {
  return 32 / Pack<T>::size;  // 32 values per thread: 32768 columns at 1024 threads
}

// Unsigned keys in the order of the numbers they come from (not NaN; -0 taken as +0, equal as in topk_better), so
// that a warp's best is one warp-wide unsigned max.
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t bits = __float_as_uint(v + 0.0f);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

// The inverse of order_key; keys below that of -FLT_MAX (-inf's, also with low bits cleared) give -inf.
__device__ __forceinline__ float key_value(uint32_t key) {
  if (key < 0x00800000u) return -INFINITY;
  return __uint_as_float((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}

__device__ __forceinline__ uint32_t warp_max_key(uint32_t key) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(0xffffffffu, key);
#else
  for (int offset = 16; offset > 0; offset >>= 1) key = max(key, __shfl_xor_sync(0xffffffffu, key, offset));
  return key;
#endif
}

__device__ __forceinline__ int32_t warp_min_id(int32_t id) {
#if __CUDA_ARCH__ >= 800
  return __reduce_min_sync(0xffffffffu, id);
#else
  for (int offset = 16; offset > 0; offset >>= 1) id = min(id, __shfl_xor_sync(0xffffffffu, id, offset));
  return id;
#endif
}

// tau: the k-th largest of the threads' my_max (-inf for a thread without a number at its allowed ids); every
// thread gets it. Each warp takes its k largest in k rounds of one warp-wide max, in which the winning lane drops
// out (a key's low 5 bits hold the lane, so exactly one lane wins), and warp 0 merges the warps' sorted lists the
// same way. The cleared low bits may make tau a few ulps lower: still a bound, the list just a little longer.
// A warp has 32 lanes, so its list holds min(k, 32) keys, and k above 32 needs k <= blockDim.x (the warps' lists
// together hold at least k keys). warp_keys holds 32 * 32 keys.
__device__ float block_threshold(float my_max, int k, uint32_t* warp_keys, float* shared_tau) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int listed = min(k, kWarpLanes);
  const uint32_t lane_bits = 31 - lane;
  uint32_t key = (order_key(my_max) & ~31u) | lane_bits;
  for (int r = 0; r < listed; ++r) {  // at most 32 rounds over 32 lanes: the winner was never dropped
    const uint32_t best = warp_max_key(key);
    if (lane == 0) warp_keys[warp * listed + r] = best & ~31u;
    if (key == best) key = 0;  // below every key offered
  }
  __syncthreads();
  if (warp == 0) {
    // Lane l walks warp l's list, best first. There are warps * listed >= k entries: k rounds never run out.
    const uint32_t* list = warp_keys + lane * listed;
    key = lane < warps ? list[0] | lane_bits : 0u;
    uint32_t next = lane < warps && listed > 1 ? list[1] | lane_bits : 0u;  // loaded a round ahead
    uint32_t best = 0;
    for (int r = 0, head = 0; r < k; ++r) {
      best = warp_max_key(key);
      if (key == best) {
        key = next;
        ++head;
        next = lane < warps && head + 1 < listed ? list[head + 1] | lane_bits : 0u;
      }
    }
    if (lane == 0) *shared_tau = key_value(best & ~31u);
  }
  __syncthreads();
  return *shared_tau;
}

// Run by one warp: the k best of the n candidates (k <= n, numbers with unique ids) by topk_better, written best
// first. Lane l holds candidates l, l + 32, ...; each round takes the best of the lanes' heads (the largest key, then
// the lowest id: topk_better's order on numbers) and only its owner looks for its next best.
__device__ void select_candidates(const float* candidate_v, const int32_t* candidate_id, int n, int k, float* values,
                                  int32_t* ids) {
  const int lane = threadIdx.x & 31;
  auto next_best = [&](float last_v, int32_t last_id, float& best_v, int32_t& best_id) {
    best_v = nan_f32(), best_id = kNoTopKId;
    for (int c = lane; c < n; c += 32) {
      const float v = candidate_v[c];
      const int32_t id = candidate_id[c];
      if (topk_better(last_v, last_id, v, id) && topk_better(v, id, best_v, best_id)) best_v = v, best_id = id;
    }
  };
  float my_v;
  int32_t my_id;
  next_best(INFINITY, -1, my_v, my_id);
  for (int i = 0; i < k; ++i) {  // n - i >= 1 candidates are left: some lane offers a key above 0
    const uint32_t my_key = my_id == kNoTopKId ? 0u : order_key(my_v);
    const uint32_t best_key = warp_max_key(my_key);
    const int32_t best_id = warp_min_id(my_key == best_key ? my_id : kNoTopKId);
    if (my_id == best_id) {
      values[i] = my_v;
      ids[i] = my_id;
      next_best(my_v, my_id, my_v, my_id);
    }
  }
}

// The shared memory of both threshold kernels: reduction slots, block_threshold's warp lists and tau, the candidate
// list and its count.
struct ThresholdShared {
  float reduce[32];
  float best_v[32];
  int32_t best_id[32];
  uint32_t warp_keys[kWarpLanes * kWarpLanes];
  float candidate_v[kTopKCandidates];
  int32_t candidate_id[kTopKCandidates];
  int candidate_count;
  float tau;
};

// The fallback of the threshold kernels: k block-wide rounds of "best remaining". next_best(last_v, last_id, best_v,
// best_id) gives this thread's best allowed element worse than (last_v, last_id), or (NaN, kNoTopKId) when none;
// topk_better is a total order over (value, id) with unique ids, so "worse than the last taken" is exactly "not taken
// yet", and only the thread that owned a round's winner looks for its next best. Writes the row's k values and ids
// (empty slots as -inf and -1).
template <typename NextBest>
__device__ void take_best_remaining(const NextBest& next_best, int k, float* values, int32_t* ids, float* shared_v,
                                    int32_t* shared_id) {
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
      values[i] = empty ? -INFINITY : best_v;
      ids[i] = empty ? -1 : best_id;
    }
    // Ids are unique, so only the owner looks further (nobody once only empty slots remain).
    if (best_id != kNoTopKId && my_id == best_id) next_best(best_v, best_id, my_v, my_id);
  }
}

// After a threshold kernel's candidate pass (the list complete once all threads pass the barrier): one warp's exact
// top-k of the list, or, where the list does not serve (shorter than k: NaN rows, fewer than k numbers among the
// allowed ids; longer than kTopKCandidates: large ties at tau, rows of -inf), take_best_remaining with next_best.
// Both give the same ids and values.
template <typename NextBest>
__device__ void take_top_k(ThresholdShared& sh, const NextBest& next_best, int k, float* values, int32_t* ids) {
  __syncthreads();
  const int candidates = sh.candidate_count;  // the same in every thread: the branch below is block-uniform
  if (candidates >= k && candidates <= kTopKCandidates) {
    if (threadIdx.x < 32) select_candidates(sh.candidate_v, sh.candidate_id, candidates, k, values, ids);
  } else {
    take_best_remaining(next_best, k, values, ids, sh.best_v, sh.best_id);
  }
}

template <typename T>
__global__ void __launch_bounds__(kResidentTopKThreads) topk_log_softmax_resident_kernel(
    const T* logits, int cols, int64_t ld, int k, int first_allowed_id, int eos_id, float* values, int32_t* ids,
    float* eos_log_prob) {
  constexpr int P = Pack<T>::size, kPacks = topk_resident_packs<T>();
  __shared__ ThresholdShared sh;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * ld;
  const int packs = cols / P;
  if (threadIdx.x == 0) sh.candidate_count = 0;  // block_max's barriers come before the first append
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
      for (int j = 0; j < P; ++j) val[i][j] = nan_f32();  // past the row: never a candidate, never offered
    }
  }
  const float row_max = block_max(m, sh.reduce);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kPacks; ++i)
    if (threadIdx.x + i * blockDim.x < packs)
#pragma unroll
      for (int j = 0; j < P; ++j) s += expf(val[i][j] - row_max);
  const float lse = row_max + logf(block_sum(s, sh.reduce));
  // log p. Ids below first_allowed_id become NaN too, so that the threshold and the candidates need no id checks
  // (fmaxf skips NaN, and NaN fails every >=); the rounds of the fallback check ids themselves.
  float my_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPacks; ++i) {
    const int32_t first_id = (threadIdx.x + i * blockDim.x) * P;
#pragma unroll
    for (int j = 0; j < P; ++j) val[i][j] -= lse;
    if (first_id < first_allowed_id)
#pragma unroll
      for (int j = 0; j < P; ++j)
        if (first_id + j < first_allowed_id) val[i][j] = nan_f32();
#pragma unroll
    for (int j = 0; j < P; ++j) my_max = fmaxf(my_max, val[i][j]);
  }
  const float tau = block_threshold(my_max, k, sh.warp_keys, &sh.tau);
  if (my_max >= tau)  // only the few threads that hold a candidate
#pragma unroll
    for (int i = 0; i < kPacks; ++i)
#pragma unroll
      for (int j = 0; j < P; ++j)
        if (val[i][j] >= tau) {
          const int slot = atomicAdd(&sh.candidate_count, 1);
          if (slot < kTopKCandidates)
            sh.candidate_v[slot] = val[i][j], sh.candidate_id[slot] = (threadIdx.x + i * blockDim.x) * P + j;
        }
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
  take_top_k(sh, next_best, k, values + row * k, ids + row * k);
  if (threadIdx.x == 0) eos_log_prob[row] = to_f32(x[eos_id]) - lse;
}

// Pack q of a row (elements q * P to q * P + P - 1): one 16-byte load where the row start is 16-byte aligned
// (Aligned) and the pack lies inside the row, else element by element, `fill` past cols.
template <typename T, bool Aligned>
__device__ __forceinline__ void load_row_pack(const T* x, int q, int cols, float fill, float (&val)[Pack<T>::size]) {
  constexpr int P = Pack<T>::size;
  const int first = q * P;
  if (Aligned && first + P <= cols) {
    load_pack<T>(x + first, val);
  } else {
#pragma unroll
    for (int j = 0; j < P; ++j) val[j] = first + j < cols ? to_f32(x[first + j]) : fill;
  }
}

// Every row the register-resident kernel does not take: many rows (beam search's hypotheses, from two a
// multiprocessor), rows longer than it holds or of any length and alignment (GPT-2's 50257 columns), and k above 32
// (top-k sampling's 50). The row is streamed twice instead of held in registers, so that a block needs few registers
// and every row of a step runs at once (the register-resident kernel fits one 1024-thread block an SM: 512 rows took
// four waves of a latency-bound block each). Pass 1 reads the row once for an online log-sum-exp (each thread's
// running max and sum, rescaled when the max grows) and each thread's best allowed logit; then, as in the resident
// kernel, tau is the k-th largest of the threads' best log-probabilities (log p = x - lse rounds monotonically in x,
// so a thread's best log-probability is its best logit's), and pass 2 (the row again, now mostly from L2) appends
// the elements with log p >= tau to a shared list of which one warp takes the exact top-k. Rows whose list is
// shorter than k or longer than kTopKCandidates take k block-wide rounds of "best remaining", each thread rescanning
// only its own packs. Rows are ld elements apart; Aligned: ld % P == 0 and a 16-byte aligned first row, so that
// whole packs load as one vector (a general kernel that kept a sorted list of k a thread took 0.77-0.88 ms for 32-128
// GPT-2 rows on an H100).
// Blocks of kStreamingTopKThreads where rows fill the GPU; a row a multiprocessor at most (a language model's step:
// 128 rows of GPT-2's 50257 on 132 SMs) takes kWideStreamingTopKThreads, which keep four times the loads in flight
// where a block has a multiprocessor to itself.
constexpr int kStreamingTopKThreads = 256;
constexpr int kWideStreamingTopKThreads = 1024;
static_assert(kStreamingTopKThreads >= kMaxTopK, "block_threshold needs as many threads as k");

template <typename T, bool Aligned, int kThreads>
__global__ void __launch_bounds__(kThreads)
    topk_log_softmax_streaming_kernel(const T* logits, int cols, int64_t ld, int k, int first_allowed_id, int eos_id,
                                      float* values, int32_t* ids, float* eos_log_prob) {
  constexpr int P = Pack<T>::size;
  constexpr int kUnroll = 4;  // packs loaded before the first is used
  __shared__ ThresholdShared sh;
  const int64_t row = blockIdx.x;
  const T* x = logits + row * ld;
  const int packs = (cols + P - 1) / P;
  if (threadIdx.x == 0) sh.candidate_count = 0;  // block_max's barriers come before the first append
  // Pass 1. A -inf element adds 0 (exp(-inf - m) would be NaN while m is -inf); NaN and +inf make the sum NaN, as
  // the two-pass sum of the CPU does. Ids below first_allowed_id count for the sum, not for the thread's best.
  // Places past cols read as -inf: nothing for the sum or the best.
  float m = -INFINITY, sum = 0.0f, best = -INFINITY;
  for (int q0 = threadIdx.x; q0 < packs; q0 += kUnroll * blockDim.x) {
    float val[kUnroll][P];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = q0 + u * blockDim.x;
      if (q < packs) {
        load_row_pack<T, Aligned>(x, q, cols, -INFINITY, val[u]);
      } else {
#pragma unroll
        for (int j = 0; j < P; ++j) val[u][j] = -INFINITY;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float pack_max = val[u][0];
#pragma unroll
      for (int j = 1; j < P; ++j) pack_max = fmaxf(pack_max, val[u][j]);
      if (pack_max > m) {
        sum *= expf(m - pack_max);
        m = pack_max;
      }
#pragma unroll
      for (int j = 0; j < P; ++j) sum += val[u][j] == -INFINITY ? 0.0f : expf(val[u][j] - m);
      const int first_id = (q0 + u * blockDim.x) * P;
      if (first_id >= first_allowed_id) {
        best = fmaxf(best, pack_max);
      } else {
#pragma unroll
        for (int j = 0; j < P; ++j)
          if (first_id + j >= first_allowed_id) best = fmaxf(best, val[u][j]);
      }
    }
  }
  const float row_max = block_max(m, sh.reduce);
  // A thread without a number contributes 0 (or its NaN); with every thread at -inf the row is -inf throughout and
  // its log-sum-exp NaN, as the CPU's.
  const float scaled = m == -INFINITY ? (sum == sum ? 0.0f : sum) : sum * expf(m - row_max);
  const float total = block_sum(scaled, sh.reduce);
  const float lse = row_max == -INFINITY ? nan_f32() : row_max + logf(total);
  // fmaxf drops NaN: a thread whose log-probabilities are all NaN (or that has none) offers -inf.
  const float my_max = fmaxf(-INFINITY, best - lse);
  const float tau = block_threshold(my_max, k, sh.warp_keys, &sh.tau);
  // Pass 2: only threads whose best reaches tau can hold a candidate.
  if (my_max >= tau)
    for (int q = threadIdx.x; q < packs; q += blockDim.x) {
      float val[P];
      load_row_pack<T, Aligned>(x, q, cols, -INFINITY, val);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int32_t id = q * P + j;
        const float lp = val[j] - lse;
        if (id >= first_allowed_id && id < cols && lp >= tau) {
          const int slot = atomicAdd(&sh.candidate_count, 1);
          if (slot < kTopKCandidates) sh.candidate_v[slot] = lp, sh.candidate_id[slot] = id;
        }
      }
    }
  // This thread's best allowed element worse than (last_v, last_id), from its own packs; (NaN, kNoTopKId) when
  // none.
  auto next_best = [&](float last_v, int32_t last_id, float& best_v, int32_t& best_id) {
    best_v = nan_f32(), best_id = kNoTopKId;
    for (int q = threadIdx.x; q < packs; q += blockDim.x) {
      float val[P];
      load_row_pack<T, Aligned>(x, q, cols, -INFINITY, val);
#pragma unroll
      for (int j = 0; j < P; ++j) {
        const int32_t id = q * P + j;
        const float lp = val[j] - lse;
        if (id >= first_allowed_id && id < cols && topk_better(last_v, last_id, lp, id) &&
            topk_better(lp, id, best_v, best_id))
          best_v = lp, best_id = id;
      }
    }
  };
  take_top_k(sh, next_best, k, values + row * k, ids + row * k);
  if (threadIdx.x == 0) eos_log_prob[row] = to_f32(x[eos_id]) - lse;
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::topk_log_softmax(DType dt, const void* logits, int rows, int cols, int k, int first_allowed_id,
                                   int eos_id, float* values, int32_t* ids, float* eos_log_prob, int ld) {
  if (rows < 0 || cols < 1) fail("topk_log_softmax: invalid shape rows={} cols={}", rows, cols);
  if (k < 1 || k > kMaxTopK) fail("topk_log_softmax: k = {} is outside [1, {}]", k, kMaxTopK);
  if (eos_id < 0 || eos_id >= cols) fail("topk_log_softmax: eos id {} is outside the {} columns", eos_id, cols);
  if (first_allowed_id < 0) fail("topk_log_softmax: first allowed id {} is negative", first_allowed_id);
  const int stride = row_stride("topk_log_softmax", ld, cols);
  if (rows == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(logits);
    constexpr int P = Pack<T>::size;
    const bool aligned_rows = can_vectorize<T>(stride, x);
    const int64_t threads = (static_cast<int64_t>(cols / P) + topk_resident_packs<T>() - 1) / topk_resident_packs<T>();
    // The resident kernel runs one block a multiprocessor; from two waves of it on, streaming every row at once
    // wins (H100, bf16, 32000 columns, k 5: 512 rows 0.0385 -> 0.0281 ms; at 32 and 128 rows the resident kernel
    // takes 0.011 ms and the streaming one 0.017).
    const bool resident = rows < 2 * sm_count_ && k <= kResidentMaxK && aligned_rows && cols % P == 0 &&
                          threads <= kResidentTopKThreads;
    if (resident) {
      // Just enough threads for the row (multiple of 32, at least 64).
      const int block = static_cast<int>(std::max<int64_t>(64, (threads + 31) / 32 * 32));
      topk_log_softmax_resident_kernel<T>
          <<<rows, block, 0, stream_>>>(x, cols, stride, k, first_allowed_id, eos_id, values, ids, eos_log_prob);
    } else {
      auto stream_rows = [&](auto aligned, auto threads) {
        constexpr int kThreads = decltype(threads)::value;
        topk_log_softmax_streaming_kernel<T, decltype(aligned)::value, kThreads>
            <<<rows, kThreads, 0, stream_>>>(x, cols, stride, k, first_allowed_id, eos_id, values, ids, eos_log_prob);
      };
      auto with_threads = [&](auto aligned) {
        if (rows <= sm_count_)
          stream_rows(aligned, std::integral_constant<int, kWideStreamingTopKThreads>{});
        else
          stream_rows(aligned, std::integral_constant<int, kStreamingTopKThreads>{});
      };
      if (aligned_rows)
        with_threads(std::true_type{});
      else
        with_threads(std::false_type{});
    }
  });
  check_launch("topk_log_softmax");
}

}  // namespace lseq::kernels

// Incremental decoding's attention on the GPU in one launch: one warp per (row, head) slice, four slices a block,
// no block barriers. The warp walks the slice's keys in tiles of 32 with an online softmax (a running max and sum;
// the partial context is rescaled when the max grows), so any k_len works with fixed shared memory. Per tile, lane
// j scores key j (the whole dot product, 16-byte loads where aligned, q from the warp's shared copy); then the warp
// accumulates p_j v_j over the tile's keys, each key's weight and offset taken from its scoring lane by a shuffle:
// - packed (16-byte aligned rows whose packs divide among 32 lanes, e.g. 8 lanes for a bf16 head of 64): L lanes
//   share a value row, one pack each, so a 16-byte load per lane reads 32 / L value rows at once; the lane groups'
//   partial sums are added by shuffles at the end;
// - otherwise the lanes split the head dimensions (lane + 32c), one value row per step for the whole warp.
// Results depend only on the shape and the GPU's multiprocessor count (which sets the key split below). Each key has
// its own base: with a position-origin table (beam search's re-indexed self-attention caches) key j of a slice may
// live in another row's slice.
//
// Few slices with many keys (a language model's batch of prompts: 1536 slices of up to 384 keys; one warp a slice
// left most of the GPU's warp slots empty and each warp walking a dozen tiles in turn) split a slice's keys over S
// warps of its block (tiles split, split + S, ...), whose partial (max, sum, context) are merged through shared
// memory at the end. S = 1 is the one-warp-a-slice kernel, unchanged.
//
// Caches planned long (a language model's) take a second kernel, attention_step_rows_kernel, whose lanes share key
// rows instead of owning them: every load a whole row, keys and values of an iteration loaded together. On an H100
// it ran GPT-2 small's steps' attention at 2.37 TB/s against the warp kernel's 2.05 (ncu, 128 prompts).
//
// (Until 2026-11-24 one 128-thread block per slice, one thread per key: at decoding's few keys most threads idled
// through six block barriers; 22.7 us per launch at 4096 slices on an H100, 30% of a beam-4 step.)
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kStepWarps = 4;  // slices per block
constexpr int kKeysInFlight = 4;  // value rows loaded before the first is used (per lane)
// Blocks an SM keeps resident: 8 x 4 warps with at most 64 registers a thread, so that beam search's 4096 slices (512
// hypotheses x 8 heads) run as one wave on an H100's 132 SMs (7 blocks a SM at 71 registers left a second wave of
// 100 blocks that took as long as the first).
constexpr int kStepBlocksPerSm = 8;
constexpr int kMaxKeySplits = kStepWarps;  // S: warps a slice's keys are split over, 1, 2 or 4
// R: rows of keys (and as many of values) a lane of the row-streaming kernel loads an iteration. 2 keeps it within
// 64 registers (kStepBlocksPerSm); 4 was no faster on an H100 (GPT-2 small and medium, 128 prompts).
constexpr int kRowsPerLane = 2;
constexpr int kRowsMinCacheColumns = 1024;  // caches planned at least this long take the row-streaming kernel

// A chunk of W elements widened to fp32: one element, or one 16-byte pack (aligned, checked by the caller).
template <typename T>
__device__ __forceinline__ void load_chunk(const T* p, float (&out)[1]) {
  out[0] = to_f32(p[0]);
}
template <typename T>
__device__ __forceinline__ void load_chunk(const T* p, float (&out)[Pack<T>::size]) {
  load_pack(p, out);
}

// The end of a slice on the packed value path: lanes 0 .. L-1 hold its context sums acc, one pack each, every lane
// the running max m and sum l. With S = 1 the warp writes them out; otherwise the slice's S warps (consecutive in the
// block) merge through shared memory in a fixed order: the first rescales each partial sum to the largest max among
// the warps that saw keys (a warp without keys has l = 0 and counts nothing). live: false for a stand-in slice past
// the end (computed for the merge's barrier, not written). Every warp of the block must call it.
template <typename T, int W, int L, int S>
__device__ __forceinline__ void write_slice_context(const float (&acc)[W], float m, float l, int warp, int lane,
                                                    int split, bool live, T* __restrict__ out_row) {
  if constexpr (S == 1) {
    if (lane < L) {
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // no valid keys: context 0
      float out[W];
#pragma unroll
      for (int e = 0; e < W; ++e) out[e] = acc[e] * inv;
      store_pack(out_row + lane * W, out);
    }
  } else {
    __shared__ float partial[kStepWarps][L * W];
    __shared__ float partial_max[kStepWarps], partial_sum[kStepWarps];
    if (lane < L)
#pragma unroll
      for (int e = 0; e < W; ++e) partial[warp][lane * W + e] = acc[e];
    if (lane == 0) partial_max[warp] = m, partial_sum[warp] = l;
    __syncthreads();
    if (split != 0 || !live) return;
    float m_all = -INFINITY;
#pragma unroll
    for (int s = 0; s < S; ++s)
      if (partial_sum[warp + s] > 0.0f) m_all = fmaxf(m_all, partial_max[warp + s]);
    float weight[S], l_all = 0.0f;
#pragma unroll
    for (int s = 0; s < S; ++s) {
      weight[s] = partial_sum[warp + s] > 0.0f ? expf(partial_max[warp + s] - m_all) : 0.0f;
      l_all += weight[s] * partial_sum[warp + s];
    }
    if (lane < L) {
      const float all_inv = l_all > 0.0f ? 1.0f / l_all : 0.0f;
      float out[W];
#pragma unroll
      for (int e = 0; e < W; ++e) {
        float sum = 0.0f;
#pragma unroll
        for (int s = 0; s < S; ++s) sum = fmaf(weight[s], partial[warp + s][lane * W + e], sum);
        out[e] = sum * all_inv;
      }
      store_pack(out_row + lane * W, out);
    }
  }
}

// W: elements per key load (1, or Pack<T>::size when head_dim, slice_stride and k allow 16-byte loads). L: lanes per
// value row in the packed value path (head_dim = L W, L divides 32), or 0 for the per-dimension path with D context
// dimensions per lane (lane, lane + 32, ...), head_dim <= 32 D. S: warps per slice (the key splits; 1 for L = 0).
template <typename T, int W, int D, int L, int S>
__global__ void __launch_bounds__(kStepWarps * 32, kStepBlocksPerSm)
    attention_step_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                          int64_t slice_stride, const int32_t* __restrict__ kv_index,
                          const int32_t* __restrict__ origin, int origin_stride,
                          const int32_t* __restrict__ k_lengths, const int32_t* __restrict__ key_starts,
                          int64_t slices, int heads, int head_dim, int k_len, float scale, T* __restrict__ context) {
  static_assert(S == 1 || (L > 0 && kStepWarps % S == 0), "keys split only on the packed value path");
  __shared__ float q_shared[kStepWarps][Backend::kMaxStepHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int split = warp % S;                                        // this warp's share of the slice's tiles
  int64_t i = int64_t(blockIdx.x) * (kStepWarps / S) + warp / S;  // the slice (row, head)
  const bool live = i < slices;
  if constexpr (S == 1) {
    if (!live) return;  // whole warps only: nothing below waits for others
  } else {
    if (!live) i = slices - 1;  // the merge's barrier waits for every warp: computed again, not written
  }
  const int64_t r = i / heads;
  const int64_t h = i - r * heads;
  const int valid = k_lengths ? min(max(k_lengths[r], 0), k_len) : k_len;
  const int first = key_starts ? min(max(key_starts[r], 0), valid) : 0;  // keys [first, valid) take part
  const int64_t slice = kv_index ? kv_index[i] : i;
  const int32_t* row_origin = origin ? origin + r * origin_stride : nullptr;
  float* q_s = q_shared[warp];
  for (int d = lane; d < head_dim; d += 32) q_s[d] = to_f32(q[i * head_dim + d]);
  __syncwarp();

  constexpr int A = L > 0 ? W : D;  // context values a lane accumulates
  float acc[A];
#pragma unroll
  for (int c = 0; c < A; ++c) acc[c] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // running max of the scaled scores and sum of exp(score - m)
  const int chunks = head_dim / W;
  for (int t0 = first + 32 * split; t0 < valid; t0 += 32 * S) {
    const int j = t0 + lane;
    float s = -INFINITY;
    int64_t offset = 0;  // element offset of key j (and value j) in k (and v)
    if (j < valid) {
      const int64_t key_slice = row_origin ? static_cast<int64_t>(row_origin[j]) * heads + h : slice;
      offset = key_slice * slice_stride + static_cast<int64_t>(j) * head_dim;
      const T* key = k + offset;
      float dot = 0.0f;
#pragma unroll 4
      for (int c = 0; c < chunks; ++c) {
        float kc[W];
        load_chunk(key + c * W, kc);
#pragma unroll
        for (int e = 0; e < W; ++e) dot = fmaf(q_s[c * W + e], kc[e], dot);
      }
      s = scale * dot;
    }
    // The tile holds at least one valid key, so m_new is finite for finite inputs; at the first tile m = -inf and
    // corr = 0.
    const float m_new = fmaxf(m, warp_max(s));
    const float p = j < valid ? expf(s - m_new) : 0.0f;
    const float corr = expf(m - m_new);
    l = l * corr + warp_sum(p);
    m = m_new;
#pragma unroll
    for (int c = 0; c < A; ++c) acc[c] *= corr;
    // Keys in groups whose value loads are all issued before the first is used (the loads, not the arithmetic,
    // set the pace); keys past the tile get weight 0 and read value row j = 0 of the tile (a valid address).
    const int tile = min(32, valid - t0);
    if constexpr (L > 0) {
      constexpr int kRowsPerLoad = 32 / L;
      const int group = lane / L, chunk = lane % L;  // this lane's value row in a load, and its pack of the row
      for (int j0 = 0; j0 < tile; j0 += kRowsPerLoad * kKeysInFlight) {
        float pj[kKeysInFlight], x[kKeysInFlight][W];
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
          const int jj = j0 + u * kRowsPerLoad + group;
          pj[u] = __shfl_sync(0xffffffffu, p, jj < tile ? jj : 0);
          const int64_t value_offset = __shfl_sync(0xffffffffu, offset, jj < tile ? jj : 0);
          load_pack(v + value_offset + chunk * W, x[u]);
          if (jj >= tile) pj[u] = 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u)
#pragma unroll
          for (int e = 0; e < W; ++e) acc[e] = fmaf(pj[u], x[u][e], acc[e]);
      }
    } else {
      for (int j0 = 0; j0 < tile; j0 += kKeysInFlight) {
        float pj[kKeysInFlight], x[kKeysInFlight][D];
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u) {
          const int jj = j0 + u < tile ? j0 + u : 0;
          pj[u] = __shfl_sync(0xffffffffu, p, jj);
          const T* value = v + __shfl_sync(0xffffffffu, offset, jj);
#pragma unroll
          for (int c = 0; c < D; ++c) {
            const int d = lane + 32 * c;
            x[u][c] = d < head_dim ? to_f32(value[d]) : 0.0f;
          }
          if (j0 + u >= tile) pj[u] = 0.0f;
        }
#pragma unroll
        for (int u = 0; u < kKeysInFlight; ++u)
#pragma unroll
          for (int c = 0; c < D; ++c) acc[c] = fmaf(pj[u], x[u][c], acc[c]);
      }
    }
  }

  const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // no valid keys: context 0
  if constexpr (L > 0) {
    // The lane groups hold partial sums over disjoint keys of the same dimensions: add them, in a fixed order.
#pragma unroll
    for (int o = L; o < 32; o <<= 1)
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
    write_slice_context<T, W, L, S>(acc, m, l, warp, lane, split, live, context + i * head_dim);
  } else {
#pragma unroll
    for (int c = 0; c < D; ++c) {
      const int d = lane + 32 * c;
      if (d < head_dim) context[i * head_dim + d] = from_f32<T>(acc[c] * inv);
    }
  }
}

// The row-streaming path (16-byte aligned rows whose packs divide among the lanes): L = head_dim / W lanes share a
// key row and its value row, one pack each, so that a warp load reads G = 32 / L whole rows; each lane issues its R
// key loads and R value loads of an iteration (G R keys) together, before any is used. One round trip to memory an
// iteration, every load a full row: the form that reads a long cache at the memory's speed. The score of a key is
// its L lanes' partial dot products added by shuffles (every lane of the group ends with it); the group's lanes
// accumulate p v over their own keys, and the groups' sums are added at the end. S warps a slice as above.
template <typename T, int L, int R, int S>
__global__ void __launch_bounds__(kStepWarps * 32, kStepBlocksPerSm)
    attention_step_rows_kernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                               int64_t slice_stride, const int32_t* __restrict__ kv_index,
                               const int32_t* __restrict__ origin, int origin_stride,
                               const int32_t* __restrict__ k_lengths, const int32_t* __restrict__ key_starts,
                               int64_t slices, int heads, int k_len, float scale, T* __restrict__ context) {
  constexpr int W = Pack<T>::size, G = 32 / L, kKeys = G * R, head_dim = L * W;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int split = warp % S;
  int64_t i = int64_t(blockIdx.x) * (kStepWarps / S) + warp / S;
  const bool live = i < slices;
  if constexpr (S == 1) {
    if (!live) return;
  } else {
    if (!live) i = slices - 1;  // the merge's barrier waits for every warp: computed again, not written
  }
  const int64_t r = i / heads;
  const int64_t h = i - r * heads;
  const int valid = k_lengths ? min(max(k_lengths[r], 0), k_len) : k_len;
  const int first = key_starts ? min(max(key_starts[r], 0), valid) : 0;
  const int64_t slice = kv_index ? kv_index[i] : i;
  const int32_t* row_origin = origin ? origin + r * origin_stride : nullptr;
  const int group = lane / L, chunk = lane % L;

  float qv[W];
  load_pack(q + i * head_dim + chunk * W, qv);
  float acc[W];
#pragma unroll
  for (int e = 0; e < W; ++e) acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  // Key u of this lane's group in the iteration at t0: t0 + u G + group; past `valid` it reads the last valid key
  // again (a valid address) and gets weight 0. Origins are fetched an iteration ahead.
  int key_slice[R];
  auto fetch_slices = [&](int t0) {
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int j = min(t0 + u * G + group, valid - 1);
      key_slice[u] = row_origin ? row_origin[j] : 0;
    }
  };
  const int start = first + kKeys * split;
  if (start < valid) fetch_slices(start);
  for (int t0 = start; t0 < valid; t0 += kKeys * S) {
    uint4 key_raw[R], value_raw[R];
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int j = min(t0 + u * G + group, valid - 1);
      const int64_t base = row_origin ? static_cast<int64_t>(key_slice[u]) * heads + h : slice;
      const int64_t offset = base * slice_stride + static_cast<int64_t>(j) * head_dim + chunk * W;
      key_raw[u] = *reinterpret_cast<const uint4*>(k + offset);
      value_raw[u] = *reinterpret_cast<const uint4*>(v + offset);
    }
    if (row_origin && t0 + kKeys * S < valid) fetch_slices(t0 + kKeys * S);
    float s[R];
    float tile_max = -INFINITY;
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const T* key = reinterpret_cast<const T*>(&key_raw[u]);
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < W; ++e) dot = fmaf(qv[e], to_f32(key[e]), dot);
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      s[u] = t0 + u * G + group < valid ? scale * dot : -INFINITY;
      tile_max = fmaxf(tile_max, s[u]);
    }
#pragma unroll
    for (int o = L; o < 32; o <<= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    // The iteration holds at least one valid key, so m_new is finite; at the first m = -inf and corr = 0.
    const float m_new = fmaxf(m, tile_max);
    const float corr = expf(m - m_new);
    float p_sum = 0.0f;
#pragma unroll
    for (int e = 0; e < W; ++e) acc[e] *= corr;
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const float p = expf(s[u] - m_new);  // 0 for keys past the end
      p_sum += p;
      const T* value = reinterpret_cast<const T*>(&value_raw[u]);
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] = fmaf(p, to_f32(value[e]), acc[e]);
    }
#pragma unroll
    for (int o = L; o < 32; o <<= 1) p_sum += __shfl_xor_sync(0xffffffffu, p_sum, o);
    l = l * corr + p_sum;
    m = m_new;
  }
  // The groups hold partial sums over disjoint keys of the same dimensions: add them, in a fixed order.
#pragma unroll
  for (int o = L; o < 32; o <<= 1)
#pragma unroll
    for (int e = 0; e < W; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
  write_slice_context<T, W, L, S>(acc, m, l, warp, lane, split, live, context + i * head_dim);
}

}  // namespace
}  // namespace cuda

void CudaBackend::attention_step(DType dt, const void* q, const void* k, const void* v, int64_t slice_stride,
                                 const int32_t* kv_index, const int32_t* origin, int origin_stride,
                                 const int32_t* k_lengths, int rows, int heads, int head_dim, int k_len, float scale,
                                 void* context, const int32_t* key_starts) {
  using namespace cuda;
  check_attention_step_shape(rows, heads, head_dim, k_len, slice_stride, kv_index, origin, origin_stride);
  const int64_t slices = static_cast<int64_t>(rows) * heads;
  if (slices == 0) return;
  if (slices > 0x7FFFFFFF) fail("attention_step: {} slices exceed one launch's grid", slices);
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T* tq = static_cast<const T*>(q);
    const T* tk = static_cast<const T*>(k);
    const T* tv = static_cast<const T*>(v);
    T* tc = static_cast<T*>(context);
    constexpr int P = Pack<T>::size;
    // Then every key's offset, key slice * slice_stride + j * head_dim, is a whole number of packs too.
    const bool packed = can_vectorize<T>(head_dim, tk, tv) && slice_stride % P == 0;
    // Keys split over S warps while the slices alone would fill at most half of the GPU's resident warps and
    // every warp keeps at least two tiles of the longest slice (k_len: the cache's length, an upper bound).
    const int64_t resident_warps = static_cast<int64_t>(sm_count_) * kStepBlocksPerSm * kStepWarps;
    int splits = 1;
    while (splits < kMaxKeySplits && slices * splits * 2 <= resident_warps && k_len >= 64 * splits * 2) splits *= 2;
    auto launch_split = [&](auto w, auto d, auto l, auto s) {
      constexpr int S = decltype(s)::value;
      const auto blocks = static_cast<unsigned>((slices + kStepWarps / S - 1) / (kStepWarps / S));
      attention_step_kernel<T, decltype(w)::value, decltype(d)::value, decltype(l)::value, S>
          <<<blocks, kStepWarps * 32, 0, stream_>>>(tq, tk, tv, slice_stride, kv_index, origin, origin_stride,
                                                     k_lengths, key_starts, slices, heads, head_dim, k_len, scale,
                                                     tc);
    };
    auto launch = [&](auto w, auto d, auto l) {
      if constexpr (decltype(l)::value > 0) {
        if (splits == 4) return launch_split(w, d, l, std::integral_constant<int, 4>{});
        if (splits == 2) return launch_split(w, d, l, std::integral_constant<int, 2>{});
      }
      launch_split(w, d, l, std::integral_constant<int, 1>{});
    };
    const std::integral_constant<int, 0> per_dimension;  // L = 0: the value path of one dimension a lane
    auto with_dims = [&](auto w) {  // context dimensions per lane: ceil(head_dim / 32), rounded up to 1, 2, 4 or 8
      if (head_dim <= 32) return launch(w, std::integral_constant<int, 1>{}, per_dimension);
      if (head_dim <= 64) return launch(w, std::integral_constant<int, 2>{}, per_dimension);
      if (head_dim <= 128) return launch(w, std::integral_constant<int, 4>{}, per_dimension);
      launch(w, std::integral_constant<int, Backend::kMaxStepHeadDim / 32>{}, per_dimension);
    };
    // The packed value path: context rows aligned too (store_pack), L = head_dim / P lanes per value row.
    const int lanes_per_row = head_dim / P;
    const bool rows_packed = packed && can_vectorize<T>(head_dim, tc) && 32 % lanes_per_row == 0;
    const std::integral_constant<int, P> pack;
    const std::integral_constant<int, 1> one;
    // Caches planned long (a language model's prompts and continuations: GPT-2's 1,277 columns) go through the
    // row-streaming kernel, which reads them nearer the memory's speed. A translation's caches are planned at 3x the
    // longest source (769 columns by default) and hold few keys: there the row kernel was no faster, and its other
    // order of sums changed 50 of 2,000 greedy lines (bf16, H200), so translations stay on the warp kernel.
    if (rows_packed && k_len >= kRowsMinCacheColumns) {
      auto launch_rows = [&](auto l, auto ss) {
        constexpr int S = decltype(ss)::value;
        const auto blocks = static_cast<unsigned>((slices + kStepWarps / S - 1) / (kStepWarps / S));
        attention_step_rows_kernel<T, decltype(l)::value, kRowsPerLane, S>
            <<<blocks, kStepWarps * 32, 0, stream_>>>(tq, tk, tv, slice_stride, kv_index, origin, origin_stride,
                                                      k_lengths, key_starts, slices, heads, k_len, scale, tc);
      };
      auto with_splits = [&](auto l) {
        if (splits == 4) return launch_rows(l, std::integral_constant<int, 4>{});
        if (splits == 2) return launch_rows(l, std::integral_constant<int, 2>{});
        launch_rows(l, std::integral_constant<int, 1>{});
      };
      switch (lanes_per_row) {
        case 1:
          return with_splits(std::integral_constant<int, 1>{});
        case 2:
          return with_splits(std::integral_constant<int, 2>{});
        case 4:
          return with_splits(std::integral_constant<int, 4>{});
        case 8:
          return with_splits(std::integral_constant<int, 8>{});
        case 16:
          return with_splits(std::integral_constant<int, 16>{});
        default:
          return with_splits(std::integral_constant<int, 32>{});
      }
    }
    if (rows_packed) {
      switch (lanes_per_row) {
        case 1: return launch(pack, one, std::integral_constant<int, 1>{});
        case 2: return launch(pack, one, std::integral_constant<int, 2>{});
        case 4: return launch(pack, one, std::integral_constant<int, 4>{});
        case 8: return launch(pack, one, std::integral_constant<int, 8>{});
        case 16: return launch(pack, one, std::integral_constant<int, 16>{});
        default: return launch(pack, one, std::integral_constant<int, 32>{});
      }
    }
    if (packed)
      with_dims(pack);
    else
      with_dims(one);
  });
  check_launch("attention_step");
}

}  // namespace lseq::kernels

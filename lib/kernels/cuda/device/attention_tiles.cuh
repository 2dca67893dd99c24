#pragma once
// The register-tile building blocks of the fused attention kernels (fused_attention_cuda.cu: a whole slice in
// shared memory; tiled_attention_cuda.cu: tiles of long slices with an online softmax). Tensor cores through
// mma.sync m16n8k16 (mma_fragments.cuh), fp32 accumulation: a warp owns 16 rows, and a product's accumulators are the
// next product's A operand without a trip through shared memory. Head rows in shared memory have a pitch of dh + 8
// elements (16 bytes more than the data, so the 8 rows an ldmatrix reads start on different banks).
#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cuda/device/async_copy.cuh"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/mma_fragments.cuh"
#include "kernels/cuda/device/vector_access.cuh"
#include "kernels/fused_attention_layout.h"

namespace lseq::kernels::cuda {

// Slices up to this length are staged whole (fused_attention_cuda.cu); longer ones go tile by tile.
constexpr int kWholeSliceAttentionLen = Backend::kWholeSliceAttentionLen;
constexpr int kTile = 16;  // a warp's query rows, and the padding of lengths and head_dim
constexpr int kMaxHeadDim = Backend::kMaxFusedAttentionHeadDim;
constexpr int kHeadTiles = kMaxHeadDim / 8;  // n8 accumulator tiles of a head row
static_assert(kMaxHeadDim % kTile == 0, "whole tiles");

__host__ __device__ constexpr int round_tile(int n) { return (n + kTile - 1) / kTile * kTile; }

// Keys every row of slice s may see (k_lengths of its batch entry, clamped to k_len); row i sees the first
// row_keys(keys, i, causal) of them: attention_softmax_forward's masks.
__device__ __forceinline__ int slice_keys(const int32_t* k_lengths, int s, int heads, int k_len) {
  return k_lengths ? max(0, min(k_lengths[s / heads], k_len)) : k_len;
}
__device__ __forceinline__ int row_keys(int keys, int i, bool causal) { return causal ? min(keys, i + 1) : keys; }

// The query and key rows slice s has: q_len and k_len, or its sentence's counts where the rows are packed.
struct SliceRows {
  int q, k;
  __device__ SliceRows(int s, int heads, int q_len, int k_len, const int32_t* q_offsets, const int32_t* k_offsets)
      : q(fused_attention_rows(s / heads, q_len, q_offsets)), k(fused_attention_rows(s / heads, k_len, k_offsets)) {}
};

// Max and sum over the 4 lanes of a quad, which share an accumulator row.
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// A head row's extent in shared memory: head_dim rounded up to a tile, and the row pitch in elements.
struct HeadRows {
  int dh, ldh;
  __host__ __device__ explicit HeadRows(int head_dim) : dh(round_tile(head_dim)), ldh(round_tile(head_dim) + 8) {}
};

// Register tiles of a warp's 16 rows: scores over up to NK keys (fp32 accumulators), the same rounded to dt as A
// operands (16-bit pairs), and a head row's accumulators.
template <int NK>
using ScoreTiles = float[NK / 8][4];
template <int NK>
using ScoreOperands = uint32_t[NK / kTile][4];
using HeadTiles = float[kHeadTiles][4];

// kFull (the tiled kernels' interior tiles): key_end == NK and head rows of kMaxHeadDim, so the loops below have
// no run-time exits and the compiler can issue the next shared-memory loads ahead of the products; the row pitch is
// then a constant too, so every ldmatrix address is the lane's base plus an immediate offset instead of integer
// arithmetic of its own.
template <bool kFull>
__device__ __forceinline__ int row_pitch(const HeadRows& L) {
  return kFull ? kMaxHeadDim + 8 : L.ldh;  // HeadRows(kMaxHeadDim).ldh
}
__device__ __forceinline__ void zero_tiles(HeadTiles& acc) {
#pragma unroll
  for (int j = 0; j < kHeadTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
}

// acc = a b^T for the 16 rows at a ([16][ldh]) and the first key_end rows of b ([nk][ldh]): the score-shaped
// products q k^T and dO v^T. Tiles past key_end (keys no row of the tile sees) stay 0.
template <typename T, int NK, bool kFull = false>
__device__ __forceinline__ void score_product(const T* a, const T* b, int key_end, const HeadRows& L,
                                              ScoreTiles<NK>& acc) {
  const int lane = threadIdx.x & 31, ldh = row_pitch<kFull>(L);
  const T* a_lane = a + (lane % 16) * ldh + 8 * (lane / 16);
  const T* b_lane = b + (lane % 8 + 8 * (lane / 16)) * ldh + 8 * ((lane / 8) % 2);
#pragma unroll
  for (int j = 0; j < NK / 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
  for (int kc = 0; kc < kMaxHeadDim / kTile; ++kc) {
    if (!kFull && kc * kTile >= L.dh) break;
    uint32_t fa[4];
    load_matrices(fa, a_lane + kc * kTile);
#pragma unroll
    for (int np = 0; np < NK / kTile; ++np) {
      if (!kFull && np * kTile >= key_end) break;
      // Matrices: keys [16np, +8) x dims lo, hi, then keys [16np + 8, +8) x dims lo, hi.
      uint32_t fb[4];
      load_matrices(fb, b_lane + np * kTile * ldh + kc * kTile);
      mma_16x8x16<T>(acc[2 * np], fa, fb[0], fb[1]);
      mma_16x8x16<T>(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

// acc += a b for one k-step: a 16 x 16 A operand and rows [r, r + 16) of b [.][ldh] (row-major, its columns the head
// dimensions). Transposed matrices: rows lo, hi x dims [16dp, +8), then rows lo, hi x dims [16dp + 8, +8).
template <typename T, bool kFull = false>
__device__ __forceinline__ void head_step(const uint32_t (&a)[4], const T* b, int r, const HeadRows& L,
                                          HeadTiles& acc) {
  const int lane = threadIdx.x & 31, ldh = row_pitch<kFull>(L);
  const T* b_lane = b + (r + lane % 8 + 8 * ((lane / 8) % 2)) * ldh + 8 * (lane / 16);
#pragma unroll
  for (int dp = 0; dp < kMaxHeadDim / kTile; ++dp) {
    if (!kFull && dp * kTile >= L.dh) break;
    uint32_t fb[4];
    load_matrices_transposed(fb, b_lane + dp * kTile);
    mma_16x8x16<T>(acc[2 * dp], a, fb[0], fb[1]);
    mma_16x8x16<T>(acc[2 * dp + 1], a, fb[2], fb[3]);
  }
}

// acc = a b for a warp's score operands a (16 rows x nk keys, in registers, 0 from key_end on) and b [nk][ldh]
// (v or k, row-major): the head-shaped products P v and dS k.
template <typename T, int NK>
__device__ __forceinline__ void head_product(const ScoreOperands<NK>& a, const T* b, int key_end, const HeadRows& L,
                                             HeadTiles& acc) {
#pragma unroll
  for (int j = 0; j < kHeadTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
#pragma unroll
  for (int c = 0; c < NK / kTile; ++c) {
    if (c * kTile >= key_end) break;
    head_step(a[c], b, c * kTile, L, acc);
  }
}

// The lane's two values of score tile j, row half h, back from operands that to_operands made (rounded to T).
template <typename T, int NK>
__device__ __forceinline__ float2 operand_pair(const ScoreOperands<NK>& a, int j, int h) {
  return unpack_pair<T>(a[j / 2][2 * (j % 2) + h]);
}

// The rows r0 + l/4 and r0 + l/4 + 8 of a head tile (those below `rows`), columns below head_dim, to dst (row
// stride ld), rounded to T: 4-byte pairs when `paired` (head_dim, ld and dst even-aligned).
template <typename T>
__device__ __forceinline__ void store_head_tile(const HeadTiles& acc, int r0, int rows, int head_dim, T* dst,
                                                int64_t ld, bool paired) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = r0 + g + 8 * half;
    if (r >= rows) continue;
    T* row = dst + r * ld;
#pragma unroll
    for (int j = 0; j < kHeadTiles; ++j) {
      const int c = 8 * j + 2 * t;
      if (c >= head_dim) break;
      const float lo = acc[j][2 * half], hi = acc[j][2 * half + 1];
      if (paired) {
        *reinterpret_cast<uint32_t*>(row + c) = pack_pair<T>(lo, hi);
      } else {
        row[c] = from_f32<T>(lo);
        if (c + 1 < head_dim) row[c + 1] = from_f32<T>(hi);
      }
    }
  }
}

// Score tiles rounded to dt as A operands (mma_fragments.cuh: two accumulator tiles make one k-step).
template <typename T, int NK>
__device__ __forceinline__ void to_operands(const ScoreTiles<NK>& x, ScoreOperands<NK>& a) {
#pragma unroll
  for (int c = 0; c < NK / kTile; ++c) {
    a[c][0] = pack_pair<T>(x[2 * c][0], x[2 * c][1]);
    a[c][1] = pack_pair<T>(x[2 * c][2], x[2 * c][3]);
    a[c][2] = pack_pair<T>(x[2 * c + 1][0], x[2 * c + 1][1]);
    a[c][3] = pack_pair<T>(x[2 * c + 1][2], x[2 * c + 1][3]);
  }
}

// Rows [0, rows) x columns [0, cols) of src (row stride src_ld) into dst [rows_pad][ld] (columns [0, cols_pad)),
// zeros elsewhere. packed: 16-byte packs (cols and src_ld multiples of 8, src 16-byte aligned), copied
// asynchronously: the caller waits (wait_async_copies) before its __syncthreads. With every copy in flight at once
// staging is bound by bandwidth instead of one latency per pack.
template <typename T>
__device__ void stage(const T* src, int src_ld, int rows, int cols, T* dst, int ld, int rows_pad, int cols_pad,
                      bool packed) {
  if (packed) {
    constexpr int P = Pack<T>::size;
    const int row_packs = cols_pad / P;
    for (int e = threadIdx.x; e < rows_pad * row_packs; e += blockDim.x) {
      const int r = e / row_packs, c = (e - r * row_packs) * P;
      const bool inside = r < rows && c < cols;  // else 16 zero bytes: 0 in bf16 and fp16 alike
      copy_async_16(dst + r * ld + c, inside ? src + static_cast<int64_t>(r) * src_ld + c : src, inside);
    }
    return;
  }
  for (int e = threadIdx.x; e < rows_pad * cols_pad; e += blockDim.x) {
    const int r = e / cols_pad, c = e - r * cols_pad;
    dst[r * ld + c] = r < rows && c < cols ? src[static_cast<int64_t>(r) * src_ld + c] : from_f32<T>(0.0f);
  }
}

// ---- fp32 rows (FMA loops): a head row spread over a warp, lane l holding elements l and l + 32 ----

constexpr int kDimsPerLane = (kMaxHeadDim + 31) / 32;

__device__ __forceinline__ void load_row(const float* src, int head_dim, float (&v)[kDimsPerLane]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < kDimsPerLane; ++c) v[c] = lane + 32 * c < head_dim ? src[lane + 32 * c] : 0.0f;
}

__device__ __forceinline__ void store_row(const float (&v)[kDimsPerLane], int head_dim, float* dst) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < kDimsPerLane; ++c)
    if (lane + 32 * c < head_dim) dst[lane + 32 * c] = v[c];
}

// a . b for warp-spread rows; every lane gets it.
__device__ __forceinline__ float row_dot(const float (&a)[kDimsPerLane], const float (&b)[kDimsPerLane]) {
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < kDimsPerLane; ++c) s += a[c] * b[c];
  return warp_sum(s);
}

// 16-byte packs for every row of every operand: the head size, the row strides (and the context's row,
// heads*head_dim) multiples of the pack and the base pointers aligned.
template <typename T, typename... P>
bool rows_vectorize(int head_dim, int ldq, int ldkv, const P*... ptrs) {
  constexpr int pack = Pack<T>::size;
  return can_vectorize<T>(head_dim, ptrs...) && ldq % pack == 0 && ldkv % pack == 0;
}

}  // namespace lseq::kernels::cuda

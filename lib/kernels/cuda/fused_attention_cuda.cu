// The fused attention core of training (Backend::attention_forward/backward): one CTA per (batch, head) slice,
// the slice's q, k, v (and d_context) staged whole in shared memory, so scores and probabilities never reach global
// memory. MT sentences are short (fused_attention_fits: lengths up to 128, head_dim up to 64), which is what makes a
// whole slice fit and lets the softmax see its whole row at once (no online softmax). The slices are read from and
// written to the projections' token-major rows (a head is a column range of each row), so no split into a head
// layout and no merge back costs a pass over memory.
//
// 16-bit storage (bf16/fp16): the products run on tensor cores through WMMA 16x16x16 fragments with fp32
// accumulation; lengths and head_dim are rounded up to tiles of 16 in shared memory, the extra rows and columns 0.
//   forward:  S = q k^T (fp32, shared) -> masked softmax per row (a row spread over 4-16 lanes with 8 keys each,
//             fp32; lse saved) -> P (dt, written over S) -> context = P v, tile by tile to global memory.
//   backward: S = q k^T and dP = dO v^T (fp32, shared) -> per row P = exp(scale S - lse) (masked: exactly 0),
//             D = sum_j P dP, dS = P (dP - D) scale, both rounded to dt over S and dP -> dV = P^T dO, dK = dS^T q,
//             dQ = dS k, tile by tile to global memory.
// The roundings (P and dS to dt before their products) are those of the composed path, which stores probs and
// dscores in dt.
//
// fp32 storage: no tensor cores (fp32 must match the CPU to ~1e-5), plain FMA loops with a warp per query row (and
// in backward then a warp per key for dK and dV), operands read from global memory (L1/L2-resident per slice).
//
// No atomics: every output element is written by one thread, so results depend only on the inputs.
#include <mma.h>

#include <type_traits>

#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/vector_access.cuh"
#include "kernels/fused_attention_layout.h"

namespace lseq::kernels {

namespace cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTile = 16;  // WMMA m = n = k
constexpr int kMaxLen = Backend::kMaxFusedAttentionLen;
constexpr int kMaxHeadDim = Backend::kMaxFusedAttentionHeadDim;
constexpr int kKeysPerLane = 8;  // tensor-core path: a lane holds 8 consecutive keys of a score row (a 16-byte P pack)
constexpr float kLog2e = 1.4426950408889634f;

// Block shape of the tensor-core kernels by slice length. A slice is a chain of short dependent phases and shared
// memory caps the blocks an SM holds, so longer slices get more warps; a score row is spread over LanesPerRow lanes
// (8 keys each), so a warp works on 32 / LanesPerRow rows at once and its reductions take log2(LanesPerRow) shuffles.
template <int Warps, int LanesPerRow>
struct SliceShape {
  static constexpr int warps = Warps, threads = 32 * Warps, lanes_per_row = LanesPerRow;
  static constexpr int rows_per_pass = 32 / LanesPerRow;
};
using ShortSlices = SliceShape<4, 4>;    // up to 32 keys
using MediumSlices = SliceShape<8, 8>;   // up to 64
using LongSlices = SliceShape<8, kMaxLen / kKeysPerLane>;
static_assert(LongSlices::lanes_per_row <= 32 && kTile % ShortSlices::rows_per_pass == 0,
              "a pass of rows stays within the tile-padded rows");

// f(Shape{}) with the block shape for k_len keys.
template <typename F>
void with_slice_shape(int k_len, F&& f) {
  if (k_len <= 32)
    f(ShortSlices{});
  else if (k_len <= 64)
    f(MediumSlices{});
  else
    f(LongSlices{});
}

// Max and sum over the LanesPerRow lanes that share a score row (aligned groups: xor stays inside them).
template <int LanesPerRow>
__device__ __forceinline__ float row_max(float v) {
#pragma unroll
  for (int offset = LanesPerRow / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <int LanesPerRow>
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int offset = LanesPerRow / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// 8 fp32 scores from shared memory (16-byte aligned).
__device__ __forceinline__ void load_keys(const float* src, float (&x)[kKeysPerLane]) {
  const float4 a = *reinterpret_cast<const float4*>(src), b = *reinterpret_cast<const float4*>(src + 4);
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

// fp32 path (FMA loops): warps per block, and a head row spread over a warp.
constexpr int kWarps = 4;
constexpr int kSliceThreads = 32 * kWarps;
constexpr int kDimsPerLane = (kMaxHeadDim + 31) / 32;

__host__ __device__ constexpr int round_tile(int n) { return (n + kTile - 1) / kTile * kTile; }

// Keys every row of slice s may see (k_lengths of its batch entry, clamped to k_len); row i sees the first
// row_keys(keys, i, causal) of them: attention_softmax_forward's masks.
__device__ __forceinline__ int slice_keys(const int32_t* k_lengths, int s, int heads, int k_len) {
  return k_lengths ? max(0, min(k_lengths[s / heads], k_len)) : k_len;
}
__device__ __forceinline__ int row_keys(int keys, int i, bool causal) { return causal ? min(keys, i + 1) : keys; }

// The softmax passes' walk over the mq score rows: row(i, valid) for each row i this lane shares (Shape's
// lanes_per_row lanes per row, a warp on rows_per_pass rows at once), valid = the keys row i sees (0 past q_len).
// Every lane of a warp makes the same calls, so row may use the row reductions and __syncwarp.
template <typename Shape, typename Row>
__device__ __forceinline__ void for_each_score_row(int mq, int q_len, int keys, bool causal, Row&& row) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int i0 = warp * Shape::rows_per_pass; i0 < mq; i0 += Shape::warps * Shape::rows_per_pass) {
    const int i = i0 + lane / Shape::lanes_per_row;
    row(i, i < q_len ? row_keys(keys, i, causal) : 0);
  }
}

// ---- tensor-core path (bf16/fp16) ----

// Shared memory of one slice, in bytes from the (128-byte aligned) base. T rows have a pitch of dh + 8 elements and
// fp32 rows one of nk + 4 (16 bytes more than the data: consecutive rows start on other banks); every region and
// every 16x16 tile starts 32-byte aligned, as WMMA requires.
//   q      [mq][ldh] T     k, v [nk][ldh] T     d_out (backward: d_context) [mq][ldh] T
//   scores [mq][lds] fp32  S, then P (T, pitch 2*lds, written over each row)
//   d_scores (backward) [mq][lds] fp32  dP, then dS (T, pitch 2*lds)
//   tiles  [warps][16][16] fp32: each warp's staging tile for output tiles on their way to global memory. Used only
//          by the output products, after the last read of q and k (forward) or v (backward), so it lies over those
//          when they are large enough: shared memory is what caps the blocks an SM holds (at 64 x 64, backward 3
//          blocks instead of 2, forward 5 instead of 4).
//   lse (backward) [mq] fp32: the rows' log-sum-exp, staged with the operands
// Largest (lq = lk = 128, head_dim = 64): forward 122880 bytes, backward 209408 (the H100 allows 232448 per block).
struct SliceLayout {
  int mq, nk, dh;  // lq, lk, head_dim rounded up to tiles
  int ldh, lds;    // row pitches in elements: head rows (T), score rows (fp32)
  unsigned q, k, v, d_out, scores, d_scores, tiles, lse, bytes;
  __host__ __device__ SliceLayout(int lq, int lk, int head_dim, bool backward, int warps)
      : mq(round_tile(lq)), nk(round_tile(lk)), dh(round_tile(head_dim)), ldh(dh + 8), lds(nk + 4) {
    const unsigned q_bytes = 2u * mq * ldh, k_bytes = 2u * nk * ldh, s_bytes = 4u * mq * lds;
    q = 0;
    k = q + q_bytes;
    v = k + k_bytes;
    d_out = v + k_bytes;
    scores = d_out + (backward ? q_bytes : 0u);
    d_scores = scores + s_bytes;
    unsigned end = d_scores + (backward ? s_bytes : 0u);
    const unsigned tile_bytes = 4u * warps * kTile * kTile;
    const unsigned spare_at = backward ? v : q, spare_bytes = backward ? k_bytes : q_bytes + k_bytes;
    if (tile_bytes <= spare_bytes) {
      tiles = spare_at;
    } else {
      tiles = end;
      end += tile_bytes;
    }
    lse = end;
    bytes = lse + (backward ? 4u * mq : 0u);
  }
};

using Accumulator = wmma::fragment<wmma::accumulator, kTile, kTile, kTile, float>;

// acc = A B over `steps` k-steps of 16 for 16-row A and 16-column B tiles in shared memory. a and b point at the
// first k-step; a row-major A steps along its columns, a column-major one (a transposed operand) along its rows, and
// the reverse for B.
template <typename T, typename LayoutA, typename LayoutB>
__device__ __forceinline__ void tile_product(Accumulator& acc, const T* a, int lda, const T* b, int ldb, int steps) {
  constexpr bool a_rows = std::is_same_v<LayoutA, wmma::row_major>;
  constexpr bool b_rows = std::is_same_v<LayoutB, wmma::row_major>;
  wmma::fragment<wmma::matrix_a, kTile, kTile, kTile, T, LayoutA> fa;
  wmma::fragment<wmma::matrix_b, kTile, kTile, kTile, T, LayoutB> fb;
  wmma::fill_fragment(acc, 0.0f);
  for (int step = 0; step < steps; ++step) {
    wmma::load_matrix_sync(fa, a + step * (a_rows ? kTile : kTile * lda), lda);
    wmma::load_matrix_sync(fb, b + step * (b_rows ? kTile * ldb : kTile), ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// Rows [0, rows) x columns [0, cols) of src (row stride src_ld) into dst [rows_pad][ld] (columns [0, cols_pad)),
// zeros elsewhere. packed: 16-byte packs (cols and src_ld multiples of 8, src 16-byte aligned), copied
// asynchronously: the caller waits (wait_async_copies) before its __syncthreads. Staging is most of these kernels'
// time; with every copy in flight at once it is bound by bandwidth instead of one latency per pack.
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

// The warp's 16x16 result tile at (r0, c0) into dst (row stride dst_ld, T), clipped to rows x cols, through the
// warp's staging tile: lane l writes 8 consecutive values of row l / 2 (one 16-byte pack when packed and whole).
template <typename T>
__device__ void store_tile(const Accumulator& acc, float* staging, T* dst, int dst_ld, int rows, int cols, int r0,
                           int c0, bool packed) {
  wmma::store_matrix_sync(staging, acc, kTile, wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x & 31;
  const int r = r0 + (lane >> 1), c = c0 + (lane & 1) * 8;
  const float* from = staging + (lane >> 1) * kTile + (lane & 1) * 8;
  if (r < rows) {
    T* to = dst + static_cast<int64_t>(r) * dst_ld + c;
    if (packed && c + 8 <= cols) {
      float v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = from[e];
      store_pack(to, v);
    } else {
      for (int e = 0; e < 8 && c + e < cols; ++e) to[e] = from_f32<T>(from[e]);
    }
  }
  __syncwarp();  // the staging tile is free again
}

// Pointers into the dynamic shared memory of a slice.
template <typename T>
struct SliceSmem {
  T *q, *k, *v, *d_out;
  float *scores, *d_scores, *staging, *lse;
  T *p, *d_p;  // P and dS written over scores and d_scores (pitch ldp)
  int ldp;
  __device__ SliceSmem(unsigned char* base, const SliceLayout& L)
      : q(reinterpret_cast<T*>(base + L.q)),
        k(reinterpret_cast<T*>(base + L.k)),
        v(reinterpret_cast<T*>(base + L.v)),
        d_out(reinterpret_cast<T*>(base + L.d_out)),
        scores(reinterpret_cast<float*>(base + L.scores)),
        d_scores(reinterpret_cast<float*>(base + L.d_scores)),
        staging(reinterpret_cast<float*>(base + L.tiles) + (threadIdx.x >> 5) * kTile * kTile),
        lse(reinterpret_cast<float*>(base + L.lse)),
        p(reinterpret_cast<T*>(scores)),
        d_p(reinterpret_cast<T*>(d_scores)),
        ldp(2 * L.lds) {}
};

// The slice's q [q_len][head_dim] (row stride ldq), k and v [k_len][head_dim] (ldkv) into shared memory,
// zero-padded to whole tiles.
template <typename T>
__device__ void stage_slice(const T* q, int ldq, const T* k, const T* v, int ldkv, int q_len, int k_len, int head_dim,
                            const SliceLayout& L, const SliceSmem<T>& sm, bool packed) {
  stage(q, ldq, q_len, head_dim, sm.q, L.ldh, L.mq, L.dh, packed);
  stage(k, ldkv, k_len, head_dim, sm.k, L.ldh, L.nk, L.dh, packed);
  stage(v, ldkv, k_len, head_dim, sm.v, L.ldh, L.nk, L.dh, packed);
}

// out[mq][nk] (fp32, pitch L.lds) = a b^T for a [mq][ldh], b [nk][ldh] (T): the score-shaped products q k^T and
// dO v^T, tiles dealt to the warps in turn.
template <typename T>
__device__ void scores_product(const T* a, const T* b, const SliceLayout& L, float* out) {
  const int n_tiles = L.nk / kTile;
  for (int t = threadIdx.x >> 5; t < (L.mq / kTile) * n_tiles; t += blockDim.x >> 5) {
    const int ti = t / n_tiles, tj = t - ti * n_tiles;
    Accumulator acc;
    tile_product<T, wmma::row_major, wmma::col_major>(acc, a + ti * kTile * L.ldh, L.ldh, b + tj * kTile * L.ldh,
                                                      L.ldh, L.dh / kTile);
    wmma::store_matrix_sync(out + ti * kTile * L.lds + tj * kTile, acc, L.lds, wmma::mem_row_major);
  }
}

// dst [rows][head_dim] (global, row stride dst_ld) = A B with B [.][ldh] row-major in shared memory: A is
// row-major [rows][ldp] (LayoutA row_major) or the transpose of a [k][ldp] buffer (col_major); `steps` k-steps.
template <typename T, typename LayoutA>
__device__ void head_product(const T* a, int ldp, const T* b, const SliceLayout& L, int steps, int rows,
                             int head_dim, float* staging, T* dst, int dst_ld, bool packed) {
  constexpr bool a_rows = std::is_same_v<LayoutA, wmma::row_major>;
  const int d_tiles = L.dh / kTile;
  for (int t = threadIdx.x >> 5; t < round_tile(rows) / kTile * d_tiles; t += blockDim.x >> 5) {
    const int ti = t / d_tiles, tj = t - ti * d_tiles;
    Accumulator acc;
    tile_product<T, LayoutA, wmma::row_major>(acc, a + (a_rows ? ti * kTile * ldp : ti * kTile), ldp, b + tj * kTile,
                                              L.ldh, steps);
    store_tile(acc, staging, dst, dst_ld, rows, head_dim, ti * kTile, tj * kTile, packed);
  }
}

template <typename T, typename Shape>
__global__ void __launch_bounds__(Shape::threads)
    attention_forward_kernel(const T* q, int ldq, const T* k, const T* v, int ldkv, const int32_t* k_lengths,
                             int heads, int q_len, int k_len, int head_dim, float scale, bool causal, bool packed,
                             T* context, float* lse) {
  extern __shared__ __align__(128) unsigned char smem[];
  const SliceLayout L(q_len, k_len, head_dim, false, Shape::warps);
  const SliceSmem<T> sm(smem, L);
  const int s = blockIdx.x;
  const int width = heads * head_dim;  // the context's row
  constexpr int G = Shape::lanes_per_row;
  const int j0 = (threadIdx.x % G) * kKeysPerLane;  // this lane's first key of a row
  const bool has_keys = j0 < L.nk;                   // lanes past the padded keys only join the reductions
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv);
  const int64_t o_at = fused_attention_slice_at(s, heads, q_len, head_dim, width);
  stage_slice(q + q_at, ldq, k + k_at, v + k_at, ldkv, q_len, k_len, head_dim, L, sm, packed);
  const int keys = slice_keys(k_lengths, s, heads, k_len);  // read while the copies are in flight
  wait_async_copies();
  __syncthreads();
  scores_product(sm.q, sm.k, L, sm.scores);
  __syncthreads();
  // Masked softmax: G lanes per row, 8 keys each; rows past q_len get P = 0.
  for_each_score_row<Shape>(L.mq, q_len, keys, causal, [&](int i, int valid) {
    float x[kKeysPerLane];
    if (has_keys) load_keys(sm.scores + i * L.lds + j0, x);
    float mx = -INFINITY;
#pragma unroll
    for (int e = 0; e < kKeysPerLane; ++e) {
      x[e] = has_keys && j0 + e < valid ? scale * x[e] : -INFINITY;
      mx = fmaxf(mx, x[e]);
    }
    mx = row_max<G>(mx);
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < kKeysPerLane; ++e) {
      x[e] = j0 + e < valid ? exp2f((x[e] - mx) * kLog2e) : 0.0f;
      sum += x[e];
    }
    sum = row_sum<G>(sum);
    const float row_lse = valid > 0 ? mx + logf(sum) : -INFINITY;  // a row without keys: P = 0, context 0
    const float inv_sum = valid > 0 ? 1.0f / sum : 0.0f;
    __syncwarp();  // the whole row is read before P overwrites it
    if (has_keys) {
#pragma unroll
      for (int e = 0; e < kKeysPerLane; ++e) x[e] *= inv_sum;
      store_pack(sm.p + i * sm.ldp + j0, x);
    }
    if (j0 == 0 && i < q_len) lse[static_cast<int64_t>(s) * q_len + i] = row_lse;
  });
  __syncthreads();
  head_product<T, wmma::row_major>(sm.p, sm.ldp, sm.v, L, L.nk / kTile, q_len, head_dim, sm.staging,
                                   context + o_at, width, packed);
}

template <typename T, typename Shape>
__global__ void __launch_bounds__(Shape::threads)
    attention_backward_kernel(const T* q, int ldq, const T* k, const T* v, int ldkv, const int32_t* k_lengths,
                              int heads, int q_len, int k_len, int head_dim, float scale, bool causal, bool packed,
                              const float* lse, const T* d_context, T* d_q, T* d_k, T* d_v) {
  extern __shared__ __align__(128) unsigned char smem[];
  const SliceLayout L(q_len, k_len, head_dim, true, Shape::warps);
  const SliceSmem<T> sm(smem, L);
  const int s = blockIdx.x;
  const int width = heads * head_dim;  // d_context's row
  constexpr int G = Shape::lanes_per_row;
  const int j0 = (threadIdx.x % G) * kKeysPerLane;  // this lane's first key of a row
  const bool has_keys = j0 < L.nk;
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv);
  const int64_t o_at = fused_attention_slice_at(s, heads, q_len, head_dim, width);
  stage_slice(q + q_at, ldq, k + k_at, v + k_at, ldkv, q_len, k_len, head_dim, L, sm, packed);
  stage(d_context + o_at, width, q_len, head_dim, sm.d_out, L.ldh, L.mq, L.dh, packed);
  // Read while the copies are in flight.
  const int keys = slice_keys(k_lengths, s, heads, k_len);
  for (int i = threadIdx.x; i < q_len; i += blockDim.x) sm.lse[i] = lse[static_cast<int64_t>(s) * q_len + i];
  wait_async_copies();
  __syncthreads();
  scores_product(sm.q, sm.k, L, sm.scores);        // S
  scores_product(sm.d_out, sm.v, L, sm.d_scores);  // dP
  __syncthreads();
  // Softmax backward, G lanes per row with 8 keys each: P from S and lse (masked keys and rows past q_len exactly
  // 0), D = sum P dP, dS = P (dP - D) scale.
  for_each_score_row<Shape>(L.mq, q_len, keys, causal, [&](int i, int valid) {
    const float row_lse = valid > 0 ? sm.lse[i] : 0.0f;
    float p[kKeysPerLane], dp[kKeysPerLane];
    if (has_keys) {
      load_keys(sm.scores + i * L.lds + j0, p);
      load_keys(sm.d_scores + i * L.lds + j0, dp);
    }
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < kKeysPerLane; ++e) {
      const bool seen = has_keys && j0 + e < valid;
      p[e] = seen ? exp2f((scale * p[e] - row_lse) * kLog2e) : 0.0f;
      dp[e] = seen ? dp[e] : 0.0f;
      dot += p[e] * dp[e];
    }
    dot = row_sum<G>(dot);
    __syncwarp();  // the whole row is read before P and dS overwrite it
    if (has_keys) {
      store_pack(sm.p + i * sm.ldp + j0, p);
#pragma unroll
      for (int e = 0; e < kKeysPerLane; ++e) dp[e] = p[e] * (dp[e] - dot) * scale;
      store_pack(sm.d_p + i * sm.ldp + j0, dp);
    }
  });
  __syncthreads();
  // dV = P^T dO and dK = dS^T q over the mq query rows; dQ = dS k over the nk keys.
  head_product<T, wmma::col_major>(sm.p, sm.ldp, sm.d_out, L, L.mq / kTile, k_len, head_dim, sm.staging, d_v + k_at,
                                   ldkv, packed);
  head_product<T, wmma::col_major>(sm.d_p, sm.ldp, sm.q, L, L.mq / kTile, k_len, head_dim, sm.staging, d_k + k_at,
                                   ldkv, packed);
  head_product<T, wmma::row_major>(sm.d_p, sm.ldp, sm.k, L, L.nk / kTile, q_len, head_dim, sm.staging, d_q + q_at,
                                   ldq, packed);
}

// ---- fp32 path: FMA loops, a head row spread over a warp (lane l holds elements l and l + 32) ----

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

// acc += w * row j of src [.][head_dim], warp-spread.
__device__ __forceinline__ void add_row(float (&acc)[kDimsPerLane], float w, const float* src, int head_dim) {
  float r[kDimsPerLane];
  load_row(src, head_dim, r);
#pragma unroll
  for (int c = 0; c < kDimsPerLane; ++c) acc[c] += w * r[c];
}

// acc = sum_j w[j] row j of src (row stride ld) over j < n.
__device__ __forceinline__ void weighted_rows(float (&acc)[kDimsPerLane], const float* w, int n, const float* src,
                                              int ld, int head_dim) {
#pragma unroll
  for (int c = 0; c < kDimsPerLane; ++c) acc[c] = 0.0f;
  for (int j = 0; j < n; ++j) add_row(acc, w[j], src + static_cast<int64_t>(j) * ld, head_dim);
}

__global__ void __launch_bounds__(kSliceThreads)
    attention_forward_f32_kernel(const float* q, int ldq, const float* k, const float* v, int ldkv,
                                 const int32_t* k_lengths, int heads, int q_len, int k_len, int head_dim, float scale,
                                 bool causal, float* context, float* lse) {
  __shared__ float probs[kWarps][kMaxLen];  // a row's scaled scores, then its probabilities
  const int s = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int width = heads * head_dim;
  const float* qs = q + fused_attention_slice_at(s, heads, q_len, head_dim, ldq);
  const float* ks = k + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv);
  const float* vs = v + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv);
  float* cs = context + fused_attention_slice_at(s, heads, q_len, head_dim, width);
  float* p = probs[warp];
  const int keys = slice_keys(k_lengths, s, heads, k_len);
  for (int i = warp; i < q_len; i += kWarps) {
    const int valid = row_keys(keys, i, causal);
    float qi[kDimsPerLane], kj[kDimsPerLane];
    load_row(qs + static_cast<int64_t>(i) * ldq, head_dim, qi);
    float mx = -INFINITY;
    for (int j = 0; j < valid; ++j) {
      load_row(ks + static_cast<int64_t>(j) * ldkv, head_dim, kj);
      const float x = scale * row_dot(qi, kj);
      if (lane == 0) p[j] = x;
      mx = fmaxf(mx, x);
    }
    __syncwarp();
    float sum = 0.0f;
    for (int j = lane; j < valid; j += 32) sum += expf(p[j] - mx);
    sum = warp_sum(sum);
    const float row_lse = valid > 0 ? mx + logf(sum) : -INFINITY;
    for (int j = lane; j < valid; j += 32) p[j] = expf(p[j] - row_lse);
    __syncwarp();
    float o[kDimsPerLane];
    weighted_rows(o, p, valid, vs, ldkv, head_dim);
    store_row(o, head_dim, cs + static_cast<int64_t>(i) * width);
    if (lane == 0) lse[static_cast<int64_t>(s) * q_len + i] = row_lse;
    __syncwarp();  // p is the next row's
  }
}

__global__ void __launch_bounds__(kSliceThreads)
    attention_backward_f32_kernel(const float* q, int ldq, const float* k, const float* v, int ldkv,
                                  const int32_t* k_lengths, int heads, int q_len, int k_len, int head_dim, float scale,
                                  bool causal, const float* lse, const float* d_context, float* d_q, float* d_k,
                                  float* d_v) {
  __shared__ float row_dots[kMaxLen];           // D_i = sum_j P_ij dP_ij
  __shared__ float score_grads[kWarps][kMaxLen];  // a row's P, then dS
  __shared__ float prob_grads[kWarps][kMaxLen];   // a row's dP
  const int s = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int width = heads * head_dim;  // d_context's row
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv);
  const float *qs = q + q_at, *ks = k + k_at, *vs = v + k_at;
  const float* dos = d_context + fused_attention_slice_at(s, heads, q_len, head_dim, width);
  const float* ls = lse + static_cast<int64_t>(s) * q_len;
  const int keys = slice_keys(k_lengths, s, heads, k_len);
  // Rows: P, dP, D and dQ = dS k.
  float* ds = score_grads[warp];
  float* dp = prob_grads[warp];
  for (int i = warp; i < q_len; i += kWarps) {
    const int valid = row_keys(keys, i, causal);
    float qi[kDimsPerLane], doi[kDimsPerLane], r[kDimsPerLane];
    load_row(qs + static_cast<int64_t>(i) * ldq, head_dim, qi);
    load_row(dos + static_cast<int64_t>(i) * width, head_dim, doi);
    for (int j = 0; j < valid; ++j) {
      load_row(ks + static_cast<int64_t>(j) * ldkv, head_dim, r);
      const float pj = expf(scale * row_dot(qi, r) - ls[i]);
      load_row(vs + static_cast<int64_t>(j) * ldkv, head_dim, r);
      const float dpj = row_dot(doi, r);
      if (lane == 0) ds[j] = pj, dp[j] = dpj;
    }
    __syncwarp();
    float dot = 0.0f;
    for (int j = lane; j < valid; j += 32) dot += ds[j] * dp[j];
    dot = warp_sum(dot);
    for (int j = lane; j < valid; j += 32) ds[j] = ds[j] * (dp[j] - dot) * scale;
    __syncwarp();
    float dq[kDimsPerLane];
    weighted_rows(dq, ds, valid, ks, ldkv, head_dim);
    store_row(dq, head_dim, d_q + q_at + static_cast<int64_t>(i) * ldq);
    if (lane == 0) row_dots[i] = dot;
    __syncwarp();
  }
  __syncthreads();
  // Keys: dV_j = sum_i P_ij dO_i, dK_j = sum_i dS_ij q_i over the rows that see key j (padding keys: 0).
  for (int j = warp; j < k_len; j += kWarps) {
    float kj[kDimsPerLane], vj[kDimsPerLane], dk[kDimsPerLane] = {}, dv[kDimsPerLane] = {};
    load_row(ks + static_cast<int64_t>(j) * ldkv, head_dim, kj);
    load_row(vs + static_cast<int64_t>(j) * ldkv, head_dim, vj);
    for (int i = 0; i < q_len; ++i) {
      if (j >= row_keys(keys, i, causal)) continue;  // the same for the whole warp
      float qi[kDimsPerLane], doi[kDimsPerLane];
      load_row(qs + static_cast<int64_t>(i) * ldq, head_dim, qi);
      load_row(dos + static_cast<int64_t>(i) * width, head_dim, doi);
      const float pij = expf(scale * row_dot(qi, kj) - ls[i]);
      const float dsij = pij * (row_dot(doi, vj) - row_dots[i]) * scale;
#pragma unroll
      for (int c = 0; c < kDimsPerLane; ++c) {
        dv[c] += pij * doi[c];
        dk[c] += dsij * qi[c];
      }
    }
    store_row(dk, head_dim, d_k + k_at + static_cast<int64_t>(j) * ldkv);
    store_row(dv, head_dim, d_v + k_at + static_cast<int64_t>(j) * ldkv);
  }
}

// Checks the shape (as the CPU does) and returns the slices, one block each.
unsigned fused_slices(const char* op, int batch, int heads, int q_len, int k_len, int head_dim, int ldq, int ldkv) {
  check_fused_attention_shape(op, batch, heads, q_len, k_len, head_dim, ldq, ldkv);
  return static_cast<unsigned>(batch) * static_cast<unsigned>(heads);
}

// 16-byte packs for every row of every operand: the head size, the row strides (and the context's row,
// heads*head_dim) multiples of the pack and the base pointers aligned.
template <typename T, typename... P>
bool rows_vectorize(int head_dim, int ldq, int ldkv, const P*... ptrs) {
  constexpr int pack = Pack<T>::size;
  return can_vectorize<T>(head_dim, ptrs...) && ldq % pack == 0 && ldkv % pack == 0;
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::attention_forward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                    const int32_t* k_lengths, int batch, int heads, int q_len, int k_len,
                                    int head_dim, float scale, bool causal, void* context, float* lse) {
  const unsigned slices = fused_slices("attention_forward", batch, heads, q_len, k_len, head_dim, ldq, ldkv);
  if (slices == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k), *pv = static_cast<const T*>(v);
    T* out = static_cast<T*>(context);
    if constexpr (std::is_same_v<T, float>) {
      attention_forward_f32_kernel<<<slices, kSliceThreads, 0, stream_>>>(
          pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, out, lse);
    } else {
      const bool packed = rows_vectorize<T>(head_dim, ldq, ldkv, pq, pk, pv, out);
      with_slice_shape(k_len, [&](auto shape) {
        using Shape = decltype(shape);
        const SliceLayout layout(q_len, k_len, head_dim, false, Shape::warps);
        allow_shared_bytes(attention_forward_kernel<T, Shape>, layout.bytes);
        attention_forward_kernel<T, Shape><<<slices, Shape::threads, layout.bytes, stream_>>>(
            pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, packed, out, lse);
      });
    }
  });
  check_launch("attention_forward");
}

void CudaBackend::attention_backward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                     const int32_t* k_lengths, int batch, int heads, int q_len, int k_len,
                                     int head_dim, float scale, bool causal, const float* lse, const void* d_context,
                                     void* d_q, void* d_k, void* d_v) {
  const unsigned slices = fused_slices("attention_backward", batch, heads, q_len, k_len, head_dim, ldq, ldkv);
  if (slices == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k), *pv = static_cast<const T*>(v);
    const T* pdo = static_cast<const T*>(d_context);
    T *dq = static_cast<T*>(d_q), *dk = static_cast<T*>(d_k), *dv = static_cast<T*>(d_v);
    if constexpr (std::is_same_v<T, float>) {
      attention_backward_f32_kernel<<<slices, kSliceThreads, 0, stream_>>>(
          pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, lse, pdo, dq, dk, dv);
    } else {
      const bool packed = rows_vectorize<T>(head_dim, ldq, ldkv, pq, pk, pv, pdo, dq, dk, dv);
      with_slice_shape(k_len, [&](auto shape) {
        using Shape = decltype(shape);
        const SliceLayout layout(q_len, k_len, head_dim, true, Shape::warps);
        allow_shared_bytes(attention_backward_kernel<T, Shape>, layout.bytes);
        attention_backward_kernel<T, Shape><<<slices, Shape::threads, layout.bytes, stream_>>>(
            pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, packed, lse, pdo, dq, dk,
            dv);
      });
    }
  });
  check_launch("attention_backward");
}

}  // namespace lseq::kernels

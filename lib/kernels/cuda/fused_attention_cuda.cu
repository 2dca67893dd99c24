// The fused attention core of training (Backend::attention_forward/backward): one CTA per (batch, head) slice,
// the slice's q, k, v (and d_context) staged whole in shared memory, so scores and probabilities never reach global
// memory. MT sentences are short (lengths up to kWholeSliceAttentionLen = 128, head_dim up to 64), which is what
// makes a whole slice fit and lets the softmax see its whole row at once (no online softmax); longer slices go tile
// by tile (tiled_attention_cuda.cu). The slices are read from and
// written to the projections' token-major rows (a head is a column range of each row), so no split into a head
// layout and no merge back costs a pass over memory. The rows may also be packed (padding-free: a sentence's rows
// start at its offset and stop at its length, fused_attention_layout.h), as the training encoder's are.
//
// 16-bit storage (bf16/fp16): tensor cores through mma.sync m16n8k16 (mma_fragments.cuh), fp32 accumulation. Each
// warp owns 16 query rows, and a row's scores stay in that warp's registers from product to product (the
// accumulator of one product is the A operand of the next); lengths and head_dim are rounded up to tiles of 16 in
// shared memory, the extra rows and columns 0.
//   forward:  S = q k^T -> masked softmax (a row is spread over the 4 lanes of a quad; lse saved) -> P rounded to
//             dt -> context = P v, stored from registers.
//   backward: S = q k^T -> P = exp(scale S - lse) rounded to dt (masked: exactly 0) -> dP = dO v^T ->
//             D = sum_j P dP, dS = P (dP - D) scale rounded to dt -> dQ = dS k, stored from registers. P goes to
//             shared memory as soon as it is made (its registers are needed for dP), dS once every warp is done
//             with k and v (it lies over them); then the warps take 16-key tiles: dV = P^T dO, dK = dS^T q.
// The roundings (P and dS to dt before their products) are those of the composed path, which stores probs and
// dscores in dt.
//
// fp32 storage: no tensor cores (fp32 must match the CPU to ~1e-5), plain FMA loops with a warp per query row (and
// in backward then a warp per key for dK and dV), operands read from global memory (L1/L2-resident per slice).
//
// No atomics: every output element is written by one thread, so results depend only on the inputs.
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/attention_tiles.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kMaxLen = kWholeSliceAttentionLen;  // longer slices: tiled_attention_cuda.cu
constexpr int kMaxWarps = kMaxLen / kTile;        // one per 16 query rows
static_assert(kMaxLen % kTile == 0, "whole tiles");

// fp32 path (FMA loops): warps per block, and a head row spread over a warp.
constexpr int kWarps = 4;
constexpr int kSliceThreads = 32 * kWarps;

// Shared memory of one slice, in bytes from the (128-byte aligned) base. Head rows (T) have a pitch of dh + 8
// elements and probability rows (T) one of nk + 8: 16 bytes more than the data, so the 8 rows an ldmatrix reads
// start on different banks. Every row starts 16-byte aligned.
//   q [mq][ldh]   d_out (backward: d_context) [mq][ldh]   k, v [nk][ldh]
//   backward: dS [mq][ldp] over k and v (written after their last reads; past them when larger), P [mq][ldp]
// Largest (lq = lk = 128, head_dim = 64): forward 55296 bytes, backward 108544 (two blocks an SM).
struct SliceLayout : HeadRows {  // dh, ldh: head_dim rounded up to a tile, head rows' pitch
  int mq, nk;  // lq, lk rounded up to tiles
  int ldp;     // the pitch of probability rows
  unsigned q, d_out, k, v, p, d_s, bytes;
  __host__ __device__ SliceLayout(int lq, int lk, int head_dim, bool backward)
      : HeadRows(head_dim), mq(round_tile(lq)), nk(round_tile(lk)), ldp(nk + 8) {
    const unsigned q_bytes = 2u * mq * ldh, k_bytes = 2u * nk * ldh, p_bytes = 2u * mq * ldp;
    q = 0;
    d_out = q + q_bytes;
    k = d_out + (backward ? q_bytes : 0u);
    v = k + k_bytes;
    unsigned end = v + k_bytes;
    d_s = k;
    p = end;
    if (backward) {
      p = end > d_s + p_bytes ? end : d_s + p_bytes;
      end = p + p_bytes;
    }
    bytes = end;
  }
};

// acc = a^T b for key tile kt: a [mq][ldp] (P or dS, rows = queries) and b [mq][ldh] (dO or q), both in shared
// memory: the key-shaped products P^T dO and dS^T q, summed over the query tiles from q_begin on (the rows before
// see none of the tile's keys: their P and dS are 0 there).
template <typename T>
__device__ __forceinline__ void key_product(const T* a, const T* b, int kt, int q_begin, const SliceLayout& L,
                                            HeadTiles& acc) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int j = 0; j < kHeadTiles; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  for (int qc = q_begin; qc < L.mq / kTile; ++qc) {
    // a^T's fragment, transposed from a: queries lo x keys lo, queries lo x keys hi, queries hi x keys lo, hi.
    uint32_t fa[4];
    load_matrices_transposed(fa, a + (qc * kTile + lane % 8 + 8 * (lane / 16)) * L.ldp + kt * kTile +
                                     8 * ((lane / 8) % 2));
    head_step(fa, b, qc * kTile, L, acc);
  }
}

// The lane's two values of score tile j, row half h (0: l/4, 1: l/4 + 8), from rows [r0, r0 + 16) of src [.][ldp]
// (shared memory, as store_operands wrote them); 0 past nk.
template <typename T>
__device__ __forceinline__ float2 stored_pair(const T* src, int r0, int j, int h, int nk, int ldp) {
  if (8 * j >= nk) return make_float2(0.0f, 0.0f);
  const int lane = threadIdx.x & 31;
  const int row = r0 + (lane >> 2) + 8 * h, col = 8 * j + 2 * (lane & 3);
  return unpack_pair<T>(*reinterpret_cast<const uint32_t*>(src + row * ldp + col));
}

// A warp's 16 rows of operands into rows [r0, r0 + 16) of dst [.][ldp] (shared memory).
template <int NK>
__device__ __forceinline__ void store_operands(const ScoreOperands<NK>& a, int r0, int nk, void* dst, int ldp) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  uint16_t* base = static_cast<uint16_t*>(dst);
#pragma unroll
  for (int c = 0; c < NK / kTile; ++c) {
    if (c * kTile >= nk) break;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int row = r0 + g + 8 * (r % 2), col = c * kTile + 8 * (r / 2) + 2 * t;
      *reinterpret_cast<uint32_t*>(base + row * ldp + col) = a[c][r];
    }
  }
}

// Pointers into the dynamic shared memory of a slice.
template <typename T>
struct SliceSmem {
  T *q, *d_out, *k, *v, *p, *d_s;
  __device__ SliceSmem(unsigned char* base, const SliceLayout& L)
      : q(reinterpret_cast<T*>(base + L.q)),
        d_out(reinterpret_cast<T*>(base + L.d_out)),
        k(reinterpret_cast<T*>(base + L.k)),
        v(reinterpret_cast<T*>(base + L.v)),
        p(reinterpret_cast<T*>(base + L.p)),
        d_s(reinterpret_cast<T*>(base + L.d_s)) {}
};

// The two query rows of lane l in the warp's tile at r0 (l/4 and l/4 + 8), the keys each sees (0 past q_len), and
// key_end: the keys any row of the tile sees, rounded up to a tile (the products stop there: masked tiles of
// shorter sentences in the batch and, when causal, the tiles right of the diagonal).
struct LaneRows {
  int row[2], valid[2], key_end;
  __device__ LaneRows(int r0, int q_len, int keys, bool causal) {
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row[h] = r0 + g + 8 * h;
      valid[h] = row[h] < q_len ? row_keys(keys, row[h], causal) : 0;
    }
    key_end = r0 < q_len ? round_tile(row_keys(keys, min(r0 + kTile, q_len) - 1, causal)) : 0;
  }
  // Whether score tile j's column element e is seen by row half h.
  __device__ bool sees(int h, int j, int e) const { return 8 * j + 2 * (threadIdx.x & 3) + e < valid[h]; }
};

template <typename T, int NK>
__global__ void __launch_bounds__(kMaxWarps * 32, 2)
    attention_forward_kernel(const T* q, int ldq, const T* k, const T* v, int ldkv, const int32_t* k_lengths,
                             int heads, int q_len, int k_len, int head_dim, float scale, bool causal, bool packed,
                             T* context, float* lse, const int32_t* q_offsets, const int32_t* k_offsets) {
  extern __shared__ __align__(128) unsigned char smem[];
  const SliceLayout L(q_len, k_len, head_dim, false);
  const SliceSmem<T> sm(smem, L);
  const int s = blockIdx.x;
  const int width = heads * head_dim;  // the context's row
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  stage(q + q_at, ldq, rows_of.q, head_dim, sm.q, L.ldh, L.mq, L.dh, packed);
  stage(k + k_at, ldkv, rows_of.k, head_dim, sm.k, L.ldh, L.nk, L.dh, packed);
  stage(v + k_at, ldkv, rows_of.k, head_dim, sm.v, L.ldh, L.nk, L.dh, packed);
  const int r0 = (threadIdx.x >> 5) * kTile;
  const LaneRows rows(r0, rows_of.q, min(rows_of.k, slice_keys(k_lengths, s, heads, k_len)), causal);  // while the
                                                                                                     // copies fly
  wait_async_copies();
  __syncthreads();
  ScoreTiles<NK> x;
  score_product<T, NK>(sm.q + r0 * L.ldh, sm.k, rows.key_end, L, x);
  // Masked softmax of the lane's two rows; a row without keys gets P = 0 (context 0) and lse = -inf.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < NK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& xe = x[j][2 * h + e];
        xe = rows.sees(h, j, e) ? scale * xe : -INFINITY;
        mx = fmaxf(mx, xe);
      }
    mx = quad_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < NK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& xe = x[j][2 * h + e];
        xe = rows.sees(h, j, e) ? exp2_flush((xe - mx) * kLog2e) : 0.0f;
        sum += xe;
      }
    sum = quad_sum(sum);
    const bool any = rows.valid[h] > 0;
    const float inv_sum = any ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int j = 0; j < NK / 8; ++j) x[j][2 * h] *= inv_sum, x[j][2 * h + 1] *= inv_sum;
    if ((threadIdx.x & 3) == 0 && rows.row[h] < rows_of.q)
      lse[static_cast<int64_t>(s) * q_len + rows.row[h]] = any ? mx + logf(sum) : -INFINITY;
  }
  ScoreOperands<NK> p;
  to_operands<T, NK>(x, p);
  HeadTiles out;
  head_product<T, NK>(p, sm.v, rows.key_end, L, out);
  store_head_tile(out, r0, rows_of.q, head_dim,
                  context + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets), width, packed);
}

template <typename T, int NK>
__global__ void __launch_bounds__(kMaxWarps * 32, 2)
    attention_backward_kernel(const T* q, int ldq, const T* k, const T* v, int ldkv, const int32_t* k_lengths,
                              int heads, int q_len, int k_len, int head_dim, float scale, bool causal, bool packed,
                              const float* lse, const T* d_context, T* d_q, T* d_k, T* d_v, const int32_t* q_offsets,
                              const int32_t* k_offsets) {
  extern __shared__ __align__(128) unsigned char smem[];
  const SliceLayout L(q_len, k_len, head_dim, true);
  const SliceSmem<T> sm(smem, L);
  const int s = blockIdx.x;
  const int width = heads * head_dim;  // d_context's row
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  stage(q + q_at, ldq, rows_of.q, head_dim, sm.q, L.ldh, L.mq, L.dh, packed);
  stage(d_context + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets), width, rows_of.q, head_dim,
        sm.d_out, L.ldh, L.mq, L.dh, packed);
  stage(k + k_at, ldkv, rows_of.k, head_dim, sm.k, L.ldh, L.nk, L.dh, packed);
  stage(v + k_at, ldkv, rows_of.k, head_dim, sm.v, L.ldh, L.nk, L.dh, packed);
  // Read while the copies are in flight.
  const int warp = threadIdx.x >> 5, warps = blockDim.x >> 5, r0 = warp * kTile;
  const int keys = min(rows_of.k, slice_keys(k_lengths, s, heads, k_len));
  const LaneRows rows(r0, rows_of.q, keys, causal);
  float row_lse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) row_lse[h] = rows.valid[h] > 0 ? lse[static_cast<int64_t>(s) * q_len + rows.row[h]] : 0.0f;
  wait_async_copies();
  __syncthreads();
  // P from S and lse, rounded to dt (masked keys and rows past q_len exactly 0).
  ScoreTiles<NK> x;
  score_product<T, NK>(sm.q + r0 * L.ldh, sm.k, rows.key_end, L, x);
#pragma unroll
  for (int j = 0; j < NK / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& xe = x[j][2 * h + e];
        xe = rows.sees(h, j, e) ? exp2_flush((scale * xe - row_lse[h]) * kLog2e) : 0.0f;
      }
  {
    ScoreOperands<NK> p;
    to_operands<T, NK>(x, p);
    store_operands<NK>(p, r0, L.nk, sm.p, L.ldp);  // read back below by the lanes that wrote them
  }
  // dP, then D = sum_j P dP per row and dS = P (dP - D) scale.
  score_product<T, NK>(sm.d_out + r0 * L.ldh, sm.v, rows.key_end, L, x);
  float dot[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < NK / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 p = stored_pair(sm.p, r0, j, h, L.nk, L.ldp);
      dot[h] += p.x * x[j][2 * h] + p.y * x[j][2 * h + 1];
    }
  dot[0] = quad_sum(dot[0]), dot[1] = quad_sum(dot[1]);
#pragma unroll
  for (int j = 0; j < NK / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float2 p = stored_pair(sm.p, r0, j, h, L.nk, L.ldp);
      x[j][2 * h] = p.x * (x[j][2 * h] - dot[h]) * scale;
      x[j][2 * h + 1] = p.y * (x[j][2 * h + 1] - dot[h]) * scale;
    }
  ScoreOperands<NK> d_s;
  to_operands<T, NK>(x, d_s);
  HeadTiles acc;
  head_product<T, NK>(d_s, sm.k, rows.key_end, L, acc);  // dQ = dS k
  store_head_tile(acc, r0, rows_of.q, head_dim, d_q + q_at, ldq, packed);
  __syncthreads();  // every warp's last read of k and v is done: dS goes over them
  store_operands<NK>(d_s, r0, L.nk, sm.d_s, L.ldp);
  __syncthreads();
  // dV = P^T dO and dK = dS^T q, 16 keys a warp at a time, over all query rows.
  for (int kt = warp; kt < L.nk / kTile; kt += warps) {
    // Keys no row sees (past the sentence's length) get zero gradients; causal rows see key tile kt from row 16 kt.
    const int q_begin = kt * kTile >= keys ? L.mq / kTile : causal ? kt : 0;
    key_product(sm.p, sm.d_out, kt, q_begin, L, acc);
    store_head_tile(acc, kt * kTile, rows_of.k, head_dim, d_v + k_at, ldkv, packed);
    key_product(sm.d_s, sm.q, kt, q_begin, L, acc);
    store_head_tile(acc, kt * kTile, rows_of.k, head_dim, d_k + k_at, ldkv, packed);
  }
}

// f(std::integral_constant<int, NK>{}) with the register tiles' key count for k_len keys.
template <typename F>
void with_key_tiles(int k_len, F&& f) {
  if (k_len <= 32)
    f(std::integral_constant<int, 32>{});
  else if (k_len <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, kMaxLen>{});
}

// Threads of a slice's block: a warp per 16 query rows.
int slice_threads(int q_len) { return 32 * (round_tile(q_len) / kTile); }

// ---- fp32 path: FMA loops, a head row spread over a warp (lane l holds elements l and l + 32) ----

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
                                 bool causal, float* context, float* lse, const int32_t* q_offsets,
                                 const int32_t* k_offsets) {
  __shared__ float probs[kWarps][kMaxLen];  // a row's scaled scores, then its probabilities
  const int s = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int width = heads * head_dim;
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  const float* qs = q + fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const float* ks = k + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const float* vs = v + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  float* cs = context + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets);
  float* p = probs[warp];
  const int keys = min(rows_of.k, slice_keys(k_lengths, s, heads, k_len));
  for (int i = warp; i < rows_of.q; i += kWarps) {
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
                                  float* d_v, const int32_t* q_offsets, const int32_t* k_offsets) {
  __shared__ float row_dots[kMaxLen];           // D_i = sum_j P_ij dP_ij
  __shared__ float score_grads[kWarps][kMaxLen];  // a row's P, then dS
  __shared__ float prob_grads[kWarps][kMaxLen];   // a row's dP
  const int s = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int width = heads * head_dim;  // d_context's row
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const float *qs = q + q_at, *ks = k + k_at, *vs = v + k_at;
  const float* dos = d_context + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets);
  const float* ls = lse + static_cast<int64_t>(s) * q_len;
  const int keys = min(rows_of.k, slice_keys(k_lengths, s, heads, k_len));
  // Rows: P, dP, D and dQ = dS k.
  float* ds = score_grads[warp];
  float* dp = prob_grads[warp];
  for (int i = warp; i < rows_of.q; i += kWarps) {
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
  for (int j = warp; j < rows_of.k; j += kWarps) {
    float kj[kDimsPerLane], vj[kDimsPerLane], dk[kDimsPerLane] = {}, dv[kDimsPerLane] = {};
    load_row(ks + static_cast<int64_t>(j) * ldkv, head_dim, kj);
    load_row(vs + static_cast<int64_t>(j) * ldkv, head_dim, vj);
    for (int i = 0; i < rows_of.q; ++i) {
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

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::attention_forward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                    const int32_t* k_lengths, int batch, int heads, int q_len, int k_len,
                                    int head_dim, float scale, bool causal, void* context, float* lse,
                                    const int32_t* q_offsets, const int32_t* k_offsets, const Dropout& drop) {
  const unsigned slices = fused_slices("attention_forward", batch, heads, q_len, k_len, head_dim, ldq, ldkv);
  check_fused_attention_dropout("attention_forward", q_len, k_len, drop);
  if (slices == 0) return;
  bind();
  if (q_len > kMaxLen || k_len > kMaxLen) {
    tiled_attention_forward(dt, q, ldq, k, v, ldkv, k_lengths, batch, heads, q_len, k_len, head_dim, scale, causal,
                            context, lse, q_offsets, k_offsets, drop);
    check_launch("attention_forward");
    return;
  }
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k), *pv = static_cast<const T*>(v);
    T* out = static_cast<T*>(context);
    if constexpr (std::is_same_v<T, float>) {
      attention_forward_f32_kernel<<<slices, kSliceThreads, 0, stream_>>>(
          pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, out, lse, q_offsets,
          k_offsets);
    } else {
      const bool packed = rows_vectorize<T>(head_dim, ldq, ldkv, pq, pk, pv, out);
      with_key_tiles(k_len, [&](auto nk) {
        constexpr int NK = decltype(nk)::value;
        const SliceLayout layout(q_len, k_len, head_dim, false);
        allow_shared_bytes(attention_forward_kernel<T, NK>, layout.bytes);
        attention_forward_kernel<T, NK><<<slices, slice_threads(q_len), layout.bytes, stream_>>>(
            pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, packed, out, lse, q_offsets,
            k_offsets);
      });
    }
  });
  check_launch("attention_forward");
}

void CudaBackend::attention_backward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                     const int32_t* k_lengths, int batch, int heads, int q_len, int k_len,
                                     int head_dim, float scale, bool causal, const float* lse, const void* context,
                                     const void* d_context, void* d_q, void* d_k, void* d_v, const int32_t* q_offsets,
                                     const int32_t* k_offsets, const Dropout& drop) {
  const unsigned slices = fused_slices("attention_backward", batch, heads, q_len, k_len, head_dim, ldq, ldkv);
  check_fused_attention_dropout("attention_backward", q_len, k_len, drop);
  if (slices == 0) return;
  bind();
  if (q_len > kMaxLen || k_len > kMaxLen) {
    tiled_attention_backward(dt, q, ldq, k, v, ldkv, k_lengths, batch, heads, q_len, k_len, head_dim, scale, causal,
                             lse, context, d_context, d_q, d_k, d_v, q_offsets, k_offsets, drop);
    check_launch("attention_backward");
    return;
  }
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k), *pv = static_cast<const T*>(v);
    const T* pdo = static_cast<const T*>(d_context);
    T *dq = static_cast<T*>(d_q), *dk = static_cast<T*>(d_k), *dv = static_cast<T*>(d_v);
    if constexpr (std::is_same_v<T, float>) {
      attention_backward_f32_kernel<<<slices, kSliceThreads, 0, stream_>>>(
          pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, lse, pdo, dq, dk, dv,
          q_offsets, k_offsets);
    } else {
      const bool packed = rows_vectorize<T>(head_dim, ldq, ldkv, pq, pk, pv, pdo, dq, dk, dv);
      with_key_tiles(k_len, [&](auto nk) {
        constexpr int NK = decltype(nk)::value;
        const SliceLayout layout(q_len, k_len, head_dim, true);
        allow_shared_bytes(attention_backward_kernel<T, NK>, layout.bytes);
        attention_backward_kernel<T, NK><<<slices, slice_threads(q_len), layout.bytes, stream_>>>(
            pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, packed, lse, pdo, dq, dk,
            dv, q_offsets, k_offsets);
      });
    }
  });
  check_launch("attention_backward");
}

}  // namespace lseq::kernels

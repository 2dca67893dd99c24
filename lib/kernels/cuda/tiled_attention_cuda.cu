// The fused attention core over slices longer than the whole-slice kernels take (Backend::attention_forward/backward
// above kWholeSliceAttentionLen positions: language models, long documents). Flash-style: scores and probabilities
// never reach global memory and nothing of size length^2 is stored, so memory grows with the length, not its square.
//
// 16-bit storage (bf16/fp16), tensor cores (attention_tiles.cuh), fp32 accumulation. A CTA owns a block of 64 rows
// (a warp per 16) of one slice and streams 64-row tiles of the other side through two shared-memory buffers (the
// next tile's cp.async copies fly while the warps work on this one):
//   forward:  queries own; key/value tiles stream. Online softmax per row (running max and sum in registers, the
//             accumulated context rescaled when the max grows); context = acc / sum and lse = max + log(sum) at the
//             end. P is rounded to dt before P v (unnormalised: exp(s - running max)).
//   backward: D_i = d_context_i . context_i (a row-dots kernel; the softmax gradient's row sums sum_j P_ij dP_ij)
//             into the backend's scratch, then two kernels, so that every output element is written by one thread
//             (no atomics, deterministic):
//             dQ:     queries (and their d_context rows) own; key/value tiles stream: P = exp(scale S - lse),
//                     dP = dO v^T, dS = P (dP - D) scale, dQ += dS k.
//             dK, dV: keys (and values) own; query/d_context tiles stream with their lse and D. A warp's 16 keys
//                     make the rows of transposed scores S^T = k q^T, so P^T and dS^T are A operands as they are:
//                     dV += P^T dO, dP^T = v dO^T, dK += dS^T q.
// Causal slices skip the tiles past the diagonal; the forward and dQ grids start with the query blocks that see the
// most keys. Keys past a sentence's length are staged as zeros and masked.
//
// fp32 storage: FMA loops (fp32 must match the CPU to ~1e-5), a warp per query row, and in backward a warp per key,
// each recomputing its products instead of keeping rows in shared memory: the oracle-grade path, not a fast one.
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/attention_tiles.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

constexpr int kBlockRows = 64;  // a CTA's own rows: queries (forward, dQ) or keys (dK, dV), a warp per 16
constexpr int kBlockWarps = kBlockRows / kTile;
constexpr int kBlockThreads = 32 * kBlockWarps;
constexpr int kStreamRows = 64;  // rows of the streamed side per step: keys (forward, dQ) or queries (dK, dV)
constexpr int kMaxGridY = 65535;
using StreamScores = ScoreTiles<kStreamRows>;
using StreamOperands = ScoreOperands<kStreamRows>;

// Shared memory of a CTA, in bytes from the base: `own` operands of its own block ([64][ldh] T each), then two
// buffers of two streamed operands each, then (dK/dV) two buffers of the streamed queries' lse and D x scale (64
// floats each). Head-dim 64: forward 46080 bytes, dQ 55296, dK/dV 56320.
struct TiledLayout : HeadRows {
  unsigned operand_bytes, stream_at, stats_at, bytes;
  TiledLayout(int head_dim, int own, bool stats) : HeadRows(head_dim) {
    operand_bytes = 2u * kBlockRows * ldh;  // 16-bit elements
    stream_at = own * operand_bytes;
    stats_at = stream_at + 4 * operand_bytes;
    bytes = stats_at + (stats ? 2u * 2u * kStreamRows * sizeof(float) : 0u);
  }
};

template <typename T>
struct TiledSmem {
  unsigned char* base;
  const TiledLayout& L;
  __device__ T* own(int i) const { return reinterpret_cast<T*>(base + i * L.operand_bytes); }
  __device__ T* streamed(int buffer, int i) const {
    return reinterpret_cast<T*>(base + L.stream_at + (2 * buffer + i) * L.operand_bytes);
  }
  __device__ float* stats(int buffer, int i) const {  // i = 0: lse, 1: D
    return reinterpret_cast<float*>(base + L.stats_at) + (2 * buffer + i) * kStreamRows;
  }
};

// The lane's two rows (l/4 and l/4 + 8 of its warp's 16, from `first`) and the keys each sees.
struct OwnRows {
  int row[2], keys[2];
  int warp_keys;  // keys any row of the warp sees
  __device__ OwnRows(int first, int rows, int slice_keys, bool causal) {
    const int g = (threadIdx.x & 31) >> 2;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row[h] = first + g + 8 * h;
      keys[h] = row[h] < rows ? row_keys(slice_keys, row[h], causal) : 0;
    }
    warp_keys = first < rows ? row_keys(slice_keys, min(first + kTile, rows) - 1, causal) : 0;
  }
};

// Column (streamed row) of element e of score tile j for this lane, from the tile's first row `first`.
__device__ __forceinline__ int tile_column(int first, int j, int e) {
  return first + 8 * j + 2 * (threadIdx.x & 3) + e;
}

// A forward or dQ CTA's block: 64 query rows of slice s (the rows that see the most keys first), the keys they see,
// where the slice starts in q and in k/v, and the calling warp's first row.
struct QueryBlock {
  int s, q0;
  SliceRows rows_of;
  int keys, block_keys;
  int64_t q_at, k_at;
  int warp, first;
  __device__ QueryBlock(int slice_begin, int heads, int q_len, int k_len, int head_dim, int ldq, int ldkv, bool causal,
                        const int32_t* k_lengths, const int32_t* q_offsets, const int32_t* k_offsets)
      : s(slice_begin + static_cast<int>(blockIdx.y)),
        q0((gridDim.x - 1 - blockIdx.x) * kBlockRows),
        rows_of(s, heads, q_len, k_len, q_offsets, k_offsets),
        keys(min(rows_of.k, slice_keys(k_lengths, s, heads, k_len))),
        block_keys(q0 < rows_of.q ? row_keys(keys, min(q0 + kBlockRows, rows_of.q) - 1, causal) : 0),
        q_at(fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets)),
        k_at(fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets)),
        warp(threadIdx.x >> 5),
        first(q0 + warp * kTile) {}
  __device__ bool empty() const { return q0 >= rows_of.q; }  // packed: the sentence is shorter
  __device__ int own_rows() const { return min(kBlockRows, rows_of.q - q0); }
  __device__ int key_tiles() const { return (block_keys + kStreamRows - 1) / kStreamRows; }
  // Keys every row of the warp sees (its first row sees the fewest); tiles below them need no mask.
  __device__ int all_see(bool causal) const { return first < rows_of.q ? row_keys(keys, first, causal) : 0; }
  // The lane's two rows' first dropout-mask index, (s*q_len + row)*k_len.
  __device__ void mask_rows(const OwnRows& rows, int q_len, int k_len, int64_t (&at)[2]) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) at[h] = (static_cast<int64_t>(s) * q_len + rows.row[h]) * k_len;
  }
};

// Key/value tile t of a query block's slice (keys past the sentence as zeros) into streamed buffer `buffer`.
template <typename T>
__device__ __forceinline__ void stage_key_tile(const T* k, const T* v, int ldkv, const QueryBlock& b, int t,
                                               int head_dim, bool packed, const TiledSmem<T>& sm, int buffer) {
  const int k0 = t * kStreamRows, n = min(kStreamRows, b.keys - k0);
  stage(k + b.k_at + static_cast<int64_t>(k0) * ldkv, ldkv, n, head_dim, sm.streamed(buffer, 0), sm.L.ldh,
        kStreamRows, sm.L.dh, packed);
  stage(v + b.k_at + static_cast<int64_t>(k0) * ldkv, ldkv, n, head_dim, sm.streamed(buffer, 1), sm.L.ldh,
        kStreamRows, sm.L.dh, packed);
}

// Streams tiles [0, tiles): stage(t, buffer) issues tile t's copies; work(t, buffer) runs once tile t is visible
// to the whole CTA. The next tile's copies fly while the current one is worked on.
template <typename Stage, typename Work>
__device__ __forceinline__ void stream_tiles(int tiles, Stage&& stage, Work&& work) {
  if (tiles > 0) stage(0, 0);
  commit_async_copies();
  for (int t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) {
      stage(t + 1, (t + 1) & 1);
      commit_async_copies();
      wait_async_copy_groups<1>();
    } else {
      wait_async_copy_groups<0>();
    }
    __syncthreads();
    work(t, t & 1);
    __syncthreads();  // buffer t & 1 is staged again for tile t + 2
  }
}

// Runs tile(full, maskable) for one streamed tile, both std::bool_constant: kFull where the kernel's head is
// kMaxHeadDim and the tile has every streamed row (`full`), and maskable false for an interior tile (`masked` false:
// no key hidden from any row), whose mask compares and selects are then compiled out. They were 70 of the 421
// instructions of a full forward tile (sm_90 SASS) though most tiles of a long slice need none.
template <bool kWideHead, typename Tile>
__device__ __forceinline__ void dispatch_tile(bool full, bool masked, Tile&& tile) {
  if (kWideHead && full) {
    if (masked)
      tile(std::bool_constant<kWideHead>{}, std::true_type{});
    else
      tile(std::bool_constant<kWideHead>{}, std::false_type{});
  } else {
    tile(std::false_type{}, std::true_type{});
  }
}

// One streamed key tile (keys k0.., the first `end` of them seen by some row of the warp) for a warp's 16 query
// rows: scores, the online softmax update (in log2 units: the running max is the raw scores' max times
// scale * log2(e), which is positive, and each weight one fma and one ex2 of its raw score), and out += P v. `masked`:
// some key of the tile is hidden from some row (the diagonal, the sentence's end), read only where kMaskable. kDrop:
// the probabilities are dropped out (after the row sums took them) before the product with v; element (row, key) draws
// at mask_row[h] + key.
template <typename T, bool kFull, bool kDrop, bool kMaskable>
__device__ __forceinline__ void forward_tile(const T* q_rows, const T* k_tile, const T* v_tile, int k0, int end,
                                             bool masked, const OwnRows& rows, float scale_log2, const HeadRows& L,
                                             const DeviceMask& mask, const int64_t (&mask_row)[2], float (&row_max)[2],
                                             float (&row_sum)[2], HeadTiles& out) {
  StreamScores x;
  score_product<T, kStreamRows, kFull>(q_rows, k_tile, end, L, x);
  float rescale[2];
  bool grew = false;  // some row's max grew: its accumulated context is rescaled
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kStreamRows / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& xe = x[j][2 * h + e];
        if (kMaskable && masked && tile_column(k0, j, e) >= rows.keys[h]) xe = -INFINITY;
        tile_max = fmaxf(tile_max, xe);
      }
    const float new_max = fmaxf(row_max[h], quad_max(tile_max) * scale_log2);
    const float base = new_max == -INFINITY ? 0.0f : new_max;  // no key seen yet: everything stays 0
    rescale[h] = exp2_flush(row_max[h] - base);
    grew = grew || new_max > row_max[h];
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kStreamRows / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& xe = x[j][2 * h + e];
        xe = exp2_flush(fmaf(xe, scale_log2, -base));
        sum += xe;
      }
    row_sum[h] = row_sum[h] * rescale[h] + sum;
    row_max[h] = new_max;
    if constexpr (kDrop) {
#pragma unroll
      for (int j = 0; j < kStreamRows / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) x[j][2 * h + e] *= mask(mask_row[h] + tile_column(k0, j, e));
    }
  }
  // Past the first tiles a row's max seldom grows; where none of the warp's did, every rescale is 1.
  if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
    for (int j = 0; j < kHeadTiles; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) out[j][i] *= rescale[i / 2];
  }
  StreamOperands p;
  to_operands<T, kStreamRows>(x, p);
#pragma unroll
  for (int c = 0; c < kStreamRows / kTile; ++c) {
    if (!kFull && c * kTile >= end) break;
    head_step<T, kFull>(p[c], v_tile, c * kTile, L, out);
  }
}

template <typename T, bool kWideHead, bool kDrop>
__global__ void __launch_bounds__(kBlockThreads)
    tiled_forward_kernel(const T* q, int ldq, const T* k, const T* v, int ldkv, const int32_t* k_lengths, int heads,
                         int q_len, int k_len, int head_dim, float scale, bool causal, bool packed, int slice_begin,
                         TiledLayout layout, DeviceMask mask, T* context, float* lse, const int32_t* q_offsets,
                         const int32_t* k_offsets) {
  extern __shared__ __align__(128) unsigned char smem[];
  const TiledLayout& L = layout;
  const TiledSmem<T> sm{smem, L};
  const QueryBlock b(slice_begin, heads, q_len, k_len, head_dim, ldq, ldkv, causal, k_lengths, q_offsets, k_offsets);
  if (b.empty()) return;
  stage(q + b.q_at + static_cast<int64_t>(b.q0) * ldq, ldq, b.own_rows(), head_dim, sm.own(0), L.ldh, kBlockRows,
        L.dh, packed);
  const OwnRows rows(b.first, b.rows_of.q, b.keys, causal);
  const int all_see = b.all_see(causal);
  const float scale_log2 = scale * kLog2e;
  int64_t mask_row[2];
  b.mask_rows(rows, q_len, k_len, mask_row);
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};  // log2 units; row_sum: this lane's share
  HeadTiles out;
  zero_tiles(out);
  const T* q_rows = sm.own(0) + b.warp * kTile * L.ldh;
  stream_tiles(
      b.key_tiles(), [&](int t, int buffer) { stage_key_tile(k, v, ldkv, b, t, head_dim, packed, sm, buffer); },
      [&](int t, int buffer) {
        const int k0 = t * kStreamRows, seen = min(kStreamRows, rows.warp_keys - k0);
        if (seen <= 0) return;  // the warp's rows see none of these keys
        const bool masked = k0 + kStreamRows > all_see;
        dispatch_tile<kWideHead>(seen == kStreamRows, masked, [&](auto full, auto maskable) {
          forward_tile<T, decltype(full)::value, kDrop, decltype(maskable)::value>(
              q_rows, sm.streamed(buffer, 0), sm.streamed(buffer, 1), k0, round_tile(seen), masked, rows, scale_log2, L,
              mask, mask_row, row_max, row_sum, out);
        });
      });
  // Rows without keys: context 0 and lse -inf, as in the whole-slice kernel.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = quad_sum(row_sum[h]);
    const bool any = rows.keys[h] > 0 && total > 0.0f;
    const float inv = any ? 1.0f / total : 0.0f;
#pragma unroll
    for (int j = 0; j < kHeadTiles; ++j) out[j][2 * h] *= inv, out[j][2 * h + 1] *= inv;
    if ((threadIdx.x & 3) == 0 && rows.row[h] < b.rows_of.q)
      lse[static_cast<int64_t>(b.s) * q_len + rows.row[h]] = any ? (row_max[h] + log2f(total)) * kLn2 : -INFINITY;
  }
  const int width = heads * head_dim;
  store_head_tile(out, b.first, b.rows_of.q, head_dim,
                  context + fused_attention_slice_at(b.s, heads, q_len, head_dim, width, q_offsets), width, packed);
}

// D_i = d_context_i . context_i per (slice, query row), into row_dots[(s - slice_begin) * q_len + i]; rows a packed
// sentence does not have get 0. A warp per row, or with 16-byte packs (kPacked: head_dim a multiple of the pack,
// rows aligned) 8 lanes per row and 4 rows a warp: a head of 64 is one pack a lane (a warp per row read it two
// elements a lane, at a third of the memory bandwidth: GPT-2 small on an H100, 2026-11-28).
template <typename T, bool kPacked>
__global__ void row_dots_kernel(const T* context, const T* d_context, int heads, int q_len, int head_dim,
                                int slice_begin, int slices, const int32_t* q_offsets, float* row_dots) {
  constexpr int P = Pack<T>::size;
  constexpr int kRowLanes = kPacked ? 8 : 32;
  const int lane = threadIdx.x & 31, part = lane % kRowLanes;
  const int64_t index =
      (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) * (32 / kRowLanes) + lane / kRowLanes;
  const bool inside = index < static_cast<int64_t>(slices) * q_len;
  float sum = 0.0f;
  if (inside) {  // no early exit: the whole warp takes part in the sums below
    const int s = slice_begin + static_cast<int>(index / q_len), i = static_cast<int>(index % q_len);
    const int width = heads * head_dim;
    if (i < fused_attention_rows(s / heads, q_len, q_offsets)) {
      const int64_t at =
          fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets) + static_cast<int64_t>(i) * width;
      if constexpr (kPacked) {
        for (int d = part * P; d < head_dim; d += kRowLanes * P) {
          float o[P], g[P];
          load_pack<T>(context + at + d, o);
          load_pack<T>(d_context + at + d, g);
#pragma unroll
          for (int j = 0; j < P; ++j) sum += o[j] * g[j];
        }
      } else {
        for (int d = part; d < head_dim; d += kRowLanes) sum += to_f32(context[at + d]) * to_f32(d_context[at + d]);
      }
    }
  }
#pragma unroll
  for (int offset = kRowLanes / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (inside && part == 0) row_dots[index] = sum;
}

// One streamed key/value tile for a warp's 16 query rows in dQ: P = exp2(S scale log2(e) - lse log2(e)),
// dP = dO v^T, dS = P (dP - D) scale, acc += dS k. `masked` and kMaskable as in forward_tile.
template <typename T, bool kFull, bool kDrop, bool kMaskable>
__device__ __forceinline__ void dq_tile(const T* q_rows, const T* do_rows, const T* k_tile, const T* v_tile, int k0,
                                        int end, bool masked, const OwnRows& rows, float scale, const float (&lse2)[2],
                                        const float (&scaled_dot)[2], const HeadRows& L, const DeviceMask& mask,
                                        const int64_t (&mask_row)[2], HeadTiles& acc) {
  const float scale_log2 = scale * kLog2e;
  // Both score-shaped products first, then dS from fp32 P and dP in place, rounded to dt once: P is no longer packed
  // to dt and unpacked again between the products (GPT-2 small on an H200: dQ 2.93 -> 2.79 ms an update).
  StreamScores x, dp;
  score_product<T, kStreamRows, kFull>(q_rows, k_tile, end, L, x);
  score_product<T, kStreamRows, kFull>(do_rows, v_tile, end, L, dp);
#pragma unroll
  for (int j = 0; j < kStreamRows / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = !(kMaskable && masked) || tile_column(k0, j, e) < rows.keys[h]
                            ? exp2_flush(fmaf(x[j][2 * h + e], scale_log2, -lse2[h]))
                            : 0.0f;
        float& d = dp[j][2 * h + e];
        if constexpr (kDrop) d *= mask(mask_row[h] + tile_column(k0, j, e));  // dP = (dO v^T) M
        d = p * fmaf(d, scale, -scaled_dot[h]);                               // dS = P (dP - D) scale
      }
  StreamOperands d_s;
  to_operands<T, kStreamRows>(dp, d_s);
#pragma unroll
  for (int c = 0; c < kStreamRows / kTile; ++c) {
    if (!kFull && c * kTile >= end) break;
    head_step<T, kFull>(d_s[c], k_tile, c * kTile, L, acc);  // dQ += dS k
  }
}

template <typename T, bool kWideHead, bool kDrop>
__global__ void __launch_bounds__(kBlockThreads)
    tiled_dq_kernel(const T* q, int ldq, const T* k, const T* v, int ldkv, const int32_t* k_lengths, int heads,
                    int q_len, int k_len, int head_dim, float scale, bool causal, bool packed, int slice_begin,
                    TiledLayout layout, DeviceMask mask, const float* lse, const float* row_dots, const T* d_context,
                    T* d_q, const int32_t* q_offsets, const int32_t* k_offsets) {
  extern __shared__ __align__(128) unsigned char smem[];
  const TiledLayout& L = layout;
  const TiledSmem<T> sm{smem, L};
  const QueryBlock b(slice_begin, heads, q_len, k_len, head_dim, ldq, ldkv, causal, k_lengths, q_offsets, k_offsets);
  if (b.empty()) return;
  const int width = heads * head_dim;
  stage(q + b.q_at + static_cast<int64_t>(b.q0) * ldq, ldq, b.own_rows(), head_dim, sm.own(0), L.ldh, kBlockRows,
        L.dh, packed);
  stage(d_context + fused_attention_slice_at(b.s, heads, q_len, head_dim, width, q_offsets) +
            static_cast<int64_t>(b.q0) * width,
        width, b.own_rows(), head_dim, sm.own(1), L.ldh, kBlockRows, L.dh, packed);
  const OwnRows rows(b.first, b.rows_of.q, b.keys, causal);
  const int all_see = b.all_see(causal);
  int64_t mask_row[2];
  b.mask_rows(rows, q_len, k_len, mask_row);
  float lse2[2], scaled_dot[2];  // lse in log2 units; D times the scale (dS = P (dP scale - D scale): one fma)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool any = rows.keys[h] > 0;
    lse2[h] = any ? lse[static_cast<int64_t>(b.s) * q_len + rows.row[h]] * kLog2e : 0.0f;
    scaled_dot[h] = any ? row_dots[static_cast<int64_t>(b.s - slice_begin) * q_len + rows.row[h]] * scale : 0.0f;
  }
  HeadTiles acc;
  zero_tiles(acc);
  const int own_at = b.warp * kTile * L.ldh;
  stream_tiles(
      b.key_tiles(), [&](int t, int buffer) { stage_key_tile(k, v, ldkv, b, t, head_dim, packed, sm, buffer); },
      [&](int t, int buffer) {
        const int k0 = t * kStreamRows, seen = min(kStreamRows, rows.warp_keys - k0);
        if (seen <= 0) return;
        const bool masked = k0 + kStreamRows > all_see;
        dispatch_tile<kWideHead>(seen == kStreamRows, masked, [&](auto full, auto maskable) {
          dq_tile<T, decltype(full)::value, kDrop, decltype(maskable)::value>(
              sm.own(0) + own_at, sm.own(1) + own_at, sm.streamed(buffer, 0), sm.streamed(buffer, 1), k0,
              round_tile(seen), masked, rows, scale, lse2, scaled_dot, L, mask, mask_row, acc);
        });
      });
  store_head_tile(acc, b.first, b.rows_of.q, head_dim, d_q + b.q_at, ldq, packed);
}

// One streamed query tile (queries i0.., `end` of them staged, their lse in log2 units and D times the scale in
// shared memory) for a warp's 16 keys in dK/dV: transposed scores S^T = k q^T, P^T, dV += (P M)^T dO,
// dP^T = (v dO^T) M, dS^T = P^T (dP^T - D) scale, dK += dS^T q. `masked`: some (key, query) pair of the tile is
// hidden (the diagonal, the sentence's end), read only where kMaskable. kDrop: element (key, query i) draws at
// (mask_slice + i) * k_len + key.
template <typename T, bool kFull, bool kDrop, bool kMaskable>
__device__ __forceinline__ void dkdv_tile(const T* k_rows, const T* v_rows, const T* q_tile, const T* do_tile,
                                          const float* tile_lse2, const float* tile_dot, int i0, int end, bool masked,
                                          const int (&key)[2], int queries, int keys, bool causal, float scale,
                                          const HeadRows& L, const DeviceMask& mask, int64_t mask_slice, int k_len,
                                          HeadTiles& dk, HeadTiles& dv) {
  const int lane = threadIdx.x & 31;
  const float scale_log2 = scale * kLog2e;
  // Rows the warp's keys, columns the tile's queries. P^T is rounded to dt as soon as it is made (dV's A operand,
  // and the P that dS^T takes), which frees its fp32 registers for dP^T. (Both fp32 tiles held at once, as dQ does,
  // spilled past this kernel's register cap: 3.76 -> 3.91 ms an update, GPT-2 small on an H200.) With dropout the kept
  // bits (one a lane's element) stay in a register, and P^T alone is kept apart from the dropped-out (P M)^T that dV
  // takes.
  StreamOperands a;
  [[maybe_unused]] StreamOperands p_only;
  [[maybe_unused]] uint32_t kept = 0;
  {
    StreamScores x;
    score_product<T, kStreamRows, kFull>(k_rows, q_tile, end, L, x);
#pragma unroll
    for (int j = 0; j < kStreamRows / 8; ++j) {
      // The lane's two queries of the score tile (columns c, c + 1): their lse in one 8-byte shared load.
      const float2 lse2_pair = *reinterpret_cast<const float2*>(tile_lse2 + 8 * j + 2 * (lane & 3));
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * j + 2 * (lane & 3) + e, i = i0 + c;
        const float query_lse2 = e == 0 ? lse2_pair.x : lse2_pair.y;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool seen = !(kMaskable && masked) || (i < queries && key[h] < keys && (!causal || key[h] <= i));
          float& xe = x[j][2 * h + e];
          xe = seen ? exp2_flush(fmaf(xe, scale_log2, -query_lse2)) : 0.0f;
          if constexpr (kDrop)
            kept |= (mask((mask_slice + i) * k_len + key[h]) != 0.0f ? 1u : 0u) << ((2 * j + e) * 2 + h);
        }
      }
    }
    if constexpr (kDrop) {
      to_operands<T, kStreamRows>(x, p_only);
#pragma unroll
      for (int j = 0; j < kStreamRows / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            x[j][2 * h + e] *= (kept >> ((2 * j + e) * 2 + h)) & 1u ? mask.keep_scale : 0.0f;
    }
    to_operands<T, kStreamRows>(x, a);
  }
#pragma unroll
  for (int c = 0; c < kStreamRows / kTile; ++c) {
    if (!kFull && c * kTile >= end) break;
    head_step<T, kFull>(a[c], do_tile, c * kTile, L, dv);  // dV += (P M)^T dO
  }
  StreamScores dp;
  score_product<T, kStreamRows, kFull>(v_rows, do_tile, end, L, dp);
#pragma unroll
  for (int j = 0; j < kStreamRows / 8; ++j) {
    const float2 dot = *reinterpret_cast<const float2*>(tile_dot + 8 * j + 2 * (lane & 3));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float2 pe;
      if constexpr (kDrop) {
        pe = operand_pair<T, kStreamRows>(p_only, j, h);
#pragma unroll
        for (int e = 0; e < 2; ++e) dp[j][2 * h + e] *= (kept >> ((2 * j + e) * 2 + h)) & 1u ? mask.keep_scale : 0.0f;
      } else {
        pe = operand_pair<T, kStreamRows>(a, j, h);
      }
      dp[j][2 * h] = pe.x * fmaf(dp[j][2 * h], scale, -dot.x);  // dS^T = P^T (dP^T scale - D scale)
      dp[j][2 * h + 1] = pe.y * fmaf(dp[j][2 * h + 1], scale, -dot.y);
    }
  }
  to_operands<T, kStreamRows>(dp, a);
#pragma unroll
  for (int c = 0; c < kStreamRows / kTile; ++c) {
    if (!kFull && c * kTile >= end) break;
    head_step<T, kFull>(a[c], q_tile, c * kTile, L, dk);  // dK += dS^T q
  }
}

template <typename T, bool kWideHead, bool kDrop>
__global__ void __launch_bounds__(kBlockThreads, 3)
    tiled_dkdv_kernel(const T* q, int ldq, const T* k, const T* v, int ldkv, const int32_t* k_lengths, int heads,
                      int q_len, int k_len, int head_dim, float scale, bool causal, bool packed, int slice_begin,
                      TiledLayout layout, DeviceMask mask, const float* lse, const float* row_dots,
                      const T* d_context, T* d_k, T* d_v, const int32_t* q_offsets, const int32_t* k_offsets) {
  extern __shared__ __align__(128) unsigned char smem[];
  const TiledLayout& L = layout;
  const TiledSmem<T> sm{smem, L};
  const int s = slice_begin + blockIdx.y;
  const int k0 = blockIdx.x * kBlockRows;  // causal: the first key blocks are seen by the most queries
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  if (k0 >= rows_of.k) return;
  const int keys = min(rows_of.k, slice_keys(k_lengths, s, heads, k_len));
  const int width = heads * head_dim;
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const int64_t do_at = fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets);
  const int own_keys = max(0, min(kBlockRows, keys - k0));  // keys past the length: zeros, and zero gradients
  stage(k + k_at + static_cast<int64_t>(k0) * ldkv, ldkv, own_keys, head_dim, sm.own(0), L.ldh, kBlockRows, L.dh,
        packed);
  stage(v + k_at + static_cast<int64_t>(k0) * ldkv, ldkv, own_keys, head_dim, sm.own(1), L.ldh, kBlockRows, L.dh,
        packed);
  const int warp = threadIdx.x >> 5, first = k0 + warp * kTile, lane = threadIdx.x & 31;
  int key[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) key[h] = first + (lane >> 2) + 8 * h;
  const bool all_keys = first + kTile <= keys;  // every key of the warp is inside the sentence
  // Query tiles with rows that see these keys: causal rows from the block's first key on, none past the length.
  const int q_first = own_keys == 0 ? rows_of.q : causal ? k0 : 0;
  const int t_first = q_first / kStreamRows;
  const int tiles = own_keys == 0 ? 0 : (rows_of.q + kStreamRows - 1) / kStreamRows - t_first;
  HeadTiles dv, dk;
  zero_tiles(dv);
  zero_tiles(dk);
  const int own_at = warp * kTile * L.ldh;
  stream_tiles(
      tiles,
      [&](int t, int buffer) {
        const int i0 = (t_first + t) * kStreamRows, n = min(kStreamRows, rows_of.q - i0);
        stage(q + q_at + static_cast<int64_t>(i0) * ldq, ldq, n, head_dim, sm.streamed(buffer, 0), L.ldh,
              kStreamRows, L.dh, packed);
        stage(d_context + do_at + static_cast<int64_t>(i0) * width, width, n, head_dim, sm.streamed(buffer, 1), L.ldh,
              kStreamRows, L.dh, packed);
        for (int r = threadIdx.x; r < kStreamRows; r += blockDim.x) {
          const bool inside = r < n;
          sm.stats(buffer, 0)[r] = inside ? lse[static_cast<int64_t>(s) * q_len + i0 + r] * kLog2e : 0.0f;
          sm.stats(buffer, 1)[r] =
              inside ? row_dots[static_cast<int64_t>(s - slice_begin) * q_len + i0 + r] * scale : 0.0f;
        }
      },
      [&](int t, int buffer) {
        const int i0 = (t_first + t) * kStreamRows;
        if (first >= keys || (causal && first > i0 + kStreamRows - 1)) return;  // no query here sees these keys
        const int queries = min(kStreamRows, rows_of.q - i0);
        // Unmasked: every key of the warp is in the sentence, every query of the tile exists and (causal) sees the
        // warp's last key.
        const bool masked = !all_keys || queries < kStreamRows || (causal && first + kTile - 1 > i0);
        dispatch_tile<kWideHead>(queries == kStreamRows, masked, [&](auto full, auto maskable) {
          dkdv_tile<T, decltype(full)::value, kDrop, decltype(maskable)::value>(
              sm.own(0) + own_at, sm.own(1) + own_at, sm.streamed(buffer, 0), sm.streamed(buffer, 1),
              sm.stats(buffer, 0), sm.stats(buffer, 1), i0, round_tile(queries), masked, key, rows_of.q, keys, causal,
              scale, L, mask, static_cast<int64_t>(s) * q_len, k_len, dk, dv);
        });
      });
  store_head_tile(dk, first, rows_of.k, head_dim, d_k + k_at, ldkv, packed);
  store_head_tile(dv, first, rows_of.k, head_dim, d_v + k_at, ldkv, packed);
}

// ---- fp32: a warp per row, products recomputed (no row buffers, so any length) ----

template <int kWarps>
__device__ __forceinline__ int warp_row() {
  return static_cast<int>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
}
constexpr int kRowWarps = 4;

__global__ void __launch_bounds__(32 * kRowWarps)
    long_forward_f32_kernel(const float* q, int ldq, const float* k, const float* v, int ldkv,
                            const int32_t* k_lengths, int heads, int q_len, int k_len, int head_dim, float scale,
                            bool causal, int slice_begin, DeviceMask mask, float* context, float* lse,
                            const int32_t* q_offsets, const int32_t* k_offsets) {
  const int s = slice_begin + blockIdx.y, i = warp_row<kRowWarps>();
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  if (i >= rows_of.q) return;
  const int width = heads * head_dim;
  const float* qs = q + fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const float* ks = k + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const float* vs = v + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const int valid = row_keys(min(rows_of.k, slice_keys(k_lengths, s, heads, k_len)), i, causal);
  float qi[kDimsPerLane], kj[kDimsPerLane];
  load_row(qs + static_cast<int64_t>(i) * ldq, head_dim, qi);
  float mx = -INFINITY, sum = 0.0f;  // running max and the sum of exp(x - mx)
  for (int j = 0; j < valid; ++j) {
    load_row(ks + static_cast<int64_t>(j) * ldkv, head_dim, kj);
    const float x = scale * row_dot(qi, kj);
    const float new_max = fmaxf(mx, x);
    sum = sum * expf(mx - new_max) + expf(x - new_max);
    mx = new_max;
  }
  const float row_lse = valid > 0 ? mx + logf(sum) : -INFINITY;
  float o[kDimsPerLane] = {};
  const int64_t masks_at = (static_cast<int64_t>(s) * q_len + i) * k_len;
  for (int j = 0; j < valid; ++j) {
    load_row(ks + static_cast<int64_t>(j) * ldkv, head_dim, kj);
    const float p = expf(scale * row_dot(qi, kj) - row_lse) * mask(masks_at + j);
    load_row(vs + static_cast<int64_t>(j) * ldkv, head_dim, kj);
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) o[c] += p * kj[c];
  }
  store_row(o, head_dim,
            context + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets) +
                static_cast<int64_t>(i) * width);
  if ((threadIdx.x & 31) == 0) lse[static_cast<int64_t>(s) * q_len + i] = row_lse;
}

__global__ void __launch_bounds__(32 * kRowWarps)
    long_dq_f32_kernel(const float* q, int ldq, const float* k, const float* v, int ldkv, const int32_t* k_lengths,
                       int heads, int q_len, int k_len, int head_dim, float scale, bool causal, int slice_begin,
                       DeviceMask mask, const float* lse, const float* row_dots, const float* d_context, float* d_q,
                       const int32_t* q_offsets, const int32_t* k_offsets) {
  const int s = slice_begin + blockIdx.y, i = warp_row<kRowWarps>();
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  if (i >= rows_of.q) return;
  const int width = heads * head_dim;
  const int64_t q_at = fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const float* ks = k + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const float* vs = v + fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const int valid = row_keys(min(rows_of.k, slice_keys(k_lengths, s, heads, k_len)), i, causal);
  float qi[kDimsPerLane], doi[kDimsPerLane], r[kDimsPerLane], dq[kDimsPerLane] = {};
  load_row(q + q_at + static_cast<int64_t>(i) * ldq, head_dim, qi);
  load_row(d_context + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets) +
               static_cast<int64_t>(i) * width,
           head_dim, doi);
  const float row_lse = valid > 0 ? lse[static_cast<int64_t>(s) * q_len + i] : 0.0f;
  const float dot = row_dots[static_cast<int64_t>(s - slice_begin) * q_len + i];
  const int64_t masks_at = (static_cast<int64_t>(s) * q_len + i) * k_len;
  for (int j = 0; j < valid; ++j) {
    load_row(ks + static_cast<int64_t>(j) * ldkv, head_dim, r);
    const float p = expf(scale * row_dot(qi, r) - row_lse);
    float kj[kDimsPerLane];
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) kj[c] = r[c];
    load_row(vs + static_cast<int64_t>(j) * ldkv, head_dim, r);
    const float ds = p * (row_dot(doi, r) * mask(masks_at + j) - dot) * scale;
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) dq[c] += ds * kj[c];
  }
  store_row(dq, head_dim, d_q + q_at + static_cast<int64_t>(i) * ldq);
}

__global__ void __launch_bounds__(32 * kRowWarps)
    long_dkdv_f32_kernel(const float* q, int ldq, const float* k, const float* v, int ldkv, const int32_t* k_lengths,
                         int heads, int q_len, int k_len, int head_dim, float scale, bool causal, int slice_begin,
                         DeviceMask mask, const float* lse, const float* row_dots, const float* d_context, float* d_k,
                         float* d_v, const int32_t* q_offsets, const int32_t* k_offsets) {
  const int s = slice_begin + blockIdx.y, j = warp_row<kRowWarps>();
  const SliceRows rows_of(s, heads, q_len, k_len, q_offsets, k_offsets);
  if (j >= rows_of.k) return;
  const int width = heads * head_dim;
  const float* qs = q + fused_attention_slice_at(s, heads, q_len, head_dim, ldq, q_offsets);
  const float* dos = d_context + fused_attention_slice_at(s, heads, q_len, head_dim, width, q_offsets);
  const int64_t k_at = fused_attention_slice_at(s, heads, k_len, head_dim, ldkv, k_offsets);
  const int keys = min(rows_of.k, slice_keys(k_lengths, s, heads, k_len));
  float kj[kDimsPerLane], vj[kDimsPerLane], dk[kDimsPerLane] = {}, dv[kDimsPerLane] = {};
  load_row(k + k_at + static_cast<int64_t>(j) * ldkv, head_dim, kj);
  load_row(v + k_at + static_cast<int64_t>(j) * ldkv, head_dim, vj);
  const int64_t dots_at = static_cast<int64_t>(s - slice_begin) * q_len;
  for (int i = j < keys ? (causal ? j : 0) : rows_of.q; i < rows_of.q; ++i) {  // the rows that see key j
    float qi[kDimsPerLane], doi[kDimsPerLane];
    load_row(qs + static_cast<int64_t>(i) * ldq, head_dim, qi);
    load_row(dos + static_cast<int64_t>(i) * width, head_dim, doi);
    const float p = expf(scale * row_dot(qi, kj) - lse[static_cast<int64_t>(s) * q_len + i]);
    const float m = mask((static_cast<int64_t>(s) * q_len + i) * k_len + j);
    const float ds = p * (row_dot(doi, vj) * m - row_dots[dots_at + i]) * scale;
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) {
      dv[c] += p * m * doi[c];
      dk[c] += ds * qi[c];
    }
  }
  store_row(dk, head_dim, d_k + k_at + static_cast<int64_t>(j) * ldkv);
  store_row(dv, head_dim, d_v + k_at + static_cast<int64_t>(j) * ldkv);
}

int blocks_of(int rows, int per_block) { return (rows + per_block - 1) / per_block; }

// f(kWideHead, kDrop) as std::bool_constants: the kernels' interior tiles run without run-time loop exits when the
// head size is the register tiles' full width; dropout's draws are compiled in only where a mask is drawn.
template <typename F>
void with_variant(int head_dim, const Dropout& drop, F&& f) {
  auto with_drop = [&](auto wide) {
    if (drop.p > 0.0f)
      f(wide, std::true_type{});
    else
      f(wide, std::false_type{});
  };
  if (head_dim == kMaxHeadDim)
    with_drop(std::true_type{});
  else
    with_drop(std::false_type{});
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::tiled_attention_forward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                          const int32_t* k_lengths, int batch, int heads, int q_len, int k_len,
                                          int head_dim, float scale, bool causal, void* context, float* lse,
                                          const int32_t* q_offsets, const int32_t* k_offsets, const Dropout& drop) {
  const int slices = batch * heads;
  const DeviceMask mask = make_mask(drop, "attention_forward");
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k), *pv = static_cast<const T*>(v);
    T* out = static_cast<T*>(context);
    const bool packed = rows_vectorize<T>(head_dim, ldq, ldkv, pq, pk, pv, out);
    const TiledLayout layout(head_dim, 1, false);
    for (int begin = 0; begin < slices; begin += kMaxGridY) {
      const unsigned chunk = static_cast<unsigned>(std::min(kMaxGridY, slices - begin));
      if constexpr (std::is_same_v<T, float>) {
        const dim3 grid(blocks_of(q_len, kRowWarps), chunk);
        long_forward_f32_kernel<<<grid, 32 * kRowWarps, 0, stream_>>>(pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len,
                                                                    k_len, head_dim, scale, causal, begin, mask, out,
                                                                    lse, q_offsets, k_offsets);
      } else {
        const dim3 grid(blocks_of(q_len, kBlockRows), chunk);
        with_variant(head_dim, drop, [&](auto wide, auto dropping) {
          constexpr bool kWide = decltype(wide)::value, kDrop = decltype(dropping)::value;
          allow_shared_bytes(tiled_forward_kernel<T, kWide, kDrop>, layout.bytes);
          tiled_forward_kernel<T, kWide, kDrop><<<grid, kBlockThreads, layout.bytes, stream_>>>(
              pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, packed, begin, layout,
              mask, out, lse, q_offsets, k_offsets);
        });
      }
    }
  });
}

void CudaBackend::tiled_attention_backward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                           const int32_t* k_lengths, int batch, int heads, int q_len, int k_len,
                                           int head_dim, float scale, bool causal, const float* lse,
                                           const void* context, const void* d_context, void* d_q, void* d_k,
                                           void* d_v, const int32_t* q_offsets, const int32_t* k_offsets,
                                           const Dropout& drop) {
  const int slices = batch * heads;
  const DeviceMask mask = make_mask(drop, "attention_backward");
  // D for as many slices as the scratch holds at a time (the kernels of a chunk read it before the next chunk's
  // row-dots kernel overwrites it: one stream).
  const int per_chunk = static_cast<int>(
      std::min<std::size_t>(kMaxGridY, scratch_float_count() / static_cast<std::size_t>(q_len)));
  float* row_dots = scratch_floats();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const T *pq = static_cast<const T*>(q), *pk = static_cast<const T*>(k), *pv = static_cast<const T*>(v);
    const T *po = static_cast<const T*>(context), *pdo = static_cast<const T*>(d_context);
    T *dq = static_cast<T*>(d_q), *dk = static_cast<T*>(d_k), *dv = static_cast<T*>(d_v);
    const bool packed = rows_vectorize<T>(head_dim, ldq, ldkv, pq, pk, pv, pdo, dq, dk, dv);
    const bool dots_packed = can_vectorize<T>(head_dim, po, pdo);  // context rows are heads * head_dim apart
    const TiledLayout dq_layout(head_dim, 2, false), dkdv_layout(head_dim, 2, true);
    for (int begin = 0; begin < slices; begin += per_chunk) {
      const int chunk = std::min(per_chunk, slices - begin);
      constexpr int kDotWarps = 8;
      const int64_t dot_rows = static_cast<int64_t>(chunk) * q_len;
      if (dots_packed) {
        const int64_t per_block = 4 * kDotWarps;
        row_dots_kernel<T, true>
            <<<static_cast<unsigned>((dot_rows + per_block - 1) / per_block), 32 * kDotWarps, 0, stream_>>>(
                po, pdo, heads, q_len, head_dim, begin, chunk, q_offsets, row_dots);
      } else {
        row_dots_kernel<T, false>
            <<<static_cast<unsigned>((dot_rows + kDotWarps - 1) / kDotWarps), 32 * kDotWarps, 0, stream_>>>(
                po, pdo, heads, q_len, head_dim, begin, chunk, q_offsets, row_dots);
      }
      const unsigned ys = static_cast<unsigned>(chunk);
      if constexpr (std::is_same_v<T, float>) {
        long_dq_f32_kernel<<<dim3(blocks_of(q_len, kRowWarps), ys), 32 * kRowWarps, 0, stream_>>>(
            pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, begin, mask, lse, row_dots,
            pdo, dq, q_offsets, k_offsets);
        long_dkdv_f32_kernel<<<dim3(blocks_of(k_len, kRowWarps), ys), 32 * kRowWarps, 0, stream_>>>(
            pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, begin, mask, lse, row_dots,
            pdo, dk, dv, q_offsets, k_offsets);
      } else {
        with_variant(head_dim, drop, [&](auto wide, auto dropping) {
          constexpr bool kWide = decltype(wide)::value, kDrop = decltype(dropping)::value;
          allow_shared_bytes(tiled_dq_kernel<T, kWide, kDrop>, dq_layout.bytes);
          allow_shared_bytes(tiled_dkdv_kernel<T, kWide, kDrop>, dkdv_layout.bytes);
          tiled_dq_kernel<T, kWide, kDrop><<<dim3(blocks_of(q_len, kBlockRows), ys), kBlockThreads, dq_layout.bytes,
                                             stream_>>>(pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len,
                                                        head_dim, scale, causal, packed, begin, dq_layout, mask, lse,
                                                        row_dots, pdo, dq, q_offsets, k_offsets);
          tiled_dkdv_kernel<T, kWide, kDrop><<<dim3(blocks_of(k_len, kBlockRows), ys), kBlockThreads,
                                               dkdv_layout.bytes, stream_>>>(
              pq, ldq, pk, pv, ldkv, k_lengths, heads, q_len, k_len, head_dim, scale, causal, packed, begin,
              dkdv_layout, mask, lse, row_dots, pdo, dk, dv, q_offsets, k_offsets);
        });
      }
    }
  });
}

}  // namespace lseq::kernels

// LayerNorm of the CUDA backend, statistics summed in double like the CPU's, saved mean/rstd in fp32.
// Rows whose width is a multiple of a 16-byte pack and fits 32 lanes x kMaxPacksPerLane packs: one warp per row
// holding it in registers (16-byte loads; the backward fuses dx with the gamma/beta gradients: each block sums its
// chunk of rows per column, then one launch adds the chunks). Other widths: one block per row (two passes over
// the row, which stays in L1) and the gamma/beta gradients as separate two-stage column sums.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/column_pack.cuh"
#include "kernels/cuda/device/cuda_common.cuh"
#include "kernels/cuda/device/vector_access.cuh"

namespace lseq::kernels {

namespace cuda {
namespace {

int row_threads(int cols) { return cols <= 128 ? 32 : cols <= 512 ? 128 : 256; }

template <typename T>
__global__ void layer_norm_forward_kernel(const T* x, const T* gamma, const T* beta, int cols, float eps, T* y,
                                          float* mean, float* rstd) {
  __shared__ double shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  double s = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += to_f32(xr[c]);
  const double mean_d = block_sum(s, shared) / cols;
  double sq = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const double d = to_f32(xr[c]) - mean_d;
    sq += d * d;
  }
  const float mu = static_cast<float>(mean_d);
  const float rs = static_cast<float>(1.0 / sqrt(block_sum(sq, shared) / cols + eps));
  T* yr = y + row * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = from_f32<T>((to_f32(xr[c]) - mu) * rs * to_f32(gamma[c]) + to_f32(beta[c]));
  if (threadIdx.x == 0) {
    if (mean) mean[row] = mu;
    if (rstd) rstd[row] = rs;
  }
}

// What the backward recovers xhat from: LayerNorm's input, xhat = (x - mean) * rstd, or (when `beta` is set, see
// Backend::layer_norm_backward_from_output) its output, xhat = (y - beta) / gamma.
template <typename T>
struct SavedRows {
  const T* values;    // x or y [rows, cols]
  const float* mean;  // input form
  const T* beta;      // output form
};

// gamma as the output form divides by it: at least kMinBackwardGain from 0.
__device__ __forceinline__ float backward_gain(float gamma) {
  constexpr float kMin = Backend::kMinBackwardGain;
  return fabsf(gamma) >= kMin ? gamma : copysignf(kMin, gamma);
}

template <typename T>
__device__ __forceinline__ float saved_xhat(const SavedRows<T>& saved, int64_t row, int col, int cols, float rstd,
                                            float gamma) {
  const float v = to_f32(saved.values[row * cols + col]);
  if (saved.beta) return __fdividef(v - to_f32(saved.beta[col]), backward_gain(gamma));
  return (v - saved.mean[row]) * rstd;
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma. dx may alias dy: each thread reads its own
// elements again in the second pass before writing them.
template <typename T>
__global__ void layer_norm_dx_kernel(SavedRows<T> saved, const T* gamma, const float* rstd, const T* dy, int cols,
                                     T* dx, bool accumulate) {
  __shared__ double shared[32];
  const int64_t row = blockIdx.x;
  const T* dyr = dy + row * cols;
  const float rs = rstd[row];
  double sg = 0.0, sgx = 0.0;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float gam = to_f32(gamma[c]);
    const float g = to_f32(dyr[c]) * gam;
    sg += g;
    sgx += g * saved_xhat(saved, row, c, cols, rs, gam);
  }
  const float mean_g = static_cast<float>(block_sum(sg, shared) / cols);
  const float mean_gx = static_cast<float>(block_sum(sgx, shared) / cols);
  T* dxr = dx + row * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float gam = to_f32(gamma[c]);
    const float g = to_f32(dyr[c]) * gam;
    const float xhat = saved_xhat(saved, row, c, cols, rs, gam);
    const float d = rs * (g - mean_g - xhat * mean_gx);
    dxr[c] = from_f32<T>(accumulate ? to_f32(dxr[c]) + d : d);
  }
}

// Stage 1 of dgamma = sum dy * xhat and dbeta = sum dy (either partial array may be null).
template <typename T>
__global__ void layer_norm_param_partials_kernel(SavedRows<T> saved, const T* gamma, const float* rstd, const T* dy,
                                                 int rows, int cols, int rows_per_chunk, float* gamma_partials,
                                                 float* beta_partials) {
  __shared__ float shared[kColTile * kColRowsPerPass];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  const int r0 = blockIdx.y * rows_per_chunk;
  const int r1 = min(rows, r0 + rows_per_chunk);
  float sg = 0.0f, sb = 0.0f;
  if (col < cols) {
    const float gam = to_f32(gamma[col]);
    for (int r = r0 + threadIdx.y; r < r1; r += kColRowsPerPass) {
      const float g = to_f32(dy[static_cast<int64_t>(r) * cols + col]);
      sg += g * saved_xhat(saved, r, col, cols, rstd[r], gam);
      sb += g;
    }
  }
  if (gamma_partials) write_column_partial(sg, shared, gamma_partials, cols);
  __syncthreads();
  if (beta_partials) write_column_partial(sb, shared, beta_partials, cols);
}

// ---- warp per row over packs ----
constexpr int kRowWarps = 4;          // rows (warps) per block
constexpr int kMaxPacksPerLane = 4;   // bf16/fp16 rows up to 1024, fp32 rows up to 512

// Packs per lane for a row of `cols` T, or 0 when the warp kernels do not apply.
template <typename T>
int packs_per_lane(int cols) {
  const int lane_cols = 32 * Pack<T>::size;
  const int n = (cols + lane_cols - 1) / lane_cols;
  if (cols % Pack<T>::size != 0) return 0;
  return n <= 1 ? 1 : n <= 2 ? 2 : n <= kMaxPacksPerLane ? 4 : 0;
}

// Lane `lane` holds packs n = 0..N-1 at columns (n * 32 + lane) * P while they are < cols.
template <typename T, int N>
__device__ __forceinline__ void load_row(const T* row, int cols, int lane, float (&v)[N][Pack<T>::size]) {
  constexpr int P = Pack<T>::size;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const int c = (n * 32 + lane) * P;
    if (c < cols) load_pack(row + c, v[n]);
  }
}

// The same row's packs as raw 16-byte loads (a prefetch: converted by unpack_row when the row's turn comes).
template <typename T, int N>
__device__ __forceinline__ void load_raw_row(const T* row, int cols, int lane, uint4 (&raw)[N]) {
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const int c = (n * 32 + lane) * Pack<T>::size;
    if (c < cols) raw[n] = *reinterpret_cast<const uint4*>(row + c);
  }
}

template <typename T, int N>
__device__ __forceinline__ void unpack_row(const uint4 (&raw)[N], float (&v)[N][Pack<T>::size]) {
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const T* e = reinterpret_cast<const T*>(&raw[n]);
#pragma unroll
    for (int k = 0; k < Pack<T>::size; ++k) v[n][k] = to_f32(e[k]);
  }
}

// What residual_layer_norm_forward adds in front of the LayerNorm: the row normalised is s = residual +
// dropout(x + bias), rounded to T as bias_dropout_residual_forward stores it, and kept in `sum` when not null.
template <typename T>
struct ResidualInput {
  const T* bias;      // may be null
  const T* residual;
  DeviceMask mask;
  T* sum;             // may be null
};

template <typename T, int N, bool kResidual, bool kGainsEarly>
__global__ void __launch_bounds__(kRowWarps * 32)
    layer_norm_forward_warp_kernel(const T* x, ResidualInput<T> in, const T* gamma, const T* beta, int rows, int cols,
                                   float eps, T* y, float* mean, float* rstd) {
  constexpr int P = Pack<T>::size;
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5);
  if (row >= rows) return;  // the whole warp: no block barriers below
  // The row's loads (and the residual's) are all issued before any use. The gain and bias: with kGainsEarly loaded
  // beside the row, so that a batch whose rows are all in flight at once (decoding) does not wait for them at the
  // end; otherwise only at the output, so that they hold no registers through the reductions (bf16 at 512
  // columns 80 -> 56 registers, 24 -> 36 warps an SM: [16384 x 512] residual form -13%). (Prefetching them into
  // L1 at the start instead, prefetch.global.L1, made the kernel 1.5-2.5x slower.)
  float v[N][P], g[N][P], b[N][P];
  if constexpr (kGainsEarly) {
    load_row<T, N>(gamma, cols, lane, g);
    load_row<T, N>(beta, cols, lane, b);
  }
  if constexpr (kResidual) {
    uint4 raw_x[N], raw_r[N];
    load_raw_row<T, N>(x + row * cols, cols, lane, raw_x);
    load_raw_row<T, N>(in.residual + row * cols, cols, lane, raw_r);
    float res[N][P];
    unpack_row<T, N>(raw_x, v);
    unpack_row<T, N>(raw_r, res);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int c = (n * 32 + lane) * P;
      if (c >= cols) continue;
      const int64_t i = row * cols + c;
      float bias[P];
      if (in.bias) {
        load_pack(in.bias + c, bias);
      } else {
#pragma unroll
        for (int k = 0; k < P; ++k) bias[k] = 0.0f;
      }
#pragma unroll
      for (int k = 0; k < P; ++k)  // bias_dropout_residual_forward's rounding, then T's
        v[n][k] = to_f32(from_f32<T>(__fadd_rn(res[n][k], __fmul_rn(v[n][k] + bias[k], in.mask(i + k)))));
      if (in.sum) store_pack(in.sum + i, v[n]);
    }
  } else {
    load_row<T, N>(x + row * cols, cols, lane, v);
  }
  double s = 0.0;
#pragma unroll
  for (int n = 0; n < N; ++n)
    if ((n * 32 + lane) * P < cols)
#pragma unroll
      for (int k = 0; k < P; ++k) s += v[n][k];
  const double mean_d = warp_sum(s) / cols;
  double sq = 0.0;
#pragma unroll
  for (int n = 0; n < N; ++n)
    if ((n * 32 + lane) * P < cols)
#pragma unroll
      for (int k = 0; k < P; ++k) {
        const double d = v[n][k] - mean_d;
        sq += d * d;
      }
  const float mu = static_cast<float>(mean_d);
  const float rs = static_cast<float>(1.0 / sqrt(warp_sum(sq) / cols + eps));
  T* yr = y + row * cols;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const int c = (n * 32 + lane) * P;
    if (c >= cols) continue;
    if constexpr (!kGainsEarly) {
      load_pack(gamma + c, g[n]);
      load_pack(beta + c, b[n]);
    }
    float out[P];
#pragma unroll
    for (int k = 0; k < P; ++k) out[k] = (v[n][k] - mu) * rs * g[n][k] + b[n][k];
    store_pack(yr + c, out);
  }
  if (lane == 0) {
    if (mean) mean[row] = mu;
    if (rstd) rstd[row] = rs;
  }
}

// What residual_layer_norm_backward adds behind the LayerNorm's backward: d_o = dropout(dx) from the rounded dx, as
// bias_dropout_residual_backward computes it, with its column sums as a third partial array.
template <typename T>
struct ResidualTail {
  T* d_o;
  DeviceMask mask;
};

// dx as layer_norm_dx_kernel (added to dx with `accumulate`), per warp and row from registers (so dx may alias
// dy), and when `partials` is not null the chunk's sums of dy * xhat (columns [0, cols)) and dy (columns [cols,
// 2 cols)), with kTail also of d_o (columns [2 cols, 3 cols)), into partials[blockIdx.x]: each warp sums its rows,
// then the warps are added in order through shared memory (kRowWarps * width floats, width = 2 or 3 cols).
// From the output (kFromOutput) the block first puts each column's gain, 1 / backward_gain and beta into shared
// memory (after the warp sums), which the rows read instead of registers: the clamp and the reciprocal are paid
// once per block, and the gains take no registers. They are stored in the lanes' order, lane column (n, k) of
// lane l at (n * P + k) * 32 + l, so that a warp's reads hit 32 distinct banks: 3 arrays of kLaneSpan floats.
template <typename T, int N, bool kFromOutput, bool kTail>
__global__ void __launch_bounds__(kRowWarps * 32)
    layer_norm_backward_warp_kernel(SavedRows<T> saved, const T* gamma, const float* rstd, const T* dy, int rows,
                                    int cols, int rows_per_chunk, T* dx, bool accumulate, ResidualTail<T> tail,
                                    float* partials) {
  extern __shared__ float warp_sums[];
  constexpr int P = Pack<T>::size;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kLaneSpan = N * 32 * P;
  const int width = (kTail ? 3 : 2) * cols;
  float gam[N][P], dgamma[N][P], dbeta[N][P], dbias[N][P];
  float* columns = warp_sums + (partials ? kRowWarps * width : 0);
  const float* gains = columns;
  const float* inverse_gains = columns + kLaneSpan;
  const float* betas = columns + 2 * kLaneSpan;
  if constexpr (kFromOutput) {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const int slot = (c / (32 * P) * P + c % P) * 32 + c / P % 32;
      const float g = to_f32(gamma[c]);
      columns[slot] = g;
      columns[kLaneSpan + slot] = 1.0f / backward_gain(g);
      columns[2 * kLaneSpan + slot] = to_f32(saved.beta[c]);
    }
    __syncthreads();
  } else {
    load_row<T, N>(gamma, cols, lane, gam);
  }
  // The gain of lane column (n, k).
  auto gain = [&](int n, int k) {
    if constexpr (kFromOutput) return gains[(n * P + k) * 32 + lane];
    else return gam[n][k];
  };
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int k = 0; k < P; ++k) dgamma[n][k] = dbeta[n][k] = dbias[n][k] = 0.0f;
  const int r0 = blockIdx.x * rows_per_chunk;
  const int r1 = min(rows, r0 + rows_per_chunk);
  // A warp's rows are a chain of dependent steps (load, two warp sums, store), and registers cap the warps an SM
  // holds, so from the output each warp loads its next row while it works on the current one (H100, 16384 x 512
  // bf16: -11%, -9% with the tail). From the input the prefetch's registers cost warps (121 -> 141 registers,
  // +10%), so that form loads each row in its turn.
  uint4 next_saved[N], next_dy[N];
  float next_rs = 0.0f;
  auto fetch = [&](int r) {
    const int64_t offset = static_cast<int64_t>(r) * cols;
    load_raw_row<T, N>(saved.values + offset, cols, lane, next_saved);
    load_raw_row<T, N>(dy + offset, cols, lane, next_dy);
    next_rs = rstd[r];
  };
  if (kFromOutput && r0 + warp < r1) fetch(r0 + warp);
  for (int r = r0 + warp; r < r1; r += kRowWarps) {
    const int64_t offset = static_cast<int64_t>(r) * cols;
    float xhat[N][P], dyv[N][P], rs, mu = 0.0f;
    if constexpr (kFromOutput) {
      unpack_row<T, N>(next_saved, xhat);
      unpack_row<T, N>(next_dy, dyv);
      rs = next_rs;
      if (r + kRowWarps < r1) fetch(r + kRowWarps);
    } else {
      load_row<T, N>(saved.values + offset, cols, lane, xhat);
      load_row<T, N>(dy + offset, cols, lane, dyv);
      rs = rstd[r], mu = saved.mean[r];
    }
    double sg = 0.0, sgx = 0.0;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int c = (n * 32 + lane) * P;
      if (c >= cols) continue;
#pragma unroll
      for (int k = 0; k < P; ++k) {
        // The saved row becomes xhat in place.
        const int slot = (n * P + k) * 32 + lane;
        if constexpr (kFromOutput) xhat[n][k] = (xhat[n][k] - betas[slot]) * inverse_gains[slot];
        else xhat[n][k] = (xhat[n][k] - mu) * rs;
        const float g = dyv[n][k] * gain(n, k);
        sg += g;
        sgx += g * xhat[n][k];
        dgamma[n][k] += dyv[n][k] * xhat[n][k];
        dbeta[n][k] += dyv[n][k];
      }
    }
    const float mean_g = static_cast<float>(warp_sum(sg) / cols);
    const float mean_gx = static_cast<float>(warp_sum(sgx) / cols);
    T* dxr = dx + offset;
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const int c = (n * 32 + lane) * P;
      if (c >= cols) continue;
      float out[P];
#pragma unroll
      for (int k = 0; k < P; ++k) out[k] = rs * (dyv[n][k] * gain(n, k) - mean_g - xhat[n][k] * mean_gx);
      if (accumulate) {
        float before[P];
        load_pack<T>(dxr + c, before);
#pragma unroll
        for (int k = 0; k < P; ++k) out[k] += before[k];
      }
      store_pack(dxr + c, out);
      if constexpr (kTail) {
        const int64_t i = offset + c;
#pragma unroll
        for (int k = 0; k < P; ++k) {
          out[k] = to_f32(from_f32<T>(out[k])) * tail.mask(i + k);  // dx as stored, then its dropout
          dbias[n][k] += out[k];
        }
        store_pack(tail.d_o + i, out);
      }
    }
  }
  if (!partials) return;  // uniform over the grid
  float* mine = warp_sums + warp * width;
#pragma unroll
  for (int n = 0; n < N; ++n) {
    const int c = (n * 32 + lane) * P;
    if (c >= cols) continue;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      mine[c + k] = dgamma[n][k];
      mine[cols + c + k] = dbeta[n][k];
      if constexpr (kTail) mine[2 * cols + c + k] = dbias[n][k];
    }
  }
  __syncthreads();
  for (int j = threadIdx.x; j < width; j += blockDim.x) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kRowWarps; ++w) total += warp_sums[w * width + j];
    partials[static_cast<int64_t>(blockIdx.x) * width + j] = total;
  }
}

template <typename T, bool kResidual, bool kGainsEarly>
void launch_layer_norm_forward_form(cudaStream_t stream, int packs, const T* x, const ResidualInput<T>& in,
                                    const T* gamma, const T* beta, int rows, int cols, float eps, T* y, float* mean,
                                    float* rstd) {
  const unsigned blocks = static_cast<unsigned>((rows + kRowWarps - 1) / kRowWarps);
  if (packs == 1)
    layer_norm_forward_warp_kernel<T, 1, kResidual, kGainsEarly>
        <<<blocks, kRowWarps * 32, 0, stream>>>(x, in, gamma, beta, rows, cols, eps, y, mean, rstd);
  else if (packs == 2)
    layer_norm_forward_warp_kernel<T, 2, kResidual, kGainsEarly>
        <<<blocks, kRowWarps * 32, 0, stream>>>(x, in, gamma, beta, rows, cols, eps, y, mean, rstd);
  else
    layer_norm_forward_warp_kernel<T, 4, kResidual, kGainsEarly>
        <<<blocks, kRowWarps * 32, 0, stream>>>(x, in, gamma, beta, rows, cols, eps, y, mean, rstd);
}

// Gains loaded early while every row fits in one wave of warps (20 an SM at the early form's 96 registers, bf16 at
// 512 columns: decoding batches), at the output once rows queue for warps (training batches), where occupancy
// is what counts.
template <typename T, bool kResidual>
void launch_layer_norm_forward_warp(cudaStream_t stream, int sm_count, int packs, const T* x,
                                    const ResidualInput<T>& in, const T* gamma, const T* beta, int rows, int cols,
                                    float eps, T* y, float* mean, float* rstd) {
  constexpr int kEarlyFormWarpsPerSm = 20;
  if (rows <= kEarlyFormWarpsPerSm * sm_count)
    launch_layer_norm_forward_form<T, kResidual, true>(stream, packs, x, in, gamma, beta, rows, cols, eps, y, mean,
                                                       rstd);
  else
    launch_layer_norm_forward_form<T, kResidual, false>(stream, packs, x, in, gamma, beta, rows, cols, eps, y, mean,
                                                        rstd);
}

template <typename T, int N>
void launch_layer_norm_backward_warp(cudaStream_t stream, const SavedRows<T>& saved, const T* gamma, const float* rstd,
                                     const T* dy, int rows, int cols, T* dx, bool accumulate,
                                     const ResidualTail<T>& tail, float* partials, int chunks, int rows_per_chunk) {
  const std::size_t parts = tail.d_o ? 3 : 2;
  const std::size_t sums = partials ? sizeof(float) * kRowWarps * parts * static_cast<std::size_t>(cols) : 0;
  const std::size_t columns = sizeof(float) * 3 * N * 32 * Pack<T>::size;
  if (tail.d_o) {  // up to (4 * 3 + 3) * 1024 floats: above the default 48 KiB
    const auto kernel = layer_norm_backward_warp_kernel<T, N, true, true>;
    allow_shared_bytes(kernel, static_cast<unsigned>(sums + columns));
    kernel<<<chunks, kRowWarps * 32, sums + columns, stream>>>(saved, gamma, rstd, dy, rows, cols, rows_per_chunk, dx,
                                                               accumulate, tail, partials);
  } else if (saved.beta) {  // at most (4 * 2 + 3) * 1024 floats: within the default 48 KiB
    layer_norm_backward_warp_kernel<T, N, true, false><<<chunks, kRowWarps * 32, sums + columns, stream>>>(
        saved, gamma, rstd, dy, rows, cols, rows_per_chunk, dx, accumulate, tail, partials);
  } else {
    layer_norm_backward_warp_kernel<T, N, false, false><<<chunks, kRowWarps * 32, sums, stream>>>(
        saved, gamma, rstd, dy, rows, cols, rows_per_chunk, dx, accumulate, tail, partials);
  }
}

}  // namespace
}  // namespace cuda

using namespace cuda;

void CudaBackend::layer_norm_forward(DType dt, const void* x, const void* gamma, const void* beta, int rows, int cols,
                                     float eps, void* y, float* mean, float* rstd) {
  if (cols < 1) fail("layer_norm_forward: needs at least one column, got {}", cols);
  if (rows < 0) fail("layer_norm_forward: invalid row count {}", rows);
  if (rows == 0) return;
  bind();
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto* px = static_cast<const T*>(x);
    const auto* pg = static_cast<const T*>(gamma);
    const auto* pb = static_cast<const T*>(beta);
    auto* py = static_cast<T*>(y);
    const int packs = can_vectorize<T>(cols, px, pg, pb, py) ? packs_per_lane<T>(cols) : 0;
    if (packs > 0)
      launch_layer_norm_forward_warp<T, false>(stream_, sm_count_, packs, px, ResidualInput<T>{}, pg, pb, rows, cols,
                                               eps, py, mean, rstd);
    else
      layer_norm_forward_kernel<T><<<rows, row_threads(cols), 0, stream_>>>(px, pg, pb, cols, eps, py, mean, rstd);
  });
  check_launch("layer_norm_forward");
}

void CudaBackend::residual_layer_norm_forward(DType dt, const void* x, const void* bias, const void* residual,
                                              int rows, int cols, const Dropout& drop, const void* gamma,
                                              const void* beta, float eps, void* sum, void* y, float* mean,
                                              float* rstd) {
  if (cols < 1) fail("residual_layer_norm_forward: needs at least one column, got {}", cols);
  if (rows < 0) fail("residual_layer_norm_forward: invalid row count {}", rows);
  const DeviceMask mask = make_mask(drop, "residual_layer_norm_forward");
  if (rows == 0) return;
  bool fused = false;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const ResidualInput<T> in{static_cast<const T*>(bias), static_cast<const T*>(residual), mask, static_cast<T*>(sum)};
    const auto* px = static_cast<const T*>(x);
    const auto* pg = static_cast<const T*>(gamma);
    const auto* pb = static_cast<const T*>(beta);
    auto* py = static_cast<T*>(y);
    const int packs =
        can_vectorize<T>(cols, px, in.bias, in.residual, in.sum, pg, pb, py) ? packs_per_lane<T>(cols) : 0;
    if (packs == 0) return;
    bind();
    launch_layer_norm_forward_warp<T, true>(stream_, sm_count_, packs, px, in, pg, pb, rows, cols, eps, py, mean,
                                            rstd);
    fused = true;
  });
  if (fused) {
    check_launch("residual_layer_norm_forward");
    return;
  }
  // Rows the warp kernel does not take: the two ops in sequence, through y when the sum is not wanted (the
  // LayerNorm kernels read a row's statistics before writing any of it, so in place is safe).
  void* s = sum ? sum : y;
  bias_dropout_residual_forward(dt, x, bias, residual, rows, cols, drop, s);
  layer_norm_forward(dt, s, gamma, beta, rows, cols, eps, y, mean, rstd);
}

void CudaBackend::layer_norm_backward(DType dt, const void* x, const void* gamma, const float* mean, const float* rstd,
                                      const void* dy, int rows, int cols, void* dx, float* dparam_gamma,
                                      float* dparam_beta, bool accumulate_dx) {
  layer_norm_backward_saved(dt, x, mean, nullptr, gamma, rstd, dy, rows, cols, dx, accumulate_dx, dparam_gamma,
                            dparam_beta, nullptr, nullptr, nullptr, "layer_norm_backward");
}

void CudaBackend::layer_norm_backward_from_output(DType dt, const void* y, const void* gamma, const void* beta,
                                                  const float* rstd, const void* dy, int rows, int cols, void* dx,
                                                  float* dparam_gamma, float* dparam_beta) {
  if (!beta) fail("layer_norm_backward_from_output: needs the LayerNorm's beta");
  layer_norm_backward_saved(dt, y, nullptr, beta, gamma, rstd, dy, rows, cols, dx, false, dparam_gamma, dparam_beta,
                            nullptr, nullptr, nullptr, "layer_norm_backward_from_output");
}

void CudaBackend::residual_layer_norm_backward(DType dt, const void* y, const void* gamma, const void* beta,
                                               const float* rstd, const void* dy, int rows, int cols,
                                               const Dropout& drop, void* ds, void* d_o, float* dparam_gamma,
                                               float* dparam_beta, float* dparam_bias) {
  if (!beta || !d_o) fail("residual_layer_norm_backward: needs the LayerNorm's beta and a d_o buffer");
  layer_norm_backward_saved(dt, y, nullptr, beta, gamma, rstd, dy, rows, cols, ds, false, dparam_gamma, dparam_beta,
                            &drop, d_o, dparam_bias, "residual_layer_norm_backward");
}

void CudaBackend::layer_norm_backward_saved(DType dt, const void* values, const float* mean, const void* beta,
                                            const void* gamma, const float* rstd, const void* dy, int rows, int cols,
                                            void* dx, bool accumulate, float* dparam_gamma, float* dparam_beta,
                                            const Dropout* drop, void* d_o, float* dparam_bias, const char* op) {
  if (cols < 1) fail("{}: needs at least one column, got {}", op, cols);
  if (rows < 0) fail("{}: invalid row count {}", op, rows);
  const DeviceMask mask = make_mask(drop ? *drop : Dropout{}, op);
  if (rows == 0) return;
  bind();
  bool done = false;
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const SavedRows<T> saved{static_cast<const T*>(values), mean, static_cast<const T*>(beta)};
    const ResidualTail<T> tail{static_cast<T*>(d_o), mask};
    const auto* pg = static_cast<const T*>(gamma);
    const auto* pdy = static_cast<const T*>(dy);
    auto* pdx = static_cast<T*>(dx);
    const int packs =
        can_vectorize<T>(cols, saved.values, saved.beta, pg, pdy, pdx, tail.d_o) ? packs_per_lane<T>(cols) : 0;
    if (packs > 0) {
      // Chunks of >= 32 rows (8 per warp), at most 1024, with the [chunks][parts * cols] partials within the scratch.
      const int parts = d_o ? 3 : 2;
      const bool want_params = dparam_gamma || dparam_beta || (d_o && dparam_bias);
      const std::size_t cap = scratch_float_count() / (parts * static_cast<std::size_t>(cols));
      const int wanted = std::max(1, std::min((rows + 31) / 32, 1024));
      const int rows_per_chunk = (rows + wanted - 1) / wanted;
      const int chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
      if (want_params && static_cast<std::size_t>(chunks) > cap)
        fail("{}: {} columns exceed the CUDA backend's scratch", op, cols);
      float* partials = want_params ? scratch_floats() : nullptr;
      if (packs == 1)
        launch_layer_norm_backward_warp<T, 1>(stream_, saved, pg, rstd, pdy, rows, cols, pdx, accumulate, tail,
                                              partials, chunks, rows_per_chunk);
      else if (packs == 2)
        launch_layer_norm_backward_warp<T, 2>(stream_, saved, pg, rstd, pdy, rows, cols, pdx, accumulate, tail,
                                              partials, chunks, rows_per_chunk);
      else
        launch_layer_norm_backward_warp<T, 4>(stream_, saved, pg, rstd, pdy, rows, cols, pdx, accumulate, tail,
                                              partials, chunks, rows_per_chunk);
      check_launch(op);
      if (want_params)
        launch_finish_column_sums(stream_, partials, chunks, parts * cols, cols, dparam_gamma, dparam_beta,
                                  d_o ? dparam_bias : nullptr);
      check_launch(op);
      done = true;
      return;
    }
    // Parameter gradients first: dx may alias dy.
    const ColumnPlan plan = plan_column_sums(rows, cols, 2, scratch_float_count());
    float* gamma_partials = dparam_gamma ? scratch_floats() : nullptr;
    float* beta_partials = dparam_beta ? scratch_floats() + static_cast<std::size_t>(plan.chunks) * cols : nullptr;
    if (dparam_gamma || dparam_beta) {
      layer_norm_param_partials_kernel<T><<<column_grid(cols, plan), column_block(), 0, stream_>>>(
          saved, pg, rstd, pdy, rows, cols, plan.rows_per_chunk, gamma_partials, beta_partials);
      check_launch(op);
    }
    if (dparam_gamma) finish_column_sums(gamma_partials, plan.chunks, cols, dparam_gamma, op);
    if (dparam_beta) finish_column_sums(beta_partials, plan.chunks, cols, dparam_beta, op);
    layer_norm_dx_kernel<T><<<rows, row_threads(cols), 0, stream_>>>(saved, pg, rstd, pdy, cols, pdx, accumulate);
    check_launch(op);
  });
  // Rows the warp kernel does not take: the dropout tail as its own op over the rounded dx.
  if (!done && d_o) bias_dropout_residual_backward(dt, dx, rows, cols, *drop, d_o, dparam_bias);
}

}  // namespace lseq::kernels

// A product kernel of our own for decoding's skinny products, y[m, n] = act(x[m, k] w[n, k]^T + bias) with m <= 128
// (GPT-2's steps at 128 prompts), against cuBLASLt, which takes 4-9 us for what DRAM delivers in 1-2.5 us
// (l2_prefetch_products.cu: only 10-20% faster from L2, so the kernel, not the memory, sets its pace). An earlier
// attempt (cp.async copies a thread, 2026-11-28) was latency-bound on its copies' address arithmetic; this one loads
// with the TMA, so the warps only do ldmatrix + mma.sync:
//   - a block owns 64 columns and a slice of k (KC = k / C); the C blocks of a column tile form a thread-block
//     cluster;
//   - the slice comes in 64-wide boxes of x (128 rows; rows past m come as zeros) and of w (64 rows), one TMA load
//     each, swizzled by 128 bytes so that ldmatrix's eight rows hit distinct banks, each pair on its own barrier, so
//     that the first box is multiplied while the others load;
//   - four warps, 64 rows x 32 columns each (m16n8k16, fp32 accumulators);
//   - the C partial tiles (fp32, in each block's shared memory) are added through distributed shared memory in a
//     fixed order, block r of the cluster adding rows [r 128 / C, (r + 1) 128 / C), then bias and activation, one
//     rounding to bf16.
// Outcome (H200, 2026-11-29, bench/results/decode-products-h200-2026-11-29.txt): right to cuBLASLt's error against
// the fp32 reference, but 0.55-0.97x its speed. The dev modes (1: no products, 2: no sums across the cluster, 3: no
// loads) show where the time goes: every block reads all 128 rows of its x slice, so x comes from L2 once for each
// 64 output columns, more bytes than the weights; and the cluster's sums. A faster form would multicast x to a
// cluster of column tiles. Each shape is also timed through cuBLASLt's candidates under one reduction scheme.
// Not part of the build; on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/probes/skinny_products.cu -o /tmp/skinny -lcublasLt -lcuda && /tmp/skinny
#include <cooperative_groups.h>
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "probe_util.h"

namespace cg = cooperative_groups;

constexpr int kLayers = 12;
constexpr uint64_t kWorkspace = 32u << 20;
constexpr size_t kFlushBytes = 192u << 20;

constexpr int kRows = 128;     // rows a block holds (m <= kRows)
constexpr int kCols = 64;      // columns a block owns
constexpr int kThreads = 128;  // four warps: 2 x 2 of 64 rows x 32 columns

enum class Act { none, bias, gelu };

__device__ __forceinline__ float gelu_tanh(float x) {
  const float u = 0.7978845608f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void bar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void bar_expect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bar_wait(uint64_t* bar, unsigned phase) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(phase)
      : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared memory: for each 64-wide slice of k ("stage"), the x box [kRows][64] then the w box [kCols][64] (bf16, 128
// bytes a row, 16-byte chunks swizzled by the TMA: chunk c of row r lies at c ^ (r & 7)), one barrier a stage; the
// fp32 partial tile [kRows][kCols + 4] reuses the boxes once the products are done; the barriers after both.
constexpr int kBoxK = 64;
constexpr int kStageBytes = (kRows + kCols) * kBoxK * 2;  // 24 KB, a multiple of the swizzle's 1024-byte alignment
constexpr int kMaxStages = 8;
__host__ __device__ constexpr size_t barrier_offset(int stages) {
  const size_t tiles = static_cast<size_t>(stages) * kStageBytes;
  const size_t part = static_cast<size_t>(kRows) * (kCols + 4) * 4;
  return tiles > part ? tiles : part;
}

__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}

template <int S>  // blocks a cluster: k splits
__global__ void __launch_bounds__(kThreads)
    skinny_product_kernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                          const __nv_bfloat16* __restrict__ bias, int m, int n, int kc, Act act,
                          __nv_bfloat16* __restrict__ y, int mode) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int stages = kc / kBoxK;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + barrier_offset(stages));
  const int split = blockIdx.x;  // rank in the cluster (clusters run along x)
  const int col0 = blockIdx.y * kCols;
  const int k0 = split * kc;
  const int tid = threadIdx.x;

  if (tid == 0 && mode != 3) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&x_map)) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&w_map)) : "memory");
    for (int s = 0; s < stages; ++s) bar_init(&bars[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    // Rows past m come as zeros (outside the tensor map's bounds).
    for (int s = 0; s < stages; ++s) {
      unsigned char* stage = smem + s * kStageBytes;
      bar_expect(&bars[s], kStageBytes);
      tma_load_2d(stage, &x_map, k0 + s * kBoxK, 0, &bars[s]);
      tma_load_2d(stage + kRows * kBoxK * 2, &w_map, k0 + s * kBoxK, col0, &bars[s]);
    }
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them

  const int warp = tid >> 5, lane = tid & 31;
  const int wm = warp >> 1, wn = warp & 1;  // 64-row and 32-column quarter of the tile
  float acc[4][4][4];                       // [m tile][n tile][fragment]
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  // ldmatrix rows: A (lane % 16), its k chunk (lane / 16); B n = (lane & 7) + (lane >> 4) * 8, its k chunk
  // ((lane >> 3) & 1). A row's chunk c sits at c ^ (row & 7) (rows of 128 bytes; every row offset below is a
  // multiple of 8, so row & 7 is the lane's own).
  const int a_row = wm * 64 + (lane & 15), a_chunk = lane >> 4, a_swz = a_row & 7;
  const int b_row = wn * 32 + (lane & 7) + (lane >> 4) * 8, b_chunk = (lane >> 3) & 1, b_swz = b_row & 7;
  for (int s = 0; s < stages; ++s) {
    if (mode != 3) bar_wait(&bars[s], 0);
    if (mode == 1) continue;
    const unsigned char* xs = smem + s * kStageBytes;
    const unsigned char* ws = xs + kRows * kBoxK * 2;
#pragma unroll
    for (int kk = 0; kk < kBoxK / 8; kk += 2) {  // k steps of 16 = two chunks
      unsigned a[4][4], b[2][4];
#pragma unroll
      for (int i = 0; i < 4; ++i) ldmatrix_x4(a[i], xs + (a_row + i * 16) * 128 + (((kk + a_chunk) ^ a_swz) << 4));
#pragma unroll
      for (int j = 0; j < 2; ++j) ldmatrix_x4(b[j], ws + (b_row + j * 16) * 128 + (((kk + b_chunk) ^ b_swz) << 4));
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_bf16(acc[i][j], a[i], b[j >> 1][(j & 1) * 2], b[j >> 1][(j & 1) * 2 + 1]);
    }
  }
  __syncthreads();  // every warp done with xs before it holds the partial tile
  constexpr int kPartPitch = kCols + 4;
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = wm * 64 + i * 16 + (lane >> 2);
      const int col = wn * 32 + j * 8 + (lane & 3) * 2;
      part[row * kPartPitch + col] = acc[i][j][0];
      part[row * kPartPitch + col + 1] = acc[i][j][1];
      part[(row + 8) * kPartPitch + col] = acc[i][j][2];
      part[(row + 8) * kPartPitch + col + 1] = acc[i][j][3];
    }
  cg::cluster_group cluster = cg::this_cluster();
  if (mode == 2) {
    if (tid < 64) y[blockIdx.y * 64 + tid] = __float2bfloat16(part[tid * 3]);
    return;
  }
  cluster.sync();
  // This block's rows of the sum: the partial tiles added in rank order, every load issued before the first add
  // (a load from another block's shared memory takes a round trip across the cluster).
  constexpr int kRowsEach = kRows / S, kQuads = kRowsEach * kCols / 4 / kThreads;  // float4s a thread sums
  float4 v[kQuads][S];
#pragma unroll
  for (int t = 0; t < kQuads; ++t) {
    const int e = tid + t * kThreads;
    const int row = split * kRowsEach + e / (kCols / 4), col = (e % (kCols / 4)) * 4;
#pragma unroll
    for (int q = 0; q < S; ++q)
      v[t][q] = *reinterpret_cast<const float4*>(cluster.map_shared_rank(part, q) + row * kPartPitch + col);
  }
#pragma unroll
  for (int t = 0; t < kQuads; ++t) {
    const int e = tid + t * kThreads;
    const int row = split * kRowsEach + e / (kCols / 4), col = (e % (kCols / 4)) * 4;
    float out[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q = 0; q < S; ++q) out[0] += v[t][q].x, out[1] += v[t][q].y, out[2] += v[t][q].z, out[3] += v[t][q].w;
    if (row < m) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (act != Act::none) out[c] += __bfloat162float(bias[col0 + col + c]);
        if (act == Act::gelu) out[c] = gelu_tanh(out[c]);
      }
      __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(y + static_cast<size_t>(row) * n + col0 + col);
      dst[0] = __floats2bfloat162_rn(out[0], out[1]);
      dst[1] = __floats2bfloat162_rn(out[2], out[3]);
    }
  }
  cluster.sync();  // no block leaves while another reads its partial tile
}

size_t skinny_smem_bytes(int kc) { return barrier_offset(kc / kBoxK) + 8 * kMaxStages; }

// The k splits: the fewest (a power of 2, at most 8) whose blocks reach about three quarters of the multiprocessors,
// each slice a whole number of 64-wide boxes, at most kMaxStages of them.
int choose_splits(int n, int k, int sms) {
  int c = 1;
  while (c < 8 && (n / kCols) * c < sms * 3 / 4) c *= 2;
  while (c < 8 && k / c > kMaxStages * kBoxK) c *= 2;
  return c;
}

// A row-major [rows, cols] bf16 matrix as a TMA tensor map of boxes [box_rows][64], swizzled by 128 bytes; reads
// past `rows` give zeros.
CUtensorMap tensor_map(const __nv_bfloat16* p, int rows, int cols, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * 2};
  const cuuint32_t box[2] = {kBoxK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CHECK(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<__nv_bfloat16*>(p), dims, strides,
                               box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

int g_mode = 0;  // dev: 1 no products, 2 no sums across the cluster, 3 no loads

bool launch_skinny(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, int m, int n, int k,
                   Act act, __nv_bfloat16* y, int sms, cudaStream_t stream, int* splits_out = nullptr) {
  if (m < 1 || m > kRows || n % kCols != 0) return false;
  const int c = choose_splits(n, k, sms);
  if (k % (c * kBoxK) != 0 || k / c > kMaxStages * kBoxK) return false;
  const int kc = k / c;
  const size_t smem = skinny_smem_bytes(kc);
  const CUtensorMap x_map = tensor_map(x, m, k, kRows), w_map = tensor_map(w, n, k, kCols);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(c, n / kCols);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = c;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  auto kernel = c == 1   ? skinny_product_kernel<1>
                : c == 2 ? skinny_product_kernel<2>
                : c == 4 ? skinny_product_kernel<4>
                         : skinny_product_kernel<8>;
  CHECK(cudaLaunchKernelEx(&config, kernel, x_map, w_map, bias, m, n, kc, act, y, g_mode));
  if (splits_out) *splits_out = c;
  return true;
}

// The reference: fp32 sums, one thread an output.
__global__ void reference_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, const __nv_bfloat16* bias, int m,
                                 int n, int k, Act act, float* y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m * n) return;
  const int r = i / n, c = i % n;
  float s = 0.0f;
  for (int j = 0; j < k; ++j)
    s += __bfloat162float(x[static_cast<size_t>(r) * k + j]) * __bfloat162float(w[static_cast<size_t>(c) * k + j]);
  if (act != Act::none) s += __bfloat162float(bias[c]);
  if (act == Act::gelu) s = gelu_tanh(s);
  y[i] = s;
}

struct Shape {
  const char* name;
  int m, n, k;
  Act act;
};

int main() {
  const std::vector<Shape> shapes = {
      {"gpt2-small qkv", 128, 2304, 768, Act::bias},    {"gpt2-small out", 128, 768, 768, Act::none},
      {"gpt2-small fc1", 128, 3072, 768, Act::gelu},    {"gpt2-small fc2", 128, 768, 3072, Act::none},
      {"gpt2-medium qkv", 128, 3072, 1024, Act::bias},  {"gpt2-medium out", 128, 1024, 1024, Act::none},
      {"gpt2-medium fc1", 128, 4096, 1024, Act::gelu},  {"gpt2-medium fc2", 128, 1024, 4096, Act::none},
      {"gpt2-small qkv x32", 32, 2304, 768, Act::bias}, {"gpt2-small fc2 x100", 100, 768, 3072, Act::none},
      {"base x128 fc1", 128, 2048, 512, Act::none},     {"base x128 fc2", 128, 512, 2048, Act::none},
  };
  cublasLtHandle_t handle;
  CHECK(cublasLtCreate(&handle));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* workspace;
  CHECK(cudaMalloc(&workspace, kWorkspace));
  L2Flush flush(kFlushBytes);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  for (auto kernel :
       {skinny_product_kernel<1>, skinny_product_kernel<2>, skinny_product_kernel<4>, skinny_product_kernel<8>})
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 210 * 1024));
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  auto flush_l2 = [&] { flush(stream); };
  for (const Shape& s : shapes) {
    ProductOperands ops(s.m, s.n, s.k, kLayers, 11, 0.2f, 2.0f, 1.0f);
    const size_t wsize = ops.w_elems;
    const __nv_bfloat16 *w = ops.w, *x = ops.x, *bias = ops.bias;
    __nv_bfloat16 *y = ops.y, *y_lt;
    float* ref;
    CHECK(cudaMalloc(&y_lt, static_cast<size_t>(s.m) * s.n * 2));
    CHECK(cudaMalloc(&ref, static_cast<size_t>(s.m) * s.n * 4));
    const cublasLtEpilogue_t epilogue = s.act == Act::gelu   ? CUBLASLT_EPILOGUE_GELU_BIAS
                                        : s.act == Act::bias ? CUBLASLT_EPILOGUE_BIAS
                                                             : CUBLASLT_EPILOGUE_DEFAULT;
    const LtProduct product(s.m, s.n, s.k, epilogue, ops.bias);
    const cublasLtMatmulDesc_t desc = product.desc;
    const cublasLtMatrixLayout_t lw = product.w, lx = product.x, ly = product.y;
    const auto results = heuristic_choices(handle, desc, lw, lx, ly, kWorkspace, 1);
    if (results.empty()) {
      std::printf("%s: cuBLASLt offers nothing\n", s.name);
      continue;
    }
    const cublasLtMatmulAlgo_t algo = results[0].algo;
    const float alpha = 1.0f, beta = 0.0f;
    auto lt = [&](int layer, __nv_bfloat16* out) {
      CHECK(cublasLtMatmul(handle, desc, &alpha, w + wsize * layer, lw, x, lx, &beta, out, ly, out, ly, &algo,
                           workspace, kWorkspace, stream));
    };
    int splits = 0;
    if (!launch_skinny(x, w, bias, s.m, s.n, s.k, s.act, y, sms, stream, &splits)) {
      std::printf("%s: shape not taken\n", s.name);
      continue;
    }
    lt(0, y_lt);
    reference_kernel<<<(s.m * s.n + 255) / 256, 256, 0, stream>>>(x, w, bias, s.m, s.n, s.k, s.act, ref);
    CHECK(cudaStreamSynchronize(stream));
    std::vector<__nv_bfloat16> h_y(static_cast<size_t>(s.m) * s.n), h_lt(h_y.size());
    std::vector<float> h_ref(h_y.size());
    CHECK(cudaMemcpy(h_y.data(), y, h_y.size() * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_lt.data(), y_lt, h_lt.size() * 2, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(h_ref.data(), ref, h_ref.size() * 4, cudaMemcpyDeviceToHost));
    double ref_max = 0, err_ours = 0, err_lt = 0;
    size_t differ = 0;
    for (size_t i = 0; i < h_ref.size(); ++i) {
      ref_max = std::max(ref_max, std::fabs(static_cast<double>(h_ref[i])));
      err_ours = std::max(err_ours, std::fabs(__bfloat162float(h_y[i]) - static_cast<double>(h_ref[i])));
      err_lt = std::max(err_lt, std::fabs(__bfloat162float(h_lt[i]) - static_cast<double>(h_ref[i])));
      differ += __bfloat162float(h_y[i]) != __bfloat162float(h_lt[i]);
    }
    const float t_flush = graph_launch_us(stream, kLayers, [&](int) { flush_l2(); });
    const float t_lt = graph_launch_us(stream, kLayers, [&](int l) { flush_l2(), lt(l, y_lt); }) - t_flush;
    auto ours_after_flush = [&] {  // microseconds a launch beyond the flush
      return graph_launch_us(stream, kLayers,
                             [&](int l) {
                               flush_l2();
                               launch_skinny(x, w + wsize * l, bias, s.m, s.n, s.k, s.act, y, sms, stream);
                             }) -
             t_flush;
    };
    const float t_ours = ours_after_flush();
    const float t_lt_warm = graph_launch_us(stream, kLayers, [&](int l) { lt(l, y_lt); });
    const float t_ours_warm = graph_launch_us(
        stream, kLayers, [&](int l) { launch_skinny(x, w + wsize * l, bias, s.m, s.n, s.k, s.act, y, sms, stream); });
    std::printf(
        "%-20s m %3d n %5d k %4d: cuBLASLt %6.2f us (back to back %6.2f), ours %6.2f us (%5.2f) with %d splits, "
        "%.2fx; max error / max |y|: ours %.2e, cuBLASLt %.2e; %zu of %zu outputs differ\n",
        s.name, s.m, s.n, s.k, t_lt, t_lt_warm, t_ours, t_ours_warm, splits, t_lt / t_ours, err_ours / ref_max,
        err_lt / ref_max, differ, h_y.size());
    for (int mode = 1; mode <= 3; ++mode) {
      g_mode = mode;
      const float t = ours_after_flush();
      std::printf("    mode %d (%s): %6.2f us\n", mode,
                  mode == 1   ? "no products"
                  : mode == 2 ? "no cluster sums"
                              : "no loads",
                  t);
    }
    g_mode = 0;
    // cuBLASLt's own candidates when only some reduction schemes are allowed (none: no split-k; in place: the
    // split-k sums added into the output by the product kernel itself, no second kernel).
    for (uint32_t mask : {static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE),
                          static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_INPLACE),
                          static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)}) {
      cublasLtMatmulPreference_t preference;
      CHECK(cublasLtMatmulPreferenceCreate(&preference));
      const uint64_t ws = kWorkspace;
      CHECK(
          cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
      CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                 sizeof(mask)));
      std::vector<cublasLtMatmulHeuristicResult_t> found(16);
      int count = 0;
      if (cublasLtMatmulAlgoGetHeuristic(handle, desc, lw, lx, ly, ly, preference, 16, found.data(), &count) !=
          CUBLAS_STATUS_SUCCESS)
        count = 0;
      CHECK(cublasLtMatmulPreferenceDestroy(preference));
      float best = 1e9f;
      int best_i = -1;
      for (int i = 0; i < count; ++i) {
        const cublasLtMatmulAlgo_t a = found[i].algo;
        if (cublasLtMatmul(handle, desc, &alpha, w, lw, x, lx, &beta, y_lt, ly, y_lt, ly, &a, workspace, kWorkspace,
                           stream) != CUBLAS_STATUS_SUCCESS)
          continue;
        const float t = graph_launch_us(stream, kLayers,
                                        [&](int l) {
                                          flush_l2();
                                          cublasLtMatmul(handle, desc, &alpha, w + wsize * l, lw, x, lx, &beta, y_lt,
                                                         ly, y_lt, ly, &a, workspace, kWorkspace, stream);
                                        }) -
                        t_flush;
        if (t < best) best = t, best_i = i;
      }
      std::printf("    cuBLASLt, reductions %u only: %d candidates, best %6.2f us (#%d)\n", mask, count,
                  best_i >= 0 ? best : 0.0f, best_i);
    }
    CHECK(cudaFree(y_lt));
    CHECK(cudaFree(ref));
  }
  return 0;
}

// Would decoding's skinny products run faster if their weights were already in L2? A GPT-2 small step at 128 rows
// reads its layers' weights at about 0.5 TB/s through cuBLASLt (5-7 us a product, 14 MB a layer), and between the
// products run kernels that leave the DRAM idle (LayerNorm, the q/k/v split: a few microseconds of latency each).
// If a product is much faster from L2, prefetching a layer's weights beside those kernels would pay. Not part of the
// build (issue 25's one-off measurement); on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 bench/probes/l2_prefetch_products.cu -o /tmp/l2_prefetch -lcublasLt
//   /tmp/l2_prefetch
// Every timed graph holds 12 "layers"; each layer first overwrites a buffer larger than L2 (what the attention's
// cache stream does to L2 in a real step), then:
//   flush       nothing more                                  (subtracted from the rows below)
//   cold        the product, weights from DRAM
//   read+hot    a kernel that reads the weights, then the product (its time minus "read" = the product from L2)
//   read        the reading kernel alone
//   wait        a one-block kernel spinning ~5 us (a LayerNorm's latency), then the product
//   wait+pref   the same, with the layer's weights prefetched (cp.async.bulk.prefetch.L2) on a forked stream while
//               the spinning kernel runs
// Printed: microseconds a layer beyond the flush, and the product's own time in each form.
// Outcome (H200, 2026-11-29, bench/results/decode-products-h200-2026-11-29.txt): from L2 the products ran only 10-20%
// faster, and the prefetch beside the waiting kernel made them 2.1-3.1 us slower (the fork and join in the graph).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "probe_util.h"

constexpr int kLayers = 12;
constexpr uint64_t kWorkspace = 32u << 20;
constexpr size_t kFlushBytes = 192u << 20;

struct Shape {
  const char* name;
  int m, n, k;
  cublasLtEpilogue_t epilogue;
};

// Reads n bytes (a multiple of 16) so that they sit in L2 afterwards; the sum keeps the loads alive.
__global__ void read_kernel(const uint4* p, size_t n16, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

// Issues bulk L2 prefetches of [p, p + bytes) in pieces of `piece` bytes, one piece a thread at a time.
__global__ void prefetch_kernel(const char* p, size_t bytes, unsigned piece) {
  for (size_t off = size_t(blockIdx.x * blockDim.x + threadIdx.x) * piece; off < bytes;
       off += size_t(gridDim.x) * blockDim.x * piece) {
    const unsigned size = static_cast<unsigned>(bytes - off < piece ? bytes - off : piece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(size) : "memory");
  }
}

// One block spinning for `cycles` clock cycles.
__global__ void wait_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int main() {
  const std::vector<Shape> shapes = {
      {"gpt2-small qkv", 128, 2304, 768, CUBLASLT_EPILOGUE_BIAS},
      {"gpt2-small out", 128, 768, 768, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-small fc1", 128, 3072, 768, CUBLASLT_EPILOGUE_GELU_BIAS},
      {"gpt2-small fc2", 128, 768, 3072, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-medium qkv", 128, 3072, 1024, CUBLASLT_EPILOGUE_BIAS},
      {"gpt2-medium fc1", 128, 4096, 1024, CUBLASLT_EPILOGUE_GELU_BIAS},
      {"gpt2-medium fc2", 128, 1024, 4096, CUBLASLT_EPILOGUE_DEFAULT},
      {"gpt2-small qkv x32", 32, 2304, 768, CUBLASLT_EPILOGUE_BIAS},
      {"base beam4x128 fc1", 512, 2048, 512, CUBLASLT_EPILOGUE_RELU_BIAS},
      {"base beam4x128 fc2", 512, 512, 2048, CUBLASLT_EPILOGUE_DEFAULT},
  };
  cublasLtHandle_t handle;
  CHECK(cublasLtCreate(&handle));
  cudaStream_t stream, side;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t fork, join;
  CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  void* workspace;
  CHECK(cudaMalloc(&workspace, kWorkspace));
  L2Flush flush(kFlushBytes);
  unsigned* sink;
  CHECK(cudaMalloc(&sink, 16));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long wait_cycles = static_cast<long long>(clock_khz) * 5 / 1000;  // 5 us
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  auto flush_l2 = [&] { flush(stream); };

  for (const Shape& s : shapes) {
    ProductOperands ops(s.m, s.n, s.k, kLayers);
    const size_t wsize = ops.w_elems, wbytes = 2 * wsize;
    const __nv_bfloat16 *w = ops.w, *x = ops.x;
    __nv_bfloat16* y = ops.y;
    const LtProduct lt(s.m, s.n, s.k, s.epilogue, ops.bias);
    const cublasLtMatmulDesc_t desc = lt.desc;
    const cublasLtMatrixLayout_t lw = lt.w, lx = lt.x, ly = lt.y;
    const auto results = heuristic_choices(handle, desc, lw, lx, ly, kWorkspace, 1);
    if (results.empty()) {
      std::printf("%s: no heuristic choice\n", s.name);
      continue;
    }
    const cublasLtMatmulAlgo_t algo = results[0].algo;
    const float alpha = 1.0f, beta = 0.0f;
    auto product = [&](int layer) {
      CHECK(cublasLtMatmul(handle, desc, &alpha, w + wsize * layer, lw, x, lx, &beta, y, ly, y, ly, &algo, workspace,
                           kWorkspace, stream));
    };
    auto read = [&](int layer) {
      read_kernel<<<prop.multiProcessorCount * 4, 256, 0, stream>>>(reinterpret_cast<const uint4*>(w + wsize * layer),
                                                                    wbytes / 16, sink);
    };
    auto wait = [&] { wait_kernel<<<1, 32, 0, stream>>>(wait_cycles); };
    auto prefetch_beside = [&](int layer) {
      CHECK(cudaEventRecord(fork, stream));
      CHECK(cudaStreamWaitEvent(side, fork));
      prefetch_kernel<<<8, 32, 0, side>>>(reinterpret_cast<const char*>(w + wsize * layer), wbytes, 64u << 10);
      CHECK(cudaEventRecord(join, side));
    };
    auto rejoin = [&] { CHECK(cudaStreamWaitEvent(stream, join)); };
    product(0);  // loads the kernel
    CHECK(cudaStreamSynchronize(stream));

    const float t_flush = graph_launch_us(stream, kLayers, [&](int) { flush_l2(); });
    const float t_cold = graph_launch_us(stream, kLayers, [&](int l) { flush_l2(), product(l); });
    const float t_read = graph_launch_us(stream, kLayers, [&](int l) { flush_l2(), read(l); });
    const float t_hot = graph_launch_us(stream, kLayers, [&](int l) { flush_l2(), read(l), product(l); });
    const float t_wait = graph_launch_us(stream, kLayers, [&](int l) { flush_l2(), wait(), product(l); });
    const float t_wait_only = graph_launch_us(stream, kLayers, [&](int) { flush_l2(), wait(); });
    const float t_pref = graph_launch_us(stream, kLayers, [&](int l) {
      flush_l2();
      prefetch_beside(l);
      wait();
      rejoin();
      product(l);
    });
    std::printf(
        "%-20s m %4d n %5d k %4d %5.2f MB: product cold %6.2f us, from L2 %6.2f us (read %6.2f us); after a 5 us "
        "wait %6.2f us, with the prefetch beside it %6.2f us (wait alone %5.2f)\n",
        s.name, s.m, s.n, s.k, wbytes / 1e6, t_cold - t_flush, t_hot - t_read, t_read - t_flush, t_wait - t_wait_only,
        t_pref - t_wait_only, t_wait_only - t_flush);
  }
  return 0;
}

// How fast one launch can read what a decoding step's attention reads: the ceiling the attention over GPT-2's
// caches (about 65 MB a launch at 128 prompts, 100 steps in; 2.85 TB/s) is measured against. Not part of the build;
// on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/stream_read.cu -o /tmp/read && /tmp/read
// Each form reads bf16 data with 16-byte loads and keeps a sum per thread (stored only under a flag that is never
// set, so the loads stay); times are medians a launch in a replayed CUDA graph of 20 launches:
// - contiguous: the whole buffer, grid-stride over every thread of a one-wave grid (SMs x 8 blocks of 128), four
//   loads in flight a thread;
// - slices: the attention's pattern, 3072 regions (keys and values of 1536 slices) of 22 KB each, or of 14.5-29 KB
//   (the same total: GPT-2's prompts of 16-128 tokens 100 steps in) in slice order or longest first; 1, 2 or 4 warps
//   a region, each starting at a stride of 160 KB (a cache planned for 1,277 positions of 64 dims), four loads a lane
//   in flight;
// - key and value rows: the attention's own mapping (a slice's keys and values to 1 or 2 warps, an iteration 8 rows
//   of each, two 16-byte loads of keys and two of values a lane) with 0-256 fp32 operations a lane an iteration on
//   what was loaded, over the varied slices.
// Figures (one H200, 2026-11-28): bench/results/decode-attention-ceiling-h200-2026-11-28.txt.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <vector>

#include "probe_util.h"

__global__ void __launch_bounds__(128, 8) read_contiguous(const uint4* p, size_t n, int flag, unsigned* out) {
  unsigned sum = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
    sum += a.x ^ b.y ^ c.z ^ d.w;
  }
  for (; i < n; i += stride) sum += p[i].x;
  if (flag) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Region r (of `regions`) holds region_bytes[r] from r * stride_bytes; `split` warps share a region, taking its
// 512-byte rows of four loads in turn. With `order` the warps take regions in that order (longest first).
__global__ void __launch_bounds__(128, 8)
    read_slices(const char* base, int regions, int split, size_t stride_bytes, const int* region_bytes,
                const int* order, int flag, unsigned* out) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp / split >= regions) return;
  const int region = order ? order[warp / split] : warp / split, part = warp % split;
  const uint4* p = reinterpret_cast<const uint4*>(base + region * stride_bytes);
  const int packs = region_bytes[region] / 16;
  unsigned sum = 0;
  for (int j = part * 128 + lane; j < packs; j += 128 * split) {
    uint4 a = p[j], b = p[min(j + 32, packs - 1)], c = p[min(j + 64, packs - 1)], d = p[min(j + 96, packs - 1)];
    sum += a.x ^ b.y ^ c.z ^ d.w;
  }
  if (flag) out[warp * 32 + lane] = sum;
}

// The attention's own access: warp w takes slice w / split, iterations part, part + split, ... of 8 key rows (1 KB of
// keys at `keys` and 1 KB of values at `values`, two 16-byte loads of each a lane), with `work` fp32 operations a
// lane an iteration on what it loaded (eight independent chains) before the next iteration's loads.
template <int kWork>
__global__ void __launch_bounds__(128, 8)
    read_key_value_rows(const char* keys, const char* values, int slices, int split, size_t stride_bytes,
                        const int* slice_bytes, int flag, float* out) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp / split >= slices) return;
  const int slice = warp / split, part = warp % split;
  const uint4* k = reinterpret_cast<const uint4*>(keys + slice * stride_bytes);
  const uint4* v = reinterpret_cast<const uint4*>(values + slice * stride_bytes);
  const int packs = slice_bytes[slice] / 16;
  float acc[8] = {};
  for (int j = part * 64 + lane; j < packs; j += 64 * split) {
    const uint4 k0 = k[j], k1 = k[min(j + 32, packs - 1)], v0 = v[j], v1 = v[min(j + 32, packs - 1)];
    const unsigned bits[8] = {k0.x, k0.y, k1.z, k1.w, v0.x, v0.y, v1.z, v1.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] += __uint_as_float(bits[e] << 16);
#pragma unroll
    for (int w = 0; w < kWork / 8; ++w)
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = fmaf(acc[e], 0.999f, 1e-3f);
  }
  float sum = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) sum += acc[e];
  if (flag) out[warp * 32 + lane] = sum;
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const size_t max_bytes = size_t(1) << 30;
  __nv_bfloat16* buffer;
  unsigned* out;
  CHECK(cudaMalloc(&buffer, max_bytes));
  CHECK(cudaMalloc(&out, size_t(1) << 24));
  fill_random(buffer, max_bytes / 2, 7);
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const int blocks = prop.multiProcessorCount * 8;
  for (size_t mb : {16, 32, 65, 130, 260, 1024}) {
    const size_t bytes = mb << 20;
    const float us = graph_launch_us(stream, 20, [&](int) {
      read_contiguous<<<blocks, 128, 0, stream>>>(reinterpret_cast<const uint4*>(buffer), bytes / 16, 0, out);
    });
    std::printf("contiguous %5zu MB: %8.2f us, %.2f TB/s\n", mb, us, bytes / us / 1e6);
  }
  // Keys and values of 1536 slices: all 22 KB, or 14.5-29 KB as GPT-2's 128 prompts of 16-128 tokens 100 steps in
  // (the same bytes in all), in slice order or longest first.
  const int regions = 3072;
  const size_t stride = 1277 * 64 * 2;
  std::vector<int> equal(regions, 22 * 1024), varied(regions), by_length(regions);
  for (int r = 0; r < regions; ++r) {
    const unsigned h = (static_cast<unsigned>(r / 2) * 2654435761u) >> 8;
    varied[r] = (116 + static_cast<int>(h % 113)) * 128;  // 116-228 keys of 128 bytes
  }
  for (int r = 0; r < regions; ++r) by_length[r] = r;
  std::sort(by_length.begin(), by_length.end(), [&](int a, int b) { return varied[a] > varied[b]; });
  auto to_device = [](const std::vector<int>& host) {
    int* device;
    CHECK(cudaMalloc(&device, host.size() * sizeof(int)));
    CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(int), cudaMemcpyHostToDevice));
    return device;
  };
  const int *d_equal = to_device(equal), *d_varied = to_device(varied), *d_order = to_device(by_length);
  struct Form {
    const char* name;
    const int* sizes;
    const int* order;
    const std::vector<int>& host;
  };
  for (const Form& form : {Form{"equal 22 KB", d_equal, nullptr, equal}, Form{"varied", d_varied, nullptr, varied},
                           Form{"varied, longest first", d_varied, d_order, varied}}) {
    double bytes = 0;
    for (int b : form.host) bytes += b;
    for (int split : {1, 2, 4}) {
      const int warps = regions * split;
      const float us = graph_launch_us(stream, 20, [&](int) {
        read_slices<<<(warps + 3) / 4, 128, 0, stream>>>(reinterpret_cast<const char*>(buffer), regions, split, stride,
                                                         form.sizes, form.order, 0, out);
      });
      std::printf("slices %d, %s (%.1f MB), %d warps a slice: %8.2f us, %.2f TB/s\n", regions, form.name, bytes / 1e6,
                  split, us, bytes / us / 1e6);
    }
  }
  // The attention's pairs of key and value rows over the varied slices (half the regions as keys, half as values).
  const int slices = regions / 2;
  const char* keys = reinterpret_cast<const char*>(buffer);
  const char* values = keys + slices * stride;
  double pair_bytes = 0;
  for (int i = 0; i < slices; ++i) pair_bytes += 2.0 * varied[i];
  auto pairs = [&](auto work, int split) {
    const int warps = slices * split;
    const float us = graph_launch_us(stream, 20, [&](int) {
      read_key_value_rows<decltype(work)::value><<<(warps + 3) / 4, 128, 0, stream>>>(
          keys, values, slices, split, stride, d_varied, 0, reinterpret_cast<float*>(out));
    });
    std::printf(
        "key and value rows, %d slices (%.1f MB), %d warps a slice, %3d operations an iteration: %8.2f us, "
        "%.2f TB/s\n",
        slices, pair_bytes / 1e6, split, decltype(work)::value, us, pair_bytes / us / 1e6);
  };
  for (int split : {1, 2}) {
    pairs(std::integral_constant<int, 0>{}, split);
    pairs(std::integral_constant<int, 64>{}, split);
    pairs(std::integral_constant<int, 128>{}, split);
    pairs(std::integral_constant<int, 256>{}, split);
  }
  return 0;
}

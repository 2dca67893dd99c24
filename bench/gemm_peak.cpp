// The GPU's measured dense GEMM peak: the denominator of issue 6's MFU ("bf16 dense GEMM about 800 TFLOP/s
// measured"), beside the datasheet's. A square bf16 GEMM (fp32 accumulation, bf16 result) through the CUDA backend's
// gemm (cuBLAS), on random inputs, timed in rounds of back-to-back launches between two synchronisations; the
// median round is reported, so that the card's sustained clock is measured rather than its first burst.
//   bench_gemm_peak [--devices N] [--size 8192] [--rounds 15] [--reps 20]   (the benchmarks' options: --help)
// Output: one RESULT line (bench_support.h's key=value format). Reports only; asserts nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_options.h"
#include "core/cli/app_main.h"
#include "kernels/backend.h"

using namespace lseq::kernels;
using lseq::Options;

namespace {

// n random bf16 values in [-1, 1) on the device (drawn as fp32 on the host, cast there).
void* random_bf16(Backend& be, std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> host(n);
  for (float& x : host) x = dist(rng);
  void* staged = be.allocate(n * 4);
  be.copy_to_device(staged, host.data(), n * 4);
  void* out = be.allocate(n * dtype_size(DType::bf16));
  be.cast(DType::f32, staged, DType::bf16, out, n);
  be.synchronize();
  be.release(staged);
  return out;
}

int run(const Options& options) {
  if (!cuda_backend_available()) {
    std::printf("bench_gemm_peak: no CUDA GPU visible (or a build without CUDA); nothing to measure\n");
    return 0;
  }
  const int n = static_cast<int>(options.get_int("size")), rounds = static_cast<int>(options.get_int("rounds")),
            reps = static_cast<int>(options.get_int("reps"));
  auto owner = make_cuda_backend(lseq::bench::device(options));
  Backend& be = *owner;
  std::mt19937 rng(2026);
  const std::size_t elements = std::size_t(n) * n;
  void* a = random_bf16(be, elements, rng);
  void* b = random_bf16(be, elements, rng);
  void* c = be.allocate(elements * dtype_size(DType::bf16));

  GemmArgs g;
  g.m = g.n = g.k = n;
  g.a = a, g.b = b, g.c = c;
  g.lda = g.ldb = g.ldc = n;
  g.ab = g.c_type = DType::bf16;
  for (int i = 0; i < 5; ++i) be.gemm(g);  // warm-up: cuBLAS's first call picks and loads its kernel
  be.synchronize();
  std::vector<double> round_ms;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) be.gemm(g);
    be.synchronize();
    round_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(round_ms.begin(), round_ms.end());
  const double median = round_ms[round_ms.size() / 2];
  const double tflops = 2.0 * n * double(n) * n / (median * 1e-3) / 1e12;
  std::printf("RESULT bench=gemm-peak impl=cublas dtype=bf16 m=%d n=%d k=%d rounds=%d reps=%d ms=%.4f "
              "ms_fastest=%.4f ms_slowest=%.4f tflops=%.1f status=ok\n",
              n, n, n, rounds, reps, median, round_ms.front(), round_ms.back(), tflops);
  std::printf("# %s\n", be.name().c_str());
  be.release(a);
  be.release(b);
  be.release(c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }

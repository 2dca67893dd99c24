// Label-smoothed cross-entropy and the decoding log-softmax on the device against the CPU backend: one-entry and
// 32000-entry vocabularies, padding rows (ignore_index), with and without smoothing, gradient in place, with and
// without the output bias.
#include <cmath>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct CeCase {
  int n, vocab;
};
// Vocabularies that are multiples of the 16-byte pack and whose row fits 160 KiB (64 up to 32776) take the kernel
// that stages the row in shared memory; odd sizes (1, 5, 33, 50001) and 82000 (a row over 160 KiB in every dtype)
// the general one.
const std::vector<CeCase> kCases = {{1, 1},      {1, 5},     {7, 33},    {5, 64},    {64, 32000},
                                    {4, 32768}, {2, 32776}, {3, 50001}, {2, 82000}};

TEST_F(GpuKernels, CrossEntropyMatchesCpu) {
  uint64_t seed = 10000;
  const int ignore = 0;  // padding id
  for (DType dt : dtypes())
    for (const auto& c : kCases)
      for (float ls : {0.0f, 0.1f})
        for (bool in_place : {false, true}) {
          const std::size_t total = std::size_t(c.n) * c.vocab;
          const auto logits = quantize(random_floats(total, ++seed, -8, 8), dt);
          auto targets = random_ints(c.n, ++seed, 0, c.vocab - 1);
          if (c.n > 2) targets[1] = ignore;
          const float grad_scale = 1.0f / c.n;
          std::vector<float> ref_loss(c.n), ref_nll(c.n), ref_d(total);
          cpu.cross_entropy(DType::f32, logits.data(), nullptr, targets.data(), c.n, c.vocab, ls, ignore, grad_scale,
                            ref_loss.data(), ref_nll.data(), ref_d.data());
          DeviceBuffer dl(gpu(), dt, logits), dtg(gpu(), targets), loss(gpu(), DType::f32, c.n),
              nll(gpu(), DType::f32, c.n), grad(gpu(), dt, total);
          loss.poison();
          nll.poison();
          grad.poison();
          void* d = in_place ? dl.get() : grad.get();
          gpu().cross_entropy(dt, dl.get(), nullptr, dtg.i32(), c.n, c.vocab, ls, ignore, grad_scale, loss.f32(),
                              nll.f32(), d);
          const std::string what = label(dt) + " n " + std::to_string(c.n) + " vocab " + std::to_string(c.vocab) +
                                   " ls " + std::to_string(ls) + (in_place ? " in place" : "");
          EXPECT_TRUE(within(loss.download(), ref_loss, Bound{2e-5, 2e-5})) << what << " loss";
          EXPECT_TRUE(within(nll.download(), ref_nll, Bound{2e-5, 2e-5})) << what << " nll";
          // p - ls/vocab cancels where p is near the smoothing mass: absolute error ~1e-6 of p there.
          EXPECT_TRUE(within((in_place ? dl : grad).download(), ref_d, bound_for(dt, 0.1 * grad_scale)))
              << what << " dlogits";
        }
}

// The output layer's bias added on the fly (training skips its separate pass): the same as the CPU with the bias.
TEST_F(GpuKernels, CrossEntropyWithBiasMatchesCpu) {
  uint64_t seed = 10050;
  const int ignore = 0;
  for (DType dt : dtypes())
    for (const auto& c : kCases)
      for (bool in_place : {false, true}) {
        const std::size_t total = std::size_t(c.n) * c.vocab;
        const auto logits = quantize(random_floats(total, ++seed, -6, 6), dt);
        const auto bias = quantize(random_floats(c.vocab, ++seed, -2, 2), dt);
        auto targets = random_ints(c.n, ++seed, 0, c.vocab - 1);
        if (c.n > 2) targets[1] = ignore;
        const float grad_scale = 1.0f / c.n, ls = 0.1f;
        std::vector<float> ref_loss(c.n), ref_nll(c.n), ref_d(total);
        cpu.cross_entropy(DType::f32, logits.data(), bias.data(), targets.data(), c.n, c.vocab, ls, ignore,
                          grad_scale, ref_loss.data(), ref_nll.data(), ref_d.data());
        DeviceBuffer dl(gpu(), dt, logits), db(gpu(), dt, bias), dtg(gpu(), targets), loss(gpu(), DType::f32, c.n),
            nll(gpu(), DType::f32, c.n), grad(gpu(), dt, total);
        loss.poison();
        nll.poison();
        grad.poison();
        void* d = in_place ? dl.get() : grad.get();
        gpu().cross_entropy(dt, dl.get(), db.get(), dtg.i32(), c.n, c.vocab, ls, ignore, grad_scale, loss.f32(),
                            nll.f32(), d);
        const std::string what = label(dt) + " n " + std::to_string(c.n) + " vocab " + std::to_string(c.vocab) +
                                 (in_place ? " in place" : "");
        EXPECT_TRUE(within(loss.download(), ref_loss, Bound{2e-5, 2e-5})) << what << " loss";
        EXPECT_TRUE(within(nll.download(), ref_nll, Bound{2e-5, 2e-5})) << what << " nll";
        EXPECT_TRUE(within((in_place ? dl : grad).download(), ref_d, bound_for(dt, 0.1 * grad_scale)))
            << what << " dlogits";
      }
}

TEST_F(GpuKernels, CrossEntropyOutputsAreOptional) {
  uint64_t seed = 10100;
  for (DType dt : dtypes()) {
    const int n = 5, vocab = 100;
    const auto logits = quantize(random_floats(std::size_t(n) * vocab, ++seed, -4, 4), dt);
    const auto targets = random_ints(n, ++seed, 1, vocab - 1);
    std::vector<float> ref_loss(n);
    cpu.cross_entropy(DType::f32, logits.data(), nullptr, targets.data(), n, vocab, 0.1f, 0, 1.0f, ref_loss.data(),
                      nullptr, nullptr);
    DeviceBuffer dl(gpu(), dt, logits), dtg(gpu(), targets), loss(gpu(), DType::f32, n);
    loss.poison();
    gpu().cross_entropy(dt, dl.get(), nullptr, dtg.i32(), n, vocab, 0.1f, 0, 1.0f, loss.f32(), nullptr, nullptr);
    EXPECT_TRUE(within(loss.download(), ref_loss, Bound{2e-5, 2e-5})) << label(dt);
    EXPECT_EQ(dl.download(), logits) << label(dt) << ": logits changed without dlogits";
  }
}

TEST_F(GpuKernels, CrossEntropyMarksOutOfRangeTargetsWithNan) {
  if (!cuda_backend_available()) GTEST_SKIP() << "the CPU backend throws instead";
  const int n = 2, vocab = 10;
  const auto logits = random_floats(std::size_t(n) * vocab, 10200);
  DeviceBuffer dl(gpu(), DType::f32, logits), dtg(gpu(), std::vector<int32_t>{3, 10}), loss(gpu(), DType::f32, n);
  gpu().cross_entropy(DType::f32, dl.get(), nullptr, dtg.i32(), n, vocab, 0.1f, -1, 1.0f, loss.f32(), nullptr, nullptr);
  const auto got = loss.download();
  EXPECT_TRUE(std::isfinite(got[0]));
  EXPECT_TRUE(std::isnan(got[1]));
}

TEST_F(GpuKernels, LogSoftmaxMatchesCpu) {
  uint64_t seed = 10300;
  for (DType dt : dtypes())
    for (const auto& c : kCases)
      for (bool in_place : {false, true}) {
        if (in_place && dt != DType::f32) continue;  // aliasing only with fp32 logits
        const std::size_t total = std::size_t(c.n) * c.vocab;
        const auto logits = quantize(random_floats(total, ++seed, -8, 8), dt);
        std::vector<float> ref(total);
        cpu.log_softmax(DType::f32, logits.data(), c.n, c.vocab, ref.data());
        DeviceBuffer dl(gpu(), dt, logits), out(gpu(), DType::f32, total);
        out.poison();
        float* o = in_place ? dl.f32() : out.f32();
        gpu().log_softmax(dt, dl.get(), c.n, c.vocab, o);
        EXPECT_TRUE(within((in_place ? dl : out).download(), ref, Bound{1e-5, 2e-5}))
            << label(dt) << " n " << c.n << " vocab " << c.vocab << (in_place ? " in place" : "");
      }
}

}  // namespace
}  // namespace lseq::kernels::test

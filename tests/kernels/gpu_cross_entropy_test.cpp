// Label-smoothed cross-entropy and the decoding log-softmax on the device against the CPU backend: one-entry and
// 32000-entry vocabularies, padding rows (ignore_index), with and without smoothing, gradient in place, with and
// without the output bias.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct CeShape {
  int n, vocab;
};
// Vocabularies that are multiples of the 16-byte pack and whose row fits 160 KiB (64 up to 32776) take the kernel
// that stages the row in shared memory; odd sizes (1, 5, 33, 50001) and 82000 (a row over 160 KiB in every dtype)
// the general one.
const std::vector<CeShape> kCeCases = {{1, 1},     {1, 5},     {7, 33},    {5, 64},   {64, 32000},
                                       {4, 32768}, {2, 32776}, {3, 50001}, {2, 82000}};

TEST_F(GpuKernels, CrossEntropyMatchesCpu) {
  uint64_t seed = 10000;
  const int ignore = 0;  // padding id
  for (DType dt : dtypes())
    for (const auto& c : kCeCases)
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
    for (const auto& c : kCeCases)
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

// Rows padded to a 16-byte stride (the output layer's logits chunks, so that its GEMMs stay aligned): odd
// vocabularies, GPT-2's 50261 among them, take the staged kernel with a partial last pack; with and without the
// bias, in place; the columns up to the vocabulary against the CPU's dense run, and the bias gradient over the same
// padded rows.
TEST_F(GpuKernels, CrossEntropyOverPaddedRowsMatchesTheDenseCpu) {
  uint64_t seed = 10070;
  const int ignore = 0;
  for (DType dt : dtypes())
    for (const auto& c : std::vector<CeShape>{{3, 5}, {7, 33}, {4, 50261}, {2, 32001}})
      for (bool with_bias : {false, true}) {
        const int ld = (c.vocab + 7) / 8 * 8;
        const std::size_t total = std::size_t(c.n) * c.vocab;
        const auto logits = quantize(random_floats(total, ++seed, -6, 6), dt);
        const auto bias = quantize(random_floats(c.vocab, ++seed, -2, 2), dt);
        auto targets = random_ints(c.n, ++seed, 0, c.vocab - 1);
        if (c.n > 2) targets[1] = ignore;
        const float grad_scale = 1.0f / c.n, ls = 0.1f;
        std::vector<float> ref_loss(c.n), ref_nll(c.n), ref_d(total), padded(std::size_t(c.n) * ld, 1e30f);
        const float* b = with_bias ? bias.data() : nullptr;
        cpu.cross_entropy(DType::f32, logits.data(), b, targets.data(), c.n, c.vocab, ls, ignore, grad_scale,
                          ref_loss.data(), ref_nll.data(), ref_d.data());
        for (int r = 0; r < c.n; ++r)
          std::copy_n(logits.begin() + std::size_t(r) * c.vocab, c.vocab, padded.begin() + std::size_t(r) * ld);
        DeviceBuffer dl(gpu(), dt, padded), db(gpu(), dt, bias), dtg(gpu(), targets), loss(gpu(), DType::f32, c.n),
            nll(gpu(), DType::f32, c.n);
        loss.poison();
        nll.poison();
        gpu().cross_entropy(dt, dl.get(), with_bias ? db.get() : nullptr, dtg.i32(), c.n, c.vocab, ls, ignore,
                            grad_scale, loss.f32(), nll.f32(), dl.get(), ld);
        const std::string what = label(dt) + " n " + std::to_string(c.n) + " vocab " + std::to_string(c.vocab) +
                                 " ld " + std::to_string(ld) + (with_bias ? " bias" : "");
        EXPECT_TRUE(within(loss.download(), ref_loss, Bound{2e-5, 2e-5})) << what << " loss";
        EXPECT_TRUE(within(nll.download(), ref_nll, Bound{2e-5, 2e-5})) << what << " nll";
        const auto got_padded = dl.download();
        std::vector<float> got(total);
        for (int r = 0; r < c.n; ++r)
          std::copy_n(got_padded.begin() + std::size_t(r) * ld, c.vocab, got.begin() + std::size_t(r) * c.vocab);
        EXPECT_TRUE(within(got, ref_d, bound_for(dt, 0.1 * grad_scale))) << what << " dlogits";
        auto acc = random_floats(c.vocab, ++seed);
        DeviceBuffer dacc(gpu(), DType::f32, acc);
        cpu.bias_grad(DType::f32, got.data(), c.n, c.vocab, acc.data());
        gpu().bias_grad(dt, dl.get(), c.n, c.vocab, dacc.f32(), ld);
        EXPECT_TRUE(within(dacc.download(), acc, Bound{1e-5, 1e-6 * c.n + 1e-6})) << what << " bias_grad";
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
    for (const auto& c : kCeCases)
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

// Logits rows ld apart (decoding's padded rows; their padding would dominate the sum if read), out packed.
TEST_F(GpuKernels, LogSoftmaxReadsRowsLdApart) {
  uint64_t seed = 10400;
  for (DType dt : dtypes())
    for (const auto& [rows, cols, ld] : {std::tuple{64, 50257, 50264}, std::tuple{5, 1000, 1008},
                                         std::tuple{7, 33, 35}}) {
      const std::size_t total = std::size_t(rows) * cols;
      const auto packed = quantize(random_floats(total, ++seed, -8, 8), dt);
      std::vector<float> padded(std::size_t(rows) * ld, 60.0f), ref(total);
      for (int r = 0; r < rows; ++r) std::copy_n(&packed[std::size_t(r) * cols], cols, &padded[std::size_t(r) * ld]);
      cpu.log_softmax(DType::f32, packed.data(), rows, cols, ref.data());
      DeviceBuffer dl(gpu(), dt, padded), out(gpu(), DType::f32, total);
      out.poison();
      gpu().log_softmax(dt, dl.get(), rows, cols, out.f32(), ld);
      EXPECT_TRUE(within(out.download(), ref, Bound{1e-5, 2e-5})) << label(dt) << " " << cols << " ld " << ld;
    }
  DeviceBuffer dl(gpu(), DType::f32, std::vector<float>(70, 1.0f));
  EXPECT_THROW(gpu().log_softmax(DType::f32, dl.get(), 2, 33, dl.f32(), 35), lseq::Error);  // aliasing padded rows
}

}  // namespace
}  // namespace lseq::kernels::test

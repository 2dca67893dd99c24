// The CUDA backend as a whole: its name, memory and copies, and the errors of bad device indices and sizes.
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

TEST_F(GpuKernels, NameSaysDeviceAndModel) {
  if (!cuda_backend_available()) GTEST_SKIP() << "names a CUDA device";
  EXPECT_EQ(gpu().kind(), DeviceKind::cuda);
  const std::string name = gpu().name();
  EXPECT_EQ(name.rfind("cuda:0 ", 0), 0u) << name;
  EXPECT_GT(name.size(), 7u) << name;
}

TEST_F(GpuKernels, MemoryRoundTripsThroughCopies) {
  for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(1) << 20}) {
    const auto x = random_floats(n, 7000 + n);
    DeviceBuffer a(gpu(), DType::f32, x), b(gpu(), DType::f32, n);
    b.poison();
    gpu().copy(b.get(), a.get(), n * 4);
    EXPECT_EQ(b.download(), x);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.get()) % 256, 0u);
  }
  void* empty = gpu().allocate(0);
  EXPECT_NE(empty, nullptr);
  gpu().release(empty);
}

TEST_F(GpuKernels, HugeAllocationThrowsNamingTheSize) {
  try {
    gpu().allocate(std::size_t(1) << 62);
    FAIL() << "allocated 4 EiB";
  } catch (const lseq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("4611686018427387904"), std::string::npos) << e.what();
  }
  // The backend still works after the failure (no sticky error).
  const auto x = random_floats(64, 7100);
  DeviceBuffer a(gpu(), DType::f32, x);
  EXPECT_EQ(a.download(), x);
}

TEST(GpuSetup, InvalidDeviceIndexNamesTheOptionAndTheCount) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA GPU visible";
  for (int index : {-1, 4096}) {
    try {
      make_cuda_backend(index);
      FAIL() << "made a backend for device " << index;
    } catch (const lseq::Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("--devices " + std::to_string(index)), std::string::npos) << message;
      EXPECT_NE(message.find("this machine has"), std::string::npos) << message;
    }
  }
}

TEST(GpuSetup, TwoBackendsOnOneDeviceWorkSideBySide) {
  if (!cuda_backend_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto first = make_cuda_backend(0);
  auto second = make_cuda_backend(0);
  const auto x = random_floats(4096, 7200);
  DeviceBuffer a(*first, DType::f32, x), b(*second, DType::f32, x);
  first->scale(DType::f32, a.get(), x.size(), 2.0f, a.get());
  second->scale(DType::f32, b.get(), x.size(), 3.0f, b.get());
  const auto ya = a.download(), yb = b.download();
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(ya[i], 2.0f * x[i]);
    ASSERT_EQ(yb[i], 3.0f * x[i]);
  }
}

// A recording replays its ops with the arguments they had, over whatever the buffers hold at replay time: a GEMM and
// an elementwise op recorded once give, replayed over fresh inputs, what the CPU computes from those inputs.
TEST_F(GpuKernels, RecordedOpsReplayOverNewInputs) {
  const int m = 33, n = 40, k = 24;
  DeviceBuffer a(gpu(), DType::f32, std::size_t(m) * k), b(gpu(), DType::f32, std::size_t(k) * n);
  DeviceBuffer c(gpu(), DType::f32, std::size_t(m) * n), d(gpu(), DType::f32, std::size_t(m) * n);
  GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = a.get(), g.lda = k;
  g.b = b.get(), g.ldb = n;
  g.c = c.get(), g.ldc = n;
  int calls = 0;
  std::unique_ptr<OpGraph> graph = gpu().record([&] {
    ++calls;
    gpu().gemm(g);
    gpu().add(DType::f32, c.get(), c.get(), std::size_t(m) * n, d.get());
  });
  if (!cuda_backend_available()) {  // the CPU stand-in cannot record and must say so without running anything
    EXPECT_EQ(graph, nullptr);
    EXPECT_EQ(calls, 0);
    return;
  }
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(calls, 1);
  for (int round = 0; round < 3; ++round) {
    const auto x = random_floats(std::size_t(m) * k, 7200 + round), y = random_floats(std::size_t(k) * n, 7300 + round);
    a.upload(x);
    b.upload(y);
    d.poison();
    graph->replay();
    std::vector<float> want(std::size_t(m) * n);
    GemmArgs h = g;
    h.a = x.data(), h.b = y.data(), h.c = want.data();
    cpu.gemm(h);
    for (float& w : want) w *= 2;
    EXPECT_TRUE(within(d.download(), want, bound_for(DType::f32))) << "replay " << round;
  }
  EXPECT_EQ(calls, 1);  // replays never call the recording function again
}

}  // namespace
}  // namespace lseq::kernels::test

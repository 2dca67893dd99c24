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

}  // namespace
}  // namespace lseq::kernels::test

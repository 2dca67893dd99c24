// The backend as a whole: construction, names, memory, fp32-only compute ops, and the CUDA entry points of
// this build.
#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

TEST(CpuBackendSetup, MakesBackendsWithTheAskedThreadCount) {
  auto be = make_cpu_backend(3);
  EXPECT_EQ(be->kind(), DeviceKind::cpu);
  EXPECT_EQ(be->name(), "cpu (3 threads)");
  EXPECT_EQ(make_cpu_backend(1)->name(), "cpu (1 thread)");
  EXPECT_GE(static_cast<CpuBackend&>(*make_cpu_backend(0)).threads(), 1);
  EXPECT_THROW(make_cpu_backend(-1), lseq::Error);
}

TEST_F(CpuKernels, MemoryRoundTripsThroughCopies) {
  const auto x = random_floats(1000, 3000);
  void* a = backend.allocate(x.size() * 4);
  void* b = backend.allocate(x.size() * 4);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a) % 256, 0u);
  backend.copy_to_device(a, x.data(), x.size() * 4);
  backend.copy(b, a, x.size() * 4);
  auto y = poisoned(x.size());
  backend.synchronize();
  backend.copy_to_host(y.data(), b, y.size() * 4);
  EXPECT_EQ(y, x);
  backend.release(a);
  backend.release(b);
  void* empty = backend.allocate(0);
  EXPECT_NE(empty, nullptr);
  backend.release(empty);
}

TEST_F(CpuKernels, HugeAllocationThrowsNamingTheSize) {
  try {
    backend.allocate(std::size_t(1) << 62);
    FAIL() << "allocated 4 EiB";
  } catch (const lseq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("4611686018427387904"), std::string::npos) << e.what();
  }
}

TEST_F(CpuKernels, ComputeOpsRejectHalfPrecisionWithAClearMessage) {
  std::vector<float> x(16, 1.0f), y(16);
  try {
    backend.layer_norm_forward(DType::bf16, x.data(), x.data(), x.data(), 2, 8, 1e-5f, y.data(), nullptr, nullptr);
    FAIL() << "bf16 layer_norm accepted";
  } catch (const lseq::Error& e) {
    EXPECT_STREQ(e.what(), "the CPU backend computes in fp32; layer_norm_forward was asked for bf16");
  }
  EXPECT_THROW(backend.add(DType::f16, x.data(), x.data(), 16, y.data()), lseq::Error);
  EXPECT_THROW(backend.attention_softmax_forward(DType::f16, x.data(), nullptr, 1, 1, 4, 4, 4, 1.0f, false, y.data()),
               lseq::Error);
}

TEST(CudaEntryPoints, AreConsistentWithThisBuild) {
#ifndef LSEQ_WITH_CUDA
  EXPECT_FALSE(cuda_backend_available());
#endif
  if (!cuda_backend_available()) {
    try {
      make_cuda_backend(0);
      FAIL() << "a CUDA backend was made without CUDA";
    } catch (const lseq::Error& e) {
      EXPECT_NE(std::string(e.what()).find("--cpu"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lseq::kernels::test

#ifdef LSEQ_WITH_CUDA
#include "kernels/cuda/cuda_check.h"

namespace lseq::kernels::test {
namespace {

// Needs the CUDA toolkit but no GPU: error strings come from the runtime library itself.
TEST(CudaCheck, ThrowsNamingTheCallAndCudasMessage) {
  try {
    LSEQ_CUDA_CHECK(cudaErrorMemoryAllocation);
    FAIL() << "a failed CUDA call passed the check";
  } catch (const lseq::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("CUDA call cudaErrorMemoryAllocation failed: out of memory"), std::string::npos) << message;
    EXPECT_NE(message.find("backend_test.cpp:"), std::string::npos) << message;
  }
  try {
    cuda::check_cublas(CUBLAS_STATUS_NOT_SUPPORTED, "gemm (cublasGemmEx)");
    FAIL() << "a failed cuBLAS call passed the check";
  } catch (const lseq::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuBLAS call gemm (cublasGemmEx) failed: not supported"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(LSEQ_CUDA_CHECK(cudaSuccess));
}

}  // namespace
}  // namespace lseq::kernels::test
#endif

#pragma once
// Shared by the GPU kernel tests (gpu_*.cpp): a fixture that skips cleanly without a GPU, device buffers that
// copy host floats to and from the device in any element type (rounded and widened with the CPU backend's cast),
// NaN poisoning, and the error bounds of each precision. The CPU backend in fp32 is the reference of every test.
//
// Only the Backend interface and make_cuda_backend are used, so these tests compile in a CPU-only build too.
// LSEQ_TEST_GPU_WITH_CPU=1 runs them (fp32 only) against a second CPU backend where no GPU exists: that checks the
// tests themselves, not the CUDA code.
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/cpu/float_convert.h"
#include "kernels/dropout_rng.h"
#include "kernels_test_util.h"

namespace lseq::kernels::test {

// The CPU backend used for host-side casts (its cast is the reference rounding).
inline CpuBackend& host_cast_backend() {
  static CpuBackend backend(1);
  return backend;
}

// v rounded to dt and widened back: the values a dt tensor holds.
inline std::vector<float> quantize(const std::vector<float>& v, DType dt) {
  if (dt == DType::f32) return v;
  std::vector<uint16_t> bits(v.size());
  std::vector<float> out(v.size());
  host_cast_backend().cast(DType::f32, v.data(), dt, bits.data(), v.size());
  host_cast_backend().cast(dt, bits.data(), DType::f32, out.data(), v.size());
  return out;
}

// n elements of type dt on a backend, released with it.
class DeviceBuffer {
 public:
  DeviceBuffer(Backend& backend, DType dt, std::size_t n)
      : backend_(&backend), dt_(dt), n_(n), p_(backend.allocate(n * dtype_size(dt))) {}
  DeviceBuffer(Backend& backend, DType dt, const std::vector<float>& values)
      : DeviceBuffer(backend, dt, values.size()) {
    upload(values);
  }
  DeviceBuffer(Backend& backend, const std::vector<int32_t>& values)
      : DeviceBuffer(backend, DType::f32, values.size()) {  // int32: 4-byte elements, copied as they are
    backend_->copy_to_device(p_, values.data(), values.size() * 4);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : backend_(other.backend_), dt_(other.dt_), n_(other.n_), p_(std::exchange(other.p_, nullptr)) {}
  ~DeviceBuffer() {
    if (p_) backend_->release(p_);
  }

  void* get() const { return p_; }
  float* f32() const { return static_cast<float*>(p_); }
  const int32_t* i32() const { return static_cast<const int32_t*>(p_); }
  std::size_t size() const { return n_; }
  DType dtype() const { return dt_; }

  void upload(const std::vector<float>& values) {
    if (values.size() != n_) throw std::logic_error("DeviceBuffer::upload: size mismatch");
    if (dt_ == DType::f32) {
      backend_->copy_to_device(p_, values.data(), n_ * 4);
      return;
    }
    std::vector<uint16_t> bits(n_);
    host_cast_backend().cast(DType::f32, values.data(), dt_, bits.data(), n_);
    backend_->copy_to_device(p_, bits.data(), n_ * 2);
  }
  void poison() { upload(poisoned(n_)); }

  std::vector<float> download() const {
    backend_->synchronize();
    std::vector<float> out(n_);
    if (dt_ == DType::f32) {
      backend_->copy_to_host(out.data(), p_, n_ * 4);
      return out;
    }
    std::vector<uint16_t> bits(n_);
    backend_->copy_to_host(bits.data(), p_, n_ * 2);
    host_cast_backend().cast(dt_, bits.data(), DType::f32, out.data(), n_);
    return out;
  }
  std::vector<uint16_t> download_bits() const {  // 16-bit types only
    backend_->synchronize();
    std::vector<uint16_t> bits(n_);
    backend_->copy_to_host(bits.data(), p_, n_ * 2);
    return bits;
  }

 private:
  Backend* backend_;
  DType dt_;
  std::size_t n_;
  void* p_;
};

// Error bounds per precision: |got - expected| <= atol * magnitude + rtol * |expected|. 16-bit outputs are
// rounded once (bf16 keeps 8 significant bits, fp16 11) after fp32 math on the same quantised inputs.
struct Bound {
  double rtol, atol;
};

inline Bound bound_for(DType dt, double magnitude = 1.0) {
  switch (dt) {
    case DType::f32: return {1e-5, 1e-6 * magnitude};
    case DType::bf16: return {1e-2, 1e-2 * magnitude};
    case DType::f16: return {2e-3, 2e-3 * magnitude};
  }
  return {0, 0};
}

inline ::testing::AssertionResult within(const std::vector<float>& got, const std::vector<float>& expected, Bound b) {
  return all_close(got, as_double(expected), b.rtol, b.atol);
}

inline bool gpu_tests_use_cpu() {
  const char* env = std::getenv("LSEQ_TEST_GPU_WITH_CPU");
  return env && std::strcmp(env, "1") == 0;
}

class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_backend_available()) {
      gpu_ = make_cuda_backend(0);
      dtypes_ = {DType::f32, DType::bf16, DType::f16};
    } else if (gpu_tests_use_cpu()) {
      gpu_ = make_cpu_backend(3);
      dtypes_ = {DType::f32};
    } else {
      GTEST_SKIP() << "no CUDA GPU visible";
    }
  }
  Backend& gpu() { return *gpu_; }
  // Element types the device backend is tested in (all three on a GPU).
  const std::vector<DType>& dtypes() const { return dtypes_; }

  CpuBackend cpu{2};  // the reference, fp32

 private:
  std::unique_ptr<Backend> gpu_;
  std::vector<DType> dtypes_;
};

inline std::string label(DType dt) { return std::string("dtype ") + dtype_name(dt); }

}  // namespace lseq::kernels::test

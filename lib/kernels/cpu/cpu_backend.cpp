#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>

#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/thread_pool.h"
#include "util/error.h"

namespace lseq::kernels {

namespace cpu {

void require_f32(DType dt, const char* op) {
  if (dt != DType::f32) fail("the CPU backend computes in fp32; {} was asked for {}", op, dtype_name(dt));
}

void require_dropout_p(float p, const char* op) {
  if (!(p >= 0.0f && p < 1.0f)) fail("{}: dropout probability {} is outside [0, 1)", op, p);
}

}  // namespace cpu

CpuBackend::CpuBackend(int threads) {
  if (threads < 0) fail("the CPU backend was asked for {} threads; give a positive count, or 0 for all cores", threads);
  threads_ = threads > 0 ? threads : cpu::hardware_threads();
  if (threads_ < 1) threads_ = 1;
  openblas_set_num_threads(1);  // the pool splits the GEMMs (gemm_cpu.cpp): OpenBLAS's idle workers spin
}

std::string CpuBackend::name() const { return fmt::format("cpu ({} thread{})", threads_, threads_ == 1 ? "" : "s"); }

std::unique_ptr<Backend> make_cpu_backend(int threads) { return std::make_unique<CpuBackend>(threads); }

}  // namespace lseq::kernels

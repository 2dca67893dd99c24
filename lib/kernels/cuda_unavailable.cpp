// Stands in for the CUDA backend in a build without nvcc (LSEQ_CUDA=OFF or no toolkit found).
#ifndef LSEQ_WITH_CUDA
#include "kernels/backend.h"
#include "util/error.h"

namespace lseq::kernels {

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  fail("GPU device {} requested, but this lseq was built without CUDA; rebuild where nvcc is found "
       "(cmake -DLSEQ_CUDA=ON) or run on the CPU with --cpu",
       device_index);
}

bool cuda_backend_available() { return false; }

}  // namespace lseq::kernels
#endif

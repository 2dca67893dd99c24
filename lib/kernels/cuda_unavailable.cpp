// Stands in for the CUDA backend and NCCL in a build without nvcc (LSEQ_CUDA=OFF or no toolkit found).
#ifndef LSEQ_WITH_CUDA
#include "kernels/backend.h"
#include "kernels/communicator.h"
#include "util/error.h"

namespace lseq::kernels {

std::unique_ptr<Backend> make_cuda_backend(int device_index) {
  fail("GPU device {} requested, but this lseq was built without CUDA; rebuild where nvcc is found "
       "(cmake -DLSEQ_CUDA=ON) or run on the CPU with --cpu",
       device_index);
}

bool cuda_backend_available() { return false; }

std::string nccl_unique_id() {
  fail("multi-GPU training needs NCCL, but this lseq was built without CUDA; rebuild with it, or train on the CPU "
       "with --cpu");
}

std::unique_ptr<Communicator> make_nccl_communicator(Backend&, const std::string&, int, int, const NcclOptions&) {
  nccl_unique_id();
  return nullptr;
}

}  // namespace lseq::kernels
#endif

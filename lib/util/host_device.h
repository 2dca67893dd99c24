#pragma once
// Small functions that both backends must compute identically (dropout masks, top-k order, attention layouts) are
// written once in a header: compiled for host and device under nvcc, plain inline functions elsewhere.
#if defined(__CUDACC__)
#define LSEQ_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define LSEQ_HOST_DEVICE inline
#endif

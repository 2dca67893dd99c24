#pragma once
// Picks the backend from --cpu, --devices and --cpu-threads: the GPU named by --devices where lseq was built with
// CUDA and a GPU is visible, otherwise the CPU backend (said in the log).
#include <memory>

#include "core/cli/options.h"
#include "kernels/backend.h"

namespace lseq {

// Where a data-parallel rank runs, when it is not what the options alone say: its GPU (one of --devices) and, on
// the CPU, its share of the cores. -1: from the options.
struct BackendPlace {
  int device = -1;
  int cpu_threads = -1;
};

// Also checks --precision against the backend: the CPU backend computes in fp32 only (lseq::Error otherwise).
// Without a place, --devices must name one GPU (lstrain runs one process per device: apps/train/ranks.h).
std::unique_ptr<kernels::Backend> select_backend(const Options& options, const BackendPlace& place = {});

// --precision's first value: fp32, bf16 or fp16 (a second value, Marian's optimizer type, is always fp32 here).
std::string compute_precision(const Options& options);

// The compute dtype --precision names (the options normalise it to fp32, bf16 or fp16).
kernels::DType precision_dtype(const Options& options);
// Whether the options put the work on a GPU: lseq was built with CUDA, a GPU is visible and --cpu is not given.
bool runs_on_gpu(const Options& options);
// lstranslate's and lsserve's decoding threads: --decoders, or by default 4 on a GPU (one's host work and its
// batch's tail overlap the others' steps; at most the machine's cores, at least 2) and 1 on the CPU (where each
// already uses --cpu-threads).
int decoder_count(const Options& options);
// lstranslate's decoders made during a continuous translation once its input proves long (ExtraDecoders in
// core/search/translator.h), beside `loaded` ones: without --decoders, on a GPU where the default count loaded, up to
// 6 decoders in all (at most the machine's cores), once the input holds kBatchesPerDecoderBeforeExtra batches for
// each loaded decoder. 0 otherwise.
int extra_decoder_count(const Options& options, int loaded);
constexpr int kBatchesPerDecoderBeforeExtra = 6;

}  // namespace lseq

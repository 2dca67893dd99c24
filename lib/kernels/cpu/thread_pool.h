#pragma once
// The CPU backend's worker threads. Workers sleep on a condition variable between jobs instead of spinning as
// OpenMP's default wait policy does: spinning workers steal the cores OpenBLAS needs for the GEMMs (measured on a
// 2-core box: tiny.yaml trained at ~500 target words/s with OpenMP spinning, ~9,000 with passive waiting).
#include <cstdint>
#include <functional>

namespace lseq::kernels::cpu {

// Runs body(part) for part in [0, parts) on up to `parts` threads (the caller is one of them) and returns when
// all are done. Jobs from several threads are serialised.
void run_parallel(int parts, const std::function<void(int part)>& body);

int hardware_threads();

}  // namespace lseq::kernels::cpu

#pragma once
// The CPU backend's worker threads, which also split the GEMMs (OpenBLAS itself runs on one thread). Between jobs a
// worker checks for the next one for at most 50 us, then sleeps on a condition variable: OpenMP's default of
// spinning for long stole the cores from the work (on a 2-core box tiny.yaml trained at ~500 target words/s with it,
// ~9,000 with passive waiting), while a sleep and a wake-up between every one of a decoding step's short jobs cost
// more than the jobs (lstranslate, 2,000 lines: 3.3 s with them, 2.3 s with the short spin).
#include <cstdint>
#include <functional>

namespace lseq::kernels::cpu {

// Runs body(part) for part in [0, parts) on up to `parts` threads (the caller is one of them) and returns when
// all are done. Jobs from several threads are serialised.
void run_parallel(int parts, const std::function<void(int part)>& body);

int hardware_threads();

}  // namespace lseq::kernels::cpu

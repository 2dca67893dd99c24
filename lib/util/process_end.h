#pragma once
// How lstranslate and lsscore end after a run on a GPU. Destroying the decoders one object at a time (device
// buffers, recorded CUDA graphs, cuBLAS handles, streams) and then the CUDA runtime's own teardown took 0.04-0.08 s
// of a 1 s lstranslate on an H100 (bench/results/translate-e2e-h100-2026-11-26e.txt), all of it work the driver
// does anyway when the process ends. So once everything the run wrote is flushed and closed, the process ends
// there, the way compilers skip freeing their data structures at exit. Runs on the CPU end normally: nothing is
// gained there, and sanitizer builds keep checking what they free.
namespace lseq {

// Flushes every logger, std::cout, std::cerr and C's stdio, then ends the process with `code`, running no
// destructor and no atexit handler. Call it only where every output file has been closed (its errors reported)
// and no other thread is still working.
[[noreturn]] void exit_without_teardown(int code);

}  // namespace lseq

#include "core/cli/backend_select.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "util/error.h"

namespace lseq {

// --precision's first value (Marian's second, the optimizer's type, is fp32 here).
std::string compute_precision(const Options& options) {
  const std::vector<std::string> precision = options.get_strings("precision");
  if (precision.empty()) fail("--precision is empty; give fp32, bf16 or fp16");
  return precision.front();
}

std::unique_ptr<kernels::Backend> select_backend(const Options& options, const BackendPlace& place) {
  const std::string precision = compute_precision(options);
  std::unique_ptr<kernels::Backend> backend;
  if (!options.get_bool("cpu") && kernels::cuda_backend_available()) {
    const std::vector<int64_t> devices = options.get_ints("devices");
    if (place.device < 0 && devices.size() > 1) {
      fail("--devices lists {} GPUs, but this program runs on one device; give one id (lstrain trains on several)",
           devices.size());
    }
    const int device = place.device >= 0 ? place.device : devices.empty() ? 0 : static_cast<int>(devices.front());
    backend = kernels::make_cuda_backend(device);
  } else {
    const int threads = place.cpu_threads >= 0 ? place.cpu_threads : static_cast<int>(options.get_int("cpu-threads"));
    backend = kernels::make_cpu_backend(threads);
    if (precision != "fp32") {
      fail("--precision {} needs the CUDA backend; the CPU backend computes in fp32: use --precision fp32",
           precision);
    }
  }
  spdlog::info("backend: {}, precision {}", backend->name(), precision);
  return backend;
}

bool runs_on_gpu(const Options& options) {
  return !options.get_bool("cpu") && kernels::cuda_backend_available();
}

int decoder_count(const Options& options) {
  const int asked = static_cast<int>(options.get_int("decoders"));
  if (asked > 0) return asked;
  if (!runs_on_gpu(options)) return 1;
  // Four searches side by side keep an H100 busy through the steps where each waits on its host and through the
  // tail of each batch, where only a few long hypotheses are left: on 50,000 lines lstranslate translated 118k,
  // 151k and 176k target tokens/s with 2, 3 and 4 decoders (beam 4 x 128; bench/results/translate-e2e-h100-
  // 2026-11-26e.txt). Each is a thread with host work of its own, so not more than the machine has cores (nor
  // fewer than 2, the old default).
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 4 : std::clamp(static_cast<int>(cores), 2, 4);
}

int extra_decoder_count(const Options& options, int loaded) {
  // Not where the count was given, nor on a GPU that could not hold the default count.
  if (options.get_int("decoders") > 0 || !runs_on_gpu(options) || loaded < decoder_count(options)) return 0;
  // Six decoders against four on one H200 (bench/results/translate-decoders-h200-2026-11-29.txt): 50,000 lines at
  // beam 4 x 128 249-251k against 208-214k target tokens/s, 2,000 lines at 32 and 64 sentences a batch (62 and 32
  // batches) 7-18% more; but 2,000 lines at 128, beam 4 or greedy (16 batches), 8-16% fewer: there every decoder ends
  // in the tail of a few long outputs, and more of them only slow one another. Hence two more once the input holds
  // 6 batches a decoder.
  const unsigned cores = std::thread::hardware_concurrency();
  const int most = cores == 0 ? 6 : std::min(6, static_cast<int>(cores));
  return std::max(0, most - loaded);
}

kernels::DType precision_dtype(const Options& options) {
  const std::string precision = compute_precision(options);
  if (precision == "fp32") return kernels::DType::f32;
  if (precision == "bf16") return kernels::DType::bf16;
  if (precision == "fp16") return kernels::DType::f16;
  fail("--precision {} is not one of fp32, bf16, fp16", precision);
}

}  // namespace lseq

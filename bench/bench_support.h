#pragma once
// Shared by the GPU benchmarks (train_throughput, decode_throughput): the model preset loader, the backend the
// benchmark's options select, the device-memory probe and the one-line result format that bench/run-gpu-bench.sh
// and the Python peers (pytorch_train.py, hf_generate.py) share:
//   RESULT bench=<train|decode> impl=<lseq|...> model=<name> key=value ... status=<ok|failed|not-measured>
// Values never contain spaces (reasons use '_'), so a line splits on blanks and then on the first '='.
#include <fmt/format.h>

#ifdef LSEQ_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_options.h"
#include "core/cli/backend_select.h"
#include "core/cli/options.h"
#include "core/model/model_config.h"
#include "core/model/params.h"
#include "util/error.h"

namespace lseq::bench {

// The model of a preset (configs/transformer-base.yaml ...) read through lseq's own option code, with the
// vocabulary sizes (a size of 0 keeps the preset's) and --max-length overridden by the benchmark. The options are
// returned too (optimizer settings, precision, backend choice).
struct Preset {
  Options options;
  ModelConfig config;
  std::string name;  // file name without directory and .yaml, e.g. "transformer-base"
};

inline Preset load_preset(const std::string& path, VocabSizes vocab, int max_length) {
  Preset p;
  p.options = options_from_file(App::train, path);
  p.config = ModelConfig::from_yaml(p.options.yaml());
  if (vocab.src > 0) p.config.src_vocab = vocab.src;
  if (vocab.tgt > 0) p.config.tgt_vocab = vocab.tgt;
  if (max_length > 0) p.config.max_length = max_length;
  p.config.validate();
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0) name.resize(name.size() - 5);
  p.name = name;
  return p;
}

// Sets the benchmark's --cpu, --cpu-threads, --devices (the first) and `precision` on `options` (a preset's, or
// lstranslate's for a model directory), where lseq's own backend choice reads them.
inline void set_backend_options(Options& options, const Options& bench, const std::string& precision,
                                int device_id = -1) {
  options.set("cpu", YAML::Node(bench.get_bool("cpu")));
  options.set("cpu-threads", YAML::Node(bench.get_int("cpu-threads")));
  YAML::Node devices(YAML::NodeType::Sequence);
  devices.push_back(device_id >= 0 ? device_id : device(bench));
  options.set("devices", devices);
  options.set("precision", YAML::Node(precision));
}

// The backend lseq itself would pick with those options (a precision the backend cannot run throws lseq::Error,
// reported as "not measured" by the callers).
// device_id: a data-parallel rank's GPU instead of the first of --devices.
inline std::unique_ptr<kernels::Backend> make_backend(Options& options, const Options& bench,
                                                      const std::string& precision, int device_id = -1) {
  set_backend_options(options, bench, precision, device_id);
  return select_backend(options);
}

// Training FLOPs per target token as issue 6 counts them: 6 x (the weights a token passes through, encoder side
// included) = 6 x (every parameter except the embedding tables, plus the output layer's weight [Vt, dim] whether
// or not it is tied to an embedding). Attention's score/value products (which grow with length) and the
// embedding lookups are not counted, so the figure is a lower bound of the work done, as usual for MFU.
inline double train_flops_per_token(const std::vector<ParamInfo>& params, const ModelConfig& c) {
  double weights = 0;
  bool output_weight_listed = false;
  for (const ParamInfo& p : params) {
    if (p.name.rfind("embeddings.", 0) == 0) continue;
    if (p.name == "output.weight") output_weight_listed = true;
    weights += static_cast<double>(p.count);
  }
  if (!output_weight_listed) weights += static_cast<double>(c.tgt_vocab) * c.dim_emb;  // tied to an embedding
  return 6.0 * weights;
}

// Device memory in use by this process as the driver sees it: cudaMemGetInfo's free bytes at a baseline minus
// the lowest free bytes seen at any sample() since. Construct it before the backend: it first creates the CUDA
// context on the backend's GPU (which it does not count), so the baseline is taken before lseq allocates anything,
// and the peak counts every cudaMalloc of lseq (backend scratch, cuBLAS handle and workspace, parameters,
// gradients, optimizer state, workspace) rounded up to the driver's granularity, plus kernel modules loaded lazily
// at first use; other processes on the same GPU would inflate it. With cuda = false (--cpu, or no GPU) it measures
// nothing (valid() is false).
class DeviceMemoryProbe {
 public:
  DeviceMemoryProbe(bool cuda, [[maybe_unused]] int device) : cuda_(cuda && kernels::cuda_backend_available()) {
#ifdef LSEQ_WITH_CUDA
    if (cuda_ && (cudaSetDevice(device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess)) {  // creates the context
      cudaGetLastError();
      cuda_ = false;
    }
#endif
    reset();
  }
  bool valid() const { return cuda_ && baseline_ > 0; }
  void reset() {
    baseline_ = min_free_ = free_bytes();
  }
  void sample() { min_free_ = std::min(min_free_, free_bytes()); }
  // Bytes in use since the baseline at the lowest point seen.
  std::size_t peak_bytes() const { return baseline_ > min_free_ ? baseline_ - min_free_ : 0; }
  // Forgets the lowest point seen but keeps the baseline: between cases, so that each case's peak includes what
  // stays allocated (model, optimizer) but not an earlier case's freed workspace.
  void start_case() { min_free_ = free_bytes(); }

 private:
  std::size_t free_bytes() const {
#ifdef LSEQ_WITH_CUDA
    if (!cuda_) return 0;
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return free_b;
#else
    return 0;
#endif
  }
  bool cuda_;
  std::size_t baseline_ = 0, min_free_ = 0;
};

inline std::string mib(std::size_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / 1048576.0); }

// Keeps a reason free of blanks and '=' so the RESULT line still splits cleanly.
inline std::string one_word(std::string text) {
  for (char& ch : text)
    if (ch == ' ' || ch == '=' || ch == '\t' || ch == '\n') ch = '_';
  if (text.size() > 300) text.resize(300);
  return text;
}

}  // namespace lseq::bench

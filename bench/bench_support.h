#pragma once
// Shared by the GPU benchmarks (train_throughput, decode_throughput): a small `--key value` argument reader, the
// model preset loader, the device-memory probe and the one-line result format that bench/run-gpu-bench.sh and the
// Python peers (pytorch_train.py, hf_generate.py) share:
//   RESULT bench=<train|decode> impl=<lseq|...> model=<name> key=value ... status=<ok|failed|not-measured>
// Values never contain spaces (reasons use '_'), so a line splits on blanks and then on the first '='.
#include <fmt/format.h>

#ifdef LSEQ_WITH_CUDA
#include <cuda_runtime.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/cli/backend_select.h"
#include "core/cli/options.h"
#include "core/model/model_config.h"
#include "core/model/params.h"
#include "util/error.h"

namespace lseq::bench {

// `--key value` and bare `--flag` arguments; positional arguments kept in order. Unknown keys are an error (so a
// typo never silently runs the default case).
class Args {
 public:
  Args(int argc, char** argv, std::vector<std::string> flags, std::vector<std::string> keys)
      : flags_(std::move(flags)), keys_(std::move(keys)) {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a.rfind("--", 0) != 0) {
        positional_.push_back(a);
        continue;
      }
      const std::string key = a.substr(2);
      if (std::find(flags_.begin(), flags_.end(), key) != flags_.end()) {
        values_[key] = "1";
      } else if (std::find(keys_.begin(), keys_.end(), key) != keys_.end()) {
        if (i + 1 >= argc) fail("option {} needs a value", a);
        values_[key] = argv[++i];
      } else {
        fail("unknown option {}; run with --help for the list", a);
      }
    }
  }
  bool flag(const std::string& key) const { return values_.count(key) > 0; }
  std::string get(const std::string& key, const std::string& fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : it->second;
  }
  int64_t get_int(const std::string& key, int64_t fallback) const {
    auto it = values_.find(key);
    return it == values_.end() ? fallback : parse_int(it->second, key);
  }
  double get_double(const std::string& key, double fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    try {
      std::size_t used = 0;
      const double v = std::stod(it->second, &used);
      if (used == it->second.size()) return v;
    } catch (const std::exception&) {
    }
    fail("option --{} expects a number, got '{}'", key, it->second);
  }
  // A comma-separated list of integers, e.g. --tokens 4096,8192,16384.
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> fallback) const {
    auto it = values_.find(key);
    if (it == values_.end()) return fallback;
    std::vector<int64_t> out;
    std::string item;
    for (std::size_t i = 0; i <= it->second.size(); ++i) {
      if (i == it->second.size() || it->second[i] == ',') {
        out.push_back(parse_int(item, key));
        item.clear();
      } else {
        item += it->second[i];
      }
    }
    return out;
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  static int64_t parse_int(const std::string& text, const std::string& key) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used == text.size()) return v;
    } catch (const std::exception&) {
    }
    fail("option --{} expects an integer (or a comma-separated list of integers), got '{}'", key, text);
  }
  std::vector<std::string> flags_, keys_;
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// The model of a preset (configs/transformer-base.yaml ...) read through lseq's own option code, with the
// vocabulary sizes (both sides) and --max-length overridden by the benchmark. The options are returned too
// (optimizer settings, precision, backend choice).
struct Preset {
  Options options;
  ModelConfig config;
  std::string name;  // file name without directory and .yaml, e.g. "transformer-base"
};

inline Preset load_preset(const std::string& path, int64_t vocab, int max_length) {
  Preset p;
  p.options = options_from_file(App::train, path);
  p.config = ModelConfig::from_yaml(p.options.yaml());
  if (vocab > 0) p.config.src_vocab = p.config.tgt_vocab = static_cast<int>(vocab);
  if (max_length > 0) p.config.max_length = max_length;
  p.config.validate();
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0) name.resize(name.size() - 5);
  p.name = name;
  return p;
}

// Sets --cpu and --precision on the options and returns the backend lseq itself would pick (a precision the
// backend cannot run throws lseq::Error, reported as "not measured" by the callers).
inline std::unique_ptr<kernels::Backend> make_backend(Options& options, bool cpu, const std::string& precision) {
  options.set("cpu", YAML::Node(cpu));
  options.set("precision", YAML::Node(precision));
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
// context on GPU 0 (which it does not count), so the baseline is taken before lseq allocates anything, and the
// peak counts every cudaMalloc of lseq (backend scratch, cuBLAS handle and workspace, parameters, gradients,
// optimizer state, workspace) rounded up to the driver's granularity, plus kernel modules loaded lazily at first
// use; other processes on the same GPU would inflate it. With cuda = false (--cpu, or no GPU) it measures nothing
// (valid() is false).
class DeviceMemoryProbe {
 public:
  explicit DeviceMemoryProbe(bool cuda) : cuda_(cuda && kernels::cuda_backend_available()) {
#ifdef LSEQ_WITH_CUDA
    if (cuda_ && cudaFree(nullptr) != cudaSuccess) {  // creates the context
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

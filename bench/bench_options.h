#pragma once
// What every benchmark shares to read its options. The benchmarks read them through the programs' one parser as
// App::bench (lib/core/cli/options_registry.cpp: the product options they share with lstrain and lstranslate, and
// a block of their own): main is `return lseq::app_main(lseq::App::bench, argc, argv, run);`. An option that
// several benchmarks use with different defaults (--steps, --mini-batch, --dim-vocabs ...) has no default for
// App::bench; each benchmark passes its own to the readers here, and the option's help names them.
#include <cstdint>
#include <string>
#include <vector>

#include "core/cli/options.h"
#include "core/model/model_config.h"
#include "util/error.h"

namespace lseq::bench {

inline int64_t int_or(const Options& options, const std::string& key, int64_t fallback) {
  return options.has(key) ? options.get_int(key) : fallback;
}

// An empty list (not given, or given without values) is `fallback`.
inline std::vector<int64_t> ints_or(const Options& options, const std::string& key, std::vector<int64_t> fallback) {
  std::vector<int64_t> values = options.get_ints(key);
  return values.empty() ? fallback : values;
}

// --precision as given; otherwise bf16, or fp32 with --cpu (the CPU backend computes in fp32 only).
inline std::string precision(const Options& options) {
  const std::vector<std::string> given = options.has("precision") ? options.get_strings("precision")
                                                                   : std::vector<std::string>{};
  if (!given.empty()) return given.front();
  return options.get_bool("cpu") ? "fp32" : "bf16";
}

// The GPU a benchmark runs on: the first of --devices.
inline int device(const Options& options) {
  const std::vector<int64_t> devices = options.get_ints("devices");
  return devices.empty() ? 0 : static_cast<int>(devices.front());
}

struct VocabSizes {
  int src = 0, tgt = 0;
};

// --dim-vocabs: one size for both sides, or source and target; `fallback` for both when not given.
inline VocabSizes vocab_sizes(const Options& options, int fallback) {
  const std::vector<int64_t> sizes = ints_or(options, "dim-vocabs", {fallback});
  if (sizes.size() > 2) fail("--dim-vocabs takes one size (both sides) or two (source target), got {}", sizes.size());
  return {static_cast<int>(sizes.front()), static_cast<int>(sizes.back())};
}

// The model of bench_decode_step and bench_model_step: --dim-emb, --enc-depth, --dec-depth, --transformer-heads,
// --transformer-dim-ffn and --dim-vocabs (8000), lstrain's defaults for the rest.
inline ModelConfig model_config(const Options& options, int max_length) {
  ModelConfig c;
  c.dim_emb = static_cast<int>(options.get_int("dim-emb"));
  c.enc_depth = static_cast<int>(options.get_int("enc-depth"));
  c.dec_depth = static_cast<int>(options.get_int("dec-depth"));
  c.heads = static_cast<int>(options.get_int("transformer-heads"));
  c.dim_ffn = static_cast<int>(options.get_int("transformer-dim-ffn"));
  const VocabSizes vocab = vocab_sizes(options, 8000);
  c.src_vocab = vocab.src;
  c.tgt_vocab = vocab.tgt;
  c.max_length = max_length;
  c.validate();
  return c;
}

}  // namespace lseq::bench

// Decoding throughput of a trained model (issue 4's benchmark): sentences/s and target tokens/s for beam 1 and 4
// by batch size, on synthetic sources (uniform lengths 5..40, random ids below min(vocab, 1000), seeded) so that no
// vocabulary is needed. Usage: bench_decode_throughput MODEL_DIR [--cpu] [--sentences N]
// Reports; never asserts. Until the Transformer's StepDecoder is wired (core/model_loader.cpp), it says so and
// exits 0.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/beam_search.h"
#include "core/model_loader.h"
#include "data/translation_input.h"
#include "util/error.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: {} MODEL_DIR [--cpu] [--sentences N]\n", argv[0]);
    return 2;
  }
  lseq::Options options = lseq::default_options(lseq::App::translate);
  options.set("model", YAML::Node(argv[1]));
  int total = 512;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cpu")) options.set("cpu", YAML::Node(true));
    if (!std::strcmp(argv[i], "--sentences") && i + 1 < argc) total = std::stoi(argv[++i]);
  }
  std::unique_ptr<lseq::StepDecoder> decoder;
  try {
    decoder = lseq::make_step_decoder(lseq::find_model_files(argv[1]), options);
  } catch (const lseq::Error& e) {
    fmt::print("not measured: {}\n", e.what());
    return 0;
  }
  std::mt19937 rng(1234);
  const int id_limit = std::min(decoder->vocab_size(), 1000);
  std::vector<std::vector<int32_t>> sources(total);
  for (auto& s : sources) {
    s.resize(5 + rng() % 36);
    for (auto& id : s) id = 4 + static_cast<int32_t>(rng() % (id_limit - 4));
  }
  fmt::print("{:>5} {:>6} {:>10} {:>12}\n", "beam", "batch", "sent/s", "tgt tok/s");
  for (int beam : {1, 4}) {
    for (int batch : {1, 8, 32, 128}) {
      lseq::BeamSearchOptions o;
      o.beam_size = beam;
      int64_t tokens = 0;
      auto begin = std::chrono::steady_clock::now();
      for (int first = 0; first < total; first += batch) {
        std::vector<std::vector<int32_t>> part(sources.begin() + first,
                                               sources.begin() + std::min(total, first + batch));
        for (const auto& list : lseq::beam_search(*decoder, lseq::data::make_source_batch(part, {}), o))
          if (!list.empty()) tokens += static_cast<int64_t>(list[0].tokens.size()) + 1;
      }
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      fmt::print("{:>5} {:>6} {:>10.1f} {:>12.1f}\n", beam, batch, total / seconds, tokens / seconds);
    }
  }
}

// Incremental decoding on the CPU backend: planned memory, encoder time (start) and time per step of a beam-like
// loop (select re-indexing the caches each step, then step). Reports only.
// Usage: bench_decode_step [--dim-emb 256] [--enc-depth 3] [--dec-depth 3] [--transformer-heads 4]
//   [--transformer-dim-ffn 1024] [--dim-vocabs 8000] [--mini-batch 16 (sentences)] [--beam-size 4] [--src-len 32]
//   [--out-len 32 (decoding steps)] [--cpu-threads N] [--seed 1]    (the benchmarks' options: --help)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "bench_options.h"
#include "core/cli/app_main.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"

namespace lseq {
namespace {

int run(const Options& options) {
  const int sentences = static_cast<int>(bench::int_or(options, "mini-batch", 16));
  const int beam = static_cast<int>(options.get_int("beam-size"));
  const int src_len = static_cast<int>(bench::int_or(options, "src-len", 32));
  const int steps = static_cast<int>(bench::int_or(options, "out-len", 32));
  const uint64_t seed = static_cast<uint64_t>(options.get_int("seed"));
  if (sentences < 1 || steps < 2) fail("bench_decode_step needs --mini-batch >= 1 and --out-len >= 2");
  const ModelConfig c = bench::model_config(options, std::max(src_len, steps));
  auto backend = kernels::make_cpu_backend(static_cast<int>(options.get_int("cpu-threads")));
  EncoderDecoderModel model(c, *backend);
  model.init_params(seed);
  EncoderDecoderStepModel dec(model, sentences * beam, src_len, steps, sentences);

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> id(3, c.src_vocab - 1), tgt_id(3, c.tgt_vocab - 1), pick(0, beam - 1);
  std::vector<int32_t> src(static_cast<std::size_t>(sentences) * src_len), lengths(sentences, src_len);
  for (auto& x : src) x = id(rng);
  using clock = std::chrono::steady_clock;
  auto seconds = [](clock::time_point a) { return std::chrono::duration<double>(clock::now() - a).count(); };

  const auto t0 = clock::now();
  dec.start(src, lengths, sentences, src_len);
  const double start_s = seconds(t0);
  std::vector<float> log_probs;
  dec.step(std::vector<int32_t>(sentences, 2), log_probs);
  std::vector<int32_t> parents, sentence_of;
  for (int s = 0; s < sentences; ++s)
    for (int k = 0; k < beam; ++k) parents.push_back(s), sentence_of.push_back(s);
  dec.select(parents, sentence_of);
  std::vector<int32_t> tokens(static_cast<std::size_t>(sentences) * beam);
  const auto t1 = clock::now();
  for (int t = 1; t < steps; ++t) {
    for (auto& x : tokens) x = tgt_id(rng);
    dec.step(tokens, log_probs);
    if (t + 1 < steps) {  // each hypothesis continues a random one of its sentence's beam
      for (int h = 0; h < sentences * beam; ++h) parents[h] = h / beam * beam + pick(rng);
      dec.select(parents, sentence_of);
    }
  }
  const double step_s = seconds(t1) / (steps - 1);
  std::printf("backend %s\n", backend->name().c_str());
  std::printf("model dim %d depth %d/%d heads %d ffn %d vocab %d\n", c.dim_emb, c.enc_depth, c.dec_depth, c.heads,
              c.dim_ffn, c.tgt_vocab);
  std::printf("%d sentences x beam %d, source %d, %d steps: state %.1f MiB, scratch %.1f MiB\n", sentences, beam,
              src_len, steps, dec.state_bytes() / 1048576.0, dec.scratch_bytes() / 1048576.0);
  std::printf("start %.1f ms; select+step %.2f ms (%.0f hypothesis-steps/s)\n", start_s * 1e3, step_s * 1e3,
              sentences * beam / step_s);
  return 0;
}

}  // namespace
}  // namespace lseq

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, lseq::run); }

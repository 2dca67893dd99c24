// Incremental decoding on the CPU backend: planned memory, encoder time (start) and time per step of a beam-like
// loop (select re-indexing the caches each step, then step). Reports only.
// Usage: bench_decode_step [dim depth heads ffn vocab sentences beam src_len steps threads]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"

int main(int argc, char** argv) {
  using namespace lseq;
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  ModelConfig c;
  c.dim_emb = arg(1, 256);
  c.enc_depth = c.dec_depth = arg(2, 3);
  c.heads = arg(3, 4);
  c.dim_ffn = arg(4, 1024);
  c.src_vocab = c.tgt_vocab = arg(5, 8000);
  const int sentences = arg(6, 16), beam = arg(7, 4), src_len = arg(8, 32), steps = arg(9, 32), threads = arg(10, 0);
  c.max_length = std::max(src_len, steps);
  auto backend = kernels::make_cpu_backend(threads);
  EncoderDecoderModel model(c, *backend);
  model.init_params(1);
  EncoderDecoderStepModel dec(model, sentences * beam, src_len, steps, sentences);

  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> id(3, c.src_vocab - 1), pick(0, beam - 1);
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
    for (auto& x : tokens) x = id(rng);
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

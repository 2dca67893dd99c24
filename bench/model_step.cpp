// Training-step throughput of the encoder-decoder Transformer on the CPU backend, and the planned workspace.
// Reports only. One batch of --mini-batch-words / --len sentences of --len tokens on both sides; one untimed step,
// then --steps timed ones.
// Usage: bench_model_step [--dim-emb 256] [--enc-depth 3] [--dec-depth 3] [--transformer-heads 4]
//   [--transformer-dim-ffn 1024] [--dim-vocabs 8000] [--mini-batch-words 2048] [--len 32] [--cpu-threads N]
//   [--steps 5] [--seed 1]    (the benchmarks' options: bench_model_step --help)
#include <chrono>
#include <cstdio>
#include <random>

#include "bench_options.h"
#include "core/cli/app_main.h"
#include "core/model/encoder_decoder_model.h"
#include "kernels/workspace.h"

namespace lseq {
namespace {

int run(const Options& options) {
  const int tokens = static_cast<int>(bench::int_or(options, "mini-batch-words", 2048));
  const int len = static_cast<int>(options.get_int("len"));
  const int steps = static_cast<int>(bench::int_or(options, "steps", 5));
  const uint64_t seed = static_cast<uint64_t>(options.get_int("seed"));
  if (tokens < len) fail("--mini-batch-words ({}) must hold at least one sentence of --len {} tokens", tokens, len);
  const ModelConfig c = bench::model_config(options, len);
  auto backend = kernels::make_cpu_backend(static_cast<int>(options.get_int("cpu-threads")));
  EncoderDecoderModel model(c, *backend);
  model.init_params(seed);
  const std::size_t bytes = model.workspace_bytes(tokens, len);
  kernels::Workspace ws(*backend, bytes, "raise --mini-batch-words");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> id(3, c.src_vocab - 1), tgt_id(3, c.tgt_vocab - 1);
  data::Batch b;
  b.size = tokens / len;
  b.src_len = b.tgt_len = len;
  for (int i = 0; i < b.size * len; ++i) {
    b.src.push_back(id(rng));
    b.tgt_in.push_back(tgt_id(rng));
    b.tgt_out.push_back(tgt_id(rng));
  }
  b.src_lengths.assign(b.size, len);
  b.tgt_lengths.assign(b.size, len);
  model.forward_backward(b, seed, 0, 1.0f, ws);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int s = 1; s <= steps; ++s) model.forward_backward(b, seed, s, 1.0f, ws);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  std::printf("backend %s\n", backend->name().c_str());
  std::printf("model dim %d depth %d/%d heads %d ffn %d vocab %d: %zu weights\n", c.dim_emb, c.enc_depth,
              c.dec_depth, c.heads, c.dim_ffn, c.tgt_vocab, model.num_weights());
  std::printf("batch %d x %d tokens per side: workspace %.1f MiB, step %.1f ms, %.0f target tokens/s\n", b.size, len,
              bytes / 1048576.0, seconds * 1e3, b.size * len / seconds);
  return 0;
}

}  // namespace
}  // namespace lseq

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, lseq::run); }

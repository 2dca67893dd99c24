// Training-step throughput of the encoder-decoder Transformer on the CPU backend, and the planned workspace.
// Reports only. Usage: bench_model_step [dim depth heads ffn vocab tokens len threads steps]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "core/model/encoder_decoder_model.h"
#include "kernels/workspace.h"

int main(int argc, char** argv) {
  using namespace lseq;
  auto arg = [&](int i, int fallback) { return argc > i ? std::atoi(argv[i]) : fallback; };
  ModelConfig c;
  c.dim_emb = arg(1, 256);
  c.enc_depth = c.dec_depth = arg(2, 3);
  c.heads = arg(3, 4);
  c.dim_ffn = arg(4, 1024);
  c.src_vocab = c.tgt_vocab = arg(5, 8000);
  const int tokens = arg(6, 2048), len = arg(7, 32), threads = arg(8, 0), steps = arg(9, 5);
  c.max_length = len;
  auto backend = kernels::make_cpu_backend(threads);
  EncoderDecoderModel model(c, *backend);
  model.init_params(1);
  const std::size_t bytes = model.workspace_bytes(tokens, len);
  kernels::Workspace ws(*backend, bytes, "raise --mini-batch-words");
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> id(3, c.src_vocab - 1);
  data::Batch b;
  b.size = tokens / len;
  b.src_len = b.tgt_len = len;
  for (int i = 0; i < b.size * len; ++i) {
    b.src.push_back(id(rng));
    b.tgt_in.push_back(id(rng));
    b.tgt_out.push_back(id(rng));
  }
  b.src_lengths.assign(b.size, len);
  b.tgt_lengths.assign(b.size, len);
  model.forward_backward(b, 1, 0, 1.0f, ws);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  for (int s = 1; s <= steps; ++s) model.forward_backward(b, 1, s, 1.0f, ws);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  std::printf("backend %s\n", backend->name().c_str());
  std::printf("model dim %d depth %d/%d heads %d ffn %d vocab %d: %zu weights\n", c.dim_emb, c.enc_depth,
              c.dec_depth, c.heads, c.dim_ffn, c.tgt_vocab, model.num_weights());
  std::printf("batch %d x %d tokens per side: workspace %.1f MiB, step %.1f ms, %.0f target tokens/s\n", b.size, len,
              bytes / 1048576.0, seconds * 1e3, b.size * len / seconds);
  return 0;
}

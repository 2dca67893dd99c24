// Times the CPU backend's ops at the shapes of one transformer-base layer (d=512, ffn 2048, 8 heads) plus the
// output layer and the optimizer, and reports GEMM throughput (GFLOP/s) against the memory-bound ops (GB/s).
// Reports only; asserts nothing.
//   bench_kernels_cpu [--cpu-threads N] [--mini-batch 32] [--len 32] [--dim-vocabs 8000]
// (the benchmarks' options: bench_kernels_cpu --help)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_options.h"
#include "core/cli/app_main.h"
#include "kernels/cpu/cpu_backend.h"

using namespace lseq::kernels;
using lseq::Options;

namespace {

struct Result {
  std::string op;
  double ms, flops, bytes;
  bool gemm;
};

// Best of `reps` runs after one warm-up, in milliseconds.
double time_ms(const std::function<void()>& f, int reps) {
  f();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

std::vector<float> random_vector(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

int run(const Options& options) {
  const int threads = static_cast<int>(options.get_int("cpu-threads"));
  const int B = static_cast<int>(lseq::bench::int_or(options, "mini-batch", 32));
  const int L = static_cast<int>(options.get_int("len"));
  const int V = lseq::bench::vocab_sizes(options, 8000).tgt;
  if (B < 1 || V < 1) lseq::fail("--mini-batch and --dim-vocabs must be at least 1");
  const int D = 512, F = 2048, H = 8, HD = D / H, T = B * L;
  const std::size_t params = std::size_t(10) << 20;  // 10M parameters for the optimizer ops
  CpuBackend be(threads);
  std::printf("lseq CPU kernels, %s, tokens %d (batch %d x len %d), d %d, ffn %d, heads %d, vocab %d\n",
              be.name().c_str(), T, B, L, D, F, H, V);

  auto x = random_vector(std::size_t(T) * F, 1), y = random_vector(std::size_t(T) * F, 2);
  auto z = random_vector(std::size_t(T) * F, 3);
  auto w = random_vector(std::size_t(D) * F, 4), bias = random_vector(F, 5);
  auto gamma = random_vector(D, 6), beta = random_vector(D, 7), stats = random_vector(2 * T, 8);
  auto qkv = random_vector(std::size_t(T) * 3 * D, 9), heads = random_vector(std::size_t(T) * 3 * D, 10);
  auto scores = random_vector(std::size_t(B) * H * L * L, 11), dscores = random_vector(scores.size(), 12);
  auto logits = random_vector(std::size_t(T) * V, 13), dlogits = random_vector(logits.size(), 14);
  auto table = random_vector(std::size_t(V) * D, 15), out_w = random_vector(std::size_t(V) * D, 16);
  auto p = random_vector(params, 17), g = random_vector(params, 18), m = random_vector(params, 19);
  auto v2 = random_vector(params, 20);
  for (auto& e : v2) e = std::abs(e);
  std::vector<uint16_t> working(params);
  std::vector<int32_t> tokens(T), lengths(B, L);
  for (int i = 0; i < T; ++i) tokens[i] = (i * 7919) % V;
  std::vector<float> loss(T), nll(T), dbias(F, 0.0f), scalars(4);
  const Dropout drop{0.1f, 42};

  std::vector<Result> results;
  auto gemm = [&](const char* name, int m, int n, int k, bool ta, bool tb, const float* a, const float* b, float* c,
                  int batch = 1) {
    GemmArgs args;
    args.m = m, args.n = n, args.k = k, args.trans_a = ta, args.trans_b = tb, args.batch = batch;
    args.a = a, args.b = b, args.c = c;
    args.lda = ta ? m : k, args.ldb = tb ? k : n, args.ldc = n;
    args.stride_a = int64_t(m) * k, args.stride_b = int64_t(k) * n, args.stride_c = int64_t(m) * n;
    const double ms = time_ms([&] { be.gemm(args); }, 3);
    results.push_back(
        {name, ms, 2.0 * m * n * k * batch, 4.0 * batch * (double(m) * k + double(k) * n + double(m) * n), true});
  };
  auto memory_op = [&](const char* name, double bytes, const std::function<void()>& f) {
    results.push_back({name, time_ms(f, 5), 0.0, bytes, false});
  };

  // forward and backward GEMMs of one layer (self-attention projections, FFN), attention products, output layer
  gemm("gemm qkv [T,D]x[D,3D]", T, 3 * D, D, false, false, x.data(), w.data(), y.data());
  gemm("gemm attn out [T,D]x[D,D]", T, D, D, false, false, x.data(), w.data(), y.data());
  gemm("gemm ffn1 [T,D]x[D,F]", T, F, D, false, false, x.data(), w.data(), y.data());
  gemm("gemm ffn2 [T,F]x[F,D]", T, D, F, false, false, x.data(), w.data(), y.data());
  gemm("gemm ffn1 dW [D,T]x[T,F]", D, F, T, true, false, x.data(), y.data(), w.data());
  gemm("gemm ffn1 dX [T,F]x[F,D]^T", T, D, F, false, true, y.data(), w.data(), x.data());
  gemm("gemm scores (B*H)[L,HD]x[HD,L]", L, L, HD, false, true, qkv.data(), heads.data(), scores.data(), B * H);
  gemm("gemm context (B*H)[L,L]x[L,HD]", L, HD, L, false, false, scores.data(), heads.data(), qkv.data(), B * H);
  gemm("gemm output [T,D]x[V,D]^T", T, V, D, false, true, x.data(), out_w.data(), logits.data());

  const double TD = double(T) * D * 4, TF = double(T) * F * 4, S = double(scores.size()) * 4, TV = double(T) * V * 4;
  memory_op("embedding_forward", 2 * TD, [&] {
    be.embedding_forward(DType::f32, tokens.data(), B, L, table.data(), D, 22.6f, nullptr, drop, y.data());
  });
  memory_op("layer_norm_forward", 2 * TD, [&] {
    be.layer_norm_forward(DType::f32, x.data(), gamma.data(), beta.data(), T, D, 1e-6f, y.data(), stats.data(),
                          stats.data() + T);
  });
  memory_op("layer_norm_backward", 3 * TD, [&] {
    be.layer_norm_backward(DType::f32, x.data(), gamma.data(), stats.data(), stats.data() + T, y.data(), T, D, z.data(),
                           dbias.data(), dbias.data() + D, false);
  });
  memory_op("split_heads qkv", 2 * 3 * TD,
            [&] { be.split_heads(DType::f32, qkv.data(), bias.data(), B, L, L, H, HD, 3, heads.data()); });
  memory_op("merge_heads", 2 * TD,
            [&] { be.merge_heads(DType::f32, heads.data(), B, L, L, H, HD, 1, y.data(), nullptr); });
  memory_op("attention_softmax_forward", 2 * S, [&] {
    be.attention_softmax_forward(DType::f32, scores.data(), lengths.data(), B, H, L, L, L, 0.125f, false, dscores.data());
  });
  memory_op("attention_softmax_backward", 3 * S, [&] {
    be.attention_softmax_backward(DType::f32, dscores.data(), scores.data(), B * H * L, L, L, 0.125f, y.data());
  });
  memory_op("bias_gelu_dropout_forward", 2 * TF, [&] {
    be.bias_activation_dropout_forward(DType::f32, x.data(), bias.data(), T, F, Activation::gelu, drop, y.data());
  });
  memory_op("bias_gelu_dropout_backward", 3 * TF, [&] {
    be.bias_activation_dropout_backward(DType::f32, x.data(), bias.data(), y.data(), T, F, Activation::gelu, drop,
                                        z.data(), dbias.data());
  });
  memory_op("bias_relu_dropout_forward", 2 * TF, [&] {
    be.bias_activation_dropout_forward(DType::f32, x.data(), bias.data(), T, F, Activation::relu, drop, y.data());
  });
  memory_op("bias_dropout_residual_forward", 3 * TD, [&] {
    be.bias_dropout_residual_forward(DType::f32, x.data(), bias.data(), z.data(), T, D, drop, y.data());
  });
  memory_op("bias_grad", TD, [&] { be.bias_grad(DType::f32, x.data(), T, D, dbias.data()); });
  memory_op("cross_entropy (+grad)", 2 * TV, [&] {
    be.cross_entropy(DType::f32, logits.data(), nullptr, tokens.data(), T, V, 0.1f, -1, 1.0f, loss.data(), nll.data(),
                     dlogits.data());
  });
  memory_op("grad_norm 10M", params * 4.0,
            [&] { be.grad_norm(g.data(), params, 1.0f, 1.0f, &scalars[0], &scalars[1]); });
  memory_op("adam_update 10M (+bf16 copy)", params * 4.0 * 7 + params * 2.0, [&] {
    const float factor = 1.0f;
    AdamArgs a;
    a.lr = 1e-4f;
    be.adam_update(p.data(), g.data(), m.data(), v2.data(), params, a, &factor, DType::bf16, working.data());
  });
  memory_op("cast fp32->bf16 10M", params * 6.0,
            [&] { be.cast(DType::f32, p.data(), DType::bf16, working.data(), params); });

  double gemm_ms = 0, other_ms = 0;
  std::printf("%-36s %10s %10s %10s\n", "op", "ms", "GFLOP/s", "GB/s");
  for (const auto& r : results) {
    (r.gemm ? gemm_ms : other_ms) += r.ms;
    if (r.gemm)
      std::printf("%-36s %10.3f %10.1f %10s\n", r.op.c_str(), r.ms, r.flops / r.ms / 1e6, "");
    else
      std::printf("%-36s %10.3f %10s %10.2f\n", r.op.c_str(), r.ms, "", r.bytes / r.ms / 1e6);
  }
  std::printf("sum of the rows above: gemm %.1f ms, other ops %.1f ms\n", gemm_ms, other_ms);

  // One encoder layer, forward + backward, estimated from the rows: every GEMM runs three times (forward, input
  // gradient, weight gradient, all of the same size), the memory-bound ops as a pre-norm layer calls them.
  auto ms = [&](const std::string& prefix) {
    for (const auto& r : results)
      if (r.op.rfind(prefix, 0) == 0) return r.ms;
    return 0.0;
  };
  const double layer_gemm = 3 * (ms("gemm qkv") + ms("gemm attn out") + ms("gemm ffn1 [") + ms("gemm ffn2") +
                                 ms("gemm scores") + ms("gemm context"));
  const double layer_other =
      2 * (ms("layer_norm_forward") + ms("layer_norm_backward")) + ms("split_heads") + 2 * ms("merge_heads") +
      ms("attention_softmax_forward") + ms("attention_softmax_backward") + ms("bias_gelu_dropout_forward") +
      ms("bias_gelu_dropout_backward") + 2 * ms("bias_dropout_residual_forward") + 4 * ms("bias_grad");
  std::printf("one encoder layer fwd+bwd (estimate): gemm %.1f ms, other ops %.1f ms (%.0f%% of the layer)\n",
              layer_gemm, layer_other, 100.0 * layer_other / (layer_gemm + layer_other));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }

// Times the CUDA backend's ops at the shapes of one transformer-base layer (d=512, ffn 2048, 8 heads) plus the
// output layer and the optimizer, in bf16 storage (--precision fp32 or fp16 for those), and reports GEMM
// throughput (TFLOP/s) against the memory-bound ops (GB/s of their minimal traffic). Each row is the mean of
// --reps back-to-back launches between two stream synchronisations, after a warm-up. Reports only; asserts nothing.
//   bench_kernels_gpu [--devices N] [--mini-batch 256] [--len 32] [--dim-vocabs 32000] [--reps 20]
//     [--ffn-rows 16384] [--precision bf16|fp32|fp16]       (the benchmarks' options: bench_kernels_gpu --help)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_options.h"
#include "core/cli/app_main.h"
#include "kernels/backend.h"
#include "util/error.h"

using namespace lseq::kernels;
using lseq::Options;

namespace {

struct Result {
  std::string op;
  double ms, flops, bytes;
  bool gemm;
};

// Device buffers of one backend, released at the end; filled with random values (never zeros).
class Buffers {
 public:
  explicit Buffers(Backend& be) : be_(be) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> host(kStage);
    for (auto& x : host) x = dist(rng);
    stage_ = be_.allocate(kStage * 4);
    be_.copy_to_device(stage_, host.data(), kStage * 4);
  }
  ~Buffers() {
    for (void* p : owned_) be_.release(p);
    be_.release(stage_);
  }
  void* random(DType dt, std::size_t n) {
    void* p = be_.allocate(n * dtype_size(dt));
    owned_.push_back(p);
    for (std::size_t done = 0; done < n; done += kStage) {
      const std::size_t count = std::min(kStage, n - done);
      be_.cast(DType::f32, stage_, dt, static_cast<char*>(p) + done * dtype_size(dt), count);
    }
    return p;
  }
  void* filled(DType dt, std::size_t n, float value) {
    void* p = be_.allocate(n * dtype_size(dt));
    owned_.push_back(p);
    be_.fill(dt, p, n, value);
    return p;
  }
  void* ints(const std::vector<int32_t>& v) {
    void* p = be_.allocate(v.size() * 4);
    owned_.push_back(p);
    be_.copy_to_device(p, v.data(), v.size() * 4);
    return p;
  }

 private:
  static constexpr std::size_t kStage = std::size_t(1) << 22;
  Backend& be_;
  void* stage_ = nullptr;
  std::vector<void*> owned_;
};

int run(const Options& options) {
  if (!cuda_backend_available()) {
    std::printf("bench_kernels_gpu: no CUDA GPU visible (or a build without CUDA); nothing to measure\n");
    return 0;
  }
  const int device = lseq::bench::device(options), reps = static_cast<int>(options.get_int("reps"));
  const int B = static_cast<int>(lseq::bench::int_or(options, "mini-batch", 256));
  const int L = static_cast<int>(options.get_int("len"));
  const int V = lseq::bench::vocab_sizes(options, 32000).tgt;
  if (B < 1 || V < 1) lseq::fail("--mini-batch and --dim-vocabs must be at least 1");
  const std::string precision = lseq::bench::precision(options);
  const DType dt = precision == "fp32" ? DType::f32 : precision == "fp16" ? DType::f16 : DType::bf16;
  const int D = 512, F = 2048, H = 8, HD = D / H, T = B * L;
  const std::size_t params = std::size_t(60) << 20;  // ~transformer-base
  auto be_owner = make_cuda_backend(device);
  Backend& be = *be_owner;
  std::printf("lseq CUDA kernels, %s, %s, tokens %d (batch %d x len %d), d %d, ffn %d, heads %d, vocab %d\n",
              be.name().c_str(), dtype_name(dt), T, B, L, D, F, H, V);

  Buffers buf(be);
  const std::size_t es = dtype_size(dt);
  void* x = buf.random(dt, std::size_t(T) * F);
  void* y = buf.random(dt, std::size_t(T) * F);
  void* z = buf.random(dt, std::size_t(T) * F);
  void* w = buf.random(dt, std::size_t(D) * F);
  void* bias = buf.random(dt, F);
  void* gamma = buf.random(dt, D);
  void* beta = buf.random(dt, D);
  auto* stats = static_cast<float*>(buf.filled(DType::f32, 2 * std::size_t(T), 1.0f));
  void* qkv = buf.random(dt, std::size_t(T) * 3 * D);
  void* heads = buf.random(dt, std::size_t(T) * 3 * D);
  void* scores = buf.random(dt, std::size_t(B) * H * L * L);
  void* dscores = buf.random(dt, std::size_t(B) * H * L * L);
  void* logits = buf.random(dt, std::size_t(T) * V);
  void* dlogits = buf.random(dt, std::size_t(T) * V);
  auto* logprobs = static_cast<float*>(buf.filled(DType::f32, std::size_t(T) * V, 0.0f));
  void* table = buf.random(dt, std::size_t(V) * D);
  void* out_w = buf.random(dt, std::size_t(V) * D);
  auto* dparam = static_cast<float*>(buf.filled(DType::f32, std::size_t(V) * D, 0.0f));
  auto* p = static_cast<float*>(buf.random(DType::f32, params));
  auto* g = static_cast<float*>(buf.random(DType::f32, params));
  auto* m = static_cast<float*>(buf.random(DType::f32, params));
  auto* v2 = static_cast<float*>(buf.filled(DType::f32, params, 1e-4f));
  void* working = buf.filled(dt, params, 0.0f);
  std::vector<int32_t> host_tokens(T), host_lengths(B, L);
  for (int i = 0; i < T; ++i) host_tokens[i] = (i * 7919) % V;
  const auto* tokens = static_cast<const int32_t*>(buf.ints(host_tokens));
  const auto* lengths = static_cast<const int32_t*>(buf.ints(host_lengths));
  // Real batches end sentences in padding (token 0): the last quarter of every row here, thousands of repeats.
  std::vector<int32_t> host_padded(host_tokens);
  for (int i = 0; i < T; ++i)
    if (i % L >= L - L / 4) host_padded[i] = 0;
  const auto* padded = static_cast<const int32_t*>(buf.ints(host_padded));
  void* out_bias = buf.random(dt, V);
  auto* topk_ids = static_cast<int32_t*>(buf.ints(std::vector<int32_t>(std::size_t(512) * kMaxTopK, 0)));
  auto* scalars = static_cast<float*>(buf.filled(DType::f32, 4, 1.0f));
  auto* loss = static_cast<float*>(buf.filled(DType::f32, 2 * std::size_t(T), 0.0f));
  const Dropout drop{0.1f, 42};
  be.synchronize();

  auto time_ms = [&](const std::function<void()>& f) {
    f();
    be.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) f();
    be.synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::milli>(t1 - t0).count() / reps;
  };

  std::vector<Result> results;
  auto gemm = [&](const char* name, int mm, int n, int k, bool ta, bool tb, const void* a, const void* b, void* c,
                  int batch = 1, DType c_type = DType::f32) {
    GemmArgs args;
    args.m = mm, args.n = n, args.k = k, args.trans_a = ta, args.trans_b = tb, args.batch = batch;
    args.a = a, args.b = b, args.c = c, args.ab = dt, args.c_type = c_type;
    args.lda = ta ? mm : k, args.ldb = tb ? k : n, args.ldc = n;
    args.stride_a = int64_t(mm) * k, args.stride_b = int64_t(k) * n, args.stride_c = int64_t(mm) * n;
    const double ms = time_ms([&] { be.gemm(args); });
    results.push_back(
        {name, ms, 2.0 * mm * n * k * batch,
         double(es) * batch * (double(mm) * k + double(k) * n) + double(dtype_size(c_type)) * batch * double(mm) * n,
         true});
  };
  auto memory_op = [&](const char* name, double bytes, const std::function<void()>& f) {
    results.push_back({name, time_ms(f), 0.0, bytes, false});
  };

  gemm("gemm qkv [T,D]x[D,3D]", T, 3 * D, D, false, false, x, w, y, 1, dt);
  gemm("gemm attn out [T,D]x[D,D]", T, D, D, false, false, x, w, y, 1, dt);
  gemm("gemm ffn1 [T,D]x[D,F]", T, F, D, false, false, x, w, y, 1, dt);
  gemm("gemm ffn2 [T,F]x[F,D]", T, D, F, false, false, x, w, y, 1, dt);
  gemm("gemm ffn1 dW [D,T]x[T,F] (fp32 C)", D, F, T, true, false, x, y, dparam, 1, DType::f32);
  gemm("gemm ffn1 dX [T,F]x[F,D]^T", T, D, F, false, true, y, w, x, 1, dt);
  gemm("gemm scores (B*H)[L,HD]x[HD,L]", L, L, HD, false, true, qkv, heads, scores, B * H, dt);
  gemm("gemm context (B*H)[L,L]x[L,HD]", L, HD, L, false, false, scores, heads, qkv, B * H, dt);
  gemm("gemm output [T,D]x[V,D]^T", T, V, D, false, true, x, out_w, logits, 1, dt);

  const double TD = double(T) * D * es, TF = double(T) * F * es, S = double(B) * H * L * L * es,
               TV = double(T) * V * es;
  memory_op("embedding_forward", 2 * TD,
            [&] { be.embedding_forward(dt, tokens, B, L, table, D, 22.6f, nullptr, drop, y); });
  memory_op("embedding_backward", TD + double(T) * D * 8,
            [&] { be.embedding_backward(dt, tokens, B, L, D, 22.6f, drop, y, dparam, nullptr); });
  memory_op("layer_norm_forward", 2 * TD,
            [&] { be.layer_norm_forward(dt, x, gamma, beta, T, D, 1e-6f, y, stats, stats + T); });
  memory_op("layer_norm_backward", 3 * TD,
            [&] { be.layer_norm_backward(dt, x, gamma, stats, stats + T, y, T, D, z, dparam, dparam + D, false); });
  // The post-norm block's end: training kept the sum and mean for backward until round 7; now only rstd.
  memory_op("residual_layer_norm_forward (sum kept)", 4 * TD, [&] {
    be.residual_layer_norm_forward(dt, x, bias, y, T, D, drop, gamma, beta, 1e-6f, qkv, z, stats, stats + T);
  });
  memory_op("residual_layer_norm_forward (rstd only)", 3 * TD, [&] {
    be.residual_layer_norm_forward(dt, x, bias, y, T, D, drop, gamma, beta, 1e-6f, nullptr, z, nullptr, stats + T);
  });
  memory_op("layer_norm_backward_from_output", 3 * TD, [&] {
    be.layer_norm_backward_from_output(dt, x, gamma, beta, stats + T, y, T, D, z, dparam, dparam + D);
  });
  // ... and with the post-norm block's dropout tail (d_o = dropout(dx), bias gradient) in the same kernel, against
  // the separate bias_dropout_residual_backward it replaces.
  memory_op("residual_layer_norm_backward (fused tail)", 4 * TD, [&] {
    be.residual_layer_norm_backward(dt, x, gamma, beta, stats + T, y, T, D, drop, z, qkv, dparam, dparam + D,
                                    dparam + 2 * D);
  });
  memory_op("bias_dropout_residual_backward", 2 * TD,
            [&] { be.bias_dropout_residual_backward(dt, z, T, D, drop, qkv, dparam + 2 * D); });
  memory_op("split_heads qkv (+bias)", 2 * 3 * TD, [&] { be.split_heads(dt, qkv, bias, B, L, L, H, HD, 3, heads); });
  memory_op("merge_heads", 2 * TD, [&] { be.merge_heads(dt, heads, B, L, L, H, HD, 1, y, nullptr); });
  memory_op("attention_softmax_forward", 2 * S,
            [&] { be.attention_softmax_forward(dt, scores, lengths, B, H, L, L, L, 0.125f, false, dscores); });
  memory_op("attention_softmax_backward", 3 * S,
            [&] { be.attention_softmax_backward(dt, dscores, scores, B * H * L, L, L, 0.125f, y); });
  // The fused attention core (one kernel per direction) that replaces the two score/context GEMMs and the softmax
  // forward above, and in backward the softmax backward and four batched GEMMs (scores, dP, dV, dQ, dK products).
  if (Backend::fused_attention_fits(L, L, HD)) {
    auto* lse = static_cast<float*>(buf.filled(DType::f32, std::size_t(B) * H * L, 0.0f));
    // q, k, v as column ranges of the [T, 3D] projection (what the attention layer passes), d_qkv likewise.
    auto cols = [&](void* base, int i) { return static_cast<char*>(base) + std::size_t(i) * D * es; };
    const double slice_flops = 2.0 * L * L * HD * B * H;  // one [L,L,HD] product over all slices
    results.push_back({"attention_forward (fused core)", time_ms([&] {
                         be.attention_forward(dt, qkv, 3 * D, cols(qkv, 1), cols(qkv, 2), 3 * D, lengths, B, H, L, L,
                                              HD, 0.125f, false, y, lse);
                       }),
                       2 * slice_flops, 4 * TD + double(B) * H * L * 4, false});
    results.push_back({"attention_backward (fused core)", time_ms([&] {
                         be.attention_backward(dt, qkv, 3 * D, cols(qkv, 1), cols(qkv, 2), 3 * D, lengths, B, H, L, L,
                                               HD, 0.125f, false, lse, y, z, heads, cols(heads, 1), cols(heads, 2));
                       }),
                       5 * slice_flops, 7 * TD + double(B) * H * L * 4, false});
    // Causal (decoder self-attention): the products skip the tiles right of the diagonal, about half the FLOPs.
    results.push_back({"attention_forward (fused core, causal)", time_ms([&] {
                         be.attention_forward(dt, qkv, 3 * D, cols(qkv, 1), cols(qkv, 2), 3 * D, nullptr, B, H, L, L,
                                              HD, 0.125f, true, y, lse);
                       }),
                       slice_flops, 4 * TD + double(B) * H * L * 4, false});
    results.push_back({"attention_backward (fused core, causal)", time_ms([&] {
                         be.attention_backward(dt, qkv, 3 * D, cols(qkv, 1), cols(qkv, 2), 3 * D, nullptr, B, H, L, L,
                                               HD, 0.125f, true, lse, y, z, heads, cols(heads, 1), cols(heads, 2));
                       }),
                       2.5 * slice_flops, 7 * TD + double(B) * H * L * 4, false});
  }
  memory_op("bias_gelu_dropout_forward", 2 * TF,
            [&] { be.bias_activation_dropout_forward(dt, x, bias, T, F, Activation::gelu, drop, y); });
  memory_op("bias_gelu_dropout_backward", 3 * TF,
            [&] { be.bias_activation_dropout_backward(dt, x, bias, y, T, F, Activation::gelu, drop, z, dparam); });
  memory_op("bias_relu_dropout_forward", 2 * TF,
            [&] { be.bias_activation_dropout_forward(dt, x, bias, T, F, Activation::relu, drop, y); });
  memory_op("bias_dropout_residual_forward", 3 * TD,
            [&] { be.bias_dropout_residual_forward(dt, x, bias, z, T, D, drop, y); });
  memory_op("bias_grad", TD, [&] { be.bias_grad(dt, x, T, D, dparam); });
  memory_op("cross_entropy (+grad)", 2 * TV,
            [&] { be.cross_entropy(dt, logits, nullptr, tokens, T, V, 0.1f, -1, 1.0f, loss, loss + T, dlogits); });
  memory_op("cross_entropy (+grad, +bias)", 2 * TV, [&] {
    be.cross_entropy(dt, logits, out_bias, tokens, T, V, 0.1f, -1, 1.0f, loss, loss + T, dlogits);
  });
  memory_op("embedding_backward (1/4 padding)", TD + double(T) * D * 8,
            [&] { be.embedding_backward(dt, padded, B, L, D, 22.6f, drop, y, dparam, nullptr); });
  static const char* const topk_names[] = {"topk_log_softmax 32 rows, k 5", "topk_log_softmax 128 rows, k 5",
                                           "topk_log_softmax 512 rows, k 5"};
  for (int i = 0; i < 3; ++i)
    if (const int rows = 32 << (2 * i); rows <= T)
      memory_op(topk_names[i], double(rows) * V * es,
                [&] { be.topk_log_softmax(dt, logits, rows, V, 5, 4, 3, logprobs, topk_ids, loss); });
  memory_op("log_softmax (fp32 out)", TV + double(T) * V * 4, [&] { be.log_softmax(dt, logits, T, V, logprobs); });
  memory_op("grad_norm 60M", params * 4.0, [&] { be.grad_norm(g, params, 1.0f, 1.0f, scalars, scalars + 1); });
  memory_op("adam_update 60M (+working copy)", params * 4.0 * 7 + params * double(es), [&] {
    AdamArgs a;
    a.lr = 1e-9f;
    be.adam_update(p, g, m, v2, params, a, scalars + 2, dt, working);
  });
  memory_op("cast fp32->working 60M", params * (4.0 + es), [&] { be.cast(DType::f32, p, dt, working, params); });
  memory_op("reduce_sum 60M", params * 4.0, [&] { be.reduce_sum(g, params, scalars + 3, false); });

  // The feed-forward block's first layer at the transformer-base training shape (16384 tokens, --ffn-rows): bias and
  // ReLU as a separate pass after a cuBLAS GEMM (the path of GELU, swish and FFN dropout) against the cuBLASLt
  // RELU_BIAS epilogue (the ReLU path). Backward through W_out and the ReLU (W_out's own gradient is the same on both
  // paths, left out): the unfused path recomputes a = relu(h + b) and takes relu' from h + b; the fused one reads
  // relu' off the saved a. Rows count 2*rows*D*F flops.
  {
    const int R = static_cast<int>(options.get_int("ffn-rows"));
    const std::size_t RF = std::size_t(R) * F;
    void* fx = buf.random(dt, std::size_t(R) * D);
    void* fdo = buf.random(dt, std::size_t(R) * D);
    void* fh = buf.random(dt, RF);
    void* fa = buf.random(dt, RF);
    void* fd = buf.random(dt, RF);
    void* fdh = buf.random(dt, RF);
    auto* fdb = static_cast<float*>(buf.filled(DType::f32, F, 0.0f));
    const Dropout none{};
    auto product = [&](bool trans_b, int n, int k, const void* a, const void* b, void* c) {
      GemmArgs args;  // c[R, n] = a[R, k] op(b)
      args.trans_b = trans_b;
      args.m = R, args.n = n, args.k = k;
      args.a = a, args.lda = k, args.b = b, args.ldb = trans_b ? k : n, args.c = c, args.ldc = n;
      args.ab = args.c_type = dt;
      be.gemm(args);
    };
    auto ffn_row = [&](const std::string& name, const std::function<void()>& f) {
      const double ms = time_ms(f);
      results.push_back({name + " [" + std::to_string(R) + "x" + std::to_string(D) + "x" + std::to_string(F) + "]", ms,
                         2.0 * R * D * F, double(es) * (2.0 * RF + double(R) * D), true});
    };
    ffn_row("ffn1 fwd: gemm + bias_relu", [&] {
      product(true, F, D, fx, w, fh);
      be.bias_activation_dropout_forward(dt, fh, bias, R, F, Activation::relu, none, fa);
    });
    ffn_row("ffn1 fwd: linear_bias_relu",
            [&] { be.linear_bias_forward(dt, fx, w, bias, R, D, F, BiasActivation::relu, fa); });
    ffn_row("ffn bwd: relu recompute + gemm + relu'(h + b)", [&] {
      be.bias_activation_dropout_forward(dt, fh, bias, R, F, Activation::relu, none, fa);
      product(false, F, D, fdo, w, fd);
      be.bias_activation_dropout_backward(dt, fh, bias, fd, R, F, Activation::relu, none, fdh, fdb);
    });
    ffn_row("ffn bwd: gemm + relu'(a)", [&] {
      product(false, F, D, fdo, w, fd);
      be.bias_activation_dropout_backward(dt, fa, nullptr, fd, R, F, Activation::relu, none, fdh, fdb);
    });
  }

  double gemm_ms = 0, other_ms = 0;
  std::printf("%-56s %10s %10s %10s\n", "op", "ms", "TFLOP/s", "GB/s");
  for (const auto& r : results) {
    (r.gemm ? gemm_ms : other_ms) += r.ms;
    if (r.flops > 0)
      std::printf("%-56s %10.4f %10.1f %10.1f\n", r.op.c_str(), r.ms, r.flops / r.ms / 1e9, r.bytes / r.ms / 1e6);
    else
      std::printf("%-56s %10.4f %10s %10.1f\n", r.op.c_str(), r.ms, "", r.bytes / r.ms / 1e6);
  }
  std::printf("sum of the rows above: gemm %.2f ms, other ops %.2f ms\n", gemm_ms, other_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }

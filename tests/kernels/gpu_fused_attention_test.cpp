// The fused attention core on the device (attention_forward/backward) against the CPU backend's twin (itself
// checked against the composed path in fused_attention_test.cpp), in fp32, bf16 and fp16: context, lse and the three
// head gradients, the attention layer's padded head lengths, key lengths with a sentence without keys, causal
// masks, and transformer-base shapes (8 heads of 64, lengths 8..128). Outputs are poisoned with NaN before each run.
#include <algorithm>

#include "fused_attention_cases.h"
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

const std::vector<FusedCase> kShapes = {
    {2, 3, 3, 3, 8, false, false},   {2, 2, 9, 9, 16, true, true},    {3, 2, 13, 13, 4, false, true},
    {2, 2, 30, 30, 32, true, false}, {3, 2, 9, 30, 16, false, true},  {2, 2, 5, 13, 24, false, true},
    {2, 1, 3, 7, 64, false, true},   {1, 2, 128, 128, 64, true, true}, {2, 2, 17, 100, 40, false, true}};

// Transformer-base slices: 8 heads of 64, self-attention (causal and not) and cross-attention.
std::vector<FusedCase> base_shapes() {
  std::vector<FusedCase> shapes;
  for (int len : {8, 24, 57, 128}) {
    shapes.push_back({64, 8, len, len, 64, false, true});
    shapes.push_back({64, 8, len, len, 64, true, true});
  }
  shapes.push_back({64, 8, 33, 71, 64, false, true});
  return shapes;
}

struct DeviceRun {
  std::vector<float> context, lse, d_q, d_k, d_v;
};

// Inputs rounded to dt on both sides; the device's outputs poisoned first.
DeviceRun run_device(Backend& gpu, DType dt, const FusedInputs& in) {
  const FusedCase& c = in.c;
  DeviceBuffer q(gpu, dt, in.q), k(gpu, dt, in.k), v(gpu, dt, in.v), d_context(gpu, dt, in.d_context),
      lengths(gpu, in.k_lengths), context(gpu, dt, in.q_size()), lse(gpu, DType::f32, in.rows()),
      d_q(gpu, dt, in.q_size()), d_kv(gpu, dt, 2 * in.k_size());  // d_k and d_v consecutive, as in cross-attention
  context.poison(), lse.poison(), d_q.poison(), d_kv.poison();
  const int32_t* kl = c.with_lengths ? lengths.i32() : nullptr;
  void* d_v = static_cast<char*>(d_kv.get()) + in.k_size() * dtype_size(dt);
  gpu.attention_forward(dt, q.get(), k.get(), v.get(), kl, c.batch, c.heads, in.lq, in.lk, c.k_len, c.head_dim,
                        in.scale, c.causal, context.get(), lse.f32());
  gpu.attention_backward(dt, q.get(), k.get(), v.get(), kl, c.batch, c.heads, in.lq, in.lk, c.k_len, c.head_dim,
                         in.scale, c.causal, lse.f32(), d_context.get(), d_q.get(), d_kv.get(), d_v);
  const auto kv = d_kv.download();
  return {context.download(), lse.download(), d_q.download(),
          std::vector<float>(kv.begin(), kv.begin() + in.k_size()), std::vector<float>(kv.begin() + in.k_size(), kv.end())};
}

double max_abs(const std::vector<float>& x) {
  double m = 0.0;
  for (float e : x) m = std::max(m, double(std::fabs(e)));
  return m;
}

void expect_matches_cpu(CpuBackend& cpu, Backend& gpu, DType dt, const FusedCase& c, uint64_t seed) {
  FusedInputs in = make_fused_inputs(c, seed);
  in.q = quantize(in.q, dt), in.k = quantize(in.k, dt), in.v = quantize(in.v, dt);
  in.d_context = quantize(in.d_context, dt);
  DeviceRun ref{std::vector<float>(in.q_size()), std::vector<float>(in.rows()), std::vector<float>(in.q_size()),
                std::vector<float>(in.k_size()), std::vector<float>(in.k_size())};
  cpu.attention_forward(DType::f32, in.q.data(), in.k.data(), in.v.data(), in.lengths(), c.batch, c.heads, in.lq,
                        in.lk, c.k_len, c.head_dim, in.scale, c.causal, ref.context.data(), ref.lse.data());
  cpu.attention_backward(DType::f32, in.q.data(), in.k.data(), in.v.data(), in.lengths(), c.batch, c.heads, in.lq,
                         in.lk, c.k_len, c.head_dim, in.scale, c.causal, ref.lse.data(), in.d_context.data(),
                         ref.d_q.data(), ref.d_k.data(), ref.d_v.data());
  const DeviceRun got = run_device(gpu, dt, in);
  const std::string what = label(dt) + " " + c.name();
  // The context averages values of magnitude <= 1; gradients are bounded relative to their largest element (sums
  // over up to 128 rows of products rounded to dt, as the composed path rounds them).
  EXPECT_TRUE(within(got.context, ref.context, bound_for(dt, 1.0))) << what << " context";
  for (std::size_t i = 0; i < ref.lse.size(); ++i)  // rows without keys: -inf on both
    if (std::isinf(ref.lse[i])) ASSERT_EQ(got.lse[i], ref.lse[i]) << what << " lse row " << i;
  EXPECT_TRUE(lse_close(got.lse, as_double(ref.lse), 1e-5, 1e-5)) << what << " lse";
  EXPECT_TRUE(within(got.d_q, ref.d_q, bound_for(dt, 2 * max_abs(ref.d_q)))) << what << " d_q";
  EXPECT_TRUE(within(got.d_k, ref.d_k, bound_for(dt, 2 * max_abs(ref.d_k)))) << what << " d_k";
  EXPECT_TRUE(within(got.d_v, ref.d_v, bound_for(dt, 2 * max_abs(ref.d_v)))) << what << " d_v";
  // Padded query rows of d_q (their d_context rows are 0) and the rows of padding keys are exactly 0, not just finite.
  EXPECT_TRUE(padding_rows_zero(got.d_q, in.slices, c.q_len, in.lq, c.head_dim)) << what << " d_q";
  EXPECT_TRUE(padding_rows_zero(got.d_k, in.slices, c.k_len, in.lk, c.head_dim)) << what << " d_k";
  EXPECT_TRUE(padding_rows_zero(got.d_v, in.slices, c.k_len, in.lk, c.head_dim)) << what << " d_v";
  // Padded query rows of the context are finite (merge_heads drops them).
  for (float x : got.context) ASSERT_TRUE(std::isfinite(x)) << what << ": context not finite";
}

TEST_F(GpuKernels, FusedAttentionMatchesCpu) {
  uint64_t seed = 12100;
  for (DType dt : dtypes())
    for (const auto& c : kShapes) expect_matches_cpu(cpu, gpu(), dt, c, seed += 10);
}

TEST_F(GpuKernels, FusedAttentionMatchesCpuAtTransformerBaseShapes) {
  uint64_t seed = 12300;
  for (DType dt : dtypes())
    for (const auto& c : base_shapes()) expect_matches_cpu(cpu, gpu(), dt, c, seed += 10);
}

// No atomics: the same inputs give the same bits.
TEST_F(GpuKernels, FusedAttentionIsReproducible) {
  const FusedCase c{16, 8, 57, 71, 64, false, true};
  for (DType dt : dtypes()) {
    FusedInputs in = make_fused_inputs(c, 12500);
    const DeviceRun a = run_device(gpu(), dt, in), b = run_device(gpu(), dt, in);
    const std::vector<float>* outputs[][2] = {
        {&a.context, &b.context}, {&a.lse, &b.lse}, {&a.d_q, &b.d_q}, {&a.d_k, &b.d_k}, {&a.d_v, &b.d_v}};
    for (const auto& pair : outputs)
      for (std::size_t i = 0; i < pair[0]->size(); ++i)
        ASSERT_EQ(float_bits((*pair[0])[i]), float_bits((*pair[1])[i])) << label(dt) << " element " << i;
  }
}

}  // namespace
}  // namespace lseq::kernels::test

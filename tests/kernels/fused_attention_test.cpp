// The fused attention core of the CPU backend (attention_forward/backward) over the projections' token-major rows
// against the composed path it replaces (gemm + attention_softmax_forward + gemm over head buffers, and the backward
// sequence of AttentionLayer), lse against a double reference; self-shaped (one qkv buffer; causal and not) and
// cross-shaped cases, key lengths with a sentence without keys, lengths up to the GPU's whole-slice kernels (128)
// and past them (the lengths its tiled kernels take).
#include <algorithm>
#include <cmath>

#include "fused_attention_cases.h"
#include "kernels/dropout_rng.h"

namespace lseq::kernels::test {
namespace {

// Lengths from 3 to 300; head sizes below, at and between tiles of 16.
const std::vector<FusedCase> kCases = {
    {2, 3, 3, 3, 8, false, false},   {2, 2, 9, 9, 16, true, true},    {3, 2, 13, 13, 4, false, true},
    {2, 2, 30, 30, 32, true, false}, {3, 2, 9, 30, 16, false, true},  {2, 2, 5, 13, 24, false, true},
    {2, 1, 3, 7, 64, false, true},   {1, 2, 128, 128, 64, true, false}, {2, 2, 300, 300, 16, true, true},
    {2, 1, 40, 170, 24, false, true}};

FusedOutputs run_fused(Backend& backend, const FusedInputs& in, const Dropout& drop = Dropout{}) {
  const FusedCase& c = in.c;
  FusedOutputs out = poisoned_outputs(in);
  float* d_kv = c.fused_qkv() ? out.d_q_buf.data() : out.d_kv_buf.data();
  backend.attention_forward(DType::f32, in.q(), in.ldq, in.k(), in.v(), in.ldkv, in.lengths(), c.batch, c.heads,
                            c.q_len, c.k_len, c.head_dim, in.scale, c.causal, out.context.data(), out.lse.data(),
                            nullptr, nullptr, drop);
  backend.attention_backward(DType::f32, in.q(), in.ldq, in.k(), in.v(), in.ldkv, in.lengths(), c.batch, c.heads,
                             c.q_len, c.k_len, c.head_dim, in.scale, c.causal, out.lse.data(), out.context.data(),
                             in.d_context.data(),
                             out.d_q_buf.data(), d_kv + in.k_offset(), d_kv + in.v_offset(), nullptr, nullptr,
                             drop);
  return out;
}

// Packed rows (q_offsets, k_offsets) give the padded run's values at the rows they keep, and write no other row.
TEST_F(CpuKernels, FusedAttentionOverPackedRowsMatchesThePaddedRun) {
  uint64_t seed = 2300;
  for (const auto& c : packed_cases()) {
    FusedInputs in = make_fused_inputs(c, seed += 10);
    const PackedFused p = pack_case(in);
    const FusedOutputs want = packed_reference(in, p, run_fused(backend, in));
    const PackedOperands op = packed_operands(in, p);
    const bool self = c.fused_qkv();
    const int32_t* q_offsets = self ? p.q_offsets.data() : nullptr;
    FusedOutputs got{poisoned(want.context.size()), poisoned(want.lse.size()), poisoned(want.d_q_buf.size()),
                     poisoned(want.d_kv_buf.size())};
    const std::vector<float>& k_buf = self ? op.q_buf : op.kv_buf;
    float* d_kv = self ? got.d_q_buf.data() : got.d_kv_buf.data();
    backend.attention_forward(DType::f32, op.q_buf.data(), in.ldq, k_buf.data() + in.k_offset(),
                              k_buf.data() + in.v_offset(), in.ldkv, in.lengths(), c.batch, c.heads, c.q_len, c.k_len,
                              c.head_dim, in.scale, c.causal, got.context.data(), got.lse.data(), q_offsets,
                              p.k_offsets.data());
    backend.attention_backward(DType::f32, op.q_buf.data(), in.ldq, k_buf.data() + in.k_offset(),
                               k_buf.data() + in.v_offset(), in.ldkv, in.lengths(), c.batch, c.heads, c.q_len,
                               c.k_len, c.head_dim, in.scale, c.causal, got.lse.data(), got.context.data(),
                               op.d_context.data(),
                               got.d_q_buf.data(), d_kv + in.k_offset(), d_kv + in.v_offset(), q_offsets,
                               p.k_offsets.data());
    EXPECT_TRUE(all_close(got.context, as_double(want.context), 1e-6, 1e-7)) << c.name() << " context";
    EXPECT_TRUE(all_close(got.d_q_buf, as_double(want.d_q_buf), 1e-6, 1e-7)) << c.name() << " d_q (d_qkv)";
    EXPECT_TRUE(all_close(got.d_kv_buf, as_double(want.d_kv_buf), 1e-6, 1e-7)) << c.name() << " d_kv";
    for (std::size_t i = 0; i < want.lse.size(); ++i) {
      if (std::isnan(want.lse[i])) {
        EXPECT_TRUE(std::isnan(got.lse[i])) << c.name() << " lse row " << i << " of a dropped query was written";
      } else {
        EXPECT_EQ(got.lse[i], want.lse[i]) << c.name() << " lse row " << i;
      }
    }
  }
}

TEST_F(CpuKernels, FusedAttentionMatchesTheComposedPath) {
  uint64_t seed = 2100;
  for (const auto& c : kCases) {
    const FusedInputs in = make_fused_inputs(c, seed += 10);
    ASSERT_TRUE(Backend::fused_attention_fits(c.q_len, c.k_len, c.head_dim)) << c.name();
    const HeadOutputs ref = composed_attention(backend, in);
    const FusedOutputs out = run_fused(backend, in);
    const HeadOutputs got = head_outputs(in, out);  // every element of the token-major buffers is in some head
    EXPECT_TRUE(all_close(got.context, to_double(ref.context), 1e-5, 1e-6)) << c.name() << " context";
    EXPECT_TRUE(lse_close(out.lse, reference_lse(in), 1e-6, 1e-6)) << c.name() << " lse";
    EXPECT_TRUE(all_close(got.d_q, to_double(ref.d_q), 1e-4, 1e-6)) << c.name() << " d_q";
    EXPECT_TRUE(all_close(got.d_k, to_double(ref.d_k), 1e-4, 1e-6)) << c.name() << " d_k";
    EXPECT_TRUE(all_close(got.d_v, to_double(ref.d_v), 1e-5, 1e-6)) << c.name() << " d_v";
    EXPECT_TRUE(masked_key_rows_zero(in, got.d_k)) << c.name() << " d_k";
    EXPECT_TRUE(masked_key_rows_zero(in, got.d_v)) << c.name() << " d_v";
    double norm = 0.0;
    for (float g : got.d_k) norm += double(g) * g;
    EXPECT_GT(norm, 1e-6) << c.name() << ": nothing to compare";
  }
}

// A sentence without keys (k_lengths 0): its context rows and gradients are 0, its lse -inf, never NaN.
TEST_F(CpuKernels, FusedAttentionSentenceWithoutKeysGivesZeros) {
  const FusedInputs in = make_fused_inputs({2, 2, 5, 6, 8, false, true}, 2200);
  ASSERT_EQ(in.k_lengths[0], 0);
  const FusedOutputs out = run_fused(backend, in);
  const HeadOutputs got = head_outputs(in, out);
  const std::size_t first = std::size_t(in.c.heads) * in.c.q_len;  // head rows of batch entry 0
  for (std::size_t r = 0; r < first; ++r) {
    EXPECT_EQ(out.lse[r], -std::numeric_limits<float>::infinity()) << "row " << r;
    for (int d = 0; d < in.c.head_dim; ++d) {
      EXPECT_EQ(got.context[r * in.c.head_dim + d], 0.0f) << "row " << r;
      EXPECT_EQ(got.d_q[r * in.c.head_dim + d], 0.0f) << "row " << r;
    }
  }
  for (std::size_t e = 0; e < std::size_t(in.c.heads) * in.c.k_len * in.c.head_dim; ++e) {
    EXPECT_EQ(got.d_k[e], 0.0f);
    EXPECT_EQ(got.d_v[e], 0.0f);
  }
  for (std::size_t r = first; r < out.lse.size(); ++r) EXPECT_TRUE(std::isfinite(out.lse[r])) << "row " << r;
}

// Dropout on the probabilities, which the fused core takes past 128 positions: the context is sum_j P_ij M_ij v_j
// with P from the undropped run's lse (unchanged by dropout) and M the counter masks at (s*q_len + i)*k_len + j;
// the gradients match central differences of sum(context * d_context) (the masks are fixed by the key); shorter
// slices are refused (their callers drop out composed).
TEST_F(CpuKernels, FusedAttentionDropsOutProbabilitiesPast128Positions) {
  const FusedCase c{2, 2, 140, 140, 8, true, true};
  FusedInputs in = make_fused_inputs(c, 2500);
  const Dropout drop{0.3f, 0x5eedULL};
  ASSERT_TRUE(Backend::fused_attention_drops(c.q_len, c.k_len));
  const FusedOutputs plain = run_fused(backend, in), dropped = run_fused(backend, in, drop);
  EXPECT_EQ(dropped.lse, plain.lse);
  double max_diff = 0.0, max_err = 0.0;
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h)
      for (int i = 0; i < c.q_len; ++i) {
        const int s = b * c.heads + h;
        const int keys = std::min(in.k_lengths[b], i + 1);
        const float* qi = in.q() + (std::size_t(b) * c.q_len + i) * in.ldq + h * c.head_dim;
        for (int d = 0; d < c.head_dim; ++d) {
          double want = 0.0;
          for (int j = 0; j < keys; ++j) {
            const float* kj = in.k() + (std::size_t(b) * c.k_len + j) * in.ldkv + h * c.head_dim;
            const float* vj = in.v() + (std::size_t(b) * c.k_len + j) * in.ldkv + h * c.head_dim;
            double score = 0.0;
            for (int e = 0; e < c.head_dim; ++e) score += double(qi[e]) * kj[e];
            const double p = std::exp(in.scale * score - plain.lse[std::size_t(s) * c.q_len + i]);
            want += p * dropout_multiplier(drop.key, (uint64_t(s) * c.q_len + i) * c.k_len + j, drop.p) * vj[d];
          }
          const std::size_t at = (std::size_t(b) * c.q_len + i) * in.width + h * c.head_dim + d;
          max_err = std::max(max_err, std::fabs(dropped.context[at] - want));
          max_diff = std::max(max_diff, double(std::fabs(dropped.context[at] - plain.context[at])));
        }
      }
  EXPECT_LT(max_err, 1e-5);
  EXPECT_GT(max_diff, 1e-2) << "dropout changed nothing";
  // Central differences of f = sum(context * d_context) over q, k and v elements (one qkv buffer).
  auto objective = [&](const FusedInputs& x) {
    FusedOutputs o = poisoned_outputs(x);
    backend.attention_forward(DType::f32, x.q(), x.ldq, x.k(), x.v(), x.ldkv, x.lengths(), c.batch, c.heads, c.q_len,
                              c.k_len, c.head_dim, x.scale, c.causal, o.context.data(), o.lse.data(), nullptr,
                              nullptr, drop);
    double f = 0.0;
    for (std::size_t e = 0; e < o.context.size(); ++e) f += double(o.context[e]) * x.d_context[e];
    return f;
  };
  const auto picks = random_ints(24, 2501, 0, static_cast<int>(in.q_buf.size()) - 1);
  const float step = 1e-2f;
  for (int e : picks) {
    FusedInputs up = in, down = in;
    up.q_buf[e] += step, down.q_buf[e] -= step;
    const double numeric = (objective(up) - objective(down)) / (2.0 * step);
    EXPECT_NEAR(dropped.d_q_buf[e], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "element " << e;
  }
  const FusedCase short_case{1, 1, 128, 128, 8, true, false};
  const FusedInputs short_in = make_fused_inputs(short_case, 2502);
  EXPECT_THROW(run_fused(backend, short_in, drop), lseq::Error);
}

TEST_F(CpuKernels, FusedAttentionFitsHeadsUpTo64) {
  constexpr int kMax = Backend::kMaxFusedAttentionLen;
  EXPECT_TRUE(Backend::fused_attention_fits(1, 1, 1));
  EXPECT_TRUE(Backend::fused_attention_fits(128, 128, 64));
  EXPECT_TRUE(Backend::fused_attention_fits(32, 96, 40));
  EXPECT_TRUE(Backend::fused_attention_fits(2048, 2048, 64));
  EXPECT_TRUE(Backend::fused_attention_fits(kMax, kMax, 64));
  EXPECT_FALSE(Backend::fused_attention_fits(kMax + 1, 32, 64));
  EXPECT_FALSE(Backend::fused_attention_fits(32, kMax + 1, 64));
  EXPECT_FALSE(Backend::fused_attention_fits(32, 32, 65));
  EXPECT_FALSE(Backend::fused_attention_fits(0, 32, 64));
  std::vector<float> x(136 * 128, 0.5f), lse(136, 0.0f);
  EXPECT_THROW(backend.attention_forward(DType::f32, x.data(), 128, x.data(), x.data(), 128, nullptr, 1, 1, 136, 8,
                                         128, 1.0f, false, x.data(), lse.data()),
               lseq::Error);  // head_dim above the limit
  EXPECT_THROW(backend.attention_forward(DType::f32, x.data(), 32, x.data(), x.data(), 64, nullptr, 1, 1, 8, 8, 64,
                                         1.0f, false, x.data(), lse.data()),
               lseq::Error);  // a row stride shorter than heads x head_dim
}

}  // namespace
}  // namespace lseq::kernels::test

#pragma once
// Shared by the CPU and GPU tests of the fused attention core (Backend::attention_forward/backward): shapes, inputs
// in the attention layer's padded head layout (padding rows 0), and the composed reference (batched gemm around
// attention_softmax_forward/backward, as AttentionLayer composes the core without the fused op).
#include <cmath>
#include <limits>
#include <string>

#include "kernels_test_util.h"

namespace lseq::kernels::test {

struct FusedCase {
  int batch, heads, q_len, k_len, head_dim;
  bool causal, with_lengths;
  std::string name() const {
    return std::to_string(batch) + "x" + std::to_string(heads) + " q " + std::to_string(q_len) + " k " +
           std::to_string(k_len) + " hd " + std::to_string(head_dim) + (causal ? " causal" : "") +
           (with_lengths ? " lengths" : "");
  }
};

// The attention layer's padded head length (AttentionLayer: multiples of 8 above 8).
inline int padded_len(int len) { return len <= 8 ? len : (len + 7) / 8 * 8; }

struct FusedInputs {
  FusedCase c;
  int lq = 0, lk = 0, slices = 0;
  float scale = 0.0f;
  std::vector<float> q, k, v, d_context;  // [slices][lq or lk][head_dim], padding rows 0
  std::vector<int32_t> k_lengths;          // [batch]; the first 0 (a sentence without keys) when batch > 1
  const int32_t* lengths() const { return c.with_lengths ? k_lengths.data() : nullptr; }
  std::size_t q_size() const { return std::size_t(slices) * lq * c.head_dim; }
  std::size_t k_size() const { return std::size_t(slices) * lk * c.head_dim; }
  std::size_t rows() const { return std::size_t(slices) * lq; }
};

// Rows [len, padded) of every slice of a [slices][padded][head_dim] buffer set to 0.
inline void zero_padding_rows(std::vector<float>& x, int slices, int len, int padded, int head_dim) {
  for (int s = 0; s < slices; ++s)
    for (std::size_t e = std::size_t(len) * head_dim; e < std::size_t(padded) * head_dim; ++e)
      x[std::size_t(s) * padded * head_dim + e] = 0.0f;
}

inline FusedInputs make_fused_inputs(const FusedCase& c, uint64_t seed) {
  FusedInputs in;
  in.c = c;
  in.lq = padded_len(c.q_len), in.lk = padded_len(c.k_len), in.slices = c.batch * c.heads;
  in.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  in.q = random_floats(in.q_size(), seed, -1.5f, 1.5f);
  in.k = random_floats(in.k_size(), seed + 1, -1.5f, 1.5f);
  in.v = random_floats(in.k_size(), seed + 2);
  in.d_context = random_floats(in.q_size(), seed + 3);
  zero_padding_rows(in.q, in.slices, c.q_len, in.lq, c.head_dim);
  zero_padding_rows(in.d_context, in.slices, c.q_len, in.lq, c.head_dim);
  zero_padding_rows(in.k, in.slices, c.k_len, in.lk, c.head_dim);
  zero_padding_rows(in.v, in.slices, c.k_len, in.lk, c.head_dim);
  in.k_lengths = random_ints(c.batch, seed + 4, 1, c.k_len);
  if (c.batch > 1) in.k_lengths[0] = 0, in.k_lengths[1] = c.k_len;
  return in;
}

struct FusedOutputs {
  std::vector<float> context, lse, d_q, d_k, d_v;
};

// One batched product over the slices: c[s] = op(a[s]) op(b[s]) with row-major [m,k] / [k,n] after op.
inline void slice_product(Backend& backend, int slices, bool trans_a, bool trans_b, int m, int n, int k,
                          const float* a, const float* b, float* c) {
  GemmArgs g;
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.m = m, g.n = n, g.k = k;
  g.a = a, g.lda = trans_a ? m : k, g.stride_a = int64_t(m) * k;
  g.b = b, g.ldb = trans_b ? k : n, g.stride_b = int64_t(k) * n;
  g.c = c, g.ldc = n, g.stride_c = int64_t(m) * n;
  g.batch = slices;
  backend.gemm(g);
}

// The composed core on the CPU backend (fp32): context and head gradients (lse is left empty).
inline FusedOutputs composed_attention(CpuBackend& cpu, const FusedInputs& in) {
  const FusedCase& c = in.c;
  const int hd = c.head_dim;
  std::vector<float> probs(in.rows() * in.lk), d_probs(probs.size());
  FusedOutputs out{std::vector<float>(in.q_size()), {}, std::vector<float>(in.q_size()),
                   std::vector<float>(in.k_size()), std::vector<float>(in.k_size())};
  slice_product(cpu, in.slices, false, true, in.lq, in.lk, hd, in.q.data(), in.k.data(), probs.data());
  cpu.attention_softmax_forward(DType::f32, probs.data(), in.lengths(), c.batch, c.heads, in.lq, c.k_len, in.lk,
                                in.scale, c.causal, probs.data());
  slice_product(cpu, in.slices, false, false, in.lq, hd, in.lk, probs.data(), in.v.data(), out.context.data());
  slice_product(cpu, in.slices, true, false, in.lk, hd, in.lq, probs.data(), in.d_context.data(), out.d_v.data());
  slice_product(cpu, in.slices, false, true, in.lq, in.lk, hd, in.d_context.data(), in.v.data(), d_probs.data());
  cpu.attention_softmax_backward(DType::f32, probs.data(), d_probs.data(), static_cast<int>(in.rows()), c.k_len,
                                 in.lk, in.scale, d_probs.data());
  slice_product(cpu, in.slices, false, false, in.lq, hd, in.lk, d_probs.data(), in.k.data(), out.d_q.data());
  slice_product(cpu, in.slices, true, false, in.lk, hd, in.lq, d_probs.data(), in.q.data(), out.d_k.data());
  return out;
}

// lse in double: log sum_j exp(scale q_i.k_j) over the row's unmasked keys, -inf without keys.
inline std::vector<double> reference_lse(const FusedInputs& in) {
  const FusedCase& c = in.c;
  const int hd = c.head_dim;
  std::vector<double> lse(in.rows());
  for (int s = 0; s < in.slices; ++s)
    for (int i = 0; i < in.lq; ++i) {
      int valid = c.with_lengths ? std::min(in.k_lengths[s / c.heads], c.k_len) : c.k_len;
      if (c.causal) valid = std::min(valid, i + 1);
      std::vector<double> x(valid);
      double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (int j = 0; j < valid; ++j) {
        double dot = 0.0;
        for (int d = 0; d < hd; ++d)
          dot += double(in.q[(std::size_t(s) * in.lq + i) * hd + d]) * in.k[(std::size_t(s) * in.lk + j) * hd + d];
        x[j] = in.scale * dot;
        max = std::max(max, x[j]);
      }
      for (int j = 0; j < valid; ++j) sum += std::exp(x[j] - max);
      lse[std::size_t(s) * in.lq + i] = valid > 0 ? max + std::log(sum) : -std::numeric_limits<double>::infinity();
    }
  return lse;
}

// got against expected where -inf must match exactly and the finite entries within rtol/atol.
inline ::testing::AssertionResult lse_close(std::vector<float> got, std::vector<double> expected, double rtol,
                                            double atol) {
  if (got.size() != expected.size()) return ::testing::AssertionFailure() << "size mismatch";
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::isinf(expected[i])) {
      if (!(std::isinf(got[i]) && got[i] < 0))
        return ::testing::AssertionFailure() << "row " << i << " without keys: lse " << got[i] << ", not -inf";
      got[i] = 0.0f, expected[i] = 0.0;
    }
  return all_close(got, expected, rtol, atol);
}

// Rows [len, padded) of every slice are exactly 0.
inline ::testing::AssertionResult padding_rows_zero(const std::vector<float>& x, int slices, int len, int padded,
                                                    int head_dim) {
  for (int s = 0; s < slices; ++s)
    for (std::size_t e = std::size_t(len) * head_dim; e < std::size_t(padded) * head_dim; ++e)
      if (x[std::size_t(s) * padded * head_dim + e] != 0.0f)
        return ::testing::AssertionFailure() << "slice " << s << " padding element " << e << " is "
                                             << x[std::size_t(s) * padded * head_dim + e];
  return ::testing::AssertionSuccess();
}

}  // namespace lseq::kernels::test

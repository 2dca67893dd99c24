#pragma once
// Shared by the CPU and GPU tests of the fused attention core (Backend::attention_forward/backward): shapes, inputs
// in the projections' token-major layout the core reads (self-shaped cases: q, k, v column ranges of one fused qkv
// buffer; cross-shaped: q alone and k, v in one kv buffer), conversions to the [slices][len][head_dim] head layout,
// and the composed reference (batched gemm around attention_softmax_forward/backward over head buffers, as
// AttentionLayer composes the core without the fused op).
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
  // Self-shaped (equal lengths): q, k, v in one [rows][3*heads*head_dim] buffer, as the self-attention projection
  // writes them.
  bool fused_qkv() const { return q_len == k_len; }
};

// The token-major operands of a case and where q, k, v (and their gradients) sit in them.
struct FusedLayout {
  FusedCase c;
  int slices = 0, width = 0, ldq = 0, ldkv = 0;
  std::size_t q_rows() const { return std::size_t(c.batch) * c.q_len; }
  std::size_t k_rows() const { return std::size_t(c.batch) * c.k_len; }
  std::size_t q_buffer() const { return q_rows() * ldq; }                     // qkv or q
  std::size_t kv_buffer() const { return c.fused_qkv() ? 0 : k_rows() * ldkv; }  // kv (none when fused)
  std::size_t context_size() const { return q_rows() * width; }
  std::size_t lse_size() const { return std::size_t(slices) * c.q_len; }
  // Element offsets of k and v in their buffer (the qkv buffer when fused, else the kv buffer).
  std::size_t k_offset() const { return c.fused_qkv() ? width : 0; }
  std::size_t v_offset() const { return c.fused_qkv() ? 2 * std::size_t(width) : width; }
};

inline FusedLayout fused_layout(const FusedCase& c) {
  FusedLayout l;
  l.c = c;
  l.slices = c.batch * c.heads, l.width = c.heads * c.head_dim;
  l.ldq = c.fused_qkv() ? 3 * l.width : l.width;
  l.ldkv = c.fused_qkv() ? 3 * l.width : 2 * l.width;
  return l;
}

// Head layout [slices][len][head_dim] of the column ranges at `offset` of a token-major buffer with row stride ld.
inline std::vector<float> to_heads(const std::vector<float>& rows, std::size_t offset, int ld, int batch, int len,
                                   int heads, int head_dim) {
  std::vector<float> out(std::size_t(batch) * heads * len * head_dim);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < len; ++i)
        for (int d = 0; d < head_dim; ++d)
          out[((std::size_t(b) * heads + h) * len + i) * head_dim + d] =
              rows[offset + (std::size_t(b) * len + i) * ld + std::size_t(h) * head_dim + d];
  return out;
}

struct FusedInputs : FusedLayout {
  float scale = 0.0f;
  std::vector<float> q_buf, kv_buf, d_context;  // token-major: [q_rows][ldq], [k_rows][ldkv], [q_rows][width]
  std::vector<int32_t> k_lengths;               // [batch]; the first 0 (a sentence without keys) when batch > 1
  const int32_t* lengths() const { return c.with_lengths ? k_lengths.data() : nullptr; }
  const std::vector<float>& k_buf() const { return c.fused_qkv() ? q_buf : kv_buf; }
  const float* q() const { return q_buf.data(); }
  const float* k() const { return k_buf().data() + k_offset(); }
  const float* v() const { return k_buf().data() + v_offset(); }
  // The same inputs in the head layout, for the composed reference.
  std::vector<float> q_heads() const { return to_heads(q_buf, 0, ldq, c.batch, c.q_len, c.heads, c.head_dim); }
  std::vector<float> k_heads() const {
    return to_heads(k_buf(), k_offset(), ldkv, c.batch, c.k_len, c.heads, c.head_dim);
  }
  std::vector<float> v_heads() const {
    return to_heads(k_buf(), v_offset(), ldkv, c.batch, c.k_len, c.heads, c.head_dim);
  }
  std::vector<float> d_context_heads() const {
    return to_heads(d_context, 0, width, c.batch, c.q_len, c.heads, c.head_dim);
  }
};

inline FusedInputs make_fused_inputs(const FusedCase& c, uint64_t seed) {
  FusedInputs in;
  static_cast<FusedLayout&>(in) = fused_layout(c);
  in.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  in.q_buf = random_floats(in.q_buffer(), seed, -1.5f, 1.5f);
  in.kv_buf = random_floats(in.kv_buffer(), seed + 1, -1.5f, 1.5f);
  in.d_context = random_floats(in.context_size(), seed + 3);
  in.k_lengths = random_ints(c.batch, seed + 4, 1, c.k_len);
  if (c.batch > 1) in.k_lengths[0] = 0, in.k_lengths[1] = c.k_len;
  return in;
}

// What the fused ops write, in their layouts: context and lse, and the gradients in the inputs' buffers.
struct FusedOutputs {
  std::vector<float> context, lse, d_q_buf, d_kv_buf;
};

inline FusedOutputs poisoned_outputs(const FusedLayout& l) {
  return {poisoned(l.context_size()), poisoned(l.lse_size()), poisoned(l.q_buffer()), poisoned(l.kv_buffer())};
}

// Outputs (or the composed reference) in the head layout [slices][len][head_dim].
struct HeadOutputs {
  std::vector<float> context, d_q, d_k, d_v;
};

inline HeadOutputs head_outputs(const FusedLayout& l, const FusedOutputs& out) {
  const FusedCase& c = l.c;
  const std::vector<float>& d_kv = c.fused_qkv() ? out.d_q_buf : out.d_kv_buf;
  return {to_heads(out.context, 0, l.width, c.batch, c.q_len, c.heads, c.head_dim),
          to_heads(out.d_q_buf, 0, l.ldq, c.batch, c.q_len, c.heads, c.head_dim),
          to_heads(d_kv, l.k_offset(), l.ldkv, c.batch, c.k_len, c.heads, c.head_dim),
          to_heads(d_kv, l.v_offset(), l.ldkv, c.batch, c.k_len, c.heads, c.head_dim)};
}

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

// The composed core on the CPU backend (fp32) over head buffers of the unpadded lengths: context and head gradients.
inline HeadOutputs composed_attention(CpuBackend& cpu, const FusedInputs& in) {
  const FusedCase& c = in.c;
  const int hd = c.head_dim, lq = c.q_len, lk = c.k_len;
  const std::vector<float> q = in.q_heads(), k = in.k_heads(), v = in.v_heads(), d_context = in.d_context_heads();
  const std::size_t rows = std::size_t(in.slices) * lq;
  std::vector<float> probs(rows * lk), d_probs(probs.size());
  HeadOutputs out{std::vector<float>(q.size()), std::vector<float>(q.size()), std::vector<float>(k.size()),
                  std::vector<float>(k.size())};
  slice_product(cpu, in.slices, false, true, lq, lk, hd, q.data(), k.data(), probs.data());
  cpu.attention_softmax_forward(DType::f32, probs.data(), in.lengths(), c.batch, c.heads, lq, lk, lk, in.scale,
                                c.causal, probs.data());
  slice_product(cpu, in.slices, false, false, lq, hd, lk, probs.data(), v.data(), out.context.data());
  slice_product(cpu, in.slices, true, false, lk, hd, lq, probs.data(), d_context.data(), out.d_v.data());
  slice_product(cpu, in.slices, false, true, lq, lk, hd, d_context.data(), v.data(), d_probs.data());
  cpu.attention_softmax_backward(DType::f32, probs.data(), d_probs.data(), static_cast<int>(rows), lk, lk, in.scale,
                                 d_probs.data());
  slice_product(cpu, in.slices, false, false, lq, hd, lk, d_probs.data(), k.data(), out.d_q.data());
  slice_product(cpu, in.slices, true, false, lk, hd, lq, d_probs.data(), q.data(), out.d_k.data());
  return out;
}

// lse in double: log sum_j exp(scale q_i.k_j) over the row's unmasked keys, -inf without keys; [slices][q_len].
inline std::vector<double> reference_lse(const FusedInputs& in) {
  const FusedCase& c = in.c;
  const int hd = c.head_dim;
  const std::vector<float> q = in.q_heads(), k = in.k_heads();
  std::vector<double> lse(in.lse_size());
  for (int s = 0; s < in.slices; ++s)
    for (int i = 0; i < c.q_len; ++i) {
      int valid = c.with_lengths ? std::min(in.k_lengths[s / c.heads], c.k_len) : c.k_len;
      if (c.causal) valid = std::min(valid, i + 1);
      std::vector<double> x(valid);
      double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
      for (int j = 0; j < valid; ++j) {
        double dot = 0.0;
        for (int d = 0; d < hd; ++d)
          dot += double(q[(std::size_t(s) * c.q_len + i) * hd + d]) * k[(std::size_t(s) * c.k_len + j) * hd + d];
        x[j] = in.scale * dot;
        max = std::max(max, x[j]);
      }
      for (int j = 0; j < valid; ++j) sum += std::exp(x[j] - max);
      lse[std::size_t(s) * c.q_len + i] = valid > 0 ? max + std::log(sum) : -std::numeric_limits<double>::infinity();
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

// The rows of masked keys (j >= k_lengths[b]) in a head-layout key/value gradient are exactly 0.
inline ::testing::AssertionResult masked_key_rows_zero(const FusedInputs& in, const std::vector<float>& heads) {
  const FusedCase& c = in.c;
  if (!c.with_lengths) return ::testing::AssertionSuccess();
  for (int s = 0; s < in.slices; ++s)
    for (int j = std::min(in.k_lengths[s / c.heads], c.k_len); j < c.k_len; ++j)
      for (int d = 0; d < c.head_dim; ++d) {
        const float x = heads[(std::size_t(s) * c.k_len + j) * c.head_dim + d];
        if (x != 0.0f)
          return ::testing::AssertionFailure() << "slice " << s << " masked key " << j << " has gradient " << x;
      }
  return ::testing::AssertionSuccess();
}

// ---- packed (padding-free) rows ----
// A case with key lengths run over packed rows: sentence b keeps the first k_lengths[b] rows of the key/value
// operands (k_offsets) and, self-shaped, of the query operands too (each sentence's queries are its keys, as in
// the training encoder); cross-shaped queries stay padded. The padded run of the same inputs is the reference, its
// d_context zero on the query rows packing drops (their gradient never reaches a real row in a model either).
struct PackedFused {
  std::vector<int32_t> k_offsets, q_offsets;  // batch + 1 each; q_offsets empty when the queries stay padded
  std::vector<int32_t> k_index, q_index;      // the padded row of each packed row
};

inline std::vector<int32_t> packed_offsets(const std::vector<int32_t>& lengths, int len,
                                           std::vector<int32_t>& index) {
  std::vector<int32_t> offsets{0};
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    const int n = std::min(lengths[b], len);
    for (int i = 0; i < n; ++i) index.push_back(static_cast<int32_t>(b) * len + i);
    offsets.push_back(offsets.back() + n);
  }
  return offsets;
}

inline PackedFused pack_case(FusedInputs& in) {
  const FusedCase& c = in.c;
  PackedFused p;
  p.k_offsets = packed_offsets(in.k_lengths, c.k_len, p.k_index);
  if (c.fused_qkv()) {
    p.q_offsets = packed_offsets(in.k_lengths, c.q_len, p.q_index);
    for (int b = 0; b < c.batch; ++b)  // the dropped query rows' gradient: 0
      for (int i = std::min(in.k_lengths[b], c.q_len); i < c.q_len; ++i)
        std::fill_n(in.d_context.begin() + (std::size_t(b) * c.q_len + i) * in.width, in.width, 0.0f);
  }
  return p;
}

// Rows `index` of a [rows][ld] buffer, in order.
inline std::vector<float> pack_rows(const std::vector<float>& rows, int ld, const std::vector<int32_t>& index) {
  std::vector<float> out;
  for (int32_t r : index)
    out.insert(out.end(), rows.begin() + std::size_t(r) * ld, rows.begin() + (std::size_t(r) + 1) * ld);
  return out;
}

// The packed run's inputs (from the padded ones) and the padded reference's outputs as the packed run lays them
// out; lse keeps its [slices][q_len] layout, NaN at the rows packing drops (compared where finite or -inf alike).
struct PackedOperands {
  std::vector<float> q_buf, kv_buf, d_context;
};
inline PackedOperands packed_operands(const FusedInputs& in, const PackedFused& p) {
  const bool self = in.c.fused_qkv();
  return {self ? pack_rows(in.q_buf, in.ldq, p.q_index) : in.q_buf,
          self ? in.kv_buf : pack_rows(in.kv_buf, in.ldkv, p.k_index),
          self ? pack_rows(in.d_context, in.width, p.q_index) : in.d_context};
}
inline FusedOutputs packed_reference(const FusedInputs& in, const PackedFused& p, const FusedOutputs& padded) {
  const bool self = in.c.fused_qkv();
  FusedOutputs out{self ? pack_rows(padded.context, in.width, p.q_index) : padded.context, padded.lse,
                   self ? pack_rows(padded.d_q_buf, in.ldq, p.q_index) : padded.d_q_buf,
                   self ? padded.d_kv_buf : pack_rows(padded.d_kv_buf, in.ldkv, p.k_index)};
  if (self)
    for (int s = 0; s < in.slices; ++s)
      for (int i = std::min(in.k_lengths[s / in.c.heads], in.c.q_len); i < in.c.q_len; ++i)
        out.lse[std::size_t(s) * in.c.q_len + i] = std::numeric_limits<float>::quiet_NaN();
  return out;
}

// Packed self-shaped (causal and not) and cross-shaped cases, a sentence without keys (rows) first; the last two
// past the GPU's whole-slice kernels (128 positions).
inline std::vector<FusedCase> packed_cases() {
  return {{3, 2, 13, 13, 16, false, true},  {4, 2, 30, 30, 32, true, true},   {3, 2, 9, 30, 16, false, true},
          {2, 1, 17, 100, 40, false, true}, {8, 8, 57, 57, 64, false, true},  {8, 8, 33, 71, 64, false, true},
          {3, 2, 150, 150, 64, true, true}, {3, 2, 40, 200, 32, false, true}};
}

}  // namespace lseq::kernels::test

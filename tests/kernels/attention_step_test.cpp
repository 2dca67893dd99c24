// Backend::attention_step on the CPU against a double reference: shared slices (kv_index), per-row key lengths
// (a row without keys, a length past k_len, a single key), one key, gaps between slices, large and odd head
// dimensions; and its argument checks.
#include "attention_step_reference.h"

namespace lseq::kernels::test {
namespace {

TEST_F(CpuKernels, AttentionStepMatchesDoubleReference) {
  uint64_t seed = 4400;
  const std::vector<AttentionStepCase> cases = {
      {1, 1, 1, 1, 1, false, false},      {3, 2, 8, 1, 8, true, false},       {5, 4, 16, 9, 16 * 12, false, true},
      {7, 3, 5, 13, 5 * 13, true, true},  {6, 8, 64, 40, 64 * 40, true, true}, {4, 2, 256, 3, 256 * 3, false, true},
      {2, 1, 32, 300, 32 * 301, false, false}};
  for (const auto& c : cases) {
    const auto in = make_inputs(c, seed += 10);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    auto context = poisoned(std::size_t(c.rows) * c.heads * c.head_dim);
    backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride,
                           c.shared ? in.kv_index.data() : nullptr, c.with_lengths ? in.k_lengths.data() : nullptr,
                           c.rows, c.heads, c.head_dim, c.k_len, scale, context.data());
    const auto expected = attention_step_reference(c, in, scale);
    EXPECT_TRUE(all_close(context, expected, 1e-5, 1e-6)) << describe(c);
    if (c.with_lengths)  // row 0 has no keys: exactly 0 (not NaN)
      for (int e = 0; e < c.heads * c.head_dim; ++e) ASSERT_EQ(context[e], 0.0f) << describe(c) << " element " << e;
  }
}

TEST_F(CpuKernels, AttentionStepWithOneKeyReturnsItsValue) {
  const AttentionStepCase c{4, 2, 6, 1, 6 * 4, false, false};
  const auto in = make_inputs(c, 4500);
  std::vector<float> context(std::size_t(c.rows) * c.heads * c.head_dim);
  backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride, nullptr, nullptr, c.rows,
                         c.heads, c.head_dim, c.k_len, 0.5f, context.data());
  for (int i = 0; i < c.rows * c.heads; ++i)
    for (int d = 0; d < c.head_dim; ++d)
      ASSERT_EQ(context[std::size_t(i) * c.head_dim + d], in.v[std::size_t(i) * c.slice_stride + d]) << i << " " << d;
}

TEST_F(CpuKernels, AttentionStepRejectsBadArguments) {
  std::vector<float> buf(4096, 0.5f), out(4096);
  const std::vector<int32_t> negative = {0, -1};
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 257, nullptr, nullptr, 1, 1, 257,
                                      1, 1.0f, out.data()),
               Error);  // head_dim past kMaxStepHeadDim
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 7, nullptr, nullptr, 1, 1, 4, 2,
                                      1.0f, out.data()),
               Error);  // two keys of 4 do not fit a stride of 7
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 8, negative.data(), nullptr, 1,
                                      2, 4, 2, 1.0f, out.data()),
               Error);  // negative slice index
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 8, nullptr, nullptr, -1, 2, 4, 2,
                                      1.0f, out.data()),
               Error);
  EXPECT_THROW(backend.attention_step(DType::bf16, buf.data(), buf.data(), buf.data(), 8, nullptr, nullptr, 1, 2, 4, 2,
                                      1.0f, out.data()),
               Error);  // the CPU backend computes in fp32 only
}

}  // namespace
}  // namespace lseq::kernels::test

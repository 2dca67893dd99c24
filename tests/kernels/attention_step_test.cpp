// Backend::attention_step on the CPU against a double reference: shared slices (kv_index), position-origin tables
// (origin: every key from a random row's slice), per-row key lengths (a row without keys, a length past k_len, a
// single key), one key, gaps between slices, large and odd head dimensions; and its argument checks.
#include "attention_step_reference.h"

namespace lseq::kernels::test {
namespace {

TEST_F(CpuKernels, AttentionStepMatchesDoubleReference) {
  uint64_t seed = 4400;
  const std::vector<AttentionStepCase> cases = {
      {1, 1, 1, 1, 1, false, false},      {3, 2, 8, 1, 8, true, false},       {5, 4, 16, 9, 16 * 12, false, true},
      {7, 3, 5, 13, 5 * 13, true, true},  {6, 8, 64, 40, 64 * 40, true, true}, {4, 2, 256, 3, 256 * 3, false, true},
      {2, 1, 32, 300, 32 * 301, false, false},
      // origin tables: beam search's self-attention caches, read where each position was written
      {1, 1, 1, 1, 1, false, false, true},         {5, 4, 16, 9, 16 * 12, false, true, true},
      {7, 3, 5, 13, 5 * 13, false, false, true},   {6, 8, 64, 40, 64 * 40, false, true, true},
      {3, 2, 32, 150, 32 * 160, false, false, true},
      // key starts: rows that begin at different cache positions (with an origin table, shared slices, lengths)
      {6, 2, 8, 11, 8 * 12, false, true, true, true},  {5, 3, 16, 40, 16 * 40, true, false, false, true},
      {4, 2, 32, 70, 32 * 70, false, true, false, true}};
  for (const auto& c : cases) {
    const auto in = make_inputs(c, seed += 10);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    auto context = poisoned(std::size_t(c.rows) * c.heads * c.head_dim);
    backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride,
                           c.shared ? in.kv_index.data() : nullptr, c.with_origin ? in.origin.data() : nullptr,
                           in.origin_stride, c.with_lengths ? in.k_lengths.data() : nullptr, c.rows, c.heads,
                           c.head_dim, c.k_len, scale, context.data(),
                           c.with_starts ? in.key_starts.data() : nullptr);
    const auto expected = attention_step_reference(c, in, scale);
    EXPECT_TRUE(all_close(context, expected, 1e-5, 1e-6)) << describe(c);
    if (c.with_lengths)  // row 0 has no keys: exactly 0 (not NaN)
      for (int e = 0; e < c.heads * c.head_dim; ++e) ASSERT_EQ(context[e], 0.0f) << describe(c) << " element " << e;
    if (c.with_starts)  // the last row starts past its keys: exactly 0
      for (int e = 0; e < c.heads * c.head_dim; ++e)
        ASSERT_EQ(context[std::size_t(c.rows - 1) * c.heads * c.head_dim + e], 0.0f) << describe(c) << " " << e;
  }
}

// Keys before a row's start take no part: the same as moving the row's keys down to position 0 (what a prompt laid
// out at the end of the cache computes against the same prompt at its start).
TEST_F(CpuKernels, AttentionStepKeyStartsEqualShiftedKeys) {
  const int heads = 2, hd = 4, k_len = 9, shift = 5;
  const auto q = random_floats(std::size_t(heads) * hd, 4700);
  auto k = random_floats(std::size_t(heads) * k_len * hd, 4701), v = random_floats(k.size(), 4702);
  std::vector<float> k0(k.size(), 0.0f), v0(v.size(), 0.0f);
  for (int h = 0; h < heads; ++h)
    for (int j = shift; j < k_len; ++j)
      for (int d = 0; d < hd; ++d) {
        k0[(std::size_t(h) * k_len + j - shift) * hd + d] = k[(std::size_t(h) * k_len + j) * hd + d];
        v0[(std::size_t(h) * k_len + j - shift) * hd + d] = v[(std::size_t(h) * k_len + j) * hd + d];
      }
  const std::vector<int32_t> starts = {shift}, lengths = {k_len - shift};
  std::vector<float> late(q.size()), early(q.size());
  backend.attention_step(DType::f32, q.data(), k.data(), v.data(), int64_t(k_len) * hd, nullptr, nullptr, 0, nullptr,
                         1, heads, hd, k_len, 0.5f, late.data(), starts.data());
  backend.attention_step(DType::f32, q.data(), k0.data(), v0.data(), int64_t(k_len) * hd, nullptr, nullptr, 0,
                         lengths.data(), 1, heads, hd, k_len, 0.5f, early.data());
  EXPECT_EQ(late, early);
}

TEST_F(CpuKernels, AttentionStepWithOneKeyReturnsItsValue) {
  const AttentionStepCase c{4, 2, 6, 1, 6 * 4, false, false};
  const auto in = make_inputs(c, 4500);
  std::vector<float> context(std::size_t(c.rows) * c.heads * c.head_dim);
  backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride, nullptr, nullptr, 0,
                         nullptr, c.rows, c.heads, c.head_dim, c.k_len, 0.5f, context.data());
  for (int i = 0; i < c.rows * c.heads; ++i)
    for (int d = 0; d < c.head_dim; ++d)
      ASSERT_EQ(context[std::size_t(i) * c.head_dim + d], in.v[std::size_t(i) * c.slice_stride + d]) << i << " " << d;
}

TEST_F(CpuKernels, AttentionStepRejectsBadArguments) {
  std::vector<float> buf(4096, 0.5f), out(4096);
  const std::vector<int32_t> negative = {0, -1}, rows_origin = {0, 1, 1, 0};
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 257, nullptr, nullptr, 0, nullptr,
                                      1, 1, 257, 1, 1.0f, out.data()),
               Error);  // head_dim past kMaxStepHeadDim
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 7, nullptr, nullptr, 0, nullptr,
                                      1, 1, 4, 2, 1.0f, out.data()),
               Error);  // two keys of 4 do not fit a stride of 7
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 8, negative.data(), nullptr, 0,
                                      nullptr, 1, 2, 4, 2, 1.0f, out.data()),
               Error);  // negative slice index
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 8, nullptr, nullptr, 0, nullptr,
                                      -1, 2, 4, 2, 1.0f, out.data()),
               Error);
  EXPECT_THROW(backend.attention_step(DType::bf16, buf.data(), buf.data(), buf.data(), 8, nullptr, nullptr, 0, nullptr,
                                      1, 2, 4, 2, 1.0f, out.data()),
               Error);  // the CPU backend computes in fp32 only
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 8, rows_origin.data(),
                                      rows_origin.data(), 2, nullptr, 2, 1, 4, 2, 1.0f, out.data()),
               Error);  // kv_index and origin together
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 8, nullptr, rows_origin.data(),
                                      1, nullptr, 2, 1, 4, 2, 1.0f, out.data()),
               Error);  // origin stride 1 for 2 keys
  EXPECT_THROW(backend.attention_step(DType::f32, buf.data(), buf.data(), buf.data(), 8, nullptr, negative.data(), 2,
                                      nullptr, 1, 1, 4, 2, 1.0f, out.data()),
               Error);  // negative origin entry
}

// An origin table that names each row itself reads exactly what no table reads; one that names another row reads
// that row's keys: the table moves nothing, it only says where to look.
TEST_F(CpuKernels, AttentionStepOriginSelectsWhereKeysAreRead) {
  const AttentionStepCase c{4, 3, 8, 6, 8 * 7, false, true};
  const auto in = make_inputs(c, 4600);
  const std::size_t n = std::size_t(c.rows) * c.heads * c.head_dim;
  const int stride = c.k_len + 2;
  std::vector<int32_t> self(std::size_t(c.rows) * stride), swapped(self.size());
  for (int r = 0; r < c.rows; ++r)
    for (int j = 0; j < stride; ++j) {
      self[std::size_t(r) * stride + j] = r;
      swapped[std::size_t(r) * stride + j] = r ^ 1;  // rows 0 <-> 1, 2 <-> 3
    }
  std::vector<float> plain(n), through_self(n), through_swapped(n), shared(n);
  const float scale = 0.4f;
  backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride, nullptr, nullptr, 0,
                         in.k_lengths.data(), c.rows, c.heads, c.head_dim, c.k_len, scale, plain.data());
  backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride, nullptr, self.data(),
                         stride, in.k_lengths.data(), c.rows, c.heads, c.head_dim, c.k_len, scale,
                         through_self.data());
  EXPECT_EQ(plain, through_self);
  std::vector<int32_t> kv_index;  // the same swap through kv_index
  for (int r = 0; r < c.rows; ++r)
    for (int h = 0; h < c.heads; ++h) kv_index.push_back((r ^ 1) * c.heads + h);
  backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride, nullptr, swapped.data(),
                         stride, in.k_lengths.data(), c.rows, c.heads, c.head_dim, c.k_len, scale,
                         through_swapped.data());
  backend.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride, kv_index.data(), nullptr,
                         0, in.k_lengths.data(), c.rows, c.heads, c.head_dim, c.k_len, scale, shared.data());
  EXPECT_EQ(through_swapped, shared);
  EXPECT_NE(through_swapped, plain);
}

}  // namespace
}  // namespace lseq::kernels::test

// Backend::attention_step on the device against the CPU backend (fp32 on the same rounded inputs): 16-byte and
// scalar load paths (head dimensions and slice strides that are and are not multiples of a pack), several key
// tiles with the online softmax, shared slices, position-origin tables (per-key slices, both load paths), per-row
// key lengths with a row that has no keys.
#include "attention_step_reference.h"
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

TEST_F(GpuKernels, AttentionStepMatchesCpu) {
  uint64_t seed = 9900;
  const std::vector<AttentionStepCase> cases = {
      {1, 1, 1, 1, 1, false, false},           {3, 2, 8, 1, 8, true, false},
      {5, 4, 16, 9, 16 * 12, false, true},     {7, 3, 5, 13, 5 * 13, true, true},
      {32, 8, 64, 40, 64 * 40, true, true},    {16, 8, 64, 37, 64 * 100, false, false},  // self-attention cache
      {4, 2, 256, 3, 256 * 3, false, true},    {3, 2, 200, 130, 200 * 130 + 3, false, true},  // scalar path
      {2, 1, 32, 300, 32 * 301, false, false}, {6, 2, 64, 129, 64 * 129, true, true},
      // origin tables (beam search's self-attention caches): 16-byte and scalar loads, several tiles
      {32, 8, 64, 40, 64 * 100, false, false, true}, {16, 8, 64, 37, 64 * 40, false, true, true},
      {5, 4, 16, 9, 16 * 12, false, true, true},     {3, 2, 200, 130, 200 * 130 + 3, false, true, true},
      {4, 3, 5, 13, 5 * 13, false, false, true},     {2, 2, 32, 300, 32 * 301, false, true, true}};
  for (DType dt : dtypes())
    for (const auto& c : cases) {
      auto in = make_inputs(c, seed += 10);
      in.q = quantize(in.q, dt), in.k = quantize(in.k, dt), in.v = quantize(in.v, dt);
      const float scale = 1.0f / std::sqrt(float(c.head_dim));
      const std::size_t n = std::size_t(c.rows) * c.heads * c.head_dim;
      std::vector<float> ref(n);
      cpu.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride,
                         c.shared ? in.kv_index.data() : nullptr, c.with_origin ? in.origin.data() : nullptr,
                         in.origin_stride, c.with_lengths ? in.k_lengths.data() : nullptr, c.rows, c.heads,
                         c.head_dim, c.k_len, scale, ref.data());
      DeviceBuffer dq(gpu(), dt, in.q), dk(gpu(), dt, in.k), dv(gpu(), dt, in.v), context(gpu(), dt, n);
      DeviceBuffer index(gpu(), c.shared ? in.kv_index : std::vector<int32_t>{0});
      DeviceBuffer lengths(gpu(), c.with_lengths ? in.k_lengths : std::vector<int32_t>{0});
      DeviceBuffer origin(gpu(), c.with_origin ? in.origin : std::vector<int32_t>{0});
      context.poison();
      gpu().attention_step(dt, dq.get(), dk.get(), dv.get(), c.slice_stride, c.shared ? index.i32() : nullptr,
                           c.with_origin ? origin.i32() : nullptr, in.origin_stride,
                           c.with_lengths ? lengths.i32() : nullptr, c.rows, c.heads, c.head_dim, c.k_len, scale,
                           context.get());
      const auto got = context.download();
      const std::string what = label(dt) + " " + describe(c);
      // fp32: the online softmax sums in another order than the CPU; 16-bit: one rounding of the output.
      const Bound bound = dt == DType::f32 ? Bound{1e-5, 1e-5} : bound_for(dt, 1.0);
      EXPECT_TRUE(within(got, ref, bound)) << what;
      if (c.with_lengths)  // row 0 has no keys: exactly 0, never NaN
        for (int e = 0; e < c.heads * c.head_dim; ++e) ASSERT_EQ(got[e], 0.0f) << what << " element " << e;
    }
}

}  // namespace
}  // namespace lseq::kernels::test

// Backend::attention_step on the device against the CPU backend (fp32 on the same rounded inputs): 16-byte and
// scalar load paths (head dimensions and slice strides that are and are not multiples of a pack), several key
// tiles with the online softmax, shared slices, position-origin tables (per-key slices, both load paths), per-row
// key lengths with a row that has no keys, keys split over several warps, the row-streaming kernel of long caches
// (and its results bit for bit the same from launch to launch).
// Also the step's query/key/value split with the cache append.
#include <algorithm>
#include <random>
#include <tuple>

#include "attention_step_reference.h"
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

// The case's context from the CPU backend in fp32 (the inputs already rounded to the device's type).
std::vector<float> cpu_context(CpuBackend& cpu, const AttentionStepCase& c, const AttentionStepInputs& in,
                               float scale) {
  std::vector<float> ref(std::size_t(c.rows) * c.heads * c.head_dim);
  cpu.attention_step(DType::f32, in.q.data(), in.k.data(), in.v.data(), c.slice_stride,
                     c.shared ? in.kv_index.data() : nullptr, c.with_origin ? in.origin.data() : nullptr,
                     in.origin_stride, c.with_lengths ? in.k_lengths.data() : nullptr, c.rows, c.heads, c.head_dim,
                     c.k_len, scale, ref.data(), c.with_starts ? in.key_starts.data() : nullptr);
  return ref;
}

// The case's inputs on the device, and attention_step over them (the context poisoned first, then downloaded).
class DeviceCase {
 public:
  DeviceCase(Backend& gpu, DType dt, const AttentionStepCase& c, const AttentionStepInputs& in)
      : gpu_(gpu),
        dt_(dt),
        c_(c),
        origin_stride_(in.origin_stride),
        q_(gpu, dt, in.q),
        k_(gpu, dt, in.k),
        v_(gpu, dt, in.v),
        context_(gpu, dt, std::size_t(c.rows) * c.heads * c.head_dim),
        index_(gpu, c.shared ? in.kv_index : std::vector<int32_t>{0}),
        lengths_(gpu, c.with_lengths ? in.k_lengths : std::vector<int32_t>{0}),
        origin_(gpu, c.with_origin ? in.origin : std::vector<int32_t>{0}),
        starts_(gpu, c.with_starts ? in.key_starts : std::vector<int32_t>{0}) {}

  std::vector<float> run(float scale) {
    context_.poison();
    gpu_.attention_step(dt_, q_.get(), k_.get(), v_.get(), c_.slice_stride, c_.shared ? index_.i32() : nullptr,
                        c_.with_origin ? origin_.i32() : nullptr, origin_stride_,
                        c_.with_lengths ? lengths_.i32() : nullptr, c_.rows, c_.heads, c_.head_dim, c_.k_len, scale,
                        context_.get(), c_.with_starts ? starts_.i32() : nullptr);
    return context_.download();
  }

 private:
  Backend& gpu_;
  DType dt_;
  AttentionStepCase c_;
  int origin_stride_;
  DeviceBuffer q_, k_, v_, context_, index_, lengths_, origin_, starts_;
};

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
      {4, 3, 5, 13, 5 * 13, false, false, true},     {2, 2, 32, 300, 32 * 301, false, true, true},
      // key starts (a language model's prompts laid out to end together): both load paths, several tiles
      {16, 8, 64, 70, 64 * 100, false, true, true, true}, {6, 2, 64, 129, 64 * 129, true, true, false, true},
      {3, 2, 200, 130, 200 * 130 + 3, false, false, true, true},
      // keys split over 2 or 4 warps (few slices, many keys: a language model's prompts), the partial results merged;
      // an odd slice count leaves a block with a slice past the end
      {64, 12, 64, 384, 64 * 384, false, true, false, true}, {48, 12, 64, 300, 64 * 300, false, true, true, true},
      {128, 12, 64, 200, 64 * 200, false, true, true, true}, {3, 1, 64, 150, 64 * 150, false, true},
      {5, 1, 128, 520, 128 * 520, true, false},
      // caches planned for 1024 columns or more: the row-streaming kernel (a language model's long caches), with
      // and without key splits, origin tables, key starts, shared slices and several lanes per row (head_dim 16 to
      // 256: 2 to 32 lanes in bf16)
      {24, 12, 64, 1100, 64 * 1100, false, true, true, true}, {3, 2, 64, 1024, 64 * 1030, true, true, false, true},
      {92, 12, 64, 1024, 64 * 1024, true, true, false, true}, {7, 3, 16, 1200, 16 * 1200, false, true, false, false},
      {5, 2, 256, 1024, 256 * 1024, false, true, true, false}, {6, 4, 32, 1500, 32 * 1500, true, false}};
  for (DType dt : dtypes())
    for (const auto& c : cases) {
      auto in = make_inputs(c, seed += 10);
      in.q = quantize(in.q, dt), in.k = quantize(in.k, dt), in.v = quantize(in.v, dt);
      const float scale = 1.0f / std::sqrt(float(c.head_dim));
      const std::vector<float> ref = cpu_context(cpu, c, in, scale);
      const auto got = DeviceCase(gpu(), dt, c, in).run(scale);
      const std::string what = label(dt) + " " + describe(c);
      // fp32: the online softmax sums in another order than the CPU; 16-bit: one rounding of the output.
      const Bound bound = dt == DType::f32 ? Bound{1e-5, 1e-5} : bound_for(dt, 1.0);
      EXPECT_TRUE(within(got, ref, bound)) << what;
      if (c.with_lengths)  // row 0 has no keys: exactly 0, never NaN
        for (int e = 0; e < c.heads * c.head_dim; ++e) ASSERT_EQ(got[e], 0.0f) << what << " element " << e;
    }
}

// Long caches (a language model's, the row-streaming kernel): the same launch three times gives the same bits, as
// the decoding's results must (a slice's keys split over warps are merged in a fixed order, whichever warp finishes
// first). Rows of very different lengths (a batch of prompts), few rows of many keys, origin tables, shared slices.
TEST_F(GpuKernels, AttentionStepLongCachesRepeatBitForBit) {
  uint64_t seed = 9970;
  const std::vector<AttentionStepCase> cases = {{64, 4, 64, 1277, 64 * 1277, false, true, false, true},
                                                {2, 1, 64, 1100, 64 * 1100, false, true},
                                                {40, 16, 64, 1024, 64 * 1024, false, true, true, false},
                                                {30, 8, 64, 1500, 64 * 1500, true, true, false, true}};
  const DType dt = dtypes().size() > 1 ? DType::bf16 : DType::f32;  // fp32 where the CPU stands in
  for (const auto& c : cases) {
    auto in = make_inputs(c, seed += 10);
    in.q = quantize(in.q, dt), in.k = quantize(in.k, dt), in.v = quantize(in.v, dt);
    const float scale = 1.0f / std::sqrt(float(c.head_dim));
    const std::vector<float> ref = cpu_context(cpu, c, in, scale);
    DeviceCase device(gpu(), dt, c, in);
    std::vector<float> first;
    for (int launch = 0; launch < 3; ++launch) {
      const auto got = device.run(scale);
      const std::string what = describe(c) + ", launch " + std::to_string(launch);
      EXPECT_TRUE(within(got, ref, bound_for(dt, 1.0))) << what;
      if (launch == 0)
        first = got;
      else
        ASSERT_EQ(got, first) << what << ": not the first launch's bits";
    }
  }
}

// Backend::split_step_qkv against the CPU, and bit for bit against the device's own split_heads + gather_rows (the
// two ops it replaces in a decoding step): packed and scalar head sizes, the cache rows outside append_dst untouched.
TEST_F(GpuKernels, SplitStepQkvMatchesCpuAndTheTwoOps) {
  uint64_t seed = 9950;
  for (DType dt : dtypes())
    for (auto [rows, heads, head_dim] : std::vector<std::tuple<int, int, int>>{{1, 1, 8}, {5, 3, 7}, {512, 8, 64}}) {
      const int64_t slices = int64_t(rows) * heads, width = 3 * int64_t(heads) * head_dim;
      const int cache_rows = int(2 * slices) + 9;
      const auto qkv = quantize(random_floats(std::size_t(rows) * width, ++seed), dt);
      const auto bias = quantize(random_floats(width, ++seed), dt);
      const auto before = quantize(random_floats(std::size_t(cache_rows) * head_dim, ++seed), dt);
      std::vector<int32_t> dst(cache_rows);
      for (int e = 0; e < cache_rows; ++e) dst[e] = e;
      std::shuffle(dst.begin(), dst.end(), std::mt19937(static_cast<uint32_t>(seed)));
      dst.resize(2 * slices);
      std::vector<float> ref_q(std::size_t(slices) * head_dim), ref_cache = before;
      cpu.split_step_qkv(DType::f32, qkv.data(), bias.data(), rows, heads, head_dim, ref_q.data(), ref_cache.data(),
                         dst.data());
      DeviceBuffer dqkv(gpu(), dt, qkv), dbias(gpu(), dt, bias), ddst(gpu(), dst), q(gpu(), dt, ref_q.size()),
          cache(gpu(), dt, before), heads_buf(gpu(), dt, 3 * ref_q.size()), two_cache(gpu(), dt, before);
      q.poison();
      gpu().split_step_qkv(dt, dqkv.get(), dbias.get(), rows, heads, head_dim, q.get(), cache.get(),
                           static_cast<const int32_t*>(ddst.get()));
      const std::string what = label(dt) + " " + std::to_string(rows) + "x" + std::to_string(heads) + "x" +
                               std::to_string(head_dim);
      const auto got_q = q.download(), got_cache = cache.download();
      EXPECT_TRUE(within(got_q, ref_q, bound_for(dt, 2.0))) << what << " queries";
      EXPECT_TRUE(within(got_cache, ref_cache, bound_for(dt, 2.0))) << what << " cache";

      gpu().split_heads(dt, dqkv.get(), dbias.get(), rows, 1, 1, heads, head_dim, 3, heads_buf.get());
      const auto split = heads_buf.download();
      EXPECT_EQ(got_q, std::vector<float>(split.begin(), split.begin() + got_q.size())) << what;
      const void* kv_rows = static_cast<char*>(heads_buf.get()) + got_q.size() * dtype_size(dt);
      gpu().gather_rows(dt, kv_rows, head_dim, nullptr, int(2 * slices), head_dim, two_cache.get(), head_dim,
                        static_cast<const int32_t*>(ddst.get()));
      EXPECT_EQ(got_cache, two_cache.download()) << what << ": the cache differs from split_heads + gather_rows'";
    }
}

}  // namespace
}  // namespace lseq::kernels::test

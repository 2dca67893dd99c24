// Attention helpers on the device against the CPU backend: split/merge heads (with bias and its gradient) for
// Q, KV and QKV, and the masked softmax forward (key lengths, causal, rows without keys, in place) and backward.
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct HeadsCase {
  int batch, len, heads, head_dim;
};
const std::vector<HeadsCase> kHeads = {{1, 1, 1, 1}, {2, 7, 3, 5}, {4, 33, 8, 64}, {1, 256, 16, 64}};

TEST_F(GpuKernels, SplitAndMergeHeadsMatchCpu) {
  uint64_t seed = 9700;
  for (DType dt : dtypes())
    for (const auto& c : kHeads)
      for (int parts : {1, 2, 3})
        for (bool with_bias : {false, true}) {
          const int width = parts * c.heads * c.head_dim, tokens = c.batch * c.len;
          const std::size_t n = std::size_t(tokens) * width;
          const auto qkv = quantize(random_floats(n, ++seed), dt);
          const auto bias = quantize(random_floats(width, ++seed), dt);
          std::vector<float> ref_split(n), ref_merge(n);
          auto ref_db = random_floats(width, ++seed);
          DeviceBuffer ddb(gpu(), DType::f32, ref_db);  // before the CPU accumulates into ref_db
          cpu.split_heads(DType::f32, qkv.data(), with_bias ? bias.data() : nullptr, c.batch, c.len, c.heads,
                          c.head_dim, parts, ref_split.data());
          cpu.merge_heads(DType::f32, qkv.data(), c.batch, c.len, c.heads, c.head_dim, parts, ref_merge.data(),
                          with_bias ? ref_db.data() : nullptr);
          DeviceBuffer dq(gpu(), dt, qkv), db(gpu(), dt, bias), split(gpu(), dt, n), merged(gpu(), dt, n);
          split.poison();
          merged.poison();
          gpu().split_heads(dt, dq.get(), with_bias ? db.get() : nullptr, c.batch, c.len, c.heads, c.head_dim, parts,
                            split.get());
          gpu().merge_heads(dt, dq.get(), c.batch, c.len, c.heads, c.head_dim, parts, merged.get(),
                            with_bias ? ddb.f32() : nullptr);
          const std::string what = label(dt) + " batch " + std::to_string(c.batch) + " len " + std::to_string(c.len) +
                                   " parts " + std::to_string(parts) + (with_bias ? " bias" : "");
          EXPECT_TRUE(within(split.download(), ref_split, bound_for(dt, 1e-3))) << what << " split";
          EXPECT_EQ(merged.download(), ref_merge) << what << " merge (a copy)";
          EXPECT_TRUE(within(ddb.download(), ref_db, Bound{1e-5, 2e-7 * tokens + 1e-6})) << what << " dbias";
        }
}

struct SoftmaxCase {
  int batch, heads, q_len, k_len;
};
const std::vector<SoftmaxCase> kSoftmax = {
    {1, 1, 1, 1}, {2, 3, 7, 9}, {3, 2, 1, 1024}, {4, 8, 250, 250}, {2, 4, 31, 70}};

TEST_F(GpuKernels, AttentionSoftmaxForwardMatchesCpu) {
  uint64_t seed = 9800;
  for (DType dt : dtypes())
    for (const auto& c : kSoftmax)
      for (bool causal : {false, true})
        for (bool with_lengths : {false, true})
          for (bool in_place : {false, true}) {
            const std::size_t n = std::size_t(c.batch) * c.heads * c.q_len * c.k_len;
            const auto scores = quantize(random_floats(n, ++seed, -6, 6), dt);
            auto lengths = random_ints(c.batch, ++seed, 0, c.k_len);
            lengths[0] = 0;  // a sentence without keys: its rows are all zeros
            if (c.batch > 1) lengths[1] = c.k_len;
            const int32_t* hl = with_lengths ? lengths.data() : nullptr;
            const float scale = 0.125f;
            std::vector<float> ref(n);
            cpu.attention_softmax_forward(DType::f32, scores.data(), hl, c.batch, c.heads, c.q_len, c.k_len, scale,
                                          causal, ref.data());
            DeviceBuffer ds(gpu(), dt, scores), dl(gpu(), lengths), probs(gpu(), dt, n);
            probs.poison();
            void* out = in_place ? ds.get() : probs.get();
            gpu().attention_softmax_forward(dt, ds.get(), with_lengths ? dl.i32() : nullptr, c.batch, c.heads, c.q_len,
                                            c.k_len, scale, causal, out);
            const auto got = (in_place ? ds : probs).download();
            const std::string what = label(dt) + " " + std::to_string(c.batch) + "x" + std::to_string(c.heads) + "x" +
                                     std::to_string(c.q_len) + "x" + std::to_string(c.k_len) +
                                     (causal ? " causal" : "") + (with_lengths ? " lengths" : "") +
                                     (in_place ? " in place" : "");
            EXPECT_TRUE(within(got, ref, bound_for(dt, 1e-3))) << what;
            for (std::size_t i = 0; i < n; ++i)
              if (ref[i] == 0.0f) ASSERT_EQ(got[i], 0.0f) << what << ": masked element " << i << " is not 0";
          }
}

TEST_F(GpuKernels, AttentionSoftmaxBackwardMatchesCpu) {
  uint64_t seed = 9900;
  for (DType dt : dtypes())
    for (const auto& c : kSoftmax)
      for (bool in_place : {false, true}) {
        const int rows = c.batch * c.heads * c.q_len;
        const std::size_t n = std::size_t(rows) * c.k_len;
        const auto scores = random_floats(n, ++seed, -6, 6);
        std::vector<float> probs(n);
        cpu.attention_softmax_forward(DType::f32, scores.data(), nullptr, c.batch, c.heads, c.q_len, c.k_len, 1.0f,
                                      true, probs.data());
        probs = quantize(probs, dt);
        const auto dprobs = quantize(random_floats(n, ++seed), dt);
        std::vector<float> ref(n);
        cpu.attention_softmax_backward(DType::f32, probs.data(), dprobs.data(), rows, c.k_len, 0.125f, ref.data());
        DeviceBuffer dp(gpu(), dt, probs), ddp(gpu(), dt, dprobs), dscores(gpu(), dt, n);
        dscores.poison();
        void* out = in_place ? ddp.get() : dscores.get();
        gpu().attention_softmax_backward(dt, dp.get(), ddp.get(), rows, c.k_len, 0.125f, out);
        EXPECT_TRUE(within((in_place ? ddp : dscores).download(), ref, bound_for(dt, 0.1)))
            << label(dt) << " rows " << rows << " k_len " << c.k_len << (in_place ? " in place" : "");
      }
}

}  // namespace
}  // namespace lseq::kernels::test

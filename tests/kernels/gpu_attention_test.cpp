// Attention helpers on the device against the CPU backend: split/merge heads (with bias and its gradient) for
// Q, KV and QKV, and the masked softmax forward (key lengths, causal, rows without keys, in place) and backward, with
// unpadded rows and with rows padded to a multiple of 8 (the attention layer's layout; NaN in the padding).
#include <algorithm>
#include <limits>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct HeadsCase {
  int batch, len, heads, head_dim;
};
// head_dim 5: the scalar path; 8 and 64: 16-byte packs (one pack per head in bf16 at 8; 1000 tokens: many row chunks
// in the bias gradient).
const std::vector<HeadsCase> kHeads = {{1, 1, 1, 1},   {2, 7, 3, 5},     {3, 37, 2, 8},
                                       {4, 33, 8, 64}, {1, 256, 16, 64}, {8, 125, 4, 64}};

TEST_F(GpuKernels, SplitAndMergeHeadsMatchCpu) {
  uint64_t seed = 9700;
  for (DType dt : dtypes())
    for (const auto& c : kHeads)
      for (int parts : {1, 2, 3})
        for (bool with_bias : {false, true}) {
          const int width = parts * c.heads * c.head_dim, tokens = c.batch * c.len;
          // Parts 1 and 3 pad the head length past the next multiple of 8 (zero rows written, rows ignored on merge).
          const int padded_len = parts == 2 ? c.len : (c.len + 8) / 8 * 8;
          const std::size_t n = std::size_t(tokens) * width, n_heads = std::size_t(c.batch) * padded_len * width;
          const auto qkv = quantize(random_floats(n, ++seed), dt);
          const auto heads_in = quantize(random_floats(n_heads, ++seed), dt);
          const auto bias = quantize(random_floats(width, ++seed), dt);
          std::vector<float> ref_split(n_heads), ref_merge(n);
          auto ref_db = random_floats(width, ++seed);
          DeviceBuffer ddb(gpu(), DType::f32, ref_db);  // before the CPU accumulates into ref_db
          cpu.split_heads(DType::f32, qkv.data(), with_bias ? bias.data() : nullptr, c.batch, c.len, padded_len,
                          c.heads, c.head_dim, parts, ref_split.data());
          cpu.merge_heads(DType::f32, heads_in.data(), c.batch, c.len, padded_len, c.heads, c.head_dim, parts,
                          ref_merge.data(), with_bias ? ref_db.data() : nullptr);
          DeviceBuffer dq(gpu(), dt, qkv), dh(gpu(), dt, heads_in), db(gpu(), dt, bias), split(gpu(), dt, n_heads),
              merged(gpu(), dt, n);
          split.poison();
          merged.poison();
          gpu().split_heads(dt, dq.get(), with_bias ? db.get() : nullptr, c.batch, c.len, padded_len, c.heads,
                            c.head_dim, parts, split.get());
          gpu().merge_heads(dt, dh.get(), c.batch, c.len, padded_len, c.heads, c.head_dim, parts, merged.get(),
                            with_bias ? ddb.f32() : nullptr);
          const std::string what = label(dt) + " batch " + std::to_string(c.batch) + " len " + std::to_string(c.len) +
                                   " padded " + std::to_string(padded_len) + " parts " + std::to_string(parts) +
                                   (with_bias ? " bias" : "");
          EXPECT_TRUE(within(split.download(), ref_split, bound_for(dt, 1e-3))) << what << " split";
          EXPECT_EQ(merged.download(), ref_merge) << what << " merge (a copy)";
          EXPECT_TRUE(within(ddb.download(), ref_db, Bound{1e-5, 2e-7 * tokens + 1e-6})) << what << " dbias";
        }
}

// The packed merge_heads path (head_dim a multiple of the pack) sums its bias gradient over fixed row chunks: the same
// bits run after run, on a shape with many chunks and a partial last one.
TEST_F(GpuKernels, PackedMergeHeadsBiasGradientIsReproducible) {
  const int batch = 3, len = 1367, heads = 8, head_dim = 64, parts = 3;
  const int width = parts * heads * head_dim;
  const std::size_t n = std::size_t(batch) * len * width;
  for (DType dt : dtypes()) {
    DeviceBuffer in(gpu(), dt, quantize(random_floats(n, 9650), dt)), out(gpu(), dt, n);
    const auto start = random_floats(width, 9651);
    DeviceBuffer first(gpu(), DType::f32, start), second(gpu(), DType::f32, start);
    gpu().merge_heads(dt, in.get(), batch, len, len, heads, head_dim, parts, out.get(), first.f32());
    gpu().merge_heads(dt, in.get(), batch, len, len, heads, head_dim, parts, out.get(), second.f32());
    const auto a = first.download(), b = second.download();
    for (std::size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(float_bits(a[i]), float_bits(b[i])) << label(dt) << " dbias element " << i;
    EXPECT_NE(a, start) << label(dt) << ": nothing was accumulated";
  }
}

struct SoftmaxShape {
  int batch, heads, q_len, k_len;
};
const std::vector<SoftmaxShape> kSoftmax = {{1, 1, 1, 1},   {2, 3, 7, 9},    {3, 2, 1, 1024}, {4, 8, 250, 250},
                                            {2, 4, 31, 70}, {3, 2, 17, 300}, {5, 3, 13, 4}};

// Row strides to try: unpadded (scalar path when odd) and the attention layer's multiple of 8 (16-byte packs).
std::vector<int> padded_strides_for(int k_len) {
  const int padded = (k_len + 7) / 8 * 8;
  return padded == k_len ? std::vector<int>{k_len} : std::vector<int>{k_len, padded};
}

TEST_F(GpuKernels, AttentionSoftmaxForwardMatchesCpu) {
  uint64_t seed = 9800;
  for (DType dt : dtypes())
    for (const auto& c : kSoftmax)
      for (int ld : padded_strides_for(c.k_len))
        for (bool causal : {false, true})
          for (bool with_lengths : {false, true})
            for (bool in_place : {false, true}) {
              const std::size_t n = std::size_t(c.batch) * c.heads * c.q_len * ld;
              const auto scores = with_stride(
                  quantize(random_floats(n / ld * c.k_len, ++seed, -6, 6), dt), c.k_len, ld);
              auto lengths = random_ints(c.batch, ++seed, 0, c.k_len);
              lengths[0] = 0;  // a sentence without keys: its rows are all zeros
              if (c.batch > 1) lengths[1] = c.k_len;
              const int32_t* hl = with_lengths ? lengths.data() : nullptr;
              const float scale = 0.125f;
              std::vector<float> ref(n);
              cpu.attention_softmax_forward(DType::f32, scores.data(), hl, c.batch, c.heads, c.q_len, c.k_len, ld,
                                            scale, causal, ref.data());
              DeviceBuffer ds(gpu(), dt, scores), dl(gpu(), lengths), probs(gpu(), dt, n);
              probs.poison();
              void* out = in_place ? ds.get() : probs.get();
              gpu().attention_softmax_forward(dt, ds.get(), with_lengths ? dl.i32() : nullptr, c.batch, c.heads,
                                              c.q_len, c.k_len, ld, scale, causal, out);
              const auto got = (in_place ? ds : probs).download();
              const std::string what = label(dt) + " " + std::to_string(c.batch) + "x" + std::to_string(c.heads) +
                                       "x" + std::to_string(c.q_len) + "x" + std::to_string(c.k_len) + " ld " +
                                       std::to_string(ld) + (causal ? " causal" : "") +
                                       (with_lengths ? " lengths" : "") + (in_place ? " in place" : "");
              EXPECT_TRUE(within(got, ref, bound_for(dt, 1e-3))) << what;
              // Masked keys and padding columns are exactly 0 on both backends.
              for (std::size_t i = 0; i < n; ++i)
                if (ref[i] == 0.0f) ASSERT_EQ(got[i], 0.0f) << what << ": masked element " << i << " is not 0";
            }
}

// Document masks (key_starts with causal): both kernels (scalar rows and 16-byte packs, short and long rows).
TEST_F(GpuKernels, AttentionSoftmaxKeyStartsMatchCpu) {
  uint64_t seed = 9850;
  for (DType dt : dtypes())
    for (const SoftmaxShape& c : std::vector<SoftmaxShape>{{2, 3, 9, 9}, {2, 2, 250, 250}, {1, 4, 70, 70}})
      for (int ld : padded_strides_for(c.k_len)) {
        const std::size_t n = std::size_t(c.batch) * c.heads * c.q_len * ld;
        const auto scores = with_stride(quantize(random_floats(n / ld * c.k_len, ++seed, -6, 6), dt), c.k_len, ld);
        std::vector<int32_t> starts(std::size_t(c.batch) * c.q_len);
        const auto breaks = random_ints(starts.size(), ++seed, 0, 9);
        for (int b = 0; b < c.batch; ++b)
          for (int i = 0, start = 0; i < c.q_len; ++i) {
            if (i > 0 && breaks[std::size_t(b) * c.q_len + i] == 0) start = i;
            starts[std::size_t(b) * c.q_len + i] = start;
          }
        starts[0] = c.q_len + 1;  // past every key: zeros
        std::vector<float> ref(n);
        cpu.attention_softmax_forward(DType::f32, scores.data(), nullptr, c.batch, c.heads, c.q_len, c.k_len, ld,
                                      0.125f, true, ref.data(), starts.data());
        DeviceBuffer ds(gpu(), dt, scores), dstarts(gpu(), starts), probs(gpu(), dt, n);
        probs.poison();
        gpu().attention_softmax_forward(dt, ds.get(), nullptr, c.batch, c.heads, c.q_len, c.k_len, ld, 0.125f, true,
                                        probs.get(), dstarts.i32());
        const auto got = probs.download();
        const std::string what = label(dt) + " " + std::to_string(c.q_len) + " keys, ld " + std::to_string(ld);
        EXPECT_TRUE(within(got, ref, bound_for(dt, 1e-3))) << what;
        for (std::size_t i = 0; i < n; ++i)
          if (ref[i] == 0.0f) ASSERT_EQ(got[i], 0.0f) << what << ": masked element " << i << " is not 0";
      }
}

TEST_F(GpuKernels, AttentionSoftmaxBackwardMatchesCpu) {
  uint64_t seed = 9900;
  for (DType dt : dtypes())
    for (const auto& c : kSoftmax)
      for (int ld : padded_strides_for(c.k_len))
        for (bool in_place : {false, true}) {
          const int rows = c.batch * c.heads * c.q_len;
          const std::size_t n = std::size_t(rows) * c.k_len;
          const auto scores = random_floats(n, ++seed, -6, 6);
          std::vector<float> probs(n);
          cpu.attention_softmax_forward(DType::f32, scores.data(), nullptr, c.batch, c.heads, c.q_len, c.k_len,
                                        c.k_len, 1.0f, true, probs.data());
          // NaN in the padding of probs and dprobs: only the first k_len columns may be read.
          const auto probs_ld = with_stride(quantize(probs, dt), c.k_len, ld);
          const auto dprobs_ld = with_stride(quantize(random_floats(n, ++seed), dt), c.k_len, ld);
          std::vector<float> ref(std::size_t(rows) * ld);
          cpu.attention_softmax_backward(DType::f32, probs_ld.data(), dprobs_ld.data(), rows, c.k_len, ld, 0.125f,
                                         ref.data());
          DeviceBuffer dp(gpu(), dt, probs_ld), ddp(gpu(), dt, dprobs_ld), dscores(gpu(), dt, ref.size());
          dscores.poison();
          void* out = in_place ? ddp.get() : dscores.get();
          gpu().attention_softmax_backward(dt, dp.get(), ddp.get(), rows, c.k_len, ld, 0.125f, out);
          EXPECT_TRUE(within((in_place ? ddp : dscores).download(), ref, bound_for(dt, 0.1)))
              << label(dt) << " rows " << rows << " k_len " << c.k_len << " ld " << ld
              << (in_place ? " in place" : "");
        }
}

}  // namespace
}  // namespace lseq::kernels::test

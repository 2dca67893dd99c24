// Attention pads each head's length above 8 to a multiple of 8 (AttentionLayer): the padding must not change any
// real value. The same sentences run as a batch of odd length (13: heads padded to 16) and as a batch of length 16
// (already a multiple of 8: no head padding, extra padding tokens of random input, masked by k_lengths); outputs,
// input gradients and parameter gradients of the real tokens must agree.
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/layers/attention_layer.h"
#include "kernels/workspace.h"
#include "model_test_util.h"

namespace lseq {
namespace {

constexpr int kDim = 16, kHeads = 2, kBatch = 2;

struct Result {
  std::vector<float> o, d_x, d_memory, grads;
};

struct Fixture {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend(1);
  ParamTable table;
  AttentionLayer layer;
  std::unique_ptr<ParamStore> store;
  std::unique_ptr<kernels::Workspace> ws;
  AttentionLayer::Kind kind;

  explicit Fixture(AttentionLayer::Kind k) : kind(k) {
    layer = AttentionLayer(table, "attn", kDim, kHeads, kind);
    store = std::make_unique<ParamStore>(std::move(table), *backend);
    test::randomize_params(*backend, *store, 4321);
    ws = std::make_unique<kernels::Workspace>(*backend, 4 << 20, "test workspace too small");
  }

  template <typename T>
  T* upload(StepMemory& memory, const std::vector<T>& host) {
    T* p = memory.keep_n<T>(host.size());
    backend->copy_to_device(p, host.data(), host.size() * sizeof(T));
    return p;
  }
  std::vector<float> download(const void* p, std::size_t n) {
    std::vector<float> host(n);
    backend->copy_to_host(host.data(), p, n * sizeof(float));
    return host;
  }

  // x [kBatch*q_len, dim], memory [kBatch*k_len, dim] (cross), r = d_o [kBatch*q_len, dim].
  Result run(const std::vector<float>& x, const std::vector<float>& memory_in, const std::vector<float>& r,
             const std::vector<int32_t>& k_lengths, int q_len, int k_len, bool causal) {
    ws->reset();
    store->zero_grads();
    StepMemory memory(ws.get());
    LayerContext ctx{*backend, memory, *store, kernels::DType::f32, true, 11, 5};
    const bool cross = kind == AttentionLayer::Kind::cross;
    const float* dev_x = upload(memory, x);
    const float* dev_mem = cross ? upload(memory, memory_in) : nullptr;
    const int32_t* lengths = upload(memory, k_lengths);
    const float* d_o = upload(memory, r);
    AttentionLayer::Saved saved;
    const std::size_t q_count = x.size(), k_count = memory_in.size();
    void* o = ctx.keep(q_count);
    layer.forward(ctx, dev_x, dev_mem, lengths, kBatch, q_len, k_len, causal, kernels::Dropout{}, o, saved);
    void* d_x = ctx.keep(q_count);
    void* d_mem = cross ? ctx.keep(k_count) : nullptr;
    if (cross) backend->fill(kernels::DType::f32, d_mem, k_count, 0.0f);
    layer.backward(ctx, saved, d_o, d_x, false, d_mem);
    Result res;
    res.o = download(o, q_count);
    res.d_x = download(d_x, q_count);
    if (cross) res.d_memory = download(d_mem, k_count);
    res.grads = download(store->grads(), store->size());
    return res;
  }
};

// Rows [0, len) of each sentence of a [kBatch][from][dim] tensor, as [kBatch][len][dim].
std::vector<float> first_rows(const std::vector<float>& t, int from, int len) {
  std::vector<float> out;
  for (int b = 0; b < kBatch; ++b)
    out.insert(out.end(), t.begin() + std::size_t(b) * from * kDim, t.begin() + (std::size_t(b) * from + len) * kDim);
  return out;
}

// Sentences of a [kBatch][len][dim] tensor extended to [kBatch][to][dim] with the given filler rows.
std::vector<float> extend(const std::vector<float>& t, int len, int to, const std::vector<float>& filler) {
  std::vector<float> out;
  std::size_t f = 0;
  for (int b = 0; b < kBatch; ++b) {
    out.insert(out.end(), t.begin() + std::size_t(b) * len * kDim, t.begin() + std::size_t(b + 1) * len * kDim);
    for (int i = 0; i < (to - len) * kDim; ++i) out.push_back(filler[f++]);
  }
  return out;
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-5 + 1e-5 * std::fabs(b[i])) << what << " element " << i;
    norm += static_cast<double>(b[i]) * b[i];
  }
  EXPECT_GT(norm, 1e-6) << what << ": nothing to compare";
}

void check(AttentionLayer::Kind kind, bool causal, int q_len, int k_len, std::vector<int32_t> k_lengths) {
  const bool cross = kind == AttentionLayer::Kind::cross;
  const int long_len = 16;  // the longer batch: a multiple of 8, so its heads are not padded
  std::mt19937_64 rng(77);
  const auto x = test::random_floats(rng, std::size_t(kBatch) * q_len * kDim, 1.0);
  const auto mem = cross ? test::random_floats(rng, std::size_t(kBatch) * k_len * kDim, 1.0) : std::vector<float>{};
  const auto r = test::random_floats(rng, x.size(), 1.0);
  const auto filler = test::random_floats(rng, std::size_t(kBatch) * long_len * kDim, 1.0);
  const std::vector<float> no_gradient(std::size_t(kBatch) * long_len * kDim, 0.0f);  // loss ignores padding rows

  Fixture short_run(kind), long_run(kind);
  const Result a = short_run.run(x, mem, r, k_lengths, q_len, k_len, causal);
  const Result b = long_run.run(extend(x, q_len, long_len, filler), cross ? extend(mem, k_len, long_len, filler) : mem,
                                extend(r, q_len, long_len, no_gradient), k_lengths, long_len, long_len, causal);
  expect_near(a.o, first_rows(b.o, long_len, q_len), "output");
  expect_near(a.d_x, first_rows(b.d_x, long_len, q_len), "input gradient");
  if (cross) expect_near(a.d_memory, first_rows(b.d_memory, long_len, k_len), "memory gradient");
  expect_near(a.grads, b.grads, "parameter gradients");
}

TEST(AttentionPadding, SelfAttentionIgnoresHeadPadding) {
  check(AttentionLayer::Kind::self, false, 13, 13, {13, 10});
}

TEST(AttentionPadding, CausalSelfAttentionIgnoresHeadPadding) {
  check(AttentionLayer::Kind::self, true, 13, 13, {13, 9});
}

TEST(AttentionPadding, CrossAttentionIgnoresHeadPadding) {
  check(AttentionLayer::Kind::cross, false, 11, 15, {15, 10});
  check(AttentionLayer::Kind::cross, false, 3, 11, {11, 4});  // short queries (not padded) over padded keys
}

}  // namespace
}  // namespace lseq

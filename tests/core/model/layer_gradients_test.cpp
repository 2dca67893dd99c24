// Gradient checks of each layer's hand-written backward against central finite differences (fp32, tiny sizes),
// with padding, causal masks and dropout whose masks are fixed by their keys.
#include <gtest/gtest.h>

#include "core/model/decoder.h"
#include "core/model/encoder.h"
#include "core/model/layers/attention_layer.h"
#include "core/model/layers/embedding_layer.h"
#include "core/model/layers/feed_forward_layer.h"
#include "core/model/layers/layer_norm_layer.h"
#include "core/model/layers/output_layer.h"
#include "kernels/workspace.h"
#include "model_test_util.h"

namespace lseq {
namespace {

using kernels::Activation;

// One layer under test: its parameters, a workspace, device buffers, and the random weights of the loss
// L = sum_i r_i y_i over its output y.
struct Harness {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend(1);
  std::unique_ptr<ParamStore> store;
  std::unique_ptr<kernels::Workspace> ws;
  std::mt19937_64 rng{1234};
  std::vector<void*> buffers;

  void finish(ParamTable table) {
    store = std::make_unique<ParamStore>(std::move(table), *backend);
    test::randomize_params(*backend, *store, 99);
    ws = std::make_unique<kernels::Workspace>(*backend, 4 << 20, "test workspace too small");
  }
  ~Harness() {
    for (void* p : buffers) backend->release(p);
  }
  template <typename T>
  T* upload(const std::vector<T>& host) {
    void* p = backend->allocate(host.size() * sizeof(T));
    backend->copy_to_device(p, host.data(), host.size() * sizeof(T));
    buffers.push_back(p);
    return static_cast<T*>(p);
  }
  double dot(const void* y, const std::vector<float>& r) {
    std::vector<float> host(r.size());
    backend->copy_to_host(host.data(), y, host.size() * sizeof(float));
    double sum = 0;
    for (std::size_t i = 0; i < r.size(); ++i) sum += static_cast<double>(host[i]) * r[i];
    return sum;
  }
  LayerContext context(StepMemory& memory, bool train) {
    return LayerContext{*backend, memory, *store, kernels::DType::f32, train, 11, 5};
  }
};

constexpr int kLayerDim = 8, kLayerHeads = 2;

void check_attention(AttentionLayer::Kind kind, bool causal, int batch, int q_len, int k_len,
                     std::vector<int32_t> k_lengths, float drop) {
  Harness h;
  ParamTable table;
  AttentionLayer layer(table, "attn", kLayerDim, kLayerHeads, kind);
  h.finish(std::move(table));
  const int32_t* lengths = h.upload(k_lengths);
  const bool cross = kind == AttentionLayer::Kind::cross;
  const std::size_t q_count = static_cast<std::size_t>(batch) * q_len * kLayerDim;
  const std::size_t k_count = static_cast<std::size_t>(batch) * k_len * kLayerDim;
  const std::vector<float> r = test::random_floats(h.rng, q_count, 1.0);
  std::vector<float> input = test::random_floats(h.rng, q_count + (cross ? k_count : 0), 1.0);
  auto loss = [&](const float* in, bool backward, float* d_in) {
    h.ws->reset();
    StepMemory memory(h.ws.get());
    LayerContext ctx = h.context(memory, drop > 0);
    AttentionLayer::Saved saved;
    void* o = ctx.keep(q_count);
    layer.forward(ctx, in, cross ? in + q_count : nullptr, lengths, batch, q_len, k_len, causal, ctx.dropout(drop, 77),
                  o, saved);
    // Without dropout on the probabilities the core runs fused (lse saved, rows read with a stride), with it
    // composed (head buffers; backward recomputes the probabilities).
    EXPECT_EQ(saved.lse != nullptr, drop == 0.0f);
    EXPECT_EQ(saved.ldq == 0, drop > 0.0f);
    const double l = h.dot(o, r);
    if (backward) {
      float* d_o = memory.keep_n<float>(q_count);
      h.backend->copy_to_device(d_o, r.data(), q_count * sizeof(float));
      if (cross) h.backend->fill(kernels::DType::f32, d_in + q_count, k_count, 0.0f);
      layer.backward(ctx, saved, d_o, d_in, false, cross ? d_in + q_count : nullptr);
    }
    return l;
  };
  test::check_gradients(*h.backend, *h.store, input, loss);
}

TEST(ModelLayerGradients, SelfAttentionWithPadding) {
  check_attention(AttentionLayer::Kind::self, false, 3, 5, 5, {5, 2, 3}, 0.0f);
}

TEST(ModelLayerGradients, CausalSelfAttentionWithPadding) {
  check_attention(AttentionLayer::Kind::self, true, 2, 4, 4, {4, 1}, 0.0f);
}

// Lengths above 8: attention pads each head's length to a multiple of 8 (here 11 -> 16, 9 -> 16).
TEST(ModelLayerGradients, AttentionWithHeadPadding) {
  check_attention(AttentionLayer::Kind::self, true, 2, 11, 11, {11, 6}, 0.0f);
  check_attention(AttentionLayer::Kind::cross, false, 2, 9, 11, {11, 7}, 0.2f);
}

TEST(ModelLayerGradients, CrossAttentionWithSourcePadding) {
  check_attention(AttentionLayer::Kind::cross, false, 3, 4, 5, {5, 3, 1}, 0.0f);
}

TEST(ModelLayerGradients, AttentionWithProbabilityDropout) {
  check_attention(AttentionLayer::Kind::self, true, 2, 5, 5, {5, 3}, 0.3f);
  check_attention(AttentionLayer::Kind::cross, false, 2, 3, 4, {4, 2}, 0.3f);
}

void check_feed_forward(Activation act, float drop, bool recompute = false) {
  Harness h;
  ParamTable table;
  FeedForwardLayer layer(table, "ffn", kLayerDim, 12, act);
  h.finish(std::move(table));
  const int rows = 7;
  const std::size_t count = static_cast<std::size_t>(rows) * kLayerDim;
  const std::vector<float> r = test::random_floats(h.rng, count, 1.0);
  auto loss = [&](const float* in, bool backward, float* d_in) {
    h.ws->reset();
    StepMemory memory(h.ws.get());
    LayerContext ctx = h.context(memory, drop > 0);
    ctx.recompute_ffn = recompute;
    FeedForwardLayer::Saved saved;
    void* o = ctx.keep(count);
    layer.forward(ctx, in, rows, ctx.dropout(drop, 5), o, saved);
    // ReLU without activation dropout takes the fused path (bias and ReLU inside the GEMMs), the rest the other.
    EXPECT_EQ(saved.fused_relu, act == Activation::relu && drop == 0.0f);
    EXPECT_EQ(saved.hidden == nullptr, recompute) << "--recompute-ffn keeps no hidden layer";
    const double l = h.dot(o, r);
    if (backward) {
      float* d_o = memory.keep_n<float>(count);
      h.backend->copy_to_device(d_o, r.data(), count * sizeof(float));
      layer.backward(ctx, saved, d_o, d_in, false);
    }
    return l;
  };
  test::check_gradients(*h.backend, *h.store, test::random_floats(h.rng, count, 1.0), loss);
}

TEST(ModelLayerGradients, FeedForwardReluFused) { check_feed_forward(Activation::relu, 0.0f); }
TEST(ModelLayerGradients, FeedForwardReluWithDropout) { check_feed_forward(Activation::relu, 0.25f); }
TEST(ModelLayerGradients, FeedForwardGelu) { check_feed_forward(Activation::gelu, 0.0f); }
TEST(ModelLayerGradients, FeedForwardSwishWithDropout) { check_feed_forward(Activation::swish, 0.25f); }
TEST(ModelLayerGradients, FeedForwardReluFusedRecomputed) { check_feed_forward(Activation::relu, 0.0f, true); }
TEST(ModelLayerGradients, FeedForwardSwishWithDropoutRecomputed) {
  check_feed_forward(Activation::swish, 0.25f, true);
}

TEST(ModelLayerGradients, LayerNorm) {
  Harness h;
  ParamTable table;
  LayerNormLayer layer(table, "norm", kLayerDim, 1e-6f);
  h.finish(std::move(table));
  const int rows = 6;
  const std::size_t count = static_cast<std::size_t>(rows) * kLayerDim;
  const std::vector<float> r = test::random_floats(h.rng, count, 1.0);
  auto loss = [&](const float* in, bool backward, float* d_in) {
    h.ws->reset();
    StepMemory memory(h.ws.get());
    LayerContext ctx = h.context(memory, false);
    LayerNormLayer::Saved saved;
    void* y = ctx.keep(count);
    layer.forward(ctx, in, rows, y, saved);
    const double l = h.dot(y, r);
    if (backward) {
      float* d_y = memory.keep_n<float>(count);
      h.backend->copy_to_device(d_y, r.data(), count * sizeof(float));
      layer.backward(ctx, saved, d_y, rows, d_in);
    }
    return l;
  };
  test::check_gradients(*h.backend, *h.store, test::random_floats(h.rng, count, 1.0), loss);
}

void check_embedding(float drop) {
  Harness h;
  ParamTable table;
  const int vocab = 13, batch = 3, len = 4;
  EmbeddingLayer layer(table.add("emb", {vocab, kLayerDim}, ParamInit::normal_embedding), kLayerDim);
  h.finish(std::move(table));
  // Repeated ids (their gradients add up) and padding.
  const int32_t* tokens = h.upload(std::vector<int32_t>{3, 5, 3, 1, 7, 1, 0, 0, 12, 4, 4, 0});
  const void* positions = h.upload(sinusoidal_positions(len, kLayerDim));
  const std::size_t count = static_cast<std::size_t>(batch) * len * kLayerDim;
  const std::vector<float> r = test::random_floats(h.rng, count, 1.0);
  auto loss = [&](const float*, bool backward, float*) {
    h.ws->reset();
    StepMemory memory(h.ws.get());
    LayerContext ctx = h.context(memory, drop > 0);
    void* y = ctx.keep(count);
    layer.forward(ctx, tokens, batch, len, positions, ctx.dropout(drop, 3), y);
    const double l = h.dot(y, r);
    if (backward) {
      float* d_y = memory.keep_n<float>(count);
      h.backend->copy_to_device(d_y, r.data(), count * sizeof(float));
      layer.backward(ctx, tokens, batch, len, ctx.dropout(drop, 3), d_y);
    }
    return l;
  };
  test::check_gradients(*h.backend, *h.store, {}, loss);
}

TEST(ModelLayerGradients, Embedding) { check_embedding(0.0f); }
TEST(ModelLayerGradients, EmbeddingWithDropout) { check_embedding(0.3f); }

// chunk_rows < 0: forward + loss + backward over all logits (decoding's and forward_logits' path); otherwise
// loss_in_chunks (training's path, the bias added inside cross_entropy) with that many rows a chunk (0: auto).
void check_output_layer(int chunk_rows) {
  Harness h;
  ModelConfig config;
  config.dim_emb = kLayerDim;
  config.tgt_vocab = 11;
  config.label_smoothing = 0.1f;
  ParamTable table;
  OutputLayer layer(table, config, OutputLayer::kUntied);
  h.finish(std::move(table));
  const int rows = 6;
  const int32_t* targets = h.upload(std::vector<int32_t>{4, 1, 0, 10, 7, 0});  // two padding rows
  auto loss = [&](const float* in, bool backward, float* d_in) {
    h.ws->reset();
    StepMemory memory(h.ws.get());
    LayerContext ctx = h.context(memory, false);
    float* row_loss = memory.keep_n<float>(rows);
    float* row_nll = memory.keep_n<float>(rows);
    if (chunk_rows >= 0) {
      layer.loss_in_chunks(ctx, in, rows, targets, 1.0f, row_loss, row_nll, backward ? d_in : nullptr, chunk_rows);
      return h.dot(row_loss, std::vector<float>(rows, 1.0f));
    }
    OutputLayer::Saved saved;
    layer.forward(ctx, in, rows, saved);
    layer.loss(ctx, saved, targets, backward, 1.0f, row_loss, row_nll);
    const double l = h.dot(row_loss, std::vector<float>(rows, 1.0f));
    if (backward) layer.backward(ctx, saved, d_in);
    return l;
  };
  test::check_gradients(*h.backend, *h.store, test::random_floats(h.rng, rows * kLayerDim, 1.0), loss);
}

TEST(ModelLayerGradients, OutputProjectionAndLabelSmoothedLoss) { check_output_layer(-1); }
TEST(ModelLayerGradients, OutputLossInOneChunkWithTheBiasInsideTheLoss) { check_output_layer(0); }
TEST(ModelLayerGradients, OutputLossInChunksOfFourRows) { check_output_layer(4); }  // 4 + 2 rows
TEST(ModelLayerGradients, OutputLossInChunksOfOneRow) { check_output_layer(1); }

void check_encoder_layer(NormPlacement norm, float drop) {
  Harness h;
  ModelConfig config;
  config.dim_emb = kLayerDim, config.heads = kLayerHeads, config.dim_ffn = 12;
  config.activation = Activation::gelu;
  config.norm = norm;
  config.dropout = config.dropout_attention = config.dropout_ffn = drop;
  ParamTable table;
  EncoderLayer layer(table, "encoder.l1", config, 0);
  h.finish(std::move(table));
  const int batch = 2, len = 4;
  const int32_t* lengths = h.upload(std::vector<int32_t>{4, 2});
  const std::size_t count = static_cast<std::size_t>(batch) * len * kLayerDim;
  const std::vector<float> r = test::random_floats(h.rng, count, 1.0);
  auto loss = [&](const float* in, bool backward, float* d_in) {
    h.ws->reset();
    StepMemory memory(h.ws.get());
    LayerContext ctx = h.context(memory, drop > 0);
    EncoderLayer::Saved saved;
    const void* y = layer.forward(ctx, in, lengths, batch, len, saved);
    const double l = h.dot(y, r);
    if (backward) {
      float* g = memory.keep_n<float>(count);
      float* spare = memory.keep_n<float>(count);
      h.backend->copy_to_device(g, r.data(), count * sizeof(float));
      void* d = layer.backward(ctx, saved, g, spare);
      h.backend->copy(d_in, d, count * sizeof(float));
    }
    return l;
  };
  test::check_gradients(*h.backend, *h.store, test::random_floats(h.rng, count, 1.0), loss);
}

TEST(ModelLayerGradients, EncoderLayerPostNorm) { check_encoder_layer(NormPlacement::post, 0.0f); }
TEST(ModelLayerGradients, EncoderLayerPreNorm) { check_encoder_layer(NormPlacement::pre, 0.0f); }
TEST(ModelLayerGradients, EncoderLayerPreNormWithDropout) { check_encoder_layer(NormPlacement::pre, 0.2f); }

void check_decoder_layer(NormPlacement norm) {
  Harness h;
  ModelConfig config;
  config.dim_emb = kLayerDim, config.heads = kLayerHeads, config.dim_ffn = 12;
  config.activation = Activation::swish;
  config.norm = norm;
  config.dropout = config.dropout_attention = config.dropout_ffn = 0.0f;
  ParamTable table;
  DecoderLayer layer(table, "decoder.l1", config, 0);
  h.finish(std::move(table));
  const int batch = 2, len = 3, src_len = 5;
  const int32_t* lengths = h.upload(std::vector<int32_t>{2, 3});
  const int32_t* src_lengths = h.upload(std::vector<int32_t>{5, 3});
  const std::size_t count = static_cast<std::size_t>(batch) * len * kLayerDim;
  const std::size_t mem_count = static_cast<std::size_t>(batch) * src_len * kLayerDim;
  const std::vector<float> r = test::random_floats(h.rng, count, 1.0);
  auto loss = [&](const float* in, bool backward, float* d_in) {
    h.ws->reset();
    StepMemory memory(h.ws.get());
    LayerContext ctx = h.context(memory, false);
    DecoderLayer::Saved saved;
    const DecoderMemory mem{in + count, src_lengths, src_len};
    const void* y = layer.forward(ctx, in, lengths, batch, len, mem, saved);
    const double l = h.dot(y, r);
    if (backward) {
      float* g = memory.keep_n<float>(count);
      float* spare = memory.keep_n<float>(count);
      h.backend->copy_to_device(g, r.data(), count * sizeof(float));
      h.backend->fill(kernels::DType::f32, d_in + count, mem_count, 0.0f);
      void* d = layer.backward(ctx, saved, g, spare, d_in + count);
      h.backend->copy(d_in, d, count * sizeof(float));
    }
    return l;
  };
  test::check_gradients(*h.backend, *h.store, test::random_floats(h.rng, count + mem_count, 1.0), loss);
}

TEST(ModelLayerGradients, DecoderLayerPostNorm) { check_decoder_layer(NormPlacement::post); }
TEST(ModelLayerGradients, DecoderLayerPreNorm) { check_decoder_layer(NormPlacement::pre); }

}  // namespace
}  // namespace lseq

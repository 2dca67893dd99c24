#pragma once
// The Transformer decoder stack: target embeddings (+ positions, dropout), dec_depth layers of causal self-attention,
// cross-attention over the encoder output and feed-forward blocks, and in pre-norm a final LayerNorm.
#include <string>
#include <vector>

#include "core/model/layers/attention_layer.h"
#include "core/model/layers/embedding_layer.h"
#include "core/model/layers/feed_forward_layer.h"
#include "core/model/layers/layer_norm_layer.h"
#include "core/model/layers/residual_block.h"
#include "core/model/model_config.h"

namespace lseq {

// What the decoder attends to: the encoder output and the source lengths (keys beyond them are masked).
struct DecoderMemory {
  const void* states = nullptr;      // [batch*src_len, dim], or [packing.rows, dim] over packed rows
  const int32_t* lengths = nullptr;  // [batch], device
  int len = 0;                       // src_len
  PackedRows packing;                // the encoder's (Encoder::forward)
};

// One incremental decoding step (forward only, no dropout) of `rows` live hypotheses, shared by all layers. The
// step's cache position t reaches the ops only through device arrays (self_lengths, append_dst), never as an
// argument, so that the ops of a step can be recorded once and replayed at every position (Backend::record). Rows
// of a continuous search (sentences admitted while others run) began at different cache positions: row r's
// sentence wrote its bos at key_starts[r], and row r's token is at position positions[r] = t - key_starts[r] of
// its output.
struct DecoderStep {
  int rows = 0;                           // live hypotheses
  int max_len = 0;                        // positions a self-attention cache holds (its slices are max_len*hd apart)
  int memory_sentences = 0, src_len = 0;  // layout of the cross-attention keys/values (src_len: rows per slice)
  const int32_t* cross_slices = nullptr;  // [rows*heads] device: sentence_of[r]*heads + h, the (r, h) memory slice
  const int32_t* src_lengths = nullptr;   // [rows] device: source length of row r's sentence
  const int32_t* self_lengths = nullptr;  // [rows] device: t + 1, the positions self-attention covers
  const int32_t* key_starts = nullptr;    // [rows] device: the first of them row r's sentence wrote (its bos)
  const int32_t* positions = nullptr;     // [rows] device: each row's position in its output (its positions row)
  // [2*rows*heads] device: where the step's keys and values go in self_kv's [.][hd] rows (Backend::split_step_qkv):
  // slice i's key (p = 0) or value (p = 1) goes to cache row append_dst[p*rows*heads + i] = (2i + p)*max_len + t.
  const int32_t* append_dst = nullptr;
  // [rows][max_len] device, or null for "every row reads its own slice": the position-origin table of beam
  // search, row r's self-attention key/value at position p lives at position p of row origin[r*max_len + p]'s
  // slices (written there at step p); entry [r][t] must be r, since the step appends row r's own key there.
  const int32_t* origin = nullptr;
};

// The caches of one decoder layer (docs/decoding.md):
//   self_kv   [max_rows*heads][2][max_len][hd]: slice i = r*heads + h holds the keys that row r appended at
//             each position 0..t, then its values (one buffer, so that one gather appends both). A hypothesis'
//             history is spread over the slices of the rows that wrote it: DecoderStep::origin says where.
//   cross_kv  [2][memory_sentences][heads][memory_len][hd]: the encoder output's keys, then values, per sentence
//             (rows past a sentence's length are zeros and never read; so are the slices of sentences past the
//             batch's)
struct DecoderLayerCache {
  void* self_kv = nullptr;
  void* cross_kv = nullptr;
};

class DecoderLayer {
 public:
  struct Saved {
    AttentionLayer::Saved self_attn, cross_attn;
    FeedForwardLayer::Saved ffn;
    ResidualBlock::Saved self_block, cross_block, ffn_block;
    // StepMemory::kept() before each block's forward: backward releases from there once the block is done.
    std::size_t self_from = 0, cross_from = 0, ffn_from = 0;
  };

  DecoderLayer(ParamTable& table, const std::string& prefix, const ModelConfig& config, int index);
  const void* forward(const LayerContext& ctx, const void* x, const int32_t* lengths, int batch, int len,
                      const DecoderMemory& memory, Saved& saved) const;
  // As EncoderLayer::backward; d_memory += the gradient of the encoder output through cross-attention.
  void* backward(const LayerContext& ctx, const Saved& saved, void* g, void* spare, void* d_memory) const;

  // ---- incremental decoding ----
  // cross_kv [2][memory_sentences][heads][memory_len][hd] from the encoder output [sentences*src_len, dim]
  // (sentences <= memory_sentences): rows of a (sentence, head) slice are memory_len >= src_len apart (rows past
  // src_len are zeros), and the values start memory_sentences slices in, so that the steps' shapes depend on
  // neither src_len nor the batch's sentence count (DecoderStep::memory_sentences, src_len = memory_len).
  void project_memory(const LayerContext& ctx, const void* states, int sentences, int src_len,
                      int memory_sentences, int memory_len, void* cross_kv) const;
  // x [rows, dim] at the step's position t -> the layer output [rows, dim] (kept); appends position t to the
  // caches.
  const void* step(const LayerContext& ctx, const void* x, const DecoderStep& step,
                   const DecoderLayerCache& cache) const;
  // The same step for a pre-norm stack, over its residual stream x [rows, dim], updated in place, as
  // EncoderLayer::step_pre_norm: `normed` holds LN(x) for the self-attention and receives next_norm(x out); each
  // block's residual add and the LayerNorm after it are one op.
  void step_pre_norm(const LayerContext& ctx, void* x, void* normed, const DecoderStep& step,
                     const DecoderLayerCache& cache, const LayerNormLayer& next_norm) const;
  const LayerNormLayer& self_attention_norm() const { return self_block_.norm(); }

 private:
  // A step's self-attention over the cache (o: its output before the out bias) and cross-attention over the
  // encoder's keys and values, from their sublayer inputs.
  void self_attention_step(const LayerContext& ctx, const void* in, const DecoderStep& step,
                           const DecoderLayerCache& cache, void* o) const;
  void cross_attention_step(const LayerContext& ctx, const void* in, const DecoderStep& step,
                            const DecoderLayerCache& cache, void* o) const;

  ModelConfig config_;
  int index_ = 0;
  std::size_t self_begin_ = 0, cross_begin_ = 0, ffn_begin_ = 0;  // table offsets of the blocks' first tensors
  AttentionLayer self_attn_, cross_attn_;
  ResidualBlock self_block_, cross_block_;
  FeedForwardLayer ffn_;
  ResidualBlock ffn_block_;
};

class Decoder {
 public:
  struct Saved {
    std::vector<DecoderLayer::Saved> layers;
    LayerNormLayer::Saved final_norm;
    kernels::Dropout emb_drop;
    const int32_t* tokens = nullptr;
    int batch = 0, len = 0;
    std::size_t kept_from = 0;  // StepMemory::kept() before forward
  };

  Decoder(ParamTable& table, const ModelConfig& config, std::size_t embedding_table);
  // Returns the final decoder states [batch*len, dim] (kept), the input of the output layer.
  const void* forward(const LayerContext& ctx, const int32_t* tokens, const int32_t* lengths, int batch, int len,
                      const void* positions, const DecoderMemory& memory, Saved& saved) const;
  // d_out (overwritten) and spare as Encoder::backward (what forward kept is given back as it goes); d_memory +=
  // gradient of the encoder output.
  void backward(const LayerContext& ctx, const Saved& saved, void* d_out, void* spare, void* d_memory) const;

  // ---- incremental decoding (forward only, no dropout; caches: one per layer) ----
  int depth() const { return static_cast<int>(layers_.size()); }
  // Fills every layer's cross_kv from the encoder output [sentences*src_len, dim] (DecoderLayer::project_memory).
  void project_memory(const LayerContext& ctx, const void* states, int sentences, int src_len,
                      int memory_sentences, int memory_len, const std::vector<DecoderLayerCache>& caches) const;
  // The same for sentences that join a running search: sentence b's keys and values go to the memory slot of
  // sentence slot_slices[b*heads] / heads, wherever that is (slot_slices: [2*sentences*heads] device, entry
  // (p*sentences + b)*heads + h = (p*memory_sentences + slot of b)*heads + h for keys p = 0 and values p = 1).
  // Projected per layer into a temporary [2][sentences][heads][src_len][hd], then its src_len rows per slice
  // scattered into place: the other slots, in use by running sentences, are not touched.
  void project_memory_to_slots(const LayerContext& ctx, const void* states, int sentences, int src_len,
                               const int32_t* slot_slices, int memory_len,
                               const std::vector<DecoderLayerCache>& caches) const;
  // tokens [rows] (device), each row at its position step.positions[r] of `positions` (the positions table).
  // Returns the final decoder states [rows, dim] (kept), the input of the output layer.
  const void* step(const LayerContext& ctx, const int32_t* tokens, const void* positions, const DecoderStep& step,
                   const std::vector<DecoderLayerCache>& caches) const;

 private:
  ModelConfig config_;
  EmbeddingLayer embedding_;
  std::vector<DecoderLayer> layers_;
  LayerNormLayer final_norm_;  // pre-norm only
  std::size_t final_norm_begin_ = 0;
};

}  // namespace lseq

#pragma once
// The shape of an encoder-decoder Transformer: sizes, activation, dropout, norm placement, tied embeddings.
// Stored in the checkpoint as YAML with Marian's option names (dim-emb, enc-depth, transformer-heads, ...).
#include <yaml-cpp/yaml.h>

#include <string>

#include "kernels/backend.h"

namespace lseq {

// none; target: target embedding = output weight (tied-embeddings); source: source = target embedding
// (tied-embeddings-src); all: source = target = output (tied-embeddings-all, or both flags).
enum class TiedEmbeddings { none, target, source, all };
enum class NormPlacement { post, pre };  // Marian "" + "dan" (post) or "n" + "da" / transformer-prenorm (pre)

// The largest sizes a model may have. They keep every index and size product the kernels form inside the types
// that hold them (int rows x columns, int64 elements), and bound the work a mistyped option can start: beyond them
// a model could not be trained on any machine anyway. The option registry (core/cli) takes its limits from here.
constexpr int kMaxModelDim = 65536;       // --dim-emb, --transformer-dim-ffn
constexpr int kMaxFfnDim = 1 << 20;       // --transformer-dim-ffn
constexpr int kMaxDepth = 1024;           // --enc-depth, --dec-depth
constexpr int kMaxHeads = 1024;           // --transformer-heads
constexpr int kMaxVocab = 1 << 24;        // --dim-vocabs
constexpr int kMaxLength = 8192;          // --max-length (tokens per sentence)

struct ModelConfig {
  int src_vocab = 0, tgt_vocab = 0;  // dim-vocabs
  int dim_emb = 512;                 // dim-emb
  int enc_depth = 6, dec_depth = 6;  // enc-depth, dec-depth
  int heads = 8;                     // transformer-heads
  int dim_ffn = 2048;                // transformer-dim-ffn
  kernels::Activation activation = kernels::Activation::relu;  // transformer-ffn-activation
  float dropout = 0.1f;            // transformer-dropout: residual branches (and embeddings, see below)
  bool embedding_dropout = true;   // transformer-postprocess-emb: "d" (true) or "" (false)
  float dropout_attention = 0.0f;  // transformer-dropout-attention: attention probabilities
  float dropout_ffn = 0.0f;        // transformer-dropout-ffn: after the ffn activation
  NormPlacement norm = NormPlacement::post;
  TiedEmbeddings tied = TiedEmbeddings::none;  // tied-embeddings, tied-embeddings-src, tied-embeddings-all
  int max_length = 100;          // max-length: longest sentence in tokens, eos/bos excluded (positions: +1)
  float label_smoothing = 0.1f;  // label-smoothing
  float layer_norm_eps = 1e-6f;  // layer-norm-epsilon

  int head_dim() const { return dim_emb / heads; }
  // Throws lseq::Error naming the option for a model that cannot be built.
  void validate() const;
  YAML::Node to_yaml() const;
  // Keys absent from `node` keep their defaults; unknown keys are ignored (the node may hold all options).
  // transformer-prenorm: true selects pre-norm whatever transformer-preprocess/-postprocess say.
  static ModelConfig from_yaml(const YAML::Node& node);
};

// Marian's transformer-preprocess / transformer-postprocess pair -> placement; throws lseq::Error otherwise.
NormPlacement parse_norm_placement(const std::string& preprocess, const std::string& postprocess);
kernels::Activation parse_activation(const std::string& name);  // relu, gelu, swish
bool parse_embedding_postprocess(const std::string& ops);        // "d" -> dropout, "" -> none
const char* activation_name(kernels::Activation act);

}  // namespace lseq

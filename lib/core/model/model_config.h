#pragma once
// The shape of a Transformer: encoder-decoder (--type transformer) or decoder-only (--type lm, Marian's
// lm-transformer too): sizes, activation, dropout, norm placement, tied embeddings, positions.
// Stored in the checkpoint as YAML with Marian's option names (dim-emb, enc-depth, transformer-heads, ...).
#include <yaml-cpp/yaml.h>

#include <string>

#include "kernels/backend.h"

namespace lseq {

// none; target: target embedding = output weight (tied-embeddings); source: source = target embedding
// (tied-embeddings-src); all: source = target = output (tied-embeddings-all, or both flags).
enum class TiedEmbeddings { none, target, source, all };
enum class NormPlacement { post, pre };  // Marian "" + "dan" (post) or "n" + "da" / transformer-prenorm (pre)
// The layout of the sinusoidal position table (transformer-positions), so that converted models compute what they
// computed where they came from (docs/convert-marian.md). Row t, column c of a [len, dim] table:
//   interleaved   lseq's own (Vaswani et al.): column 2i = sin(t / 10000^(2i/dim)), column 2i+1 = cos of the same
//   concatenated  Hugging Face MarianMT: column i = sin(t / 10000^(2i/dim)), column dim/2 + i = cos of the same
//   marian        Marian: column i = sin(t * exp(-i * ln(10000) / (dim/2 - 1))), column dim/2 + i = cos of the same,
//                 computed in float as Marian's CPU code does
enum class PositionLayout { interleaved, concatenated, marian };
// --type: the encoder-decoder Transformer, or a decoder-only language model (DecoderOnlyModel): dec-depth layers of
// causal self-attention and feed-forward blocks over one vocabulary, the output layer always tied to the embeddings.
enum class ModelType { transformer, lm };

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
  ModelType type = ModelType::transformer;  // type
  int src_vocab = 0, tgt_vocab = 0;  // dim-vocabs (a language model: one vocabulary, src_vocab == tgt_vocab)
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
  PositionLayout positions = PositionLayout::interleaved;  // transformer-positions
  // transformer-train-position-embeddings: a learned position table [max_length + 1, dim] instead of the
  // sinusoidal one (language models only in this version).
  bool learned_positions = false;
  // transformer-scale-embeddings: token embeddings times sqrt(dim-emb) (Vaswani et al., Marian), or as they are
  // (false: GPT-2, whose output layer shares the unscaled table; language models only in this version).
  bool scale_embeddings = true;

  int head_dim() const { return dim_emb / heads; }
  bool is_lm() const { return type == ModelType::lm; }
  // A language model's settings that follow from its type: no encoder, one vocabulary (the target's), the output
  // tied to the embeddings. from_yaml applies it; a config built in code for --type lm calls it (tests).
  void normalize_lm();
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
PositionLayout parse_position_layout(const std::string& name);  // interleaved, concatenated, marian
const char* position_layout_name(PositionLayout layout);
ModelType parse_model_type(const std::string& name);  // transformer; lm or lm-transformer
const char* model_type_name(ModelType type);          // transformer, lm

}  // namespace lseq

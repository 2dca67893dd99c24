#include "core/model/model_config.h"

#include <vector>

#include "util/error.h"

namespace lseq {

NormPlacement parse_norm_placement(const std::string& preprocess, const std::string& postprocess) {
  if (preprocess.empty() && postprocess == "dan") return NormPlacement::post;
  if (preprocess == "n" && postprocess == "da") return NormPlacement::pre;
  fail(
      "--transformer-preprocess '{}' with --transformer-postprocess '{}' is not supported; use '' with 'dan' "
      "(post-norm) or 'n' with 'da' (pre-norm)",
      preprocess, postprocess);
}

bool parse_embedding_postprocess(const std::string& ops) {
  if (ops == "d") return true;
  if (ops.empty()) return false;
  fail("--transformer-postprocess-emb '{}' is not supported; use 'd' (dropout) or '' (nothing)", ops);
}

kernels::Activation parse_activation(const std::string& name) {
  if (name == "relu") return kernels::Activation::relu;
  if (name == "gelu") return kernels::Activation::gelu;
  if (name == "swish") return kernels::Activation::swish;
  fail("--transformer-ffn-activation '{}' is not supported; use relu, gelu or swish", name);
}

const char* activation_name(kernels::Activation act) {
  switch (act) {
    case kernels::Activation::relu:
      return "relu";
    case kernels::Activation::gelu:
      return "gelu";
    case kernels::Activation::swish:
      return "swish";
  }
  return "?";
}

PositionLayout parse_position_layout(const std::string& name) {
  if (name == "interleaved") return PositionLayout::interleaved;
  if (name == "concatenated") return PositionLayout::concatenated;
  if (name == "marian") return PositionLayout::marian;
  fail("--transformer-positions '{}' is not supported; use interleaved, concatenated or marian", name);
}

const char* position_layout_name(PositionLayout layout) {
  switch (layout) {
    case PositionLayout::interleaved:
      return "interleaved";
    case PositionLayout::concatenated:
      return "concatenated";
    case PositionLayout::marian:
      return "marian";
  }
  return "?";
}

ModelType parse_model_type(const std::string& name) {
  if (name == "transformer") return ModelType::transformer;
  if (name == "lm" || name == "lm-transformer") return ModelType::lm;
  fail("model type '{}' is not supported; use transformer (encoder-decoder) or lm (decoder-only, also "
       "lm-transformer)",
       name);
}

const char* model_type_name(ModelType type) { return type == ModelType::lm ? "lm" : "transformer"; }

void ModelConfig::normalize_lm() {
  if (!is_lm()) return;
  enc_depth = 0;
  src_vocab = tgt_vocab;
  tied = TiedEmbeddings::target;
}

void ModelConfig::validate() const {
  auto in_range = [](int value, int limit, const char* option) {
    if (value <= 0) fail("{} must be positive, got {}", option, value);
    if (value > limit) fail("{} {} is above this version's limit of {}", option, value, limit);
  };
  in_range(src_vocab, kMaxVocab, is_lm() ? "--dim-vocabs" : "--dim-vocabs (source)");
  in_range(tgt_vocab, kMaxVocab, is_lm() ? "--dim-vocabs" : "--dim-vocabs (target)");
  in_range(dim_emb, kMaxModelDim, "--dim-emb");
  if (is_lm()) {
    if (enc_depth != 0 || src_vocab != tgt_vocab || tied != TiedEmbeddings::target)
      fail("internal error: a language model's config has an encoder, two vocabularies or untied output weights");
  } else {
    in_range(enc_depth, kMaxDepth, "--enc-depth");
    if (learned_positions)
      fail("--transformer-train-position-embeddings is implemented for language models (--type lm) only; the "
           "encoder-decoder Transformer uses sinusoidal positions");
    if (!scale_embeddings)
      fail("--transformer-scale-embeddings false is implemented for language models (--type lm) only; the "
           "encoder-decoder Transformer scales its embeddings by sqrt(--dim-emb)");
  }
  in_range(dec_depth, kMaxDepth, "--dec-depth");
  in_range(heads, kMaxHeads, "--transformer-heads");
  in_range(dim_ffn, kMaxFfnDim, "--transformer-dim-ffn");
  in_range(max_length, kMaxLength, "--max-length");
  if (dim_emb % heads != 0) {
    fail("--transformer-heads {} does not divide --dim-emb {}; choose a head count that divides the embedding size",
         heads, dim_emb);
  }
  auto probability = [](float p, const char* option) {
    if (!(p >= 0.0f && p < 1.0f)) fail("{} must be in [0, 1), got {}", option, p);
  };
  probability(dropout, "--transformer-dropout");
  probability(dropout_attention, "--transformer-dropout-attention");
  probability(dropout_ffn, "--transformer-dropout-ffn");
  probability(label_smoothing, "--label-smoothing");
  if ((tied == TiedEmbeddings::all || tied == TiedEmbeddings::source) && src_vocab != tgt_vocab) {
    fail(
        "--{} needs one vocabulary size for source and target, got {} and {}; use one shared vocabulary or "
        "--tied-embeddings",
        tied == TiedEmbeddings::all ? "tied-embeddings-all" : "tied-embeddings-src", src_vocab, tgt_vocab);
  }
  if (!(layer_norm_eps > 0.0f)) fail("--layer-norm-epsilon must be positive, got {}", layer_norm_eps);
  // Sines and cosines in two halves need an even width; Marian's frequencies divide by dim/2 - 1.
  if (positions != PositionLayout::interleaved && (dim_emb % 2 != 0 || dim_emb < 4)) {
    fail("--transformer-positions {} needs an even --dim-emb of at least 4, got {}", position_layout_name(positions),
         dim_emb);
  }
}

YAML::Node ModelConfig::to_yaml() const {
  YAML::Node node;
  node["type"] = model_type_name(type);
  node["dim-vocabs"].push_back(src_vocab);
  if (!is_lm()) node["dim-vocabs"].push_back(tgt_vocab);
  node["dim-emb"] = dim_emb;
  if (!is_lm()) node["enc-depth"] = enc_depth;
  node["dec-depth"] = dec_depth;
  node["transformer-heads"] = heads;
  node["transformer-dim-ffn"] = dim_ffn;
  node["transformer-ffn-activation"] = activation_name(activation);
  node["transformer-dropout"] = dropout;
  node["transformer-dropout-attention"] = dropout_attention;
  node["transformer-dropout-ffn"] = dropout_ffn;
  node["transformer-preprocess"] = norm == NormPlacement::pre ? "n" : "";
  node["transformer-postprocess"] = norm == NormPlacement::pre ? "da" : "dan";
  node["transformer-postprocess-emb"] = embedding_dropout ? "d" : "";
  node["transformer-prenorm"] = norm == NormPlacement::pre;
  node["tied-embeddings"] = tied == TiedEmbeddings::target;
  if (!is_lm()) {  // a language model's output is always tied to its one embedding table
    node["tied-embeddings-src"] = tied == TiedEmbeddings::source;
    node["tied-embeddings-all"] = tied == TiedEmbeddings::all;
  }
  node["max-length"] = max_length;
  node["label-smoothing"] = label_smoothing;
  node["layer-norm-epsilon"] = layer_norm_eps;
  node["transformer-positions"] = position_layout_name(positions);
  if (is_lm()) {
    node["transformer-train-position-embeddings"] = learned_positions;
    node["transformer-scale-embeddings"] = scale_embeddings;
  }
  return node;
}

namespace {
template <typename T>
void read(const YAML::Node& node, const char* key, T& value) {
  const YAML::Node child = node[key];
  if (!child || child.IsNull()) return;
  try {
    value = child.as<T>();
  } catch (const YAML::Exception&) {
    fail("model option {} has an invalid value '{}'", key, YAML::Dump(child));
  }
}
}  // namespace

ModelConfig ModelConfig::from_yaml(const YAML::Node& node) {
  ModelConfig c;
  std::string type = model_type_name(c.type);
  read(node, "type", type);
  c.type = parse_model_type(type);
  if (const YAML::Node vocabs = node["dim-vocabs"]; vocabs && !vocabs.IsNull()) {
    std::vector<int> sizes;
    read(node, "dim-vocabs", sizes);
    if (c.is_lm() && (sizes.size() == 1 || sizes.size() == 2)) {  // one vocabulary; lstrain's options give two
      c.src_vocab = c.tgt_vocab = sizes[0];
    } else {
      if (sizes.size() != 2) fail("model option dim-vocabs needs two sizes (source, target), got {}", sizes.size());
      c.src_vocab = sizes[0];
      c.tgt_vocab = sizes[1];
    }
  }
  read(node, "dim-emb", c.dim_emb);
  read(node, "enc-depth", c.enc_depth);
  read(node, "dec-depth", c.dec_depth);
  read(node, "transformer-heads", c.heads);
  read(node, "transformer-dim-ffn", c.dim_ffn);
  std::string act = activation_name(c.activation);
  read(node, "transformer-ffn-activation", act);
  c.activation = parse_activation(act);
  read(node, "transformer-dropout", c.dropout);
  read(node, "transformer-dropout-attention", c.dropout_attention);
  read(node, "transformer-dropout-ffn", c.dropout_ffn);
  std::string pre, post = "dan";
  read(node, "transformer-preprocess", pre);
  read(node, "transformer-postprocess", post);
  bool prenorm = false;
  read(node, "transformer-prenorm", prenorm);
  c.norm = prenorm ? NormPlacement::pre : parse_norm_placement(pre, post);
  std::string emb_ops = "d";
  read(node, "transformer-postprocess-emb", emb_ops);
  c.embedding_dropout = parse_embedding_postprocess(emb_ops);
  bool tied = false, tied_src = false, tied_all = false;
  read(node, "tied-embeddings", tied);
  read(node, "tied-embeddings-src", tied_src);
  read(node, "tied-embeddings-all", tied_all);
  if (tied_all || (tied && tied_src)) {
    c.tied = TiedEmbeddings::all;
  } else if (tied) {
    c.tied = TiedEmbeddings::target;
  } else if (tied_src) {
    c.tied = TiedEmbeddings::source;
  } else {
    c.tied = TiedEmbeddings::none;
  }
  read(node, "max-length", c.max_length);
  read(node, "label-smoothing", c.label_smoothing);
  read(node, "layer-norm-epsilon", c.layer_norm_eps);
  std::string positions = position_layout_name(c.positions);
  read(node, "transformer-positions", positions);
  c.positions = parse_position_layout(positions);
  read(node, "transformer-train-position-embeddings", c.learned_positions);
  read(node, "transformer-scale-embeddings", c.scale_embeddings);
  c.normalize_lm();
  return c;
}

}  // namespace lseq

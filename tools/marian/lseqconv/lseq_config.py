"""lseq's model config (lib/core/model/model_config.{h,cpp}): the same fields, read and written as the same YAML.

from_yaml() reads what ModelConfig::from_yaml reads (absent keys keep lseq's defaults; transformer-prenorm and the
tied-embeddings flags combine as there). to_yaml() writes the text that ModelConfig::to_yaml() gives through
yaml-cpp's YAML::Dump: the same keys in the same order, block sequences, and floats printed the way yaml-cpp 0.7
prints a float (9 significant digits, "%.9g"); a newer yaml-cpp may print the same values with fewer digits.
"""

import dataclasses

import numpy as np
import yaml

from .errors import ConversionError

ACTIVATIONS = ("relu", "gelu", "swish")
POSITIONS = ("interleaved", "concatenated", "marian")
TIED = ("none", "target", "source", "all")
MAX_LENGTH = 8192  # kMaxLength in model_config.h


@dataclasses.dataclass
class ModelConfig:
    src_vocab: int = 0
    tgt_vocab: int = 0
    dim_emb: int = 512
    enc_depth: int = 6
    dec_depth: int = 6
    heads: int = 8
    dim_ffn: int = 2048
    activation: str = "relu"
    dropout: float = 0.1
    embedding_dropout: bool = True
    dropout_attention: float = 0.0
    dropout_ffn: float = 0.0
    norm: str = "post"  # or "pre"
    tied: str = "none"  # none, target (tied-embeddings), source (tied-embeddings-src), all (tied-embeddings-all)
    max_length: int = 100
    label_smoothing: float = 0.1
    layer_norm_eps: float = 1e-6
    positions: str = "interleaved"

    def __post_init__(self):
        # lseq holds these as C++ floats: keep the float32 value, so that comparisons and output match it.
        for field in ("dropout", "dropout_attention", "dropout_ffn", "label_smoothing", "layer_norm_eps"):
            setattr(self, field, float(np.float32(getattr(self, field))))

    def check(self):
        """The checks of ModelConfig::validate() that a conversion can break, as ConversionErrors."""
        if self.activation not in ACTIVATIONS:
            raise ConversionError(f"activation '{self.activation}' has no lseq equivalent (lseq: relu, gelu, swish)")
        if self.positions not in POSITIONS or self.tied not in TIED or self.norm not in ("post", "pre"):
            raise ConversionError(f"internal: invalid model config {self}")
        for name in ("src_vocab", "tgt_vocab", "dim_emb", "enc_depth", "dec_depth", "heads", "dim_ffn",
                     "max_length"):
            if getattr(self, name) <= 0:
                raise ConversionError(f"the model's {name} is {getattr(self, name)}; it must be positive")
        if self.dim_emb % self.heads:
            raise ConversionError(f"{self.heads} heads do not divide the model width {self.dim_emb}")
        if self.tied in ("all", "source") and self.src_vocab != self.tgt_vocab:
            raise ConversionError(f"shared embeddings need one vocabulary size, got {self.src_vocab} and "
                                  f"{self.tgt_vocab}")
        if self.max_length > MAX_LENGTH:
            raise ConversionError(f"max length {self.max_length} is above lseq's limit of {MAX_LENGTH}")


def _float_text(value):
    """A float as yaml-cpp 0.7 emits it: iostream default notation with precision 9 (C's %.9g)."""
    value = float(np.float32(value))
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    return "%.9g" % value


def _string_text(value):
    """A plain string scalar as yaml-cpp emits it: as is, or "" when empty."""
    return '""' if value == "" else value


def to_yaml(c, as_options=False):
    """The YAML text of ModelConfig::to_yaml() after YAML::Dump (no trailing newline, as YAML::Dump). With
    `as_options` the same keys as lstrain --dump-config prints options: a flow list of sizes, floats shortest."""
    pre = c.norm == "pre"
    number = (lambda v: str(np.float32(v))) if as_options else _float_text
    vocabs = [f"dim-vocabs: [{c.src_vocab}, {c.tgt_vocab}]"] if as_options else [
        "dim-vocabs:", f"  - {c.src_vocab}", f"  - {c.tgt_vocab}"]
    lines = ["type: transformer"] + vocabs + [
        f"dim-emb: {c.dim_emb}",
        f"enc-depth: {c.enc_depth}",
        f"dec-depth: {c.dec_depth}",
        f"transformer-heads: {c.heads}",
        f"transformer-dim-ffn: {c.dim_ffn}",
        f"transformer-ffn-activation: {c.activation}",
        f"transformer-dropout: {number(c.dropout)}",
        f"transformer-dropout-attention: {number(c.dropout_attention)}",
        f"transformer-dropout-ffn: {number(c.dropout_ffn)}",
        f"transformer-preprocess: {_string_text('n' if pre else '')}",
        f"transformer-postprocess: {'da' if pre else 'dan'}",
        f"transformer-postprocess-emb: {_string_text('d' if c.embedding_dropout else '')}",
        f"transformer-prenorm: {'true' if pre else 'false'}",
        f"tied-embeddings: {'true' if c.tied == 'target' else 'false'}",
        f"tied-embeddings-src: {'true' if c.tied == 'source' else 'false'}",
        f"tied-embeddings-all: {'true' if c.tied == 'all' else 'false'}",
        f"max-length: {c.max_length}",
        f"label-smoothing: {number(c.label_smoothing)}",
        f"layer-norm-epsilon: {number(c.layer_norm_eps)}",
        f"transformer-positions: {c.positions}",
    ]
    return "\n".join(lines)


def from_yaml(text):
    """A ModelConfig from YAML text, read as ModelConfig::from_yaml reads it."""
    try:
        node = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConversionError(f"the lseq model config is not YAML: {e}") from None
    c = ModelConfig()

    def get(key, default):
        value = node.get(key)
        return default if value is None else value

    vocabs = node.get("dim-vocabs")
    if vocabs is not None:
        if len(vocabs) != 2:
            raise ConversionError(f"model option dim-vocabs needs two sizes, got {vocabs}")
        c.src_vocab, c.tgt_vocab = int(vocabs[0]), int(vocabs[1])
    c.dim_emb = int(get("dim-emb", c.dim_emb))
    c.enc_depth = int(get("enc-depth", c.enc_depth))
    c.dec_depth = int(get("dec-depth", c.dec_depth))
    c.heads = int(get("transformer-heads", c.heads))
    c.dim_ffn = int(get("transformer-dim-ffn", c.dim_ffn))
    c.activation = str(get("transformer-ffn-activation", c.activation))
    c.dropout = float(get("transformer-dropout", c.dropout))
    c.dropout_attention = float(get("transformer-dropout-attention", c.dropout_attention))
    c.dropout_ffn = float(get("transformer-dropout-ffn", c.dropout_ffn))
    pre, post = str(get("transformer-preprocess", "")), str(get("transformer-postprocess", "dan"))
    if get("transformer-prenorm", False):
        c.norm = "pre"
    elif (pre, post) == ("", "dan"):
        c.norm = "post"
    elif (pre, post) == ("n", "da"):
        c.norm = "pre"
    else:
        raise ConversionError(f"transformer-preprocess '{pre}' with transformer-postprocess '{post}' is not an lseq "
                              "model")
    c.embedding_dropout = str(get("transformer-postprocess-emb", "d")) == "d"
    tied, tied_src, tied_all = (bool(get(k, False)) for k in
                                ("tied-embeddings", "tied-embeddings-src", "tied-embeddings-all"))
    if tied_all or (tied and tied_src):
        c.tied = "all"
    elif tied:
        c.tied = "target"
    elif tied_src:
        c.tied = "source"
    else:
        c.tied = "none"
    c.max_length = int(get("max-length", c.max_length))
    c.label_smoothing = float(get("label-smoothing", c.label_smoothing))
    c.layer_norm_eps = float(get("layer-norm-epsilon", c.layer_norm_eps))
    c.positions = str(get("transformer-positions", c.positions))
    c.__post_init__()
    if c.positions not in POSITIONS:
        raise ConversionError(f"transformer-positions '{c.positions}' is not one of {', '.join(POSITIONS)}")
    return c

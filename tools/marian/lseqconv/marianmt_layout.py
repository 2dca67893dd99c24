"""Hugging Face MarianMT's tensor names and config.json, against lseq's (docs/convert-marian.md has the table).

Learned from transformers' modeling_marian.py and configuration_marian.py: MarianMTModel = model.shared (or
model.encoder.embed_tokens / model.decoder.embed_tokens), model.{encoder,decoder}.layers.N with q_proj/k_proj/v_proj/
out_proj (nn.Linear: [out, in], as lseq), self_attn_layer_norm, encoder_attn(_layer_norm) in the decoder, fc1, fc2,
final_layer_norm; lm_head (no bias) plus the buffer final_logits_bias [1, V]; post-norm; embeddings scaled by
sqrt(d_model) when scale_embedding; the sinusoidal embed_positions tables; nn.LayerNorm's default epsilon 1e-5.
"""

import numpy as np

from .errors import ConversionError, warn

HF_LAYER_NORM_EPS = 1e-5  # nn.LayerNorm(embed_dim) in MarianEncoderLayer / MarianDecoderLayer: not configurable

# lseq activation -> MarianMT activation_function; lseq's gelu is the tanh approximation, which is gelu_new there.
ACTIVATION_TO_HF = {"relu": "relu", "gelu": "gelu_new", "swish": "swish"}
ACTIVATION_FROM_HF = {"relu": "relu", "swish": "swish", "silu": "swish", "gelu_new": "gelu",
                      "gelu_pytorch_tanh": "gelu", "gelu_fast": None, "gelu": None}


def _lin(tensors, lseq_name, hf_name):
    return {f"{hf_name}.weight": tensors[f"{lseq_name}.weight"], f"{hf_name}.bias": tensors[f"{lseq_name}.bias"]}


def _split(tensors, lseq_name, hf_names):
    """A fused lseq projection's row blocks (qkv, kv) as separate MarianMT projections."""
    w, b = tensors[f"{lseq_name}.weight"], tensors[f"{lseq_name}.bias"]
    parts = len(hf_names)
    out = {}
    for i, (wi, bi) in enumerate(zip(np.split(w, parts, axis=0), np.split(b, parts, axis=0))):
        out[f"{hf_names[i]}.weight"], out[f"{hf_names[i]}.bias"] = wi, bi
    return out


def layers_to_hf(config, tensors):
    """The encoder and decoder layers of lseq tensors, under MarianMT's names."""
    out = {}
    for i in range(config.enc_depth):
        l, h = f"encoder.l{i + 1}", f"model.encoder.layers.{i}"
        out.update(_split(tensors, f"{l}.self_attn.qkv", [f"{h}.self_attn.{p}_proj" for p in "qkv"]))
        out.update(_lin(tensors, f"{l}.self_attn.out", f"{h}.self_attn.out_proj"))
        out.update(_lin(tensors, f"{l}.self_attn_norm", f"{h}.self_attn_layer_norm"))
        out.update(_lin(tensors, f"{l}.ffn.in", f"{h}.fc1"))
        out.update(_lin(tensors, f"{l}.ffn.out", f"{h}.fc2"))
        out.update(_lin(tensors, f"{l}.ffn_norm", f"{h}.final_layer_norm"))
    for i in range(config.dec_depth):
        l, h = f"decoder.l{i + 1}", f"model.decoder.layers.{i}"
        out.update(_split(tensors, f"{l}.self_attn.qkv", [f"{h}.self_attn.{p}_proj" for p in "qkv"]))
        out.update(_lin(tensors, f"{l}.self_attn.out", f"{h}.self_attn.out_proj"))
        out.update(_lin(tensors, f"{l}.self_attn_norm", f"{h}.self_attn_layer_norm"))
        out.update(_lin(tensors, f"{l}.cross_attn.q", f"{h}.encoder_attn.q_proj"))
        out.update(_split(tensors, f"{l}.cross_attn.kv", [f"{h}.encoder_attn.{p}_proj" for p in "kv"]))
        out.update(_lin(tensors, f"{l}.cross_attn.out", f"{h}.encoder_attn.out_proj"))
        out.update(_lin(tensors, f"{l}.cross_attn_norm", f"{h}.encoder_attn_layer_norm"))
        out.update(_lin(tensors, f"{l}.ffn.in", f"{h}.fc1"))
        out.update(_lin(tensors, f"{l}.ffn.out", f"{h}.fc2"))
        out.update(_lin(tensors, f"{l}.ffn_norm", f"{h}.final_layer_norm"))
    return out


class HfTensors:
    """A MarianMT state dict, read with its names checked off as they are used, so that leftovers are refused."""

    def __init__(self, tensors, where):
        if not any(k.startswith("model.") for k in tensors):  # a MarianModel checkpoint: no "model." prefix
            tensors = {(k if k in ("final_logits_bias", "lm_head.weight") else f"model.{k}"): v
                       for k, v in tensors.items()}
        self.tensors = tensors
        self.where = where
        self.used = set()

    def has(self, name):
        return name in self.tensors

    def take(self, name, shape=None):
        if name not in self.tensors:
            raise ConversionError(f"{self.where} lacks the tensor {name}")
        array = np.asarray(self.tensors[name], dtype=np.float32)
        if shape is not None and tuple(array.shape) != tuple(shape):
            raise ConversionError(f"{self.where}: {name} has shape {list(array.shape)}, expected {list(shape)}")
        self.used.add(name)
        return array

    def leftovers(self):
        return sorted(set(self.tensors) - self.used)


def _fuse(hf, names, dim):
    w = np.concatenate([hf.take(f"{n}.weight", (dim, dim)) for n in names], axis=0)
    b = np.concatenate([hf.take(f"{n}.bias", (dim,)) for n in names], axis=0)
    return w, b


def layers_from_hf(config, hf):
    """lseq's layer tensors from a MarianMT state dict (HfTensors)."""
    d, ffn = config.dim_emb, config.dim_ffn
    out = {}

    def lin(lseq_name, hf_name, rows, cols):
        out[f"{lseq_name}.weight"] = hf.take(f"{hf_name}.weight", (rows, cols) if cols else (rows,))
        out[f"{lseq_name}.bias"] = hf.take(f"{hf_name}.bias", (rows,))

    def fused(lseq_name, hf_names):
        out[f"{lseq_name}.weight"], out[f"{lseq_name}.bias"] = _fuse(hf, hf_names, d)

    for i in range(config.enc_depth):
        l, h = f"encoder.l{i + 1}", f"model.encoder.layers.{i}"
        fused(f"{l}.self_attn.qkv", [f"{h}.self_attn.{p}_proj" for p in "qkv"])
        lin(f"{l}.self_attn.out", f"{h}.self_attn.out_proj", d, d)
        lin(f"{l}.self_attn_norm", f"{h}.self_attn_layer_norm", d, 0)
        lin(f"{l}.ffn.in", f"{h}.fc1", ffn, d)
        lin(f"{l}.ffn.out", f"{h}.fc2", d, ffn)
        lin(f"{l}.ffn_norm", f"{h}.final_layer_norm", d, 0)
    for i in range(config.dec_depth):
        l, h = f"decoder.l{i + 1}", f"model.decoder.layers.{i}"
        fused(f"{l}.self_attn.qkv", [f"{h}.self_attn.{p}_proj" for p in "qkv"])
        lin(f"{l}.self_attn.out", f"{h}.self_attn.out_proj", d, d)
        lin(f"{l}.self_attn_norm", f"{h}.self_attn_layer_norm", d, 0)
        lin(f"{l}.cross_attn.q", f"{h}.encoder_attn.q_proj", d, d)
        fused(f"{l}.cross_attn.kv", [f"{h}.encoder_attn.{p}_proj" for p in "kv"])
        lin(f"{l}.cross_attn.out", f"{h}.encoder_attn.out_proj", d, d)
        lin(f"{l}.cross_attn_norm", f"{h}.encoder_attn_layer_norm", d, 0)
        lin(f"{l}.ffn.in", f"{h}.fc1", ffn, d)
        lin(f"{l}.ffn.out", f"{h}.fc2", d, ffn)
        lin(f"{l}.ffn_norm", f"{h}.final_layer_norm", d, 0)
    return out


# config.json options a MarianMT checkpoint may carry that would make it compute something lseq cannot.
_REFUSED_TRUE = {
    "normalize_before": "pre-norm layers (normalize_before); lseq's pre-norm ends with a final LayerNorm "
                        "that MarianMT lacks, and MarianMT's code is post-norm",
    "normalize_embedding": "a LayerNorm on the embeddings (normalize_embedding)",
    "layernorm_embedding": "a LayerNorm on the embeddings (layernorm_embedding)",
    "add_final_layer_norm": "a final LayerNorm (add_final_layer_norm)",
    "add_bias_logits": "a bias inside the output projection (add_bias_logits)",
}


def check_hf_config(cfg, where, allow_gelu_approximation=False):
    """lseq's architecture fields from a MarianMT config.json; refuses what lseq cannot compute, naming the option.
    Returns a dict of ModelConfig fields (vocabulary sizes and tying included)."""
    if cfg.get("model_type") != "marian":
        raise ConversionError(f"{where}: model_type is {cfg.get('model_type')!r}, not 'marian'; only MarianMT "
                              "checkpoints convert")
    for key, what in _REFUSED_TRUE.items():
        if cfg.get(key):
            raise ConversionError(f"{where}: {key} is true: {what} has no lseq equivalent")
    if cfg.get("static_position_embeddings") is False:
        raise ConversionError(f"{where}: static_position_embeddings is false (learned positions); lseq has "
                              "sinusoidal positions only")
    if not cfg.get("scale_embedding", False):
        raise ConversionError(f"{where}: scale_embedding is false (or absent, MarianConfig's default); lseq always "
                              "scales embeddings by sqrt(d_model)")
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if cfg.get(a) != cfg.get(b):
            raise ConversionError(f"{where}: {a} {cfg.get(a)} differs from {b} {cfg.get(b)}; lseq has one value "
                                  "for both stacks")
    act = cfg.get("activation_function", "gelu")
    mapped = ACTIVATION_FROM_HF.get(act)
    if act == "gelu" and allow_gelu_approximation:
        warn("activation_function gelu (exact, erf) becomes lseq's gelu, the tanh approximation (gelu_new): "
             "outputs differ by up to about 1e-3 per activation")
        mapped = "gelu"
    if mapped is None:
        hint = " (or pass --allow-gelu-approximation)" if act == "gelu" else ""
        raise ConversionError(f"{where}: activation_function {act!r} has no exact lseq equivalent; lseq has relu, "
                              f"swish and gelu_new (tanh approximation){hint}")
    share = bool(cfg.get("share_encoder_decoder_embeddings", True))
    vocab = int(cfg["vocab_size"])
    dec_vocab = vocab if share else int(cfg.get("decoder_vocab_size") or vocab)
    return {
        "dim_emb": int(cfg["d_model"]), "enc_depth": int(cfg["encoder_layers"]),
        "dec_depth": int(cfg["decoder_layers"]), "heads": int(cfg["encoder_attention_heads"]),
        "dim_ffn": int(cfg["encoder_ffn_dim"]), "activation": mapped,
        "dropout": float(cfg.get("dropout", 0.1)), "dropout_attention": float(cfg.get("attention_dropout", 0.0)),
        "dropout_ffn": float(cfg.get("activation_dropout", 0.0)),
        "max_positions": int(cfg.get("max_position_embeddings", 1024)),
        "share": share, "tie_output": bool(cfg.get("tie_word_embeddings", True)),
        "vocab": vocab, "dec_vocab": dec_vocab,
    }


def hf_config(config, max_positions):
    """config.json of an lseq model (ids are lseq's: pad 0, decoding starts from bos 2, eos 3). Generation settings
    (forced_eos_token_id, bad_words_ids, num_beams, ...) go to generation_config.json: transformers 5 no longer
    takes them from config.json."""
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": config.src_vocab,
        "decoder_vocab_size": config.tgt_vocab,
        "share_encoder_decoder_embeddings": config.tied in ("all", "source"),
        "tie_word_embeddings": config.tied in ("all", "target"),
        "d_model": config.dim_emb,
        "encoder_layers": config.enc_depth,
        "decoder_layers": config.dec_depth,
        "encoder_attention_heads": config.heads,
        "decoder_attention_heads": config.heads,
        "encoder_ffn_dim": config.dim_ffn,
        "decoder_ffn_dim": config.dim_ffn,
        "activation_function": ACTIVATION_TO_HF[config.activation],
        "dropout": config.dropout,
        "attention_dropout": config.dropout_attention,
        "activation_dropout": config.dropout_ffn,
        "max_position_embeddings": max_positions,
        "scale_embedding": True,
        "static_position_embeddings": True,
        "normalize_before": False,
        "normalize_embedding": False,
        "add_final_layer_norm": False,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "decoder_start_token_id": 2,
        "eos_token_id": 3,
        "is_encoder_decoder": True,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "init_std": 0.02,
        "use_cache": True,
    }

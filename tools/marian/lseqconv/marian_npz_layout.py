"""Marian's .npz parameter names and its special:model.yml options, against lseq's (docs/convert-marian.md).

Learned from marian-dev's src/models/transformer.h (MultiHead: {prefix}_Wq/_bq/_Wk/_bk/_Wv/_bv/_Wo/_bo with prefixes
encoder_lN_self, decoder_lN_self, decoder_lN_context; LayerFFN: {prefix}_W1/_b1/_W2/_b2 with prefix encoder_lN_ffn;
postProcess/preProcess LayerNorms {prefix}_Wo_ln_scale/_ln_bias and {prefix}_ffn_ln_scale/_ln_bias, "_pre" suffixed
in pre-norm; {encoder,decoder}_top_ln_* from transformer-postprocess-top), src/layers/embedding.cpp (Wemb, or
encoder_Wemb / decoder_Wemb), src/layers/output.cpp (decoder_ff_logit_out_Wt [V, dim], legacy _W [dim, V], _b
[1, V]) and src/layers/generic.h (LayerNorm epsilon 1e-6); checked against Hugging Face's
convert_marian_to_pytorch.py. Marian's matrices are [in, out] (y = x W + b): every one but the embeddings and _Wt
is transposed into lseq's [out, in]; biases and LayerNorm parameters are [1, dim] rows.
"""

import numpy as np

from .errors import ConversionError, warn

CONFIG_KEY = "special:model.yml"
MARIAN_LAYER_NORM_EPS = 1e-6  # marian::layerNorm(x, scale, bias, 1e-6f) in src/layers/generic.h


def read_npz(path):
    """(parameters, Marian options) of a Marian model file."""
    import yaml
    try:
        with np.load(path, allow_pickle=False) as npz:
            params = {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as e:
        raise ConversionError(f"cannot read the Marian model '{path}': {e}") from None
    if CONFIG_KEY not in params:
        raise ConversionError(f"'{path}' has no '{CONFIG_KEY}' entry; it is not a Marian model file")
    text = params.pop(CONFIG_KEY).tobytes().decode("utf-8").rstrip("\x00")
    try:
        options = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConversionError(f"'{path}': its {CONFIG_KEY} is not YAML: {e}") from None
    return params, options


def _opt(options, key, default):
    value = options.get(key)
    return default if value is None else value


def check_options(options, params, where, allow_gelu_approximation=False):
    """lseq's ModelConfig fields from Marian's options; refuses what lseq cannot compute, naming the option."""
    def refuse(key, why):
        raise ConversionError(f"{where}: {key} {why}")

    if _opt(options, "type", "transformer") != "transformer":
        refuse("type", f"is {options.get('type')!r}; only Marian's transformer converts")
    if _opt(options, "transformer-decoder-autoreg", "self-attention") != "self-attention":
        refuse("transformer-decoder-autoreg", f"is {options['transformer-decoder-autoreg']!r}; lseq's decoder has "
               "self-attention only")
    for key in ("right-left", "transformer-train-position-embeddings", "transformer-disable-position-embeddings",
                "transformer-no-projection", "transformer-pool", "ulr"):
        if _opt(options, key, False):
            refuse(key, "is true, which lseq's Transformer does not have")
    if "Wpos" in params:
        refuse("Wpos", "(learned positions) is in the model; lseq has sinusoidal positions only")
    if int(_opt(options, "transformer-ffn-depth", 2)) != 2:
        refuse("transformer-ffn-depth", f"is {options['transformer-ffn-depth']}; lseq's feed-forward has 2 layers")
    if int(_opt(options, "transformer-decoder-ffn-depth", 0)) not in (0, 2):
        refuse("transformer-decoder-ffn-depth", "differs from 2; lseq's feed-forward has 2 layers")
    dim_ffn = int(_opt(options, "transformer-dim-ffn", 2048))
    if int(_opt(options, "transformer-decoder-dim-ffn", 0)) not in (0, dim_ffn):
        refuse("transformer-decoder-dim-ffn", "differs from transformer-dim-ffn; lseq has one size for both stacks")
    if _opt(options, "transformer-tied-layers", []):
        refuse("transformer-tied-layers", "is set; lseq's decoder layers have their own parameters")
    if int(_opt(options, "lemma-dim-emb", 0)) or any(k.endswith("lemmaEt") for k in params):
        refuse("lemma-dim-emb", "(factored vocabularies) is set; lseq's vocabularies are not factored")
    pre, post = str(_opt(options, "transformer-preprocess", "")), str(_opt(options, "transformer-postprocess", "dan"))
    top = str(_opt(options, "transformer-postprocess-top", ""))
    if (pre, post, top) == ("", "dan", ""):
        norm = "post"
    elif (pre, post, top) == ("n", "da", "n"):
        norm = "pre"
    else:
        refuse("transformer-preprocess/-postprocess/-postprocess-top", f"are '{pre}'/'{post}'/'{top}'; lseq has "
               "post-norm (''/'dan'/'') and pre-norm with a final LayerNorm ('n'/'da'/'n')")
    emb = str(_opt(options, "transformer-postprocess-emb", "d"))
    if emb not in ("d", ""):
        refuse("transformer-postprocess-emb", f"is '{emb}'; lseq has dropout ('d') or nothing ('') after the "
               "embeddings")
    act = str(_opt(options, "transformer-ffn-activation", "swish"))
    if act == "gelu":
        if not allow_gelu_approximation:
            refuse("transformer-ffn-activation", "is gelu, which Marian computes exactly (older versions: "
                   "x * sigmoid(1.702 x)) and lseq with the tanh approximation; pass --allow-gelu-approximation "
                   "to accept the difference")
        warn("transformer-ffn-activation gelu becomes lseq's tanh-approximated gelu: outputs differ slightly")
    elif act not in ("relu", "swish"):
        refuse("transformer-ffn-activation", f"is {act!r}; lseq has relu, swish and gelu")
    tied, tied_src, tied_all = (bool(_opt(options, k, False)) for k in
                                ("tied-embeddings", "tied-embeddings-src", "tied-embeddings-all"))
    tie = "all" if tied_all or (tied and tied_src) else "source" if tied_src else "target" if tied else "none"
    return {
        "dim_emb": int(_opt(options, "dim-emb", 512)), "enc_depth": int(_opt(options, "enc-depth", 6)),
        "dec_depth": int(_opt(options, "dec-depth", 6)), "heads": int(_opt(options, "transformer-heads", 8)),
        "dim_ffn": dim_ffn, "activation": act, "norm": norm, "tied": tie, "embedding_dropout": emb == "d",
        "dropout": float(_opt(options, "transformer-dropout", 0.0)),
        "dropout_attention": float(_opt(options, "transformer-dropout-attention", 0.0)),
        "dropout_ffn": float(_opt(options, "transformer-dropout-ffn", 0.0)),
        "label_smoothing": float(_opt(options, "label-smoothing", 0.0)),
        "max_length": int(_opt(options, "max-length", 100)),
    }


class NpzParams:
    """Marian's parameters, checked off as they are used so that leftovers are refused."""

    def __init__(self, params, where):
        self.params, self.where, self.used = params, where, set()

    def has(self, name):
        return name in self.params

    def take(self, name, shape):
        if name not in self.params:
            raise ConversionError(f"{self.where} lacks the parameter {name}")
        array = np.asarray(self.params[name], dtype=np.float32)
        if array.size != int(np.prod(shape)) or (len(shape) == 2 and array.shape != tuple(shape)):
            raise ConversionError(f"{self.where}: {name} has shape {list(array.shape)}, expected {list(shape)}")
        self.used.add(name)
        return array.reshape(shape)

    def leftovers(self):
        return sorted(set(self.params) - self.used)


def layers(fields, p):
    """lseq's layer tensors (and final norms) from Marian's parameters (NpzParams)."""
    d, ffn = fields["dim_emb"], fields["dim_ffn"]
    suffix = "_pre" if fields["norm"] == "pre" else ""
    out = {}

    def matrix(name, rows_in, cols_out):  # Marian [in, out] -> lseq [out, in]
        return p.take(name, (rows_in, cols_out)).T

    def vector(name, n):
        return p.take(name, (n,))

    def norm(lseq_name, marian_prefix):
        out[f"{lseq_name}.weight"] = vector(f"{marian_prefix}_ln_scale{suffix}", d)
        out[f"{lseq_name}.bias"] = vector(f"{marian_prefix}_ln_bias{suffix}", d)

    def attention(lseq_name, marian_prefix, parts):
        out[f"{lseq_name}.weight"] = np.concatenate([matrix(f"{marian_prefix}_W{x}", d, d) for x in parts])
        out[f"{lseq_name}.bias"] = np.concatenate([vector(f"{marian_prefix}_b{x}", d) for x in parts])

    def block(l, m):
        out[f"{l}.ffn.in.weight"], out[f"{l}.ffn.in.bias"] = matrix(f"{m}_ffn_W1", d, ffn), vector(f"{m}_ffn_b1", ffn)
        out[f"{l}.ffn.out.weight"], out[f"{l}.ffn.out.bias"] = matrix(f"{m}_ffn_W2", ffn, d), vector(f"{m}_ffn_b2", d)
        norm(f"{l}.ffn_norm", f"{m}_ffn_ffn")

    for i in range(1, fields["enc_depth"] + 1):
        l, m = f"encoder.l{i}", f"encoder_l{i}"
        attention(f"{l}.self_attn.qkv", f"{m}_self", "qkv")
        out[f"{l}.self_attn.out.weight"] = matrix(f"{m}_self_Wo", d, d)
        out[f"{l}.self_attn.out.bias"] = vector(f"{m}_self_bo", d)
        norm(f"{l}.self_attn_norm", f"{m}_self_Wo")
        block(l, m)
    for i in range(1, fields["dec_depth"] + 1):
        l, m = f"decoder.l{i}", f"decoder_l{i}"
        attention(f"{l}.self_attn.qkv", f"{m}_self", "qkv")
        out[f"{l}.self_attn.out.weight"] = matrix(f"{m}_self_Wo", d, d)
        out[f"{l}.self_attn.out.bias"] = vector(f"{m}_self_bo", d)
        norm(f"{l}.self_attn_norm", f"{m}_self_Wo")
        attention(f"{l}.cross_attn.q", f"{m}_context", "q")
        attention(f"{l}.cross_attn.kv", f"{m}_context", "kv")
        out[f"{l}.cross_attn.out.weight"] = matrix(f"{m}_context_Wo", d, d)
        out[f"{l}.cross_attn.out.bias"] = vector(f"{m}_context_bo", d)
        norm(f"{l}.cross_attn_norm", f"{m}_context_Wo")
        block(l, m)
    if fields["norm"] == "pre":
        for stack in ("encoder", "decoder"):
            out[f"{stack}.final_norm.weight"] = vector(f"{stack}_top_ln_scale", d)
            out[f"{stack}.final_norm.bias"] = vector(f"{stack}_top_ln_bias", d)
    return out


def embedding_tables(fields, p, src_size, tgt_size):
    """(source, target, output or None, bias or None) Marian tables by its tying rules."""
    d, tied = fields["dim_emb"], fields["tied"]
    if tied in ("all", "source"):
        src = tgt = p.take("Wemb", (tgt_size, d))
    else:
        src = p.take("encoder_Wemb", (src_size, d))
        tgt = p.take("decoder_Wemb", (tgt_size, d))
    out = None
    if tied in ("none", "source"):
        if p.has("decoder_ff_logit_out_Wt"):
            out = p.take("decoder_ff_logit_out_Wt", (tgt_size, d))
        else:
            out = p.take("decoder_ff_logit_out_W", (d, tgt_size)).T
    bias = p.take("decoder_ff_logit_out_b", (tgt_size,)) if p.has("decoder_ff_logit_out_b") else None
    return src, tgt, out, bias

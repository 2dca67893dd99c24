"""lseq's tensor table: every parameter's name and shape, in the order EncoderDecoderModel registers them.

docs/tensor-names.md is the reference (and lib/core/model/encoder_decoder_model.cpp, encoder.cpp, decoder.cpp and
the layers the code that declares them); lseq's checkpoints store the tensors in exactly this order.
"""


def _norm(prefix, dim):
    return [(f"{prefix}.weight", (dim,)), (f"{prefix}.bias", (dim,))]


def _linear(prefix, rows, cols):
    return [(f"{prefix}.weight", (rows, cols)), (f"{prefix}.bias", (rows,))]


def param_specs(config):
    """[(name, shape)] of a model config (lseq_config.ModelConfig), in checkpoint order."""
    d, ffn = config.dim_emb, config.dim_ffn
    specs = []
    if config.tied in ("all", "source"):
        specs.append(("embeddings.shared.weight", (config.tgt_vocab, d)))
    else:
        specs.append(("embeddings.src.weight", (config.src_vocab, d)))
        specs.append(("embeddings.tgt.weight", (config.tgt_vocab, d)))
    for i in range(1, config.enc_depth + 1):
        p = f"encoder.l{i}"
        specs += _linear(f"{p}.self_attn.qkv", 3 * d, d) + _linear(f"{p}.self_attn.out", d, d)
        specs += _norm(f"{p}.self_attn_norm", d)
        specs += _linear(f"{p}.ffn.in", ffn, d) + _linear(f"{p}.ffn.out", d, ffn) + _norm(f"{p}.ffn_norm", d)
    if config.norm == "pre":
        specs += _norm("encoder.final_norm", d)
    for i in range(1, config.dec_depth + 1):
        p = f"decoder.l{i}"
        specs += _linear(f"{p}.self_attn.qkv", 3 * d, d) + _linear(f"{p}.self_attn.out", d, d)
        specs += _norm(f"{p}.self_attn_norm", d)
        specs += _linear(f"{p}.cross_attn.q", d, d) + _linear(f"{p}.cross_attn.kv", 2 * d, d)
        specs += _linear(f"{p}.cross_attn.out", d, d) + _norm(f"{p}.cross_attn_norm", d)
        specs += _linear(f"{p}.ffn.in", ffn, d) + _linear(f"{p}.ffn.out", d, ffn) + _norm(f"{p}.ffn_norm", d)
    if config.norm == "pre":
        specs += _norm("decoder.final_norm", d)
    if config.tied in ("none", "source"):
        specs.append(("output.weight", (config.tgt_vocab, d)))
    specs.append(("output.bias", (config.tgt_vocab,)))
    return specs


def embedding_names(tied):
    """(source embedding, target embedding, output weight) tensor names under a tying mode."""
    if tied == "all":
        return "embeddings.shared.weight", "embeddings.shared.weight", "embeddings.shared.weight"
    if tied == "source":
        return "embeddings.shared.weight", "embeddings.shared.weight", "output.weight"
    if tied == "target":
        return "embeddings.src.weight", "embeddings.tgt.weight", "embeddings.tgt.weight"
    return "embeddings.src.weight", "embeddings.tgt.weight", "output.weight"


def tied_from_flags(share_embeddings, tie_output):
    """lseq's tying mode from (source = target embedding, output = target embedding)."""
    if share_embeddings:
        return "all" if tie_output else "source"
    return "target" if tie_output else "none"

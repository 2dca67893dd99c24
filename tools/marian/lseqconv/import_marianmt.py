"""A Hugging Face MarianMT folder -> an lseq model directory (marianmt_to_lseq.py is the command)."""

import numpy as np

from . import assemble, id_plan, lseq_config, lseq_dir, marianmt_layout, positions, spm_vocab
from .errors import ConversionError, warn
from .hf_folder import HfFolder
from .lseq_params import tied_from_flags

ORIGIN = "tools/marian/marianmt_to_lseq.py"


def plans(hf, src_proto, tgt_proto, fields):
    """(source Side, target Side) of a MarianMT folder: the id plans and SentencePiece models."""
    pad = hf.special("pad_token_id")
    start = hf.special("decoder_start_token_id", pad)
    eos = hf.special("eos_token_id")
    if eos is None:
        raise ConversionError(f"{hf.folder}/config.json has no eos_token_id")
    sides = []
    for vocab, proto, size in ((hf.source_vocab, src_proto, fields["vocab"]),
                               (hf.target_vocab, tgt_proto, fields["dec_vocab"])):
        if hf.unk_token not in vocab:
            raise ConversionError(f"{hf.folder}: the unk token {hf.unk_token!r} is not in the vocabulary")
        if max(vocab.values()) >= size:
            raise ConversionError(f"{hf.folder}: the vocabulary has id {max(vocab.values())}, but the model has "
                                  f"{size} embedding rows")
        sides.append((vocab, proto, size, vocab[hf.unk_token]))
    if fields["share"]:
        vocab, _, size, unk = sides[0]
        extra = assemble.extras([src_proto, tgt_proto], [vocab, vocab])
        token_of = {i: t for t, i in vocab.items()}
        plan = id_plan.make(size, token_of, pad, start, eos, unk, extra)
        return (assemble.Side(plan, unk, src_proto), assemble.Side(plan, unk, tgt_proto))
    out = []
    for vocab, proto, size, unk in sides:
        token_of = {i: t for t, i in vocab.items()}
        plan = id_plan.make(size, token_of, pad, start, eos, unk, assemble.extras([proto], [vocab]))
        out.append(assemble.Side(plan, unk, proto))
    return tuple(out)


def _positions(hf):
    """The layout of the checkpoint's embed_positions tables (absent: MarianMT computes its own, concatenated)."""
    found = set()
    for name in ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"):
        if hf.has(name):
            layout = positions.recognise(hf.take(name))
            if layout is None:
                raise ConversionError(f"{hf.where}: {name} is no sinusoidal table lseq knows (learned positions?); "
                                      "lseq has sinusoidal positions only")
            found.add(layout)
    if len(found) > 1:
        raise ConversionError(f"{hf.where}: the encoder and decoder position tables differ ({sorted(found)})")
    return found.pop() if found else "concatenated"


def _embedding_tables(hf, fields):
    """(source, target, output or None, bias or None) foreign tables, by MarianMT's tying rules."""
    d = fields["dim_emb"]
    if fields["share"]:
        for name in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
            if hf.has(name):
                src = tgt = hf.take(name, (fields["vocab"], d))
                break
        else:
            raise ConversionError(f"{hf.where} has no model.shared.weight")
        for alias in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
            if hf.has(alias):
                hf.take(alias)  # aliases of the shared table
    else:
        src = hf.take("model.encoder.embed_tokens.weight", (fields["vocab"], d))
        tgt = hf.take("model.decoder.embed_tokens.weight", (fields["dec_vocab"], d))
    out = None
    if fields["tie_output"]:
        if hf.has("lm_head.weight"):
            head = hf.take("lm_head.weight")
            if head.shape != tgt.shape or not np.array_equal(head, tgt):
                warn("lm_head.weight differs from the target embedding, but tie_word_embeddings is true: "
                     "transformers ties them when loading, and so does lseq (lm_head.weight is not used)")
    else:
        out = hf.take("lm_head.weight", (fields["dec_vocab"], d))
    bias = None
    if hf.has("final_logits_bias"):
        bias = hf.take("final_logits_bias").reshape(-1)
        if bias.shape[0] != fields["dec_vocab"]:
            raise ConversionError(f"{hf.where}: final_logits_bias has {bias.shape[0]} entries for a target "
                                  f"vocabulary of {fields['dec_vocab']}")
    return src, tgt, out, bias


def _decoder_options(hf, max_length):
    g = hf.generation_config
    beam = g.get("num_beams") or hf.config.get("num_beams") or 4
    normalize = g.get("length_penalty", hf.config.get("length_penalty", 1.0))
    return {"beam-size": int(beam), "normalize": float(normalize), "max-length-factor": 3, "mini-batch": 16,
            "maxi-batch": 100, "max-length": max_length}


def _carried(hf, config):
    """The lseq model config a folder written by lseq_to_marianmt.py carries, when it describes this model: it
    restores what MarianMT cannot hold (max length, LayerNorm epsilon, label smoothing, ...)."""
    text = hf.metadata.get(lseq_dir.CONFIG_KEY)
    if not text:
        return None, None
    carried = lseq_config.from_yaml(text)
    same = ("src_vocab", "tgt_vocab", "dim_emb", "enc_depth", "dec_depth", "heads", "dim_ffn", "activation", "tied",
            "positions", "dropout", "dropout_attention", "dropout_ffn")
    if all(getattr(carried, k) == getattr(config, k) for k in same):
        return carried, text
    warn("the folder carries an lseq model config that does not describe its weights any more; it is ignored")
    return None, None


def convert(folder, out_dir, allow_gelu_approximation=False):
    """Converts; returns (lseq ModelConfig, source Side, target Side) for callers that map ids (tests, checks)."""
    hf = HfFolder(folder)
    fields = marianmt_layout.check_hf_config(hf.config, f"{folder}/config.json", allow_gelu_approximation)
    tensors = marianmt_layout.HfTensors(hf.tensors, f"the weights of '{folder}'")
    src_proto, tgt_proto = spm_vocab.load_proto(hf.source_spm), spm_vocab.load_proto(hf.target_spm)
    source, target = plans(hf, src_proto, tgt_proto, fields)
    if any(t.startswith(">>") and t.endswith("<<") for t in hf.source_vocab):
        warn("the vocabulary has language tokens (>>xx<<); MarianTokenizer splits them off before SentencePiece, "
             "lseq's vocabulary does not: give such inputs as ids (--no-spm-encode)")
    tied = tied_from_flags(fields["share"], fields["tie_output"])
    config = lseq_config.ModelConfig(
        src_vocab=len(source.plan.rows), tgt_vocab=len(target.plan.rows), dim_emb=fields["dim_emb"],
        enc_depth=fields["enc_depth"], dec_depth=fields["dec_depth"], heads=fields["heads"],
        dim_ffn=fields["dim_ffn"], activation=fields["activation"], dropout=fields["dropout"],
        dropout_attention=fields["dropout_attention"], dropout_ffn=fields["dropout_ffn"], norm="post", tied=tied,
        max_length=min(fields["max_positions"] - 1, lseq_config.MAX_LENGTH),
        layer_norm_eps=marianmt_layout.HF_LAYER_NORM_EPS, positions=_positions(tensors))
    out = marianmt_layout.layers_from_hf(config, tensors)
    out.update(assemble.embeddings(tied, source, target, *_embedding_tables(tensors, fields)))
    leftovers = [n for n in tensors.leftovers() if not n.endswith("embed_positions.weight")]
    if leftovers:
        more = f" (and {len(leftovers) - 1} more)" if len(leftovers) > 1 else ""
        raise ConversionError(f"the weights of '{folder}' hold {leftovers[0]}{more}, which lseq's Transformer has "
                              "no place for")
    carried, text = _carried(hf, config)
    if carried is not None:
        config = carried
    elif config.max_length < fields["max_positions"] - 1:
        warn(f"max_position_embeddings {fields['max_positions']} is above lseq's limit; max-length is "
             f"{config.max_length}")
    lseq_dir.write(out_dir, config, out, assemble.vocabularies(source, target),
                   _decoder_options(hf, min(fields["max_positions"] - 1, lseq_config.MAX_LENGTH)), ORIGIN, text,
                   hf.metadata.get("lseq.updates", "0") if carried is not None else "0")
    return config, source, target


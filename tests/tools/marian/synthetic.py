"""Synthetic foreign models for the converter tests, built with numpy alone (nothing is downloaded):
SentencePiece models trained on data/sample-de-en, MarianMT folders laid out as save_pretrained and MarianTokenizer
write them, and Marian .npz models with their .yml vocabularies, from the same random weights."""

import io
import json
import os
import sys

import numpy as np
import sentencepiece as spm

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SAMPLE = os.path.join(REPO, "data", "sample-de-en")
sys.path.insert(0, os.path.join(REPO, "tools", "marian"))

from lseqconv import positions, safetensors_io, spm_vocab  # noqa: E402


def sample_lines(name, count=None):
    with open(os.path.join(SAMPLE, name), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:count] if count else lines


def train_spm(lines, vocab_size, model_type="unigram"):
    """A SentencePiece model (serialized) with the library's default specials: <unk> 0, <s> 1, </s> 2, as Marian's
    and OPUS-MT's are; hard_vocab_limit off so small corpora train."""
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=out, vocab_size=vocab_size,
                                   model_type=model_type, hard_vocab_limit=False, minloglevel=2,
                                   character_coverage=1.0, num_threads=1)
    return out.getvalue()


def produced(spm_bytes):
    """The pieces of a SentencePiece model that segmentation produces, in model order."""
    return list(spm_vocab.produced_pieces(spm_vocab.parse(spm_bytes)))


class Spec:
    """A random MarianMT: sizes, activation, tying, and how its vocabulary and weights are made."""

    def __init__(self, d=16, enc=2, dec=2, heads=2, ffn=32, activation="swish", share=True, tie=True,
                 drop_pieces=(5, 9, 14), foreign_tokens=("▁qqzx", "▁zzyq"), pad_last=True, max_positions=64,
                 positions_table=False, neutral_pad=False, seed=1, embedding_std=0.5, bias_std=1.0):
        self.__dict__.update(locals())
        del self.__dict__["self"]


def vocab_tokens(spec, src_spm, tgt_spm):
    """MarianMT token lists ({token: id}; for a shared vocabulary both are the same dict): </s> 0, <unk> 1, the
    pieces of the SentencePiece models but a few (`drop_pieces`: pieces the vocabulary lacks, as Marian's .yml
    vocabularies lack pieces that never occurred in the training data), a few tokens no model produces, and <pad>
    last (as Hugging Face's converter adds it) or at 2."""
    def build(pieces):
        kept = [p for i, p in enumerate(pieces) if i not in spec.drop_pieces]
        tokens = ["</s>", "<unk>"] + ([] if spec.pad_last else ["<pad>"]) + kept + list(spec.foreign_tokens)
        tokens += ["<pad>"] if spec.pad_last else []
        return {t: i for i, t in enumerate(dict.fromkeys(tokens))}

    src, tgt = produced(src_spm), produced(tgt_spm)
    if spec.share:
        joint = build(list(dict.fromkeys(src + tgt)))
        return joint, joint
    return build(src), build(tgt)


def random_weights(spec, src_size, tgt_size, pad):
    """MarianMT's state dict (HF names, float32) of a random model."""
    rng = np.random.default_rng(spec.seed)
    d, ffn = spec.d, spec.ffn

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def vec(n, center=0.0, std=0.1):
        return (center + std * rng.standard_normal(n)).astype(np.float32)

    w = {}

    def linear(name, rows, cols):
        w[f"{name}.weight"], w[f"{name}.bias"] = mat(rows, cols), vec(rows)

    def norm(name):
        w[f"{name}.weight"], w[f"{name}.bias"] = vec(d, 1.0), vec(d)

    for stack, depth in (("encoder", spec.enc), ("decoder", spec.dec)):
        for i in range(depth):
            h = f"model.{stack}.layers.{i}"
            for p in ("q", "k", "v", "out"):
                linear(f"{h}.self_attn.{p}_proj", d, d)
            norm(f"{h}.self_attn_layer_norm")
            if stack == "decoder":
                for p in ("q", "k", "v", "out"):
                    linear(f"{h}.encoder_attn.{p}_proj", d, d)
                norm(f"{h}.encoder_attn_layer_norm")
            linear(f"{h}.fc1", ffn, d)
            linear(f"{h}.fc2", d, ffn)
            norm(f"{h}.final_layer_norm")
    src = (spec.embedding_std * rng.standard_normal((src_size, d))).astype(np.float32)
    tgt = src if spec.share else (spec.embedding_std * rng.standard_normal((tgt_size, d))).astype(np.float32)
    bias = (spec.bias_std * rng.standard_normal((1, tgt_size))).astype(np.float32)
    if spec.neutral_pad:  # the pad row as Marian "has" it: a zero start vector that is never produced
        src[pad] = 0.0
        tgt[pad] = 0.0
        bias[0, pad] = -30000.0
    if spec.share:
        w["model.shared.weight"] = src
    else:
        w["model.encoder.embed_tokens.weight"], w["model.decoder.embed_tokens.weight"] = src, tgt
    if not spec.tie:
        w["lm_head.weight"] = (spec.embedding_std * rng.standard_normal((tgt_size, d))).astype(np.float32)
    w["final_logits_bias"] = bias
    if spec.positions_table:
        table = positions.table("concatenated", spec.max_positions, d)
        w["model.encoder.embed_positions.weight"] = w["model.decoder.embed_positions.weight"] = table
    return w


def marianmt_folder(path, spec, src_spm, tgt_spm):
    """Writes a MarianMT folder; returns (config.json dict, state dict, source tokens, target tokens)."""
    os.makedirs(path, exist_ok=True)
    src_tokens, tgt_tokens = vocab_tokens(spec, src_spm, tgt_spm)
    pad = src_tokens["<pad>"]
    assert tgt_tokens["<pad>"] == pad, "MarianMT has one pad id for both vocabularies"
    weights = random_weights(spec, len(src_tokens), len(tgt_tokens), pad)
    config = {
        "architectures": ["MarianMTModel"], "model_type": "marian", "vocab_size": len(src_tokens),
        "decoder_vocab_size": len(tgt_tokens), "share_encoder_decoder_embeddings": spec.share,
        "tie_word_embeddings": spec.tie, "d_model": spec.d, "encoder_layers": spec.enc,
        "decoder_layers": spec.dec, "encoder_attention_heads": spec.heads, "decoder_attention_heads": spec.heads,
        "encoder_ffn_dim": spec.ffn, "decoder_ffn_dim": spec.ffn, "activation_function": spec.activation,
        "max_position_embeddings": spec.max_positions, "scale_embedding": True, "static_position_embeddings": True,
        "normalize_before": False, "normalize_embedding": False, "pad_token_id": pad,
        "decoder_start_token_id": pad, "eos_token_id": 0, "forced_eos_token_id": 0, "bos_token_id": 0,
        "dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0, "is_encoder_decoder": True,
    }
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    write_tokenizer_files(path, spec, src_tokens, tgt_tokens, src_spm, tgt_spm)
    with open(os.path.join(path, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump({"num_beams": 4, "bad_words_ids": [[pad]], "max_length": spec.max_positions}, f)
    safetensors_io.write(os.path.join(path, "model.safetensors"), sorted(weights.items()), {"format": "pt"})
    return config, weights, src_tokens, tgt_tokens


def write_tokenizer_files(path, spec, src_tokens, tgt_tokens, src_spm, tgt_spm):
    """vocab.json (and target_vocab.json), tokenizer_config.json, source.spm and target.spm, as MarianTokenizer
    saves them."""
    with open(os.path.join(path, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(src_tokens, f, ensure_ascii=False)
    if not spec.share:
        with open(os.path.join(path, "target_vocab.json"), "w", encoding="utf-8") as f:
            json.dump(tgt_tokens, f, ensure_ascii=False)
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "MarianTokenizer", "separate_vocabs": not spec.share, "source_lang": "de",
                   "target_lang": "en"}, f)
    for name, data in (("source.spm", src_spm), ("target.spm", tgt_spm)):
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)


def _yml_vocab(path, tokens):
    with open(path, "w", encoding="utf-8") as f:
        for token, i in sorted(tokens.items(), key=lambda kv: kv[1]):
            f.write(f"{json.dumps(token, ensure_ascii=False)}: {i}\n")


def marian_npz(path, spec, weights, tokens):
    """Writes a Marian model directory (model.npz, vocab.yml, decoder.yml) from a shared-vocabulary MarianMT
    state dict whose <pad> is the last id (dropped: Marian has no pad row)."""
    assert spec.share and spec.tie and spec.pad_last
    os.makedirs(path, exist_ok=True)
    size = len(tokens) - 1
    p = {"Wemb": weights["model.shared.weight"][:size],
         "decoder_ff_logit_out_b": weights["final_logits_bias"][:, :size]}

    def lin(marian_w, marian_b, hf):  # [out, in] -> Marian's [in, out]; the bias as a [1, n] row
        p[marian_w], p[marian_b] = weights[f"{hf}.weight"].T.copy(), weights[f"{hf}.bias"][None]

    def norm(marian, hf):
        p[f"{marian}_ln_scale"], p[f"{marian}_ln_bias"] = weights[f"{hf}.weight"][None], weights[f"{hf}.bias"][None]

    for stack, depth in (("encoder", spec.enc), ("decoder", spec.dec)):
        for i in range(depth):
            m, h = f"{stack}_l{i + 1}", f"model.{stack}.layers.{i}"
            for x, hx in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
                lin(f"{m}_self_W{x}", f"{m}_self_b{x}", f"{h}.self_attn.{hx}")
            norm(f"{m}_self_Wo", f"{h}.self_attn_layer_norm")
            if stack == "decoder":
                for x, hx in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
                    lin(f"{m}_context_W{x}", f"{m}_context_b{x}", f"{h}.encoder_attn.{hx}")
                norm(f"{m}_context_Wo", f"{h}.encoder_attn_layer_norm")
            lin(f"{m}_ffn_W1", f"{m}_ffn_b1", f"{h}.fc1")
            lin(f"{m}_ffn_W2", f"{m}_ffn_b2", f"{h}.fc2")
            norm(f"{m}_ffn_ffn", f"{h}.final_layer_norm")
    options = "\n".join([
        "type: transformer", f"dim-vocabs: [{size}, {size}]", f"dim-emb: {spec.d}", f"enc-depth: {spec.enc}",
        f"dec-depth: {spec.dec}", f"transformer-heads: {spec.heads}", f"transformer-dim-ffn: {spec.ffn}",
        f"transformer-ffn-activation: {spec.activation}", "transformer-ffn-depth: 2",
        'transformer-preprocess: ""', "transformer-postprocess: dan", "transformer-postprocess-emb: d",
        "transformer-dropout: 0.1", "tied-embeddings-all: true", f"max-length: {spec.max_positions - 1}",
        "label-smoothing: 0.1", "transformer-decoder-autoreg: self-attention", "right-left: false"]) + "\n"
    p["special:model.yml"] = np.frombuffer(options.encode() + b"\0", dtype=np.int8)
    np.savez(os.path.join(path, "model.npz"), **p)
    _yml_vocab(os.path.join(path, "vocab.yml"), {t: i for t, i in tokens.items() if i < size})
    with open(os.path.join(path, "decoder.yml"), "w", encoding="utf-8") as f:
        f.write("relative-paths: true\nmodels:\n  - model.npz\nvocabs:\n  - vocab.yml\n  - vocab.yml\n"
                "beam-size: 6\nnormalize: 0.6\nword-penalty: 0\nmini-batch: 16\nmaxi-batch: 100\n")
    return p

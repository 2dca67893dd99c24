"""An lseq model directory -> a Hugging Face MarianMT folder (lseq_to_marianmt.py is the command).

The folder keeps lseq's ids: vocab.json names each lseq id's piece, pad_token_id is 0, decoding starts from lseq's
bos (decoder_start_token_id 2) and ends at eos 3; generation_config.json bans pad, unk and bos (bad_words_ids), as
lseq's search does. source.spm and target.spm are lseq's vocabularies, whose piece ids are these ids.
"""

import json
import os
import shutil

import numpy as np

from . import lseq_dir, lseq_params, marianmt_layout, positions, safetensors_io, spm_vocab
from .errors import ConversionError, warn

DEFAULT_MAX_POSITIONS = 512  # MarianMT's usual max_position_embeddings


def tensors(config, lseq_tensors, max_positions):
    """The MarianMT state dict of lseq tensors."""
    out = marianmt_layout.layers_to_hf(config, lseq_tensors)
    src_name, tgt_name, out_name = lseq_params.embedding_names(config.tied)
    if config.tied in ("all", "source"):
        for alias in ("model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
            out[alias] = lseq_tensors[src_name]
    else:
        out["model.encoder.embed_tokens.weight"] = lseq_tensors[src_name]
        out["model.decoder.embed_tokens.weight"] = lseq_tensors[tgt_name]
    out["lm_head.weight"] = lseq_tensors[out_name]
    out["final_logits_bias"] = lseq_tensors["output.bias"].reshape(1, -1)
    # MarianMT computes its own (concatenated) tables when these are missing; lseq's layout is stored explicitly.
    table = positions.table(config.positions, max_positions, config.dim_emb)
    out["model.encoder.embed_positions.weight"] = table
    out["model.decoder.embed_positions.weight"] = table
    return out


def _pieces(path):
    return [p.piece for p in spm_vocab.load_proto(path).pieces]


def _write_json(path, data):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")


def convert(model_dir, out_dir, max_positions=None):
    """Converts; returns the MarianMT config.json it wrote."""
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise ConversionError(f"'{out_dir}' exists and is not an empty directory; give a new output directory")
    model = lseq_dir.read(model_dir)
    c = model.config
    if c.norm == "pre":
        raise ConversionError(f"'{model_dir}' is a pre-norm model (transformer-preprocess n); MarianMT's layers are "
                              "post-norm and it has no final LayerNorm, so it cannot compute this model")
    max_positions = max_positions or max(c.max_length + 1, DEFAULT_MAX_POSITIONS)
    if c.layer_norm_eps != np.float32(marianmt_layout.HF_LAYER_NORM_EPS):
        warn(f"the model's layer-norm-epsilon is {c.layer_norm_eps:g}, MarianMT's LayerNorm uses 1e-05 (not "
             "configurable): its outputs will differ slightly from lseq's; train with --layer-norm-epsilon 1e-5 "
             "for an exact match")
    if c.positions != "concatenated":
        warn(f"the model's positions are '{c.positions}'; the folder stores that table in embed_positions.weight, "
             "which transformers loads, but save_pretrained drops it (MarianMT then computes its own table): "
             "convert again rather than re-saving; train with --transformer-positions concatenated to avoid this")
    os.makedirs(out_dir, exist_ok=True)

    state = tensors(c, model.tensors, max_positions)
    safetensors_io.write(os.path.join(out_dir, "model.safetensors"), sorted(state.items()),
                         {"format": "pt", lseq_dir.CONFIG_KEY: model.config_text, "lseq.updates": model.updates})
    config = marianmt_layout.hf_config(c, max_positions)
    _write_json(os.path.join(out_dir, "config.json"), config)

    src_pieces, tgt_pieces = _pieces(model.source_vocab), _pieces(model.target_vocab)
    separate = src_pieces != tgt_pieces
    _write_json(os.path.join(out_dir, "vocab.json"), {p: i for i, p in enumerate(src_pieces)})
    if separate:
        _write_json(os.path.join(out_dir, "target_vocab.json"), {p: i for i, p in enumerate(tgt_pieces)})
    shutil.copyfile(model.source_vocab, os.path.join(out_dir, "source.spm"))
    shutil.copyfile(model.target_vocab, os.path.join(out_dir, "target.spm"))
    _write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "tokenizer_class": "MarianTokenizer", "separate_vocabs": separate, "source_lang": None, "target_lang": None,
        "pad_token": tgt_pieces[0], "unk_token": tgt_pieces[1], "bos_token": tgt_pieces[2],
        "eos_token": tgt_pieces[3], "model_max_length": max_positions, "sp_model_kwargs": {}})
    d = model.decoder_options
    _write_json(os.path.join(out_dir, "generation_config.json"), {
        "decoder_start_token_id": 2, "bos_token_id": 2, "eos_token_id": 3, "forced_eos_token_id": 3,
        "pad_token_id": 0, "bad_words_ids": [[0], [1], [2]], "suppress_tokens": [0, 1, 2],
        "num_beams": int(d.get("beam-size", 4)),
        "length_penalty": float(d.get("normalize", 0.6)), "early_stopping": True, "max_length": max_positions})
    return config

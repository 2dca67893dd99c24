#!/usr/bin/env python3
"""Converts a Hugging Face GPT-2 checkpoint into an lseq language-model directory (docs/convert-gpt2.md).

  python3 tools/gpt2/gpt2_to_lseq.py gpt2-folder/ model/
  lstranslate --model model/ < prompts.txt       # continuations
  lsscore --model model/ -t text.txt              # log-probabilities

Reads config.json, the weights (model.safetensors, or pytorch_model.bin when torch is installed), vocab.json and
merges.txt; writes model.safetensors (lseq's tensor names and order, the model config in its metadata), vocab.json,
merges.txt, decoder.yml and config.yml. Needs Python 3 with numpy and PyYAML. A checkpoint lseq cannot compute
exactly is refused in one line, and nothing is written: the directory appears whole or not at all.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "marian"))
from lseqconv import safetensors_io  # noqa: E402  (shared with the Marian converters)
from lseqconv.errors import ConversionError, run_main, warn  # noqa: E402

# lseq's fixed ids below a byte-level BPE vocabulary's, whose token i is lseq id i + 4 (lib/data/byte_level_bpe.h).
PAD, UNK, BOS, EOS, FIRST_TOKEN = 0, 1, 2, 3, 4
# The output bias of the ids GPT-2 has no logits for: pad, unk, bos, and <|endoftext|>'s own id, whose probability
# goes to eos instead (they share its embedding row). exp(-1e4) is 0 in every precision lseq computes in.
BANNED_BIAS = -1.0e4
ACTIVATIONS = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu", "silu": "swish", "swish": "swish"}
END_OF_TEXT = "<|endoftext|>"


def read_config(folder):
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        raise ConversionError(f"'{folder}' has no config.json; give a Hugging Face GPT-2 folder")
    with open(path, encoding="utf-8") as f:
        try:
            config = json.load(f)
        except json.JSONDecodeError as e:
            raise ConversionError(f"'{path}' is not JSON: {e}") from None
    if config.get("model_type") != "gpt2":
        raise ConversionError(f"'{path}' describes a '{config.get('model_type')}' model; this converter reads GPT-2 "
                              "(model_type gpt2) only")
    activation = config.get("activation_function", "gelu_new")
    if activation not in ACTIVATIONS:
        raise ConversionError(f"'{path}': activation_function '{activation}' has no lseq equivalent (lseq computes "
                              "gelu_new, relu and silu; its gelu is the tanh approximation, not the exact 'gelu')")
    # Variants lseq's layers do not compute: refuse rather than convert to a model that computes something else.
    for key, fine in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                      ("add_cross_attention", False), ("tie_word_embeddings", True)):
        if config.get(key, fine) != fine:
            raise ConversionError(f"'{path}': {key} {str(config[key]).lower()} is a GPT-2 variant lseq does not "
                                  f"compute (it needs {str(fine).lower()})")
    dim, heads = config.get("n_embd", 768), config.get("n_head", 12)
    if dim % heads:
        raise ConversionError(f"'{path}': n_head {heads} does not divide n_embd {dim}")
    return config, ACTIVATIONS[activation]


def read_weights(folder):
    """name -> float32 array, the names without GPT2LMHeadModel's "transformer." prefix."""
    safetensors = os.path.join(folder, "model.safetensors")
    pytorch = os.path.join(folder, "pytorch_model.bin")
    if os.path.isfile(safetensors):
        tensors, _ = safetensors_io.read(safetensors)
    elif os.path.isfile(pytorch):
        try:
            import torch
        except ImportError:
            raise ConversionError(f"'{pytorch}' needs torch to be read; install it, or give model.safetensors "
                                  "instead") from None
        state = torch.load(pytorch, map_location="cpu", weights_only=True)
        tensors = {name: value.float().numpy() for name, value in state.items()}
    else:
        raise ConversionError(f"'{folder}' has neither model.safetensors nor pytorch_model.bin")
    out = {}
    for name, array in tensors.items():
        out[name[len("transformer."):] if name.startswith("transformer.") else name] = np.asarray(array, np.float32)
    return out


def read_vocabulary(folder):
    """(vocab.json's bytes, merges.txt's bytes, its token count, <|endoftext|>'s id)."""
    paths = [os.path.join(folder, name) for name in ("vocab.json", "merges.txt")]
    for path in paths:
        if not os.path.isfile(path):
            raise ConversionError(f"'{folder}' has no {os.path.basename(path)}; GPT-2's tokenizer is vocab.json + "
                                  "merges.txt")
    with open(paths[0], "rb") as f:
        vocab_bytes = f.read()
    with open(paths[1], "rb") as f:
        merges_bytes = f.read()
    try:
        vocab = json.loads(vocab_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConversionError(f"'{paths[0]}' is not JSON: {e}") from None
    ids = sorted(vocab.values()) if isinstance(vocab, dict) else None
    if not ids or ids != list(range(len(ids))):
        raise ConversionError(f"'{paths[0]}' is not a token -> id map with the ids 0..n-1")
    if END_OF_TEXT not in vocab:
        raise ConversionError(f"'{paths[0]}' has no {END_OF_TEXT}, which GPT-2 begins and ends a text with")
    return vocab_bytes, merges_bytes, len(ids), vocab[END_OF_TEXT]


def tensor(weights, name, shape):
    if name not in weights:
        raise ConversionError(f"the checkpoint lacks the tensor {name}")
    array = weights[name]
    if tuple(array.shape) != tuple(shape):
        raise ConversionError(f"the checkpoint's {name} has shape {list(array.shape)}, its config.json needs "
                              f"{list(shape)}")
    return array


def convert(config, activation, weights, tokens, end_of_text, max_length=None):
    """(lseq's model options as YAML text, their max-length, [(name, array)] in lseq's order); docs/tensor-names.md
    names the tensors. max_length: keep the first max_length + 1 positions only (lseq's GPU attention takes at most
    128 positions in this version)."""
    dim, layers, heads = config.get("n_embd", 768), config.get("n_layer", 12), config.get("n_head", 12)
    ffn = config.get("n_inner") or 4 * dim
    positions, vocab_size = config.get("n_positions", 1024), config.get("vocab_size", 50257)
    if vocab_size < tokens:
        raise ConversionError(f"config.json's vocab_size {vocab_size} is smaller than vocab.json's {tokens} tokens")
    if vocab_size > tokens:
        warn(f"the embedding's last {vocab_size - tokens} rows (beyond vocab.json's {tokens} tokens) are left out")
    wte = tensor(weights, "wte.weight", (vocab_size, dim))[:tokens]
    embedding = np.concatenate([np.zeros((2, dim), np.float32), wte[[end_of_text, end_of_text]], wte])
    bias = np.zeros(FIRST_TOKEN + tokens, np.float32)
    bias[[PAD, UNK, BOS, FIRST_TOKEN + end_of_text]] = BANNED_BIAS
    # lseq's sequence is bos w1..wn, bos at position 0: GPT-2's <|endoftext|> w1..wn.
    if max_length is None:
        max_length = positions - 1  # the learned table has max-length + 1 rows
    if not 1 <= max_length < positions:
        raise ConversionError(f"--max-length {max_length} must be between 1 and n_positions - 1 = {positions - 1}")
    named = [("embeddings.tgt.weight", embedding),
             ("embeddings.positions.weight", tensor(weights, "wpe.weight", (positions, dim))[:max_length + 1])]
    for i in range(layers):
        h, lseq = f"h.{i}", f"decoder.l{i + 1}"
        # Conv1D keeps [in, out]; lseq's linear maps are [out, in]. c_attn's columns are query, key, value, each
        # grouped by head, which is the row layout of lseq's qkv.
        named += [
            (f"{lseq}.self_attn.qkv.weight", tensor(weights, f"{h}.attn.c_attn.weight", (dim, 3 * dim)).T),
            (f"{lseq}.self_attn.qkv.bias", tensor(weights, f"{h}.attn.c_attn.bias", (3 * dim,))),
            (f"{lseq}.self_attn.out.weight", tensor(weights, f"{h}.attn.c_proj.weight", (dim, dim)).T),
            (f"{lseq}.self_attn.out.bias", tensor(weights, f"{h}.attn.c_proj.bias", (dim,))),
            (f"{lseq}.self_attn_norm.weight", tensor(weights, f"{h}.ln_1.weight", (dim,))),
            (f"{lseq}.self_attn_norm.bias", tensor(weights, f"{h}.ln_1.bias", (dim,))),
            (f"{lseq}.ffn.in.weight", tensor(weights, f"{h}.mlp.c_fc.weight", (dim, ffn)).T),
            (f"{lseq}.ffn.in.bias", tensor(weights, f"{h}.mlp.c_fc.bias", (ffn,))),
            (f"{lseq}.ffn.out.weight", tensor(weights, f"{h}.mlp.c_proj.weight", (ffn, dim)).T),
            (f"{lseq}.ffn.out.bias", tensor(weights, f"{h}.mlp.c_proj.bias", (dim,))),
            (f"{lseq}.ffn_norm.weight", tensor(weights, f"{h}.ln_2.weight", (dim,))),
            (f"{lseq}.ffn_norm.bias", tensor(weights, f"{h}.ln_2.bias", (dim,))),
        ]
    named += [("decoder.final_norm.weight", tensor(weights, "ln_f.weight", (dim,))),
              ("decoder.final_norm.bias", tensor(weights, "ln_f.bias", (dim,))),
              ("output.bias", bias)]
    named = [(name, np.ascontiguousarray(array, np.float32)) for name, array in named]
    for name, array in named:
        if not np.all(np.isfinite(array)):
            raise ConversionError(f"the checkpoint's values for {name} are not all finite")
    return model_yaml(config, activation, dim, layers, heads, ffn, max_length, FIRST_TOKEN + tokens), max_length, named


def model_yaml(config, activation, dim, layers, heads, ffn, max_length, vocab):
    """lseq's model options of a GPT-2 (ModelConfig's YAML keys; lstrain --config reads them too)."""
    eps = float(np.float32(config.get("layer_norm_epsilon", 1e-5)))
    dropout = float(config.get("resid_pdrop", 0.1))
    return "\n".join([
        "type: lm",
        f"dim-vocabs: [{vocab}]",
        f"dim-emb: {dim}",
        f"dec-depth: {layers}",
        f"transformer-heads: {heads}",
        f"transformer-dim-ffn: {ffn}",
        f"transformer-ffn-activation: {activation}",
        f"transformer-dropout: {dropout:.9g}",
        f"transformer-dropout-attention: {float(config.get('attn_pdrop', 0.1)):.9g}",
        "transformer-dropout-ffn: 0",
        "transformer-prenorm: true",
        "tied-embeddings: true",
        f"max-length: {max_length}",
        f"layer-norm-epsilon: {eps:.9g}",
        "transformer-train-position-embeddings: true",
        "transformer-scale-embeddings: false",
    ])


def write_directory(out, model_config, max_length, named, vocab_bytes, merges_bytes, source):
    """Builds the directory beside `out` and renames it into place, so a failure leaves nothing behind."""
    if os.path.exists(out):
        raise ConversionError(f"'{out}' exists; give a new output directory (nothing was written)")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        raise ConversionError(f"the parent directory '{parent}' of '{out}' does not exist")
    staging = tempfile.mkdtemp(prefix=".gpt2_to_lseq.", dir=parent)
    try:
        metadata = {"lseq.model_config": model_config, "lseq.updates": "0", "lseq.format": "1"}
        safetensors_io.write(os.path.join(staging, "model.safetensors"), named, metadata)
        for name, data in (("vocab.json", vocab_bytes), ("merges.txt", merges_bytes)):
            with open(os.path.join(staging, name), "wb") as f:
                f.write(data)
        with open(os.path.join(staging, "decoder.yml"), "w", encoding="utf-8") as f:
            # lstrain's decoder.yml for a language model: greedy, and up to 100 new tokens the positions allow.
            f.write(f"beam-size: 1\nmax-length: {min(100, max(1, max_length - 1))}\n")
        with open(os.path.join(staging, "config.yml"), "w", encoding="utf-8") as f:
            f.write(f"# The model options of the GPT-2 converted from {source} by tools/gpt2/gpt2_to_lseq.py.\n"
                    f"{model_config}\n")
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gpt2", help="Hugging Face GPT-2 folder: config.json, model.safetensors or "
                        "pytorch_model.bin, vocab.json, merges.txt")
    parser.add_argument("out", help="the lseq model directory to write (must not exist)")
    parser.add_argument("--max-length", type=int, help="keep only the positions of sequences this long (bos "
                        "included: max-length + 1 positions); default n_positions - 1 (GPT-2: 1023)")
    args = parser.parse_args()
    if os.path.exists(args.out):
        raise ConversionError(f"'{args.out}' exists; give a new output directory (nothing was written)")
    config, activation = read_config(args.gpt2)
    vocab_bytes, merges_bytes, tokens, end_of_text = read_vocabulary(args.gpt2)
    model_config, max_length, named = convert(config, activation, read_weights(args.gpt2), tokens, end_of_text,
                                              args.max_length)
    write_directory(args.out, model_config, max_length, named, vocab_bytes, merges_bytes, args.gpt2)
    print(f"gpt2_to_lseq: wrote {args.out} ({sum(a.size for _, a in named)} parameters, {tokens} + 4 ids)")


if __name__ == "__main__":
    run_main(main)

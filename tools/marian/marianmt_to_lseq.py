#!/usr/bin/env python3
"""Imports a Hugging Face MarianMT folder into an lseq model directory that lstranslate --model DIR runs.

    python3 tools/marian/marianmt_to_lseq.py HF_FOLDER OUT_DIR

HF_FOLDER holds config.json, model.safetensors (or sharded safetensors, or pytorch_model.bin when torch is
installed), vocab.json (target_vocab.json with separate vocabularies), source.spm, target.spm and optionally
tokenizer_config.json and generation_config.json. The lseq model computes what MarianMTModel computes (LayerNorm
epsilon 1e-5, MarianMT's position table); its vocabularies segment text as MarianTokenizer does and give every
piece the id lseq uses for the same row. Refused, naming the option: pre-norm (normalize_before), embedding
LayerNorm, learned positions, scale_embedding false, exact gelu (unless --allow-gelu-approximation), different
encoder/decoder sizes. docs/convert-marian.md describes the id layout and the mapping.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lseqconv import import_marianmt  # noqa: E402
from lseqconv.errors import run_main  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="Hugging Face MarianMT folder (what save_pretrained writes, plus the tokenizer)")
    parser.add_argument("out", help="new directory for the lseq model")
    parser.add_argument("--allow-gelu-approximation", action="store_true",
                        help="accept activation_function gelu (exact) as lseq's tanh-approximated gelu")
    args = parser.parse_args()
    config, source, target = import_marianmt.convert(args.folder, args.out, args.allow_gelu_approximation)
    added = sum(r.kind != "row" for r in target.plan.rows)
    print(f"wrote {args.out}: {config.enc_depth}+{config.dec_depth} layers, dim {config.dim_emb}, vocabularies "
          f"{config.src_vocab}/{config.tgt_vocab} ({added} rows added: pad/start and pieces the vocabulary lacks), "
          f"positions {config.positions}, layer-norm-epsilon {config.layer_norm_eps:g}")
    return 0


if __name__ == "__main__":
    run_main(main)

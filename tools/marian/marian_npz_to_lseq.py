#!/usr/bin/env python3
"""Imports a Marian .npz model (an OPUS-MT release, for example) into an lseq model directory.

    python3 tools/marian/marian_npz_to_lseq.py MARIAN_DIR OUT_DIR
    python3 tools/marian/marian_npz_to_lseq.py model.npz OUT_DIR --vocabs vocab.yml --spm source.spm target.spm

Given a directory, the model and vocabularies come from its decoder.yml (models:, vocabs:, and the decoding options
beam-size, normalize, word-penalty, max-length-factor), else from its only .npz and .vocab.yml; the SentencePiece
models that segment text for .yml vocabularies default to source.spm and target.spm beside them. The lseq model
computes what Marian computes (Marian's position table, LayerNorm epsilon 1e-6, decoding from a zero vector).
Refused, naming the option: trained positions, average attention or RNN decoders, factored vocabularies,
right-to-left models, ffn depths other than 2, exact gelu (unless --allow-gelu-approximation), and any parameter
lseq has no place for. docs/convert-marian.md describes the id layout and the mapping.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lseqconv import import_marian_npz  # noqa: E402
from lseqconv.errors import run_main  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="Marian model: a .npz file, or a directory with decoder.yml or one .npz")
    parser.add_argument("out", help="new directory for the lseq model")
    parser.add_argument("--vocabs", nargs="+", metavar="VOCAB",
                        help="source and target vocabularies (.yml or .spm; one path for both)")
    parser.add_argument("--spm", nargs=2, metavar=("SOURCE", "TARGET"),
                        help="SentencePiece models that segment text for .yml vocabularies")
    parser.add_argument("--decoder-yml", help="Marian decoder config naming the model and vocabularies")
    parser.add_argument("--allow-gelu-approximation", action="store_true",
                        help="accept Marian's gelu as lseq's tanh-approximated gelu")
    args = parser.parse_args()
    config, source, target = import_marian_npz.convert(args.model, args.out, args.vocabs, args.spm,
                                                      args.decoder_yml, args.allow_gelu_approximation)
    added = sum(r.kind != "row" for r in target.plan.rows)
    print(f"wrote {args.out}: {config.enc_depth}+{config.dec_depth} layers, dim {config.dim_emb}, vocabularies "
          f"{config.src_vocab}/{config.tgt_vocab} ({added} rows added: pad, the zero start row and pieces the "
          f"vocabulary lacks), positions {config.positions}, {config.norm}-norm")
    return 0


if __name__ == "__main__":
    run_main(main)

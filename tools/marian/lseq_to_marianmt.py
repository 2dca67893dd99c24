#!/usr/bin/env python3
"""Exports an lseq model directory as a Hugging Face MarianMT folder that MarianMTModel.from_pretrained loads.

    python3 tools/marian/lseq_to_marianmt.py MODEL_DIR OUT_DIR

Writes config.json, model.safetensors, vocab.json (and target_vocab.json for two different vocabularies),
source.spm, target.spm, tokenizer_config.json and generation_config.json. The ids stay lseq's (pad 0, unk 1, bos 2
= decoder_start_token_id, eos 3). Refused: pre-norm models. docs/convert-marian.md describes the mapping.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lseqconv import export_marianmt  # noqa: E402
from lseqconv.errors import run_main  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="lseq model directory (written by lstrain or an lseq importer)")
    parser.add_argument("out", help="new directory for the MarianMT folder")
    parser.add_argument("--max-position-embeddings", type=int, default=None,
                        help="rows of the position tables (default: the larger of 512 and the model's max-length + 1)")
    args = parser.parse_args()
    config = export_marianmt.convert(args.model, args.out, args.max_position_embeddings)
    print(f"wrote {args.out}: MarianMT, {config['encoder_layers']}+{config['decoder_layers']} layers, d_model "
          f"{config['d_model']}, vocabularies {config['vocab_size']}/{config['decoder_vocab_size']}")
    return 0


if __name__ == "__main__":
    run_main(main)

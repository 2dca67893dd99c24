#!/usr/bin/env python3
"""Draws the small German-English sample shipped in data/sample-de-en from the ding-de-en corpus.

Deterministic (fixed seed), so the sample can be regenerated and checked:
    python3 scripts/make-sample.py ../shared/data/ding-de-en data/sample-de-en
Train: 4000 sentence pairs (4+ German words) and 2000 short phrases; valid and test: 200 sentences each.
"""
import os
import random
import sys


def read_pairs(root, split):
    with open(os.path.join(root, split + ".de"), encoding="utf-8") as de, \
         open(os.path.join(root, split + ".en"), encoding="utf-8") as en:
        return [(d.rstrip("\n"), e.rstrip("\n")) for d, e in zip(de, en)]


def write_pairs(out, split, pairs):
    for lang, idx in (("de", 0), ("en", 1)):
        with open(os.path.join(out, split + "." + lang), "w", encoding="utf-8") as f:
            for p in pairs:
                f.write(p[idx] + "\n")


def main():
    src, out = sys.argv[1], sys.argv[2]
    rng = random.Random(20261122)
    train = read_pairs(src, "train")
    sentences = [p for p in train if len(p[0].split()) >= 4 and p[0][-1:] in ".?!" and p[1].strip()]
    phrases = [p for p in train if len(p[0].split()) < 4 and p[0].strip() and p[1].strip()]
    sample = rng.sample(sentences, 4000) + rng.sample(phrases, 2000)
    rng.shuffle(sample)
    write_pairs(out, "train", sample)
    write_pairs(out, "valid", rng.sample(read_pairs(src, "valid"), 200))
    write_pairs(out, "test", rng.sample(read_pairs(src, "test"), 200))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generates tests/metrics/fixtures/: hypothesis/reference files and the BLEU, chrF and 13a tokenization
results that sacreBLEU itself computes for them (expected.json), for tests/metrics/bleu_test.cpp and chrf_test.cpp.

    pip install sacrebleu            # the version used is written into expected.json
    python3 scripts/make-metric-fixtures.py [--ding /work/shared/data/ding-de-en]

Real sentences come from the ding-de-en corpus (GPL-2.0-or-later, see the fixture README); hypotheses are the
references perturbed with a seeded random generator (words dropped, swapped, replaced, inserted), at several
strengths so the scores span low to high. The output is deterministic for a given corpus and sacreBLEU version.
"""
import argparse
import json
import os
import random
import sys

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "metrics", "fixtures")


def read_lines(path, start, count):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    return lines[start:start + count]


def perturb(line, strength, rng, vocabulary):
    """Drops, swaps, replaces and inserts words, each with probability `strength`-ish."""
    words = line.split(" ")
    out = []
    for w in words:
        r = rng.random()
        if r < strength * 0.3:
            continue  # drop
        if r < strength * 0.6:
            out.append(rng.choice(vocabulary))  # replace
        else:
            out.append(w)
        if rng.random() < strength * 0.15:
            out.append(rng.choice(vocabulary))  # insert
    for _ in range(int(len(out) * strength * 0.3)):  # local swaps
        if len(out) > 1:
            i = rng.randrange(len(out) - 1)
            out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


def break_ngrams(line, every, filler):
    """Inserts a filler token after every `every` 13a tokens: keeps short n-grams, kills those longer than `every`."""
    words = BLEU().tokenizer(line).split()
    out = []
    for i, w in enumerate(words):
        out.append(w)
        if (i + 1) % every == 0 and i + 1 < len(words):
            out.append(filler)
    return " ".join(out)


# Punctuation, numbers, entities, Unicode punctuation and whitespace: each exercises one 13a or chrF rule.
SPECIAL_LINES = [
    "„Das kostet 1.000,50 €“, sagte er – und ging.",
    "He said: 'it's 3-4 km/h!' (really?) [yes] {no} <maybe> a|b ~c ^d _e `f`",
    "x&amp;y &lt;tag&gt; &quot;quoted&quot; &amp;lt; & ; &",
    "<skipped> word <skipped>",
    "Straße — Grüße… ’quoted’ ‚low‘ «guillemets» ‹single›",
    "a.b,c 1.5 1,5 .5 5. -5 5-5 x-y 1990-2000 3.-4. ,, .. ... ,.,",
    "non\u00a0breaking\u2009thin\u3000ideographic\u2028line\u0085next\u001cfs end",
    "tabs\tand\u000bvertical\u000cfeed\rreturn trailing   \t",
    "   leading and   multiple   spaces   ",
    "Emoji 😀 and CJK 漢字テスト, Greek Ωμέγα; Cyrillic Привет! Arabic مرحبا.",
    "combining e\u0301 vs é; zero\u200bwidth (not whitespace)",
    "E-Mail: test@example.com, URL: https://example.org/a?b=c&d=e#f",
    "Preis: $5.99 / 10% off + 2*3=6 ^ 2",
    "-\u2010hyphen\u2011non\u2012figure\u2013en\u2014em",
    "Er sagte: „Ich komme morgen.“ Sie antwortete: ‚Gut.‘",
    "1,000,000.00 vs 1.000.000,00 and 12:30 and 3/4",
]

SPECIAL_HYPS = [
    "„Das kostet 1.000,50 €“ sagte er - und ging .",
    "He said : ' it's 3 - 4 km / h ! ' ( really ? ) [yes] {no} < maybe > a | b ~ c ^ d _ e ` f `",
    "x & y <tag> \"quoted\" &lt; & ; &amp;",
    "word",
    "Strasse — Grüsse... 'quoted' ‚low‘ «guillemets»",
    "a.b,c 1.5 1,5 .5 5. -5 5-5 x-y 1990 - 2000 3.-4. , , . . ...",
    "non breaking thin\u3000ideographic line next\u001cfs end",
    "tabs and vertical feed return trailing",
    "leading and multiple spaces",
    "Emoji 😀 and CJK 漢字, Greek Ωμέγα; Cyrillic Привет! Arabic مرحبا",
    "combining é vs é; zero\u200bwidth (not whitespace)",
    "E-Mail: test@example.com , URL: https://example.org/a?b=c&d=e#f",
    "Preis: $5.99 / 10 % off + 2 * 3 = 6 ^ 2",
    "- \u2010hyphen\u2011non\u2012figure \u2013 en\u2014em",
    "Er sagte: „Ich komme morgen“. Sie antwortete: ‚Gut‘.",
    "1,000,000.00 vs 1.000.000,00 and 12 : 30 and 3 / 4",
]


def check_line(line):
    if "\n" in line:
        sys.exit(f"fixture line contains a newline: {line!r}")


def write_lines(path, lines):
    for line in lines:
        check_line(line)
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n" if lines else "")
    # The tests split the file on "\n" only; make sure that gives back exactly these lines.
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    back = text[:-1].split("\n") if text else []
    assert back == lines, path


def bleu_of(hyps, refs):
    s = BLEU().corpus_score(hyps, [refs])
    return {
        "score": s.score, "formatted": s.format(), "counts": list(s.counts), "totals": list(s.totals),
        "precisions": list(s.precisions), "bp": s.bp, "ratio": s.ratio, "hyp_len": s.sys_len, "ref_len": s.ref_len,
    }


def chrf_of(hyps, refs):
    metric = CHRF()
    score = metric.corpus_score(hyps, [refs])
    stats = [0] * (3 * metric.order)
    for line_stats in metric._extract_corpus_statistics(hyps, [refs]):
        stats = [a + b for a, b in zip(stats, line_stats)]
    return {
        "score": score.score, "formatted": score.format(),
        "hyp_ngrams": stats[0::3], "ref_ngrams": stats[1::3], "matches": stats[2::3],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ding", default="/work/shared/data/ding-de-en", help="the ding-de-en corpus directory")
    args = parser.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)
    rng = random.Random(20261122)

    valid_de = read_lines(os.path.join(args.ding, "valid.de"), 0, 300)
    valid_en = read_lines(os.path.join(args.ding, "valid.en"), 0, 300)
    test_de = read_lines(os.path.join(args.ding, "test.de"), 0, 200)
    test_en = read_lines(os.path.join(args.ding, "test.en"), 0, 200)
    vocab_de = sorted({w for line in valid_de + test_de for w in line.split()})
    vocab_en = sorted({w for line in valid_en + test_en for w in line.split()})

    cases = {}  # name -> (hyps, refs, note)
    cases["de-light"] = ([perturb(l, 0.1, rng, vocab_de) for l in valid_de], valid_de, "valid.de 1-300, light noise")
    cases["de-heavy"] = ([perturb(l, 0.5, rng, vocab_de) for l in test_de], test_de, "test.de 1-200, heavy noise")
    cases["en-medium"] = ([perturb(l, 0.3, rng, vocab_en) for l in valid_en], valid_en, "valid.en 1-300, medium")
    cases["en-severe"] = ([perturb(l, 0.9, rng, vocab_en) for l in test_en], test_en, "test.en 1-200, severe")
    cases["perfect"] = (list(test_en[:100]), list(test_en[:100]), "hypotheses equal references: 100")
    with_empty = [perturb(l, 0.2, rng, vocab_en) for l in valid_en[:40]]
    for i in (0, 7, 8, 39):
        with_empty[i] = ""
    cases["some-empty-hyps"] = (with_empty, valid_en[:40], "four empty hypothesis lines among others")
    cases["all-empty-hyps"] = ([""] * 20, valid_de[:20], "every hypothesis empty: BLEU 0 with BP 0")
    cases["empty-ref-lines"] = (valid_en[:10], valid_en[:5] + [""] * 5, "some references empty")
    cases["single-line"] = ([perturb(valid_de[5], 0.2, rng, vocab_de)], [valid_de[5]], "one line")
    cases["special"] = (SPECIAL_HYPS, SPECIAL_LINES, "punctuation, numbers, entities, Unicode, whitespace")
    cases["no-4gram-match"] = ([break_ngrams(l, 3, "XX") for l in valid_en[100:160]], valid_en[100:160],
                               "filler after every 3rd word: no 4-gram matches, exp smoothing halves once")
    cases["no-3gram-match"] = ([break_ngrams(l, 2, "XX") for l in valid_de[100:160]], valid_de[100:160],
                               "filler after every 2nd word: no 3- or 4-gram matches")
    short = ["Yes", "No way", "Hallo", "", "Go home"]
    cases["short-lines"] = (short, ["Yes", "No", "Hallo Welt", "x", "Go home now"],
                            "hypotheses shorter than 4 tokens: no 4-grams at all")
    cases["empty-corpus"] = ([], [], "no lines: sacreBLEU raises an error; lseq defines BLEU and chrF as 0")

    expected = {
        "_comment": "Made by scripts/make-metric-fixtures.py with sacreBLEU (version below); do not edit by hand. "
                    "Scores are sacreBLEU's corpus_score with default BLEU() and CHRF(); chrF statistics are the "
                    "per-order sums of its sentence statistics.",
        "sacrebleu_version": sacrebleu.__version__,
        "bleu_signature": None,
        "chrf_signature": None,
        "cases": {},
        "tokenizer_13a": [],
    }
    for name, (hyps, refs, note) in cases.items():
        write_lines(os.path.join(OUT_DIR, f"{name}.hyp.txt"), hyps)
        write_lines(os.path.join(OUT_DIR, f"{name}.ref.txt"), refs)
        entry = {"note": note, "lines": len(hyps)}
        if hyps:
            entry["bleu"] = bleu_of(hyps, refs)
            entry["chrf"] = chrf_of(hyps, refs)
        expected["cases"][name] = entry

    assert expected["cases"]["no-4gram-match"]["bleu"]["counts"][3] == 0
    assert expected["cases"]["no-4gram-match"]["bleu"]["counts"][2] > 0
    assert expected["cases"]["no-3gram-match"]["bleu"]["counts"][2:] == [0, 0]
    bleu, chrf = BLEU(), CHRF()
    bleu.corpus_score(["a"], [["a"]])
    chrf.corpus_score(["a"], [["a"]])
    expected["bleu_signature"] = str(bleu.get_signature())
    expected["chrf_signature"] = str(chrf.get_signature())
    tokenizer = BLEU().tokenizer
    for line in SPECIAL_LINES + SPECIAL_HYPS + valid_de[:50] + valid_en[:50]:
        expected["tokenizer_13a"].append([line, tokenizer(line.rstrip())])

    with open(os.path.join(OUT_DIR, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for name, entry in expected["cases"].items():
        if "bleu" in entry:
            print(f"{name:16} {entry['bleu']['formatted']}  {entry['chrf']['formatted']}")


if __name__ == "__main__":
    main()

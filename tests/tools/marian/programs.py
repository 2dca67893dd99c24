"""Running this build's programs (LSEQ_APPS_DIR: the build's apps/ folder) and the converter commands from the tests,
and the id-level helpers the tests share."""

import os
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TOOLS = os.path.join(REPO, "tools", "marian")


def app(name):
    apps = os.environ.get("LSEQ_APPS_DIR")
    if not apps:
        raise RuntimeError("set LSEQ_APPS_DIR to the build's apps/ folder (tests/tools/marian_test.sh does)")
    folder = {"lstrain": "train", "lstranslate": "translate", "lsscore": "score"}[name]
    return os.path.join(apps, folder, name)


def run(args, check=True):
    """Runs a command; returns (exit status, stdout, stderr). check: fail with its output when the status is not 0."""
    result = subprocess.run(args, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.returncode, result.stdout, result.stderr


def tool(script, *args, check=True):
    return run([sys.executable, os.path.join(TOOLS, script), *map(str, args)], check=check)


def spm_processor(path):
    import sentencepiece
    return sentencepiece.SentencePieceProcessor(model_file=path)


def write_ids(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(" ".join(map(str, row)) + "\n")


def word_scores(model, sources, targets):
    """lsscore's per-token log-probabilities (target tokens, then eos) of id rows (eos not included)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, tgt = os.path.join(tmp, "src"), os.path.join(tmp, "tgt")
        write_ids(src, sources)
        write_ids(tgt, targets)
        _, out, _ = run([app("lsscore"), "-m", model, "--train-sets", src, tgt, "--no-spm-encode", "--word-scores",
                         "--cpu", "--cpu-threads", "2", "--max-length", "500"])
    return [[float(x) for x in line.split("WordScores=")[1].split()] for line in out.splitlines()]


def translate_ids(model, sources, *extra):
    """lstranslate's output id rows for source id rows."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        write_ids(src, sources)
        _, out, _ = run([app("lstranslate"), "-m", model, "-i", src, "--no-spm-encode", "--no-spm-decode", "--cpu",
                         "--cpu-threads", "2", *extra])
    return [[int(x) for x in line.split()] for line in out.splitlines()]


def train_small(model, extra=(), updates=2, lines=300):
    """A tiny lseq model trained by lstrain for a few updates (tests/apps/train-small.yaml)."""
    data = os.path.join(REPO, "data", "sample-de-en")
    work = os.path.dirname(model)
    for side in ("de", "en"):
        with open(os.path.join(data, f"train.{side}"), encoding="utf-8") as f:
            head = [next(f) for _ in range(lines)]
        with open(os.path.join(work, f"train.{side}"), "w", encoding="utf-8") as f:
            f.writelines(head)
    run([app("lstrain"), "-c", os.path.join(REPO, "tests", "apps", "train-small.yaml"), "-m", model,
         "-t", os.path.join(work, "train.de"), os.path.join(work, "train.en"), "--after", f"{updates}u",
         "--cpu", *extra])


def close(got, expected, rel=1e-4, printed=6e-6):
    """|got - expected| <= rel * |expected| + printed (lsscore prints 5 decimals) for every pair; the worst pair."""
    worst = (0.0, None)
    for g, e in zip(got, expected):
        excess = abs(g - e) - (rel * abs(e) + printed)
        if worst[1] is None or excess > worst[0]:
            worst = (excess, (g, e))
    return len(got) == len(expected) and worst[0] <= 0, worst[1]

#!/usr/bin/env python3
"""Issue 25's import check at GPT-2's real sizes, on the GPU machine (where torch and transformers are installed):
a random GPT-2 built by transformers from its config (bench/hf_lm_generate.py make, nothing downloaded) and its
lseq conversion (tools/gpt2/gpt2_to_lseq.py, all 1024 positions) compute the same thing on the GPU in fp32:

  scoring     lines of 20-900 random token ids: lsscore --word-scores against transformers' per-token
              log-probabilities (after <|endoftext|> and the ids before; the closing <|endoftext|> too); the largest
              relative difference (the issue's bound: 1e-4)
  greedy      prompts of 16-300 ids: lstranslate's greedy continuation (--max-length NEW) against generate's
              (do_sample=False, the same number of new tokens); how many are equal, and for the others the
              position of the first difference and generate's margin there between its best and second token (a
              tie within float rounding is not a mapping error)

  python3 bench/gpt2_device_check.py --hf DIR --lseq DIR --apps BUILD/apps [--new-tokens 32]
Prints the figures and one RESULT line; exits 1 when the scoring bound is missed.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

import torch
from transformers import GPT2LMHeadModel

FIRST = 4  # lseq's ids are the tokenizer's + 4


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hf", required=True)
    p.add_argument("--lseq", required=True)
    p.add_argument("--apps", required=True, help="the build's apps/ folder")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--lines", type=int, default=16)
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    rng = random.Random(args.seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: a dry run of this script, not the check
    cpu = [] if dev == "cuda" else ["--cpu"]
    model = GPT2LMHeadModel.from_pretrained(args.hf, torch_dtype=torch.float32).to(dev).eval()
    vocab = model.config.vocab_size
    eot = vocab - 1
    tmp = tempfile.mkdtemp()

    # Scoring.
    lines = [[rng.randrange(eot) for _ in range(rng.randint(20, 900))] for _ in range(args.lines)]
    path = os.path.join(tmp, "score.ids")
    with open(path, "w") as f:
        f.writelines(" ".join(str(t + FIRST) for t in line) + "\n" for line in lines)
    out = run([os.path.join(args.apps, "score", "lsscore"), "-m", args.lseq, "-t", path, "--no-spm-encode",
               "--word-scores", "--precision", "fp32"] + cpu).splitlines()
    worst = 0.0
    with torch.no_grad():
        for line, ours_line in zip(lines, out):
            ids = torch.tensor([[eot] + line + [eot]], device=dev)
            logp = torch.log_softmax(model(ids[:, :-1]).logits.double(), dim=-1)[0]
            want = logp.gather(1, ids[0, 1:, None])[:, 0].tolist()
            ours = [float(x) for x in ours_line.split("WordScores=")[1].split()]
            if len(ours) != len(want):
                sys.exit(f"lsscore gave {len(ours)} word scores for a line of {len(want)} tokens")
            worst = max(worst, max(abs(a - b) / abs(b) for a, b in zip(ours, want)))
    if len(out) != len(lines):
        sys.exit(f"lsscore wrote {len(out)} lines for {len(lines)}")
    print(f"scoring: {len(lines)} lines of 20-900 ids, largest relative difference of a token's log-probability "
          f"{worst:.2e} (bound 1e-4)")

    # Greedy continuations.
    prompts = [[rng.randrange(eot) for _ in range(rng.randint(16, 300))] for _ in range(args.lines)]
    path = os.path.join(tmp, "prompts.ids")
    with open(path, "w") as f:
        f.writelines(" ".join(str(t + FIRST) for t in pr) + "\n" for pr in prompts)
    out = run([os.path.join(args.apps, "translate", "lstranslate"), "-m", args.lseq, "-i", path, "--no-spm-encode",
               "--no-spm-decode", "--precision", "fp32", "--beam-size", "1", "--max-length", str(args.new_tokens),
               "--mini-batch", "8"] + cpu).split("\n")[:-1]
    equal, notes = 0, []
    with torch.no_grad():
        for pr, ours_line in zip(prompts, out):
            ids = torch.tensor([[eot] + pr], device=dev)
            gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=args.new_tokens, pad_token_id=eot, eos_token_id=eot)
            want = gen[0, ids.shape[1]:].tolist()
            if want and want[-1] == eot:
                want = want[:-1]
            ours = [int(x) - FIRST for x in ours_line.split()]
            if ours == want:
                equal += 1
                continue
            at = next((i for i, (a, b) in enumerate(zip(ours, want)) if a != b), min(len(ours), len(want)))
            logits = model(torch.tensor([[eot] + pr + want[:at]], device=dev)).logits[0, -1].double()
            top = torch.topk(logits, 2).values.tolist()
            notes.append(f"prompt of {len(pr)}: first difference at new token {at}, generate's top-2 margin there "
                         f"{top[0] - top[1]:.2e}")
    print(f"greedy: {equal}/{len(prompts)} continuations of {args.new_tokens} tokens equal generate's")
    for n in notes:
        print("  " + n)
    print(f"RESULT bench=gpt2-import size={model.config.n_embd}x{model.config.n_layer} score_max_rel={worst:.2e} "
          f"greedy_equal={equal}/{len(prompts)} status={'ok' if worst <= 1e-4 else 'missed'}")
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()

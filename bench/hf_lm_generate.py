#!/usr/bin/env python3
"""GPT-2 generation, the Hugging Face side of bench/run-lm-bench.sh (issue 25's generation target).

  make      a random GPT-2 (small: 124M, medium: 355M; tiny: a CPU dry run's) from its config with transformers
            (nothing downloaded), saved with a stand-in vocab.json (the 256 byte tokens, then t256 .. t50255, and
            <|endoftext|> = 50256) and no merges, so that tools/gpt2/gpt2_to_lseq.py converts it and lseq loads
            it; the benchmark's prompts are token ids, no text
  prompts   COUNT prompts of 16-128 random ids (seeded; --min-length, --max-length), one a line, as lseq ids
            (the tokenizer's + 4)
  generate  transformers' generate over those prompts in batches (left-padded, KV cache, sampling top-k --top-k,
            max_new_tokens = min_new_tokens = NEW, so every prompt gets NEW tokens), timed between cuda
            synchronisations after one untimed warm-up batch; prints one RESULT line: new tokens / seconds
"""
import argparse
import json
import os
import random
import time

SIZES = {"small": dict(n_embd=768, n_layer=12, n_head=12), "medium": dict(n_embd=1024, n_layer=24, n_head=16),
         "tiny": dict(n_embd=64, n_layer=2, n_head=4)}
VOCAB = 50257  # GPT-2's; <|endoftext|> is the last id
FIRST_TOKEN = 4  # lseq's byte-level BPE ids are the tokenizer's + 4


def byte_tokens():
    """GPT-2's 256 byte tokens: printable Latin-1 bytes stand for themselves, the others for U+0100 on."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    others = [b for b in range(256) if b not in printable]
    chars = {b: chr(b) for b in printable}
    chars.update({b: chr(256 + n) for n, b in enumerate(others)})
    return [chars[b] for b in range(256)]


def make(args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(args.seed)
    config = GPT2Config(vocab_size=VOCAB, n_positions=1024, bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1,
                        initializer_range=args.init_range, **SIZES[args.size])
    GPT2LMHeadModel(config).save_pretrained(args.out, safe_serialization=True)
    vocab = {token: i for i, token in enumerate(byte_tokens())}
    vocab.update({f"t{i}": i for i in range(256, VOCAB - 1)})
    vocab["<|endoftext|>"] = VOCAB - 1
    with open(os.path.join(args.out, "vocab.json"), "w") as f:
        json.dump(vocab, f)
    with open(os.path.join(args.out, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")


def prompts(args):
    rng = random.Random(args.seed)
    with open(args.out, "w") as f:
        for _ in range(args.count):
            length = rng.randint(args.min_length, args.max_length)
            f.write(" ".join(str(rng.randrange(VOCAB - 1) + FIRST_TOKEN) for _ in range(length)) + "\n")


def generate(args):
    import torch
    from transformers import GPT2LMHeadModel
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.precision]
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    model = GPT2LMHeadModel.from_pretrained(args.model, torch_dtype=dtype).to(device).eval()
    with open(args.prompts) as f:
        rows = [[int(x) - FIRST_TOKEN for x in line.split()] for line in f]
    eot = VOCAB - 1

    def run(batch):
        width = max(len(r) for r in batch)
        ids = torch.tensor([[eot] * (width - len(r)) + [eot] + r for r in batch], device=device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * (len(r) + 1) for r in batch], device=device)
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, top_k=args.top_k,
                             max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, pad_token_id=eot)
        return (out.shape[1] - ids.shape[1]) * len(batch)

    with torch.no_grad():
        run(rows[:args.batch])  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        begin, tokens = time.perf_counter(), 0
        for i in range(0, len(rows), args.batch):
            tokens += run(rows[i:i + args.batch])
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - begin
    print(f"RESULT bench=lm-generate impl=hf-generate size={args.label} precision={args.precision} "
          f"prompts={len(rows)} batch={args.batch} new_tokens={args.new_tokens} top_k={args.top_k} device={device} "
          f"tokens={tokens} "
          f"seconds={seconds:.3f} tokens_per_s={tokens / seconds:.1f} status=ok", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--size", choices=sorted(SIZES), default="small")
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--init-range", type=float, default=0.02,
                   help="std of the random weights (GPT-2's 0.02; wider makes greedy choices less close)")
    q = sub.add_parser("prompts")
    q.add_argument("--count", type=int, default=128)
    q.add_argument("--out", required=True)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--min-length", type=int, default=16)
    q.add_argument("--max-length", type=int, default=128)
    g = sub.add_parser("generate")
    g.add_argument("--model", required=True)
    g.add_argument("--prompts", required=True)
    g.add_argument("--batch", type=int, default=32)
    g.add_argument("--new-tokens", type=int, default=64)
    g.add_argument("--top-k", type=int, default=50)
    g.add_argument("--precision", choices=["bf16", "fp16", "fp32"], default="bf16")
    g.add_argument("--label", default="small")
    g.add_argument("--cpu", action="store_true")
    args = p.parse_args()
    {"make": make, "prompts": prompts, "generate": generate}[args.command](args)


if __name__ == "__main__":
    main()

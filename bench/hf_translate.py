#!/usr/bin/env python3
"""Hugging Face peer of lstranslate (bench/run-translate-bench.sh): MarianMT `generate` over a text file.

The model is an lseq model converted to the MarianMT layout (tools/marian/lseq_to_marianmt.py), so both run the
same weights. Lines are sorted by length and cut into batches of --batch sentences (as lstranslate's maxi-batch
does, which favours the peer over unsorted batches), tokenized with the model's MarianTokenizer, translated with
beam search (--beam; 1 is greedy), Marian's length normalisation (--length-penalty = lstranslate's --normalize),
at most 3 x the longest source of the batch new tokens (lstranslate's --max-length-factor 3), in bf16 (or
--precision) on the GPU. Timed on the host around the whole loop (tokenize, generate, decode; model load apart),
after one untimed warm-up batch. Target tokens: the generated ids that are not pad or eos.
Output: one RESULT line (the C++ benchmarks' key=value format) and the translations in input order (--output).
"""
import argparse
import time

import hf_marian


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a MarianMT folder")
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--case", default="")
    args = p.parse_args()
    head = f"RESULT bench=translate impl=hf-generate case={args.case} beam={args.beam} batch={args.batch}"
    try:
        import torch
        tokenizer, model, load_s = hf_marian.load(args.model, args.precision)
        lines = hf_marian.read_lines(args.input)
        order = sorted(range(len(lines)), key=lambda i: len(lines[i].split()))
        batches = [order[i:i + args.batch] for i in range(0, len(order), args.batch)]
        special = {model.config.pad_token_id, model.config.eos_token_id}

        def translate(batch):
            enc = tokenizer([lines[i] for i in batch], return_tensors="pt", padding=True).to("cuda")
            with torch.inference_mode():
                ids = model.generate(**enc, num_beams=args.beam, do_sample=False, length_penalty=args.length_penalty,
                                     max_new_tokens=3 * int(enc["input_ids"].shape[1]), early_stopping=True)
            ids = ids.cpu()
            tokens = sum(1 for row in ids.tolist() for t in row[1:] if t not in special)
            return tokenizer.batch_decode(ids, skip_special_tokens=True), tokens

        translate(batches[len(batches) // 2])  # warm-up
        torch.cuda.synchronize()
        out = [""] * len(lines)
        tokens = 0
        t0 = time.time()
        for batch in batches:
            texts, n = translate(batch)
            tokens += n
            for i, text in zip(batch, texts):
                out[i] = text
        torch.cuda.synchronize()
        seconds = time.time() - t0
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in out))
        print(f"{head} lines={len(lines)} tokens={tokens} translate_s={seconds:.3f} load_s={load_s:.2f} "
              f"tgt_tok_s={tokens / seconds:.0f} status=ok", flush=True)
    except Exception as e:  # a failed peer is reported, not fatal to the benchmark
        print(hf_marian.failed(head, e), flush=True)


if __name__ == "__main__":
    main()

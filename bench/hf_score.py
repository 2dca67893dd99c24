#!/usr/bin/env python3
"""Hugging Face peer of lsscore (bench/run-translate-bench.sh): MarianMT's log-probabilities of given translations.

The model is an lseq model converted to the MarianMT layout (tools/marian/lseq_to_marianmt.py), so both score with
the same weights. Pairs are sorted by target length and cut into batches of --batch pairs (as lsscore's maxi-batch
does), tokenized with the model's MarianTokenizer (targets end with eos, as lsscore's do), and run through one
forward pass each, in bf16 (or --precision) on the GPU; each pair's score is the sum of its target tokens'
log-probabilities (fp32 log-softmax of the logits), lsscore's score without --normalize. Timed on the host around
the whole loop (tokenize, forward, scores to the host; model load apart), after one untimed warm-up batch.
Output: one RESULT line (the C++ benchmarks' key=value format) and the scores in input order (--output).
"""
import argparse
import time

import hf_marian


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="a MarianMT folder")
    p.add_argument("--source", required=True)
    p.add_argument("--target", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--device", default="cuda", help="cuda, or cpu (to try the script without a GPU)")
    p.add_argument("--case", default="")
    args = p.parse_args()
    head = f"RESULT bench=score impl=hf-forward case={args.case} batch={args.batch}"
    try:
        import torch
        from transformers.models.marian.modeling_marian import shift_tokens_right
        tokenizer, model, load_s = hf_marian.load(args.model, args.precision, args.device)
        sources, targets = hf_marian.read_lines(args.source), hf_marian.read_lines(args.target)
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} source and {len(targets)} target lines")
        order = sorted(range(len(targets)), key=lambda i: len(targets[i].split()))
        batches = [order[i:i + args.batch] for i in range(0, len(order), args.batch)]
        pad = model.config.pad_token_id
        start = model.config.decoder_start_token_id

        def score(batch):
            enc = tokenizer([sources[i] for i in batch], text_target=[targets[i] for i in batch],
                            return_tensors="pt", padding=True).to(args.device)
            labels = enc.pop("labels")
            with torch.inference_mode():
                # The decoder reads the labels shifted right behind its start id (MarianMT's: the pad id).
                logits = model(**enc, decoder_input_ids=shift_tokens_right(labels, pad, start)).logits
                log_probs = torch.log_softmax(logits.float(), dim=-1)
                mask = labels != pad
                picked = log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1) * mask
                return picked.sum(-1).tolist(), int(mask.sum())

        score(batches[len(batches) // 2])  # warm-up
        sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
        sync()
        out = [0.0] * len(targets)
        tokens = 0
        t0 = time.time()
        for batch in batches:
            scores, n = score(batch)
            tokens += n
            for i, s in zip(batch, scores):
                out[i] = s
        sync()
        seconds = time.time() - t0
        with open(args.output, "w", encoding="utf-8") as f:
            f.write("".join(f"{s:.6f}\n" for s in out))
        print(f"{head} lines={len(targets)} tokens={tokens} score_s={seconds:.3f} load_s={load_s:.2f} "
              f"tgt_tok_s={tokens / seconds:.0f} status=ok", flush=True)
    except Exception as e:  # a failed peer is reported, not fatal to the benchmark
        print(hf_marian.failed(head, e), flush=True)


if __name__ == "__main__":
    main()

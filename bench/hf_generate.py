#!/usr/bin/env python3
"""Hugging Face peer of bench_decode_throughput: MarianMT `generate` with transformer-base shapes.

Model: MarianMTModel from a MarianConfig with random weights (nothing is downloaded): vocabulary 32000 shared by
source, target and output (as configs/transformer-base.yaml ties all), d_model 512, 6 + 6 layers, 8 heads, FFN
2048, ReLU (the preset's activation; Marian's default would be swish), sinusoidal positions, post-norm (Marian's
architecture), in bf16 (--precision) on the GPU, eval mode. Token ids as lseq's: pad 0, bos 2 (the decoder start),
eos 3; forced_eos_token_id off so all generated tokens are ordinary ones.

Work: sources of --src-len tokens (ids uniform in [4, 32000) then eos; all the same length, no padding),
generate with num_beams 1 (greedy) or 4, do_sample False, min_new_tokens = max_new_tokens = --out-len (28), so
eos is suppressed and every output has exactly 28 tokens: 28 decoder steps per sentence, the same as
bench_decode_throughput's forced mode. The run checks the output length.

Each case: one untimed warm-up generate, then --batches-per-case timed ones on fresh sources, timed on the host
between torch.cuda.synchronize() calls. Peak memory: torch.cuda.max_memory_allocated() over the case.
Output: one RESULT line per case in the C++ benchmark's key=value format.
"""
import argparse
import sys
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch-sizes", default="32,64,128")
    p.add_argument("--beams", default="1,4")
    p.add_argument("--src-len", type=int, default=28, help="source tokens, eos included")
    p.add_argument("--out-len", type=int, default=28, help="generated tokens per sentence (forced)")
    p.add_argument("--batches-per-case", type=int, default=5)
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    batch_sizes = [int(x) for x in args.batch_sizes.split(",") if x]
    beams = [int(x) for x in args.beams.split(",") if x]

    def prefix(beam, batch):
        return (f"RESULT bench=decode impl=hf-generate model=transformer-base precision={args.precision} beam={beam} "
                f"batch={batch} src_len={args.src_len} out_len={args.out_len}")

    def report_all(status, error):
        reason = str(error).replace(" ", "_").replace("=", ":").replace("\n", "_")[:300]
        for beam in beams:
            for batch in batch_sizes:
                print(f"{prefix(beam, batch)} status={status} reason={reason}", flush=True)

    try:
        import torch
        import transformers
        from transformers import MarianConfig, MarianMTModel
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to PyTorch")
        torch.manual_seed(args.seed)
        config = MarianConfig(
            vocab_size=args.vocab, decoder_vocab_size=args.vocab, d_model=512, encoder_layers=6, decoder_layers=6,
            encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
            activation_function="relu", max_position_embeddings=512, dropout=0.1, attention_dropout=0.0,
            activation_dropout=0.0, scale_embedding=True, share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True, pad_token_id=0, eos_token_id=3, bos_token_id=2, decoder_start_token_id=2,
            forced_eos_token_id=None)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.precision]
        model = MarianMTModel(config).to(device="cuda", dtype=dtype).eval()
        attn = getattr(model.config, "_attn_implementation", "?")
        print(f"# torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name(0)}; "
              f"MarianMTModel {sum(t.numel() for t in model.parameters())} parameters, attention {attn}", flush=True)
    except Exception as e:
        report_all("not-measured", f"{type(e).__name__}: {e}")
        return 0

    g = torch.Generator().manual_seed(args.seed)

    def sources(batch):
        ids = torch.randint(4, args.vocab, (batch, args.src_len), generator=g)
        ids[:, -1] = 3  # eos
        return ids.cuda(), torch.ones(batch, args.src_len, dtype=torch.long, device="cuda")

    for beam in beams:
        for batch in batch_sizes:
            try:
                kwargs = dict(num_beams=beam, do_sample=False, min_new_tokens=args.out_len,
                              max_new_tokens=args.out_len, num_return_sequences=1, use_cache=True)
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                with torch.inference_mode():
                    ids, mask = sources(batch)
                    model.generate(input_ids=ids, attention_mask=mask, **kwargs)  # warm-up
                    inputs = [sources(batch) for _ in range(args.batches_per_case)]
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    outputs = [model.generate(input_ids=i, attention_mask=m, **kwargs) for i, m in inputs]
                    torch.cuda.synchronize()
                    seconds = time.perf_counter() - start
                # The decoder start token, then out_len generated tokens, none of them eos.
                for out in outputs:
                    generated = out[:, 1:]
                    if tuple(generated.shape) != (batch, args.out_len) or bool((generated == 3).any()):
                        raise RuntimeError(f"outputs of shape {tuple(out.shape)} are not forced to {args.out_len} tokens")
                sentences = batch * args.batches_per_case
                tokens = sentences * args.out_len
                print(f"{prefix(beam, batch)} sentences={sentences} sent_s={sentences / seconds:.1f} "
                      f"tgt_tok_s={tokens / seconds:.0f} ms_batch={seconds * 1e3 / args.batches_per_case:.2f} "
                      f"peak_mem_mib={torch.cuda.max_memory_allocated() / 2**20:.1f} status=ok", flush=True)
            except Exception as e:
                reason = f"{type(e).__name__}:_{e}".replace(" ", "_").replace("=", ":").replace("\n", "_")[:300]
                print(f"{prefix(beam, batch)} status=failed reason={reason}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

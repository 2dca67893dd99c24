#!/usr/bin/env python3
"""PyTorch peer of bench_train_throughput: the same model shapes, batches, optimizer and loss, in PyTorch.

Model: nn.TransformerEncoder/Decoder layers (post-norm, ReLU, batch_first) with the preset's sizes; dropout 0.1 on
the embeddings and the residual branches only (attention-probability and FFN-activation dropout set to 0, as the
presets' transformer-dropout-attention/-ffn: 0); no final LayerNorm after the stacks (post-norm, like lseq's
presets; nn.Transformer would add one); embeddings scaled by sqrt(dim) plus the sinusoidal table; one embedding
shared by source, target and the output projection when the preset ties all (tied-embeddings-all), output bias
kept (lseq has one); label-smoothed (0.1) cross-entropy ignoring padding (id 0), summed and divided by the real
target tokens; gradient clipping at the preset's clip-norm (none when 0); torch.optim.Adam(fused=True) with the
preset's betas/eps; bf16 autocast (--precision bf16) or fp32.

Batches: read from the file bench_train_throughput --dump-batches writes (sentences, padded lengths and every
sentence's real source/target length per batch); ids uniform in [4, vocab), padding 0, built once in pinned host
memory and copied with non_blocking each step (a data loader's usual hand-off). Steps cycle the pool from batch 0
after the warm-up, exactly as the C++ benchmark does, so both process the same token counts.

Modes: eager, and compile (torch.compile(dynamic=True) of the model+loss module: one compilation for all batch
shapes; the warm-up is raised to at least the pool size so that every shape has run before timing).

Timing: CUDA events between torch.cuda.synchronize() calls around the timed steps. Memory: a fresh model and
optimizer per case; torch.cuda.max_memory_allocated() over the case (parameters, gradients, Adam state,
activations) and max_memory_reserved() (what the caching allocator held).

Output: one RESULT line per case, in bench_train_throughput's key=value format.
"""
import argparse
import gc
import math
import os
import sys
import time


def read_shapes(path):
    """{budget: [(sentences, src_len, tgt_len, real_tokens, [src lengths], [tgt lengths])]}"""
    cases, current = {}, None
    with open(path) as f:
        for line in f:
            fields = line.split()
            if not fields:
                continue
            if fields[0] == "case":
                kv = dict(x.split("=", 1) for x in fields[1:])
                current = cases.setdefault(int(kv["tokens"]), [])
            elif fields[0] == "batch":
                current.append([int(x) for x in fields[1:5]])
            elif fields[0] in ("src", "tgt"):
                current[-1].append([int(x) for x in fields[1:]])
    for budget, batches in cases.items():
        for b in batches:
            if len(b) != 6 or len(b[4]) != b[0] or len(b[5]) != b[0]:
                sys.exit(f"error: {path}: a batch of the {budget}-token case is malformed; rewrite it with "
                         "bench_train_throughput --dump-batches")
    return cases


BUILTIN = {  # used when PyYAML is missing; the values of configs/transformer-{base,big}.yaml
    "transformer-base": dict(dim=512, heads=8, ffn=2048, enc=6, dec=6, dropout=0.1, tie="all", clip=5.0,
                             betas=(0.9, 0.98), eps=1e-9, label_smoothing=0.1),
    "transformer-big": dict(dim=1024, heads=16, ffn=4096, enc=6, dec=6, dropout=0.1, tie="all", clip=0.0,
                            betas=(0.9, 0.998), eps=1e-9, label_smoothing=0.1),
}


def read_preset(path):
    name = os.path.basename(path)
    name = name[:-5] if name.endswith(".yaml") else name
    try:
        import yaml
    except ImportError:
        if name not in BUILTIN:
            sys.exit(f"error: PyYAML is missing and {path} is not a built-in preset ({', '.join(BUILTIN)})")
        return name, BUILTIN[name]
    with open(path) as f:
        y = yaml.safe_load(f)
    if y.get("transformer-preprocess", "") not in ("", None) or y.get("transformer-postprocess", "dan") != "dan":
        sys.exit(f"error: {path}: this peer builds post-norm models only (transformer-postprocess: dan)")
    if y.get("transformer-ffn-activation", "relu") != "relu":
        sys.exit(f"error: {path}: this peer builds ReLU feed-forward layers only")
    tie = "all" if y.get("tied-embeddings-all") else ("target" if y.get("tied-embeddings") else "none")
    given = list(y.get("optimizer-params") or [])
    params = given + [0.9, 0.98, 1e-9][len(given):]  # lseq's defaults for what the preset leaves out
    return name, dict(dim=y.get("dim-emb", 512), heads=y.get("transformer-heads", 8),
                      ffn=y.get("transformer-dim-ffn", 2048), enc=y.get("enc-depth", 6), dec=y.get("dec-depth", 6),
                      dropout=float(y.get("transformer-dropout", 0.1)), tie=tie,
                      clip=float(y.get("clip-norm", 1.0)), betas=(float(params[0]), float(params[1])),
                      eps=float(params[2]), label_smoothing=float(y.get("label-smoothing", 0.1)))


def build_model(torch, nn, cfg, vocab, max_len):
    F = torch.nn.functional

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            d = cfg["dim"]
            self.dim, self.vocab, self.ls = d, vocab, cfg["label_smoothing"]
            self.src_emb = nn.Embedding(vocab, d)
            self.tgt_emb = self.src_emb if cfg["tie"] == "all" else nn.Embedding(vocab, d)
            for emb in {id(self.src_emb): self.src_emb, id(self.tgt_emb): self.tgt_emb}.values():
                nn.init.normal_(emb.weight, std=d**-0.5)  # lseq's N(0, dim^-1/2) (docs/tensor-names.md)
            enc_layer = nn.TransformerEncoderLayer(d, cfg["heads"], cfg["ffn"], cfg["dropout"], activation="relu",
                                                   batch_first=True, norm_first=False)
            dec_layer = nn.TransformerDecoderLayer(d, cfg["heads"], cfg["ffn"], cfg["dropout"], activation="relu",
                                                   batch_first=True, norm_first=False)
            # Residual dropout only: no dropout on attention probabilities or after the FFN activation.
            for layer in (enc_layer, dec_layer):
                layer.self_attn.dropout = 0.0
                layer.dropout = nn.Identity()
            dec_layer.multihead_attn.dropout = 0.0
            self.encoder = nn.TransformerEncoder(enc_layer, cfg["enc"], norm=None, enable_nested_tensor=False)
            self.decoder = nn.TransformerDecoder(dec_layer, cfg["dec"], norm=None)
            self.out = nn.Linear(d, vocab)
            if cfg["tie"] in ("all", "target"):
                self.out.weight = self.tgt_emb.weight
            position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
            rate = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(10000.0) / d))
            table = torch.zeros(max_len, d, dtype=torch.float64)
            table[:, 0::2] = torch.sin(position * rate)
            table[:, 1::2] = torch.cos(position * rate)
            self.register_buffer("positions", table.float(), persistent=False)
            self.drop = nn.Dropout(cfg["dropout"])

        def forward(self, src, tgt_in, tgt_out):  # the summed loss (divided by the tokens outside compile)
            scale = math.sqrt(self.dim)
            src_pad = src == 0
            tgt_pad = tgt_in == 0
            # Boolean masks on both arguments (True = not attended), so MultiheadAttention merges them without
            # its mixed-type deprecation path.
            n = tgt_in.shape[1]
            causal = torch.ones(n, n, dtype=torch.bool, device=src.device).triu(1)
            x = self.drop(self.src_emb(src) * scale + self.positions[: src.shape[1]])
            memory = self.encoder(x, src_key_padding_mask=src_pad)
            y = self.drop(self.tgt_emb(tgt_in) * scale + self.positions[: tgt_in.shape[1]])
            h = self.decoder(y, memory, tgt_mask=causal, tgt_is_causal=True, tgt_key_padding_mask=tgt_pad,
                             memory_key_padding_mask=src_pad)
            logits = self.out(h)
            loss = F.cross_entropy(logits.reshape(-1, self.vocab), tgt_out.reshape(-1), ignore_index=0,
                                   label_smoothing=self.ls, reduction="sum")
            return loss

    return Seq2Seq()


def flops_per_token(model, vocab, dim):
    """6 x (non-embedding weights + the output weight), as bench_train_throughput counts (issue 6)."""
    seen, weights = set(), 0
    for name, p in model.named_parameters():  # tied tensors are listed once
        if id(p) in seen or name.startswith(("src_emb.", "tgt_emb.")):
            continue
        seen.add(id(p))
        weights += p.numel()
    if model.out.weight is model.tgt_emb.weight:
        weights += vocab * dim
    return 6.0 * weights


def make_batches(torch, shapes, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for sentences, src_len, tgt_len, real, src_lengths, tgt_lengths in shapes:
        src = torch.zeros(sentences, src_len, dtype=torch.long)
        tgt_in = torch.zeros(sentences, tgt_len, dtype=torch.long)
        tgt_out = torch.zeros(sentences, tgt_len, dtype=torch.long)
        for r in range(sentences):
            ls, lt = src_lengths[r], tgt_lengths[r]  # eos / bos included
            src[r, : ls - 1] = torch.randint(4, vocab, (ls - 1,), generator=g)
            src[r, ls - 1] = 3
            ids = torch.randint(4, vocab, (lt - 1,), generator=g)
            tgt_in[r, 0] = 2
            tgt_in[r, 1:lt] = ids
            tgt_out[r, : lt - 1] = ids
            tgt_out[r, lt - 1] = 3
        out.append((src.pin_memory(), tgt_in.pin_memory(), tgt_out.pin_memory(), real))
    return out


def run_case(torch, args, name, cfg, budget, shapes, mode):
    nn = torch.nn
    device = torch.device("cuda")
    gc.collect()
    if mode == "compile":
        torch._dynamo.reset()  # nothing compiled for an earlier case is kept
    torch.cuda.empty_cache()
    torch.manual_seed(args.seed)
    max_len = 1 + max(max(s[1], s[2]) for s in shapes)
    model = build_model(torch, nn, cfg, args.vocab, max(max_len, 256)).to(device)
    model.train()
    fpt = flops_per_token(model, args.vocab, cfg["dim"])
    params = [p for p in model.parameters()]
    opt = torch.optim.Adam(params, lr=1e-4, betas=cfg["betas"], eps=cfg["eps"], fused=True)
    step_fn = torch.compile(model, dynamic=True) if mode == "compile" else model
    batches = make_batches(torch, shapes, args.vocab, args.seed)
    use_autocast = args.precision == "bf16"
    warmup = max(args.warmup, len(batches)) if mode == "compile" else args.warmup

    def update(i):
        src, tgt_in, tgt_out, real = batches[i % len(batches)]
        src = src.to(device, non_blocking=True)
        tgt_in = tgt_in.to(device, non_blocking=True)
        tgt_out = tgt_out.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_autocast):
            loss = step_fn(src, tgt_in, tgt_out) / real
        loss.backward()
        if cfg["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg["clip"])
        opt.step()
        return real, src.shape[0]

    torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for i in range(warmup):
        update(i)
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    tokens = sentences = 0
    start.record()
    issue_t0 = time.perf_counter()
    for i in range(args.steps):
        real, n = update(i)
        tokens += real
        sentences += n
    end.record()
    # How long the host took to issue the steps: close to ms_step means the run is host-bound (Python, autograd
    # and launch overhead), not GPU-bound.
    host_ms = (time.perf_counter() - issue_t0) * 1e3 / args.steps
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1e3
    tok_s = tokens / seconds
    achieved = fpt * tok_s
    real_all = sum(s[3] for s in shapes)
    padded_all = sum(s[0] * s[2] for s in shapes)
    line = (f"RESULT bench=train impl=pytorch-{mode} model={name} precision={args.precision} tokens={budget} "
            f"pool={len(shapes)} warmup={warmup} steps={args.steps} sentences_per_step={sentences / args.steps:.1f} "
            f"tgt_tokens_per_step={tokens / args.steps:.1f} pad_frac={1 - real_all / padded_all:.3f} "
            f"tgt_tok_s={tok_s:.0f} ms_step={seconds * 1e3 / args.steps:.2f} host_ms_step={host_ms:.2f} gflop_tok={fpt / 1e9:.4f} "
            f"tflops={achieved / 1e12:.1f} peak_tflops={args.peak_flops / 1e12:.0f} mfu={achieved / args.peak_flops:.4f} "
            f"peak_mem_mib={torch.cuda.max_memory_allocated() / 2**20:.1f} "
            f"reserved_mib={torch.cuda.max_memory_reserved() / 2**20:.1f} warmup_s={warm_s:.1f} status=ok")
    del step_fn, opt, model, batches
    return line


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", required=True, help="batch shapes from bench_train_throughput --dump-batches")
    p.add_argument("--preset", default="configs/transformer-base.yaml")
    p.add_argument("--tokens", default="", help="comma-separated budgets (default: every case in --shapes)")
    p.add_argument("--modes", default="eager", help="comma-separated: eager, compile")
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--peak-flops", type=float, default=989e12)
    args = p.parse_args()

    name, cfg = read_preset(args.preset)
    cases = read_shapes(args.shapes)
    budgets = [int(t) for t in args.tokens.split(",") if t] or sorted(cases)
    modes = [m for m in args.modes.split(",") if m]
    prefix = lambda mode, budget: (f"RESULT bench=train impl=pytorch-{mode} model={name} precision={args.precision} "
                                   f"tokens={budget}")
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to PyTorch")
        print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
    except Exception as e:  # report every case, as the C++ side does
        for mode in modes:
            for budget in budgets:
                print(f"{prefix(mode, budget)} status=not-measured reason={str(e).replace(' ', '_')[:200]}", flush=True)
        return 0
    for mode in modes:
        for budget in budgets:
            try:
                if budget not in cases:
                    raise RuntimeError(f"no {budget}-token case in {args.shapes}")
                print(run_case(torch, args, name, cfg, budget, cases[budget], mode), flush=True)
            except Exception as e:
                reason = f"{type(e).__name__}:_{e}".replace(" ", "_").replace("=", ":").replace("\n", "_")[:300]
                print(f"{prefix(mode, budget)} status=failed reason={reason}", flush=True)
                gc.collect()
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""GPT-2 training throughput in PyTorch, the peer of lstrain in bench/run-lm-train-bench.sh (issue 25's training
target: lseq at least 1.2x PyTorch torch.compile with its fused scaled-dot-product attention).

A GPT-2 (pre-norm, learned positions, gelu (tanh), tied output, dropout as given) written out here in the
nanoGPT style, so that attention is F.scaled_dot_product_attention(is_causal=True) (flash attention on the GPU),
trained on random token blocks of --seq tokens with AdamW (fused), bf16 autocast over fp32 weights, compiled with
torch.compile unless --eager. Times --steps updates after --warmup untimed ones (compilation happens there),
between cuda synchronisations. Prints one RESULT line: tokens/s, model FLOPs utilisation (6 N + 12 L d T FLOPs a
token, nanoGPT's and llm.c's count, against --peak-tflops), and peak memory (torch's allocator).
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.proj(y.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class Gpt(nn.Module):
    def __init__(self, vocab, positions, dim, layers, heads, dropout):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(positions, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(dim, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln(x), self.wte.weight)  # tied
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="small", choices=["small", "medium"])
    p.add_argument("--vocab", type=int, default=50261, help="rows of the embedding and output (lseq: GPT-2's + 4)")
    p.add_argument("--seq", type=int, default=1024, help="tokens a sequence")
    p.add_argument("--batch", type=int, default=16, help="sequences an update")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--eager", action="store_true", help="no torch.compile")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="the device's dense bf16 peak (H100/H200 SXM)")
    args = p.parse_args()
    dim, layers, heads = {"small": (768, 12, 12), "medium": (1024, 24, 16)}[args.size]
    torch.manual_seed(1)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU: a dry run of the script, not a figure
    torch.backends.cuda.matmul.allow_tf32 = True
    model = Gpt(args.vocab, args.seq, dim, layers, heads, args.dropout).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=device == "cuda")
    step_model = model if args.eager else torch.compile(model)

    def update():
        idx = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device)
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = step_model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(args.warmup):
        update()
    sync()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    begin = time.perf_counter()
    for _ in range(args.steps):
        loss = update()
    sync()
    seconds = time.perf_counter() - begin
    tokens = args.steps * args.batch * args.seq
    flops_per_token = 6 * params + 12 * layers * dim * args.seq
    tok_s = tokens / seconds
    mfu = tok_s * flops_per_token / (args.peak_tflops * 1e12)
    impl = "torch-eager" if args.eager else "torch-compile"
    device_name = torch.cuda.get_device_name().replace(" ", "_") if device == "cuda" else "cpu"
    print(f"RESULT bench=lm-train impl={impl} size={args.size} params={params} seq={args.seq} batch={args.batch} "
          f"dropout={args.dropout} tok_s={tok_s:.0f} ms_step={seconds * 1e3 / args.steps:.1f} mfu={mfu:.4f} "
          f"peak_mem_mib={torch.cuda.max_memory_allocated() / 2**20 if device == 'cuda' else 0:.0f} "
          f"loss={loss.item():.3f} device={device_name} "
          f"status={'ok' if math.isfinite(loss.item()) else 'nan'}",
          flush=True)


if __name__ == "__main__":
    main()

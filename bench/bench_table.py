#!/usr/bin/env python3
"""The table of bench/run-gpu-bench.sh: reads RESULT lines (bench_support.h's key=value format) and prints, per
case, ours and the peer's target tokens/s, the ratio, our MFU and both peak memories. A case without a line shows
"missing", one that did not run shows its status (failed, not-measured)."""
import sys

rows = []
for line in open(sys.argv[1]):
    kv = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
    rows.append(kv)

def find(**want):
    for r in rows:
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None

def cell(r, key, fmt="{}"):
    if r is None:
        return "missing"
    if r.get("status") != "ok":
        return r.get("status", "failed")
    v = r.get(key, "na")
    try:
        return fmt.format(float(v))
    except ValueError:
        return v

def ratio(a, b):
    try:
        if a.get("status") == "ok" and b.get("status") == "ok":
            return f"{float(a['tgt_tok_s']) / float(b['tgt_tok_s']):.2f}x"
    except (AttributeError, KeyError, ValueError, ZeroDivisionError):
        pass
    return "-"

def gib(r, key):
    c = cell(r, key)
    try:
        return f"{float(c) / 1024:.2f}"
    except ValueError:
        return c

table = [("case", "peer", "ours tok/s", "peer tok/s", "ratio", "our MFU", "our peak GiB", "peer peak GiB")]
# The cases run-gpu-bench.sh runs are always listed (missing where a part died or was skipped), plus any other.
models = sorted({r["model"] for r in rows if r.get("bench") == "train"} | {"transformer-base", "transformer-big"})
budgets = sorted({int(r["tokens"]) for r in rows if r.get("bench") == "train"} | {4096, 8192, 16384})
for m in models:
    for t in budgets:
        ours = find(bench="train", impl="lseq", model=m, tokens=str(t))
        for peer_impl in ("pytorch-eager", "pytorch-compile"):
            peer = find(bench="train", impl=peer_impl, model=m, tokens=str(t))
            if peer is None and peer_impl == "pytorch-compile":
                continue
            table.append((f"train {m.replace('transformer-', '')} {t}", peer_impl.replace("pytorch-", "torch-"),
                          cell(ours, "tgt_tok_s", "{:.0f}"), cell(peer, "tgt_tok_s", "{:.0f}"), ratio(ours, peer),
                          cell(ours, "mfu", "{:.1%}"), gib(ours, "peak_mem_mib"), gib(peer, "peak_mem_mib")))
for beam in ("1", "4"):
    for batch in ("32", "64", "128"):
        ours = find(bench="decode", impl="lseq", beam=beam, batch=batch)
        peer = find(bench="decode", impl="hf-generate", beam=beam, batch=batch)
        table.append((f"decode base beam{beam} batch{batch}", "hf-generate", cell(ours, "tgt_tok_s", "{:.0f}"),
                      cell(peer, "tgt_tok_s", "{:.0f}"), ratio(ours, peer), "-", gib(ours, "peak_mem_mib"),
                      gib(peer, "peak_mem_mib")))
widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
for row in table:
    print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)))

#!/usr/bin/env python3
"""The table of bench/run-gpu-bench.sh: reads RESULT lines (bench_support.h's key=value format) and prints, per
case, ours and the peer's target tokens/s, the ratio, our MFU and both peak memories (and their ratio), then issue
6's targets, each with the measured figure and whether it is met. MFU is given twice: against the datasheet's dense
bf16 peak (the RESULT lines' peak_tflops, 989) and against the peak measured in the same run (bench_gemm_peak),
which is the issue's definition ("bf16 dense GEMM about 800 TFLOP/s measured"); the MFU targets are checked
against the measured one. A case without a line shows "missing", one that
did not run shows its status (failed, not-measured). Ratios are against the peer measured in the same run; the
issue's own PyTorch/HF figures (measured earlier on an H200) are listed beside them for reference."""
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

# Issue 6's reference figures (H200, PyTorch 2.11 eager / HF generate), target tokens/s.
ISSUE_PEER = {("base", 4096): 87000, ("base", 8192): 162000, ("base", 16384): 293000, ("big", 8192): 139000,
              ("big", 16384): 151000, ("beam1", 32): 7700, ("beam4", 32): 4200, ("beam4", 128): 16000}


def mem_ratio(ours, peer):
    try:
        if ours.get("status") == "ok" and peer.get("status") == "ok":
            return f"{float(ours['peak_mem_mib']) / float(peer['peak_mem_mib']):.3f}x"
    except (AttributeError, KeyError, ValueError, ZeroDivisionError):
        pass
    return "-"


# The GPU's measured dense bf16 GEMM peak in this run (TFLOP/s), when bench_gemm_peak ran.
gemm_peak = next((float(r["tflops"]) for r in rows if r.get("bench") == "gemm-peak" and r.get("status") == "ok"),
                 None)


def measured_mfu(r):
    """Achieved TFLOP/s over the measured peak, or None."""
    try:
        return float(r["tflops"]) / gemm_peak if gemm_peak and r and r.get("status") == "ok" else None
    except (KeyError, ValueError):
        return None


def mfu_cell(r):
    m = measured_mfu(r)
    return f"{cell(r, 'mfu', '{:.1%}')} / {m:.1%}" if m is not None else cell(r, "mfu", "{:.1%}")


print(f"measured bf16 GEMM peak: {gemm_peak:.0f} TFLOP/s (bench_gemm_peak); MFU columns: datasheet 989 / measured"
      if gemm_peak else "measured bf16 GEMM peak: not measured; MFU against the datasheet's 989 TFLOP/s only")
table = [("case", "peer", "ours tok/s", "peer tok/s", "ratio", "issue's peer", "our MFU", "our peak GiB",
          "peer peak GiB", "mem ratio")]
# The cases run-gpu-bench.sh runs are always listed (missing where a part died or was skipped), plus any other.
models = sorted({r["model"] for r in rows if r.get("bench") == "train"} | {"transformer-base", "transformer-big"})
budgets = sorted({int(r["tokens"]) for r in rows if r.get("bench") == "train"} | {4096, 8192, 16384})
# lseq-recompute-ffn: lstrain --recompute-ffn (less memory for one more product per block), when it was run.
VARIANTS = {"lseq": "", "lseq-recompute-ffn": " recompute-ffn"}
for m in models:
    for t in budgets:
        for impl, suffix in VARIANTS.items():
            ours = find(bench="train", impl=impl, model=m, tokens=str(t))
            if ours is None and impl != "lseq":
                continue
            for peer_impl in ("pytorch-eager", "pytorch-compile"):
                peer = find(bench="train", impl=peer_impl, model=m, tokens=str(t))
                if peer is None and peer_impl == "pytorch-compile":
                    continue
                short = m.replace("transformer-", "")
                ref = ISSUE_PEER.get((short, t)) if peer_impl == "pytorch-eager" else None
                table.append((f"train {short} {t}{suffix}", peer_impl.replace("pytorch-", "torch-"),
                              cell(ours, "tgt_tok_s", "{:.0f}"), cell(peer, "tgt_tok_s", "{:.0f}"), ratio(ours, peer),
                              f"{ref} ({float(ours['tgt_tok_s']) / ref:.2f}x)" if ref and ours and ours.get("status") == "ok"
                              else "-", mfu_cell(ours), gib(ours, "peak_mem_mib"), gib(peer, "peak_mem_mib"),
                              mem_ratio(ours, peer)))
for beam in ("1", "4"):
    for batch in ("32", "64", "128"):
        ours = find(bench="decode", impl="lseq", beam=beam, batch=batch)
        peer = find(bench="decode", impl="hf-generate", beam=beam, batch=batch)
        ref = ISSUE_PEER.get((f"beam{beam}", int(batch)))
        table.append((f"decode base beam{beam} batch{batch}", "hf-generate", cell(ours, "tgt_tok_s", "{:.0f}"),
                      cell(peer, "tgt_tok_s", "{:.0f}"), ratio(ours, peer),
                      f"{ref} ({float(ours['tgt_tok_s']) / ref:.2f}x)" if ref and ours and ours.get("status") == "ok"
                      else "-", "-", gib(ours, "peak_mem_mib"), gib(peer, "peak_mem_mib"), "-"))
widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
for row in table:
    print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)))


# Issue 6's targets against the peers measured in this run.
def value(r, key):
    try:
        return float(r[key]) if r and r.get("status") == "ok" else None
    except (KeyError, ValueError):
        return None


def check(label, measured, want, fmt):
    if measured is None:
        print(f"  {label}: not measured")
    else:
        print(f"  {label}: {fmt.format(measured)} (target {fmt.format(want)}) {'MET' if measured >= want else 'NOT MET'}")


def train(model, t, impl="lseq"):
    return find(bench="train", impl=impl, model=f"transformer-{model}", tokens=str(t))


print("\nissue 6 targets (against this run's peers):")
for model, t, want_ratio, want_mfu in (("base", 16384, 3.0, 0.40), ("base", 4096, 4.0, None),
                                       ("big", 16384, 2.0, 0.50)):
    ours = value(train(model, t), "tgt_tok_s")
    for impl in ("pytorch-eager", "pytorch-compile"):
        peer = value(train(model, t, impl), "tgt_tok_s")
        if peer is not None or impl == "pytorch-eager":
            check(f"train {model} {t} vs {impl}", ours / peer if ours and peer else None, want_ratio, "{:.2f}x")
    if want_mfu:
        check(f"train {model} {t} MFU (measured peak)", measured_mfu(train(model, t)), want_mfu, "{:.1%}")
        check(f"train {model} {t} MFU (datasheet peak, for reference)", value(train(model, t), "mfu"), want_mfu,
              "{:.1%}")
for model in ("base", "big"):
    for t in (4096, 8192, 16384):
        for impl, suffix in VARIANTS.items():
            ours = value(train(model, t, impl), "peak_mem_mib")
            peer = value(train(model, t, "pytorch-eager"), "peak_mem_mib")
            if ours and peer:  # lower is better
                r = ours / peer
                print(f"  train {model} {t}{suffix} peak memory: {r:.3f}x the eager peer's (target <= 0.70x) "
                      f"{'MET' if r <= 0.70 else 'NOT MET'}")
for batch in ("32", "64", "128"):
    ours = value(find(bench="decode", impl="lseq", beam="4", batch=batch), "tgt_tok_s")
    peer = value(find(bench="decode", impl="hf-generate", beam="4", batch=batch), "tgt_tok_s")
    check(f"decode beam4 batch{batch} vs HF generate", ours / peer if ours and peer else None, 10.0, "{:.2f}x")

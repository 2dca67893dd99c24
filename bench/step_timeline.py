#!/usr/bin/env python3
"""Where a data-parallel training step spends its time, from bench_train_throughput --timeline files.

Usage: step_timeline.py ONE_GPU_PREFIX N_GPU_PREFIX
  each prefix is what --timeline wrote, less ".rank<r>.csv" (for example /tmp/tl-base-2gpu.16384).

Per step and rank the files hold the host clock when the step started, when its loss came back (this rank's
backward has finished on the device), when the job's totals came back (after the gradients' exchange) and when the
optimizer had been issued. From them, per step:
  compute   this rank's device time from the previous step's totals to its own backward's end: the optimizer of the
            previous step, forward and backward (with the exchange running beside them), and any launch gaps;
  skew      the last rank's backward end less the first's (the others wait that long in the exchange);
  tail      the totals' return less the last rank's backward end (what of the exchange was left after backward,
            and the totals' own round trip).
The step of the job is then about max-over-ranks compute + tail. Each batch's compute on N GPUs is compared with
the same batch's on one GPU (the pool is the same), which separates a slower backward from waiting.
"""
import csv
import glob
import statistics
import sys


def load(prefix):
    ranks = {}
    for path in sorted(glob.glob(prefix + ".rank*.csv")):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        for r in rows:
            for k in ("start", "backward_done", "totals_known", "optimizer_issued"):
                r[k] = float(r[k])
            r["batch"] = int(r["batch"])
        if rows:
            ranks[int(rows[0]["rank"])] = rows
    if not ranks:
        sys.exit(f"no timeline files match {prefix}.rank*.csv")
    return ranks


def per_step(ranks):
    """compute per (rank, step >= 1), skew and tail per step >= 1, and the steps' wall time."""
    steps = min(len(rows) for rows in ranks.values())
    compute, skew, tail, wall = {}, [], [], []
    for s in range(1, steps):
        ends = []
        for rank, rows in ranks.items():
            c = rows[s]["backward_done"] - rows[s - 1]["totals_known"]
            compute.setdefault(rows[s]["batch"], []).append(c)
            ends.append(rows[s]["backward_done"])
        known = max(rows[s]["totals_known"] for rows in ranks.values())
        skew.append(max(ends) - min(ends))
        tail.append(known - max(ends))
        wall.append(known - max(rows[s - 1]["totals_known"] for rows in ranks.values()))
    return compute, skew, tail, wall


def ms(x):
    return f"{1e3 * x:7.3f}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    one, many = load(sys.argv[1]), load(sys.argv[2])
    c1, _, tail1, wall1 = per_step(one)
    cn, skew, tailn, walln = per_step(many)
    print(f"ranks: 1 and {len(many)}; steps compared: {len(wall1)} and {len(walln)}")
    print(f"step wall time (ms, mean):         1 GPU {ms(statistics.mean(wall1))}   {len(many)} GPUs "
          f"{ms(statistics.mean(walln))}")
    mean_c1 = statistics.mean(x for v in c1.values() for x in v)
    mean_cn = statistics.mean(x for v in cn.values() for x in v)
    print(f"compute (ms, mean over ranks):     1 GPU {ms(mean_c1)}   {len(many)} GPUs {ms(mean_cn)}")
    # The same batches on both: the slowdown of a batch's compute beside the exchange.
    common = sorted(set(c1) & set(cn))
    if common:
        diffs = [statistics.mean(cn[b]) - statistics.mean(c1[b]) for b in common]
        print(f"same batch, N GPUs less 1 GPU:     mean {ms(statistics.mean(diffs))} ms over {len(common)} batches "
              f"(min {ms(min(diffs))}, max {ms(max(diffs))})")
    print(f"skew between ranks' backward ends: mean {ms(statistics.mean(skew))}  median {ms(statistics.median(skew))}"
          f"  max {ms(max(skew))}")
    print(f"tail after the last backward end:  mean {ms(statistics.mean(tailn))}  median "
          f"{ms(statistics.median(tailn))}  (1 GPU: {ms(statistics.mean(tail1))})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Aggregate an `ncu --csv --metrics gpu__time_duration.sum` log by kernel name.

Usage: kernel_profile.py NCU_CSV [--per N] [--top 30] [--wall-ms W]
Prints, per kernel name, the launch count and total time (divided by --per, e.g. the number of profiled steps),
then the total and, with --wall-ms, the share of the measured wall time per step that the kernels account for.
"""
import argparse
import collections
import csv
import io
import re
import sys


def short(name):
    name = re.sub(r"\(.*", "", name)  # drop argument lists
    name = re.sub(r"<.*", "", name) if len(name) > 90 else name
    return name[:90]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("csv")
    p.add_argument("--per", type=float, default=1.0)
    p.add_argument("--top", type=int, default=35)
    p.add_argument("--wall-ms", type=float, default=0.0)
    a = p.parse_args()
    text = open(a.csv, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        sys.exit(f"{a.csv}: no ncu CSV header found")
    rows = csv.DictReader(io.StringIO(text[start:]))
    total = collections.Counter()
    count = collections.Counter()
    for r in rows:
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "")
        ms = v * {"nsecond": 1e-6, "ns": 1e-6, "usecond": 1e-3, "us": 1e-3, "msecond": 1.0, "ms": 1.0}.get(unit, 1e-6)
        k = short(r["Kernel Name"])
        total[k] += ms
        count[k] += 1
    grand = sum(total.values())
    launches = sum(count.values())
    print(f"{'kernel':90s} {'launches':>9s} {'ms':>9s} {'share':>6s}")
    for k, ms in total.most_common(a.top):
        print(f"{k:90s} {count[k] / a.per:9.1f} {ms / a.per:9.3f} {100 * ms / grand:5.1f}%")
    print(f"{'TOTAL':90s} {launches / a.per:9.1f} {grand / a.per:9.3f}")
    if a.wall_ms > 0:
        print(f"kernels {grand / a.per:.2f} ms of {a.wall_ms:.2f} ms wall per step: "
              f"{100 * grand / a.per / a.wall_ms:.0f}% busy")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Per-kernel device time of one training step and one decoding batch, with Nsight Compute (the GPU machine has
# ncu but no nsys): every kernel's gpu__time_duration, aggregated by name (bench/kernel_profile.py), beside the
# step's wall time measured without the profiler. Where the step spends its time, and how much of the wall time
# the GPU is busy at all (the rest is launch gaps and host work).
#   BUILD=build-gpu OUT=/tmp/out bash bench/profile-kernels.sh [base:16384 base:4096 big:16384]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
build=${BUILD:-build-gpu}
out=${OUT:-/tmp/lseq-profile}/profile
mkdir -p "$out"
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
train_bin=$build/bench/bench_train_throughput
decode_bin=$build/bench/bench_decode_throughput
cases=${*:-base:16384 base:4096}
ncu_run() {  # ncu_run LOG COMMAND...: every kernel's duration, caches and clocks left alone
  local log=$1
  shift
  timeout -k 5 "${NCU_LIMIT:-150}" "$ncu_bin" --csv --metrics gpu__time_duration.sum --clock-control none \
    --cache-control none "$@" >"$log.csv" 2>"$log.err" || echo "ncu exit $? (see $log.err)"
}
for c in $cases; do
  m=${c%%:*} t=${c##*:}
  log=$out/train-$m-$t
  "$train_bin" --preset "configs/transformer-$m.yaml" --tokens "$t" --warmup 5 --steps 16 --pool 2 >"$log.wall" 2>&1
  wall=$(grep -o 'ms_step=[0-9.]*' "$log.wall" | head -n 1 | cut -d= -f2)
  # Profiled: 1 warm-up + 2 timed steps over the same 2-batch pool; the sum is divided by the 3 steps.
  ncu_run "$log" "$train_bin" --preset "configs/transformer-$m.yaml" --tokens "$t" --warmup 1 --steps 2 --pool 2
  echo "=== training $m $t tokens: wall ms_step=$wall (5 warm-up + 16 steps over a 2-batch pool)"
  python3 bench/kernel_profile.py "$log.csv" --per 3 --wall-ms "${wall:-0}" | tee "$log.txt"
done
for b in ${DECODE_CASES:-4:32 4:128}; do
  beam=${b%%:*} bs=${b##*:}
  log=$out/decode-beam$beam-b$bs
  "$decode_bin" --preset configs/transformer-base.yaml --beams "$beam" --batch-sizes "$bs" >"$log.wall" 2>&1
  ncu_run "$log" "$decode_bin" --preset configs/transformer-base.yaml --beams "$beam" --batch-sizes "$bs" \
    --batches-per-case 1
  echo "=== decoding beam $beam batch $bs: $(grep -o 'tgt_tok_s=[0-9.]*' "$log.wall" | head -n 1); profiled 2 batches"
  python3 bench/kernel_profile.py "$log.csv" --per 2 | tee "$log.txt"
done

#!/usr/bin/env bash
# Issue 5/6's benchmark in one go on the GPU machine: lseq and its peers side by side, then one table.
#   training (bf16): transformer-base and transformer-big at 4096, 8192, 16384 target tokens a batch, lseq
#     (bench_train_throughput) vs PyTorch eager (bench/pytorch_train.py), and PyTorch torch.compile for the cases
#     in COMPILE_CASES (default: base at 16384; compiling costs a minute or more per case);
#   decoding (bf16): transformer-base with random weights, beam 1 and 4, 32/64/128 sentences of 28 tokens,
#     outputs forced to 28 tokens, lseq (bench_decode_throughput) vs Hugging Face generate (bench/hf_generate.py).
#   and transformer-big again with --recompute-ffn (lseq-recompute-ffn in the table);
#   first of all, the GPU's measured bf16 GEMM peak (bench_gemm_peak, 8192^3), the denominator of the issue's MFU.
# Steps: WARMUP (16: one pass over the 16-batch pool, so every batch shape has run once before the clock starts, as
# it has in a long training run; torch.compile's peer already warmed up this way) untimed + STEPS (32 = two passes
# over the pool) timed steps per training case;
# 1 warm-up + 5 timed batches per decoding case. The parts run in priority order under a total time budget
# (BUDGET_S, 560 s, not counting the build), each under its own timeout; a part that fails, times out or is
# skipped for lack of time shows as failed/missing in the table and the rest go on.
#
#   bash bench/run-gpu-bench.sh                  # BUILD=build-gpu: configured if new, the three targets built
#   SKIP_BUILD=1 bash bench/run-gpu-bench.sh     # use the binaries in $BUILD as they are
#   BUILD=build-gpu OUT=/tmp/out PRECISION=bf16 STEPS=32 WARMUP=16 COMPILE_CASES="base:16384 big:16384" ...
#   TOKENS="4096 16384" bash bench/run-gpu-bench.sh   # the training cases' budgets (space- or comma-separated)
#   PASS=main bash bench/run-gpu-bench.sh        # everything but torch.compile (about 250 s on an H100)
#   PASS=compile BUDGET_S=540 OUT=/tmp/out2 bash bench/run-gpu-bench.sh  # torch.compile alone with the budget,
#                                                # between two lseq runs of its case; on a fresh machine its warm-up
#                                                # can take more than 320 s, too long to share a 10-minute call
#   python3 bench/bench_table.py <(cat /tmp/out/bench/results.txt /tmp/out2/bench/results.txt)  # one table of both
# Output: every RESULT line (also in $OUT/bench/*.log), then the table. Exit code 0 unless nothing could run.
set -uo pipefail
export PYTHONUNBUFFERED=1
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
build=${BUILD:-build-gpu}
out=${OUT:-/tmp/lseq-bench}/bench
precision=${PRECISION:-bf16}
warmup=${WARMUP:-16}
steps=${STEPS:-32}
budget=${BUDGET_S:-560}
compile_cases=${COMPILE_CASES-base:16384}  # set and empty: no torch.compile case
pass=${PASS:-all}  # all | main (all but torch.compile) | compile (torch.compile alone, between two lseq runs)
case $pass in
  all | main | compile) ;;
  *) echo "PASS=$pass: use all, main or compile" >&2 && exit 2 ;;
esac
# The budgets as a list: the benchmarks take lstrain's space-separated lists, the Python peers comma lists.
token_text=${TOKENS:-4096 8192 16384}
read -ra tokens <<<"${token_text//,/ }"
tokens_csv=$(IFS=, && echo "${tokens[*]}")
mkdir -p "$out"
rm -f "$out"/*.log "$out/results.txt"  # a reused OUT must not show an earlier run's results

echo "device: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
train_bin=$build/bench/bench_train_throughput
decode_bin=$build/bench/bench_decode_throughput
# Always brought up to date (a no-op when they are): a stale binary would measure other code than the checkout's.
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  t0=$(date +%s)
  echo "=== building the benchmarks in $build"
  if { [ -f "$build/build.ninja" ] ||
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DLSEQ_CUDA=ON; } \
    >"$out/build.log" 2>&1 &&
    cmake --build "$build" --target bench_train_throughput bench_decode_throughput bench_gemm_peak -j "${JOBS:-16}" \
      >>"$out/build.log" 2>&1; then
    :
  else
    echo "build FAILED (see $out/build.log):"
    tail -n 20 "$out/build.log"
  fi
  echo "build: $(($(date +%s) - t0)) s"
fi

start=$(date +%s)
# part NAME LIMIT_S COMMAND...: runs under min(LIMIT_S, what is left of the budget), output to the screen and a log.
part() {
  local name=$1 limit=$2 left
  shift 2
  left=$((budget - ($(date +%s) - start)))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 15 ]; then
    echo "=== $name: skipped, the time budget (BUDGET_S=$budget) is spent"
    return
  fi
  echo "=== $name (limit ${limit}s): $*"
  local t0
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "=== $name: exit $rc after $(($(date +%s) - t0)) s"
}

shapes=$out/batch-shapes.txt
"$train_bin" --dump-only --dump-batches "$shapes" --tokens "${tokens[@]}" || echo "could not write the batch shapes"

common=(--precision "$precision" --warmup "$warmup" --steps "$steps")
lseq_common=("${common[@]}" --tokens "${tokens[@]}")
peer_common=("${common[@]}" --tokens "$tokens_csv")
# The GPU's measured bf16 GEMM peak, the denominator of the issue's MFU (the datasheet's 989 TFLOP/s is the other).
part gemm-peak 30 "$build/bench/bench_gemm_peak" --size 8192
compile_case() {  # compile_case MODEL TOKENS LIMIT
  part "torch-compile-$1-$2" "$3" python3 bench/pytorch_train.py --shapes "$shapes" \
    --preset "configs/transformer-$1.yaml" --modes compile --precision "$precision" --warmup "$warmup" \
    --steps "$steps" --tokens "$2"
}
if [ "$pass" = compile ]; then
  # torch.compile alone with the whole budget, between two lseq runs of the same case.
  for c in $compile_cases; do
    m=${c%%:*} t=${c##*:}
    lseq_case=("$train_bin" --preset "configs/transformer-$m.yaml" --precision "$precision" --warmup "$warmup"
      --steps "$steps" --tokens "$t")
    part "lseq-train-$m-$t-before-compile" 60 "${lseq_case[@]}"
    compile_case "$m" "$t" $((budget - 80))
    part "lseq-train-$m-$t-after-compile" 60 "${lseq_case[@]}"
  done
else
  part lseq-train-base 90 "$train_bin" --preset configs/transformer-base.yaml "${lseq_common[@]}"
  # torch.compile next (PASS=all): its warm-up took from 164 s to more than 320 s on an H100 (the most on a fresh
  # machine, whose compile caches are empty), so it gets its full limit while the budget is whole; the cheaper parts
  # fill what is left. (lseq's base run goes before it, not in the minute after a 300 s compile job.)
  if [ "$pass" = all ]; then
    for c in $compile_cases; do compile_case "${c%%:*}" "${c##*:}" 320; done
  fi
  part torch-eager-base 100 python3 bench/pytorch_train.py --shapes "$shapes" --preset configs/transformer-base.yaml \
    --modes eager "${peer_common[@]}"
  part lseq-train-big 150 "$train_bin" --preset configs/transformer-big.yaml "${lseq_common[@]}"
  part torch-eager-big 100 python3 bench/pytorch_train.py --shapes "$shapes" --preset configs/transformer-big.yaml \
    --modes eager "${peer_common[@]}"
  part lseq-decode 60 "$decode_bin" --preset configs/transformer-base.yaml --precision "$precision" \
    --batch-sizes 32 64 128 --beams 1 4 --src-len 28 --out-len 28 --batches-per-case 10
  part hf-generate 90 python3 bench/hf_generate.py --precision "$precision" --batch-sizes 32,64,128 --beams 1,4 \
    --src-len 28 --out-len 28
  # lstrain --recompute-ffn (the memory target's case): big only, whose activations are what the option trims.
  part lseq-train-big-recompute-ffn 150 "$train_bin" --preset configs/transformer-big.yaml --recompute-ffn \
    "${lseq_common[@]}"
fi
echo "total benchmark time: $(($(date +%s) - start)) s"

cat "$out"/*.log | grep '^RESULT' >"$out/results.txt"
echo
echo "=== results ($out/results.txt)"
cat "$out/results.txt"
echo
python3 bench/bench_table.py "$out/results.txt" | tee "$out/table.txt"

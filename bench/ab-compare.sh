#!/usr/bin/env bash
# A/B on one GPU: the training and decoding benchmarks of a baseline source tree (A, e.g. an older commit from
# `git archive`) against this checkout (B), interleaved round by round (A first in odd rounds, B first in even
# ones) so that clock and thermal drift hit both alike. Prints each run's figures as they come, then the median of every case per side and B/A.
#
#   git archive <commit> | tar -x -C .baseline        # here; carry .baseline to the GPU machine
#   BASE=.baseline bash bench/ab-compare.sh           # there
#   BASE=... ROUNDS=3 TRAIN_CASES="base:16384 big:16384" DECODE_BATCHES=32,128 BEAMS=1,4 bash bench/ab-compare.sh
#
# Each side is built into its own folder (bench targets only; SKIP_BUILD=1 uses what is there). Each side gets its
# lists in the form its benchmarks read (comma-separated before the shared option parser, words since).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=$(cd "${BASE:?set BASE to the baseline source tree}" && pwd)
rounds=${ROUNDS:-3}
train_cases=${TRAIN_CASES:-base:16384 big:16384}
decode_batches=${DECODE_BATCHES:-32,128}
beams=${BEAMS:-1,4}
out=${OUT:-/tmp/lseq-ab}/ab
mkdir -p "$out"
: >"$out/runs.txt"

# Build folders: B's is the checkout's build-gpu; A's lies outside the baseline tree (BASE_BUILD), because the
# device tool replaces a carried folder, and whatever was built inside it, at every call.
build_a=${BASE_BUILD:-/tmp/lseq-ab-base-build}
build_b=$root/build-gpu
build() {  # build TREE BUILD_DIR NAME: bench_train_throughput and bench_decode_throughput
  local tree=$1 dir=$2 log=$out/build-$3.log
  { [ -f "$dir/build.ninja" ] ||
    cmake -S "$tree" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLSEQ_CUDA=ON -DLSEQ_BUILD_TESTS=OFF; } >"$log" 2>&1 &&
    cmake --build "$dir" --target bench_train_throughput bench_decode_throughput -j "${JOBS:-16}" >>"$log" 2>&1
}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  t0=$(date +%s)
  build "$base" "$build_a" A & pid_a=$!
  build "$root" "$build_b" B & pid_b=$!
  wait $pid_a || { echo "build of A failed:"; tail -n 20 "$out/build-A.log"; exit 1; }
  wait $pid_b || { echo "build of B failed:"; tail -n 20 "$out/build-B.log"; exit 1; }
  echo "builds: $(($(date +%s) - t0)) s"
fi

run_side() {  # run_side A|B TREE BUILD_DIR
  local side=$1 tree=$2 bin=$3/bench c model tokens
  for c in $train_cases; do
    model=${c%%:*} tokens=${c##*:}
    (cd "$tree" && timeout 300 "$bin/bench_train_throughput" --preset "configs/transformer-$model.yaml" \
      --precision bf16 --tokens "$tokens") 2>/dev/null | grep '^RESULT' | sed "s/^RESULT/$side/" |
      tee -a "$out/runs.txt"
  done
  # Lists: comma-separated for benchmarks older than the shared option parser (no bench/bench_options.h), Marian-
  # style words since.
  local batches=$decode_batches beam_list=$beams
  if [ -f "$tree/bench/bench_options.h" ]; then batches=${batches//,/ } beam_list=${beam_list//,/ }; fi
  # shellcheck disable=SC2086
  (cd "$tree" && timeout 300 "$bin/bench_decode_throughput" --preset configs/transformer-base.yaml \
    --precision bf16 --batch-sizes $batches --beams $beam_list --src-len 28 --out-len 28 \
    --batches-per-case 10) 2>/dev/null | grep '^RESULT' | sed "s/^RESULT/$side/" | tee -a "$out/runs.txt"
}

for r in $(seq 1 "$rounds"); do
  t0=$(date +%s)
  if [ $((r % 2)) = 1 ]; then  # the order alternates, so that a drift within a round favours neither side
    run_side A "$base" "$build_a"
    run_side B "$root" "$build_b"
  else
    run_side B "$root" "$build_b"
    run_side A "$base" "$build_a"
  fi
  echo "round $r: $(($(date +%s) - t0)) s"
done

echo
echo "=== medians over $rounds rounds (device: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
awk '
  function field(name,   i, kv) { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == name) return kv[2] } return "" }
  {
    key = field("bench") " " field("model")
    if (field("tokens") != "") key = key " tokens=" field("tokens")
    if (field("beam") != "") key = key " beam=" field("beam") " batch=" field("batch")
    v = field("tgt_tok_s"); if (v == "") next
    n[$1, key]++; vals[$1, key, n[$1, key]] = v; keys[key] = 1
  }
  function median(side, key,   m, i, j, t, a) {
    m = n[side, key]; if (m == 0) return 0
    for (i = 1; i <= m; i++) a[i] = vals[side, key, i] + 0
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    printf "%-52s %12s %12s %7s\n", "case (target tokens/s)", "A", "B", "B/A"
    for (k in keys) { a = median("A", k); b = median("B", k); printf "%-52s %12.0f %12.0f %7.3f\n", k, a, b, (a > 0 ? b / a : 0) }
  }' "$out/runs.txt" | sort

#!/usr/bin/env bash
# Issue 23's benchmark: lstranslate as users run it, beside the kernel-level decoding benchmark and Hugging Face
# generate on the same weights, on the GPU machine.
#
#  1. A transformer-base model trained here by lstrain (bf16, joint 8k SentencePiece vocabulary) on a real corpus
#     (DATA: train.de/train.en/test.de/test.en; default .bench-data/ding-de-en, copied from shared/data), for
#     TRAIN_UPDATES updates, so that outputs have realistic lengths (nothing is forced). MODEL reuses a model.
#  2. lstranslate on the whole test file (2,000 lines) for each case (beam 4 at 32, 64, 128 sentences a batch;
#     greedy at 128), bf16, --normalize 1: the wall clock of the whole program, and its own summary line (model
#     load apart, target tokens/s over the translation).
#     Then the same program batch by batch (--continuous-batching false): its translation time, and whether it
#     wrote byte-identical output. Then with --warm-up (the decoders meet their kernels during the load, as the
#     kernel benchmark's decoder does before it is timed): its translation time, and how many live hypotheses a step
#     held on average over its decoders (--log-level debug).
#  3. bench_decode_throughput on the same model directory at the same batch and beam: with sources and outputs
#     forced to the test set's mean lengths (every hypothesis the same length, the kernel-level figure per target
#     token), and on the test file's own lines (--input: the search batch by batch, as lstranslate's with
#     --continuous-batching false, timed alone).
#     A long input too (LONG_LINES, default 50,000 lines of the training source; beam 4 x 128): steps 2 and 3 once the
#     fixed start-up cost is spread over many batches.
#  4. Hugging Face generate (bench/hf_translate.py) on the same weights converted to MarianMT
#     (tools/marian/lseq_to_marianmt.py), the same sentences, beam, length normalisation, maximum length and
#     precision, when the converter is there.
#  5. lsscore on the test pairs (SCORE_BATCHES, default 128 pairs a batch): the whole program's wall clock and its
#     summary line, beside Hugging Face's forward pass over the same pairs (bench/hf_score.py), and how far the two
#     programs' per-pair scores lie apart.
# Prints tables last: per case lstranslate's target tokens/s (whole program and translation alone), the kernel
# benchmark's, Hugging Face's, and the ratios (kernel/lstr: per target token against the translation alone,
# kernel/wall: against the whole program; kernel/warm: against the translation with --warm-up); then lsscore's.
#
#   bash bench/run-translate-bench.sh                      # BUILD=build-gpu OUT=/tmp/lseq-translate-bench
#   MODEL=/tmp/model CASES="4:32 4:128 1:128" TRAIN_UPDATES=3000 bash bench/run-translate-bench.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
build=${BUILD:-build-gpu}
out=${OUT:-/tmp/lseq-translate-bench}/translate
data=${DATA:-.bench-data/ding-de-en}
model=${MODEL:-$out/model}
cases=${CASES:-4:32 4:64 4:128 1:128}
updates=${TRAIN_UPDATES:-4000}
precision=${PRECISION:-bf16}
normalize=${NORMALIZE:-1}
mkdir -p "$out"
bin=$build/apps
echo "device: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  { [ -f "$build/build.ninja" ] ||
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DLSEQ_CUDA=ON; } \
    >"$out/build.log" 2>&1 &&
    cmake --build "$build" --target lstrain lstranslate lsscore bench_decode_throughput -j "${JOBS:-16}" >>"$out/build.log" 2>&1 ||
    { echo "build FAILED (see $out/build.log)"; tail -n 20 "$out/build.log"; exit 1; }
fi

# ---- 1. the model ----
if [ ! -f "$model/model.safetensors" ]; then
  t0=$(date +%s)
  "$bin/train/lstrain" -c configs/transformer-base.yaml -m "$model" --precision "$precision" \
    -t "$data/train.de" "$data/train.en" --dim-vocabs 8000 8000 --mini-batch-words 16384 --maxi-batch 100 \
    --lr-warmup 2000u --lr-decay-inv-sqrt 2000u --learn-rate 0.0003 --after "${updates}u" --save-freq 0 \
    --valid-freq 0 --valid-metrics cross-entropy --disp-freq 500u --exponential-smoothing 0 >"$out/train.log" 2>&1 ||
    { echo "lstrain FAILED:"; tail -n 20 "$out/train.log"; exit 1; }
  echo "trained $model: $updates updates in $(($(date +%s) - t0)) s (log: $out/train.log)"
  grep -E "Ep\.|updates|tokens/s" "$out/train.log" | tail -n 2
fi
test_src=$data/test.de
lines=$(wc -l <"$test_src")

results=$out/results.txt
: >"$results"

# run_program LOG COMMAND...: runs the program with its stderr to LOG and sets rc, wall (seconds, process start to
# exit) and, from its summary line ("Translated|Scored 2000 lines (30124 target tokens) in 3.21 s: 623.1 lines/s,
# 9384 target tokens/s; model load 1.05 s"), tokens, busy (the seconds after the load: tokens over the line's rate,
# since its seconds have two decimals, 7% of a 0.14 s translation) and load.
run_program() {
  local log=$1 t0
  shift
  t0=$(date +%s.%N)
  "$@" 2>"$log"
  rc=$?
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  local summary
  summary=$(grep -E "(Translated|Scored) .* target tokens/s" "$log" | tail -n 1)
  tokens=$(sed -n 's/.*(\([0-9]*\) target tokens).*/\1/p' <<<"$summary")
  load=$(sed -n 's/.*model load \([0-9.]*\) s.*/\1/p' <<<"$summary")
  busy=$(sed -n 's/.*) in \([0-9.]*\) s:.*/\1/p' <<<"$summary")
  local per_second
  per_second=$(sed -n 's/.* \([0-9.]*\) target tokens\/s.*/\1/p' <<<"$summary")
  if [ -n "$tokens" ] && [ -n "$per_second" ]; then
    busy=$(awk -v t="$tokens" -v r="$per_second" -v b="$busy" 'BEGIN { if (r > 0) printf "%.4f", t / r; else print b }')
  fi
}
# translate_case NAME INPUT BEAM BATCH: steps 2 and 3 for one case.
translate_case() {
  local name=$1 input=$2 beam=$3 batch=$4 lines
  lines=$(wc -l <"$input")
  # ---- 2. lstranslate, whole program ----
  run_program "$out/$name.log" "$bin/translate/lstranslate" -m "$model" -i "$input" -o "$out/$name.out" \
    --precision "$precision" --beam-size "$beam" --normalize "$normalize" --mini-batch "$batch" --maxi-batch 100
  echo "RESULT bench=translate impl=lstranslate case=$name rc=$rc lines=$lines out_lines=$(wc -l <"$out/$name.out") tokens=${tokens:-0} wall_s=$wall load_s=${load:-nan} translate_s=${busy:-nan}" |
    tee -a "$results"
  # ---- 2b. an older lstranslate (BASE_LSTRANSLATE) on the same input: its wall clock, and whether it translates
  # the same (the speed-ups must not change a translation) ----
  if [ -n "${BASE_LSTRANSLATE:-}" ]; then
    new_tokens=$tokens
    run_program "$out/$name.base.log" "$BASE_LSTRANSLATE" -m "$model" -i "$input" -o "$out/$name.base.out" \
      --precision "$precision" --beam-size "$beam" --normalize "$normalize" --mini-batch "$batch" --maxi-batch 100
    same=$(cmp -s "$out/$name.out" "$out/$name.base.out" && echo yes || echo "no:$(diff "$out/$name.out" \
      "$out/$name.base.out" | grep -c '^<')_lines_differ")
    echo "RESULT bench=translate impl=lstranslate-base case=$name wall_s=$wall same_output=$same" | tee -a "$results"
    tokens=$new_tokens
  fi
  # ---- 2c. the same program batch by batch (--continuous-batching false): what continuous batching gains, and
  # whether every translation stays the same ----
  new_tokens=$tokens
  run_program "$out/$name.batchwise.log" "$bin/translate/lstranslate" -m "$model" -i "$input" \
    -o "$out/$name.batchwise.out" --precision "$precision" --beam-size "$beam" --normalize "$normalize" \
    --mini-batch "$batch" --maxi-batch 100 --continuous-batching false
  same=$(cmp -s "$out/$name.out" "$out/$name.batchwise.out" && echo yes || echo "no:$(diff "$out/$name.out" \
    "$out/$name.batchwise.out" | grep -c '^<')_lines_differ")
  echo "RESULT bench=translate impl=lstranslate-batchwise case=$name wall_s=$wall translate_s=${busy:-nan} same_output=$same" |
    tee -a "$results"
  tokens=$new_tokens
  # ---- 2d. the same with --warm-up: the decoders meet their kernels during the load, as the kernel benchmark's
  # decoder has before it is timed; and how full the steps ran (--log-level debug: each decoder's steps and live
  # hypotheses a step, averaged over all steps) ----
  new_tokens=$tokens
  run_program "$out/$name.warm.log" "$bin/translate/lstranslate" -m "$model" -i "$input" -o "$out/$name.warm.out" \
    --precision "$precision" --beam-size "$beam" --normalize "$normalize" --mini-batch "$batch" --maxi-batch 100 \
    --warm-up --log-level debug
  live=$(grep -o 'decoder [0-9]*: [0-9]* steps, [0-9.]* live' "$out/$name.warm.log" |
    awk '{ n += $3; l += $3 * $5 } END { if (n > 0) printf "%.1f", l / n; else print "nan" }')
  same=$(cmp -s "$out/$name.out" "$out/$name.warm.out" && echo yes || echo "no:$(diff "$out/$name.out" \
    "$out/$name.warm.out" | grep -c '^<')_lines_differ")
  echo "RESULT bench=translate impl=lstranslate-warm case=$name wall_s=$wall load_s=${load:-nan} translate_s=${busy:-nan} live_a_step=$live same_output=$same" |
    tee -a "$results"
  tokens=$new_tokens
  # ---- 3. the kernel-level benchmark at the same batch ----
  src_len=$(awk '{ n += NF } END { printf "%d", n / NR * 1.4 + 1 }' "$input")  # ~ SentencePiece tokens + eos
  out_len=$(awk -v t="${tokens:-0}" -v l="$lines" 'BEGIN { printf "%d", (t > 0 ? t / l : 20) }')
  "$build/bench/bench_decode_throughput" --model "$model" --precision "$precision" --batch-sizes "$batch" \
    --beams "$beam" --src-len "$src_len" --out-len "$out_len" --batches-per-case 10 2>"$out/$name.kernel.log" |
    grep '^RESULT' | sed "s/^RESULT bench=decode/RESULT bench=decode case=$name/" | tee -a "$results"
  # ... and the same search on the same lines (--input: batched as lstranslate batches them, free decoding), timed
  # alone: what the program adds around the search (reading, SentencePiece, batching, output).
  "$build/bench/bench_decode_throughput" --model "$model" --precision "$precision" --batch-sizes "$batch" \
    --beams "$beam" --normalize "$normalize" --input "$input" 2>"$out/$name.kernel-free.log" |
    grep '^RESULT' | sed "s/^RESULT bench=decode impl=lseq/RESULT bench=decode case=$name impl=lseq-free/" |
    tee -a "$results"
}
for c in $cases; do
  beam=${c%%:*} batch=${c##*:}
  translate_case "beam${beam}-batch${batch}" "$test_src" "$beam" "$batch"
done
# ---- 3b. a long input: the first LONG_LINES lines of the training source (default 50000; 0: none), beam 4 x 128,
# where the fixed start-up cost is spread over many batches: per target token, the program against the kernel-level
# figures. (The model has seen these sentences; only the speed matters here. No Hugging Face run: it would take
# minutes.) ----
long_lines=${LONG_LINES:-50000}
if [ "$long_lines" -gt 0 ]; then
  head -n "$long_lines" "$data/train.de" >"$out/long.de"
  translate_case "long$((long_lines / 1000))k-beam4-batch128" "$out/long.de" 4 128
fi

# ---- 4. Hugging Face generate on the same weights ----
if [ -f tools/marian/lseq_to_marianmt.py ]; then
  if python3 tools/marian/lseq_to_marianmt.py "$model" "$out/marianmt" >"$out/convert.log" 2>&1; then
    for c in $cases; do
      beam=${c%%:*} batch=${c##*:}
      python3 bench/hf_translate.py --model "$out/marianmt" --input "$test_src" --output "$out/beam${beam}-batch${batch}.hf" \
        --beam "$beam" --batch "$batch" --length-penalty "$normalize" --precision "$precision" \
        --case "beam${beam}-batch${batch}" 2>"$out/hf-$beam-$batch.log" | tee -a "$results"
    done
  else
    echo "conversion to MarianMT FAILED (see $out/convert.log); no Hugging Face figures"
  fi
else
  echo "tools/marian/lseq_to_marianmt.py not found: no Hugging Face figures"
fi

# ---- 5. lsscore on the test pairs, beside Hugging Face's forward pass on the same weights ----
for batch in ${SCORE_BATCHES:-128}; do
  name="score-batch${batch}"
  run_program "$out/$name.log" "$bin/score/lsscore" -m "$model" -t "$test_src" "$data/test.en" -o "$out/$name.scores" \
    --precision "$precision" --mini-batch "$batch" --maxi-batch 100
  echo "RESULT bench=score impl=lsscore case=$name rc=$rc lines=$lines out_lines=$(wc -l <"$out/$name.scores") tokens=${tokens:-0} wall_s=$wall load_s=${load:-nan} score_s=${busy:-nan}" |
    tee -a "$results"
  if [ -d "$out/marianmt" ]; then
    python3 bench/hf_score.py --model "$out/marianmt" --source "$test_src" --target "$data/test.en" \
      --output "$out/$name.hf" --batch "$batch" --precision "$precision" --case "$name" 2>"$out/hf-$name.log" |
      tee -a "$results"
    # Both score the same weights: the per-pair scores should agree to bf16's precision.
    [ -f "$out/$name.hf" ] && python3 - "$out/$name.scores" "$out/$name.hf" "$name" <<'PY' | tee -a "$results"
import statistics, sys
ours = [float(x) for x in open(sys.argv[1])]
theirs = [float(x) for x in open(sys.argv[2])]
diffs = sorted(abs(a - b) for a, b in zip(ours, theirs))
if len(ours) == len(theirs) and diffs:
    print(f"RESULT bench=score impl=agreement case={sys.argv[3]} pairs={len(diffs)} "
          f"median_abs_diff={statistics.median(diffs):.4f} p99_abs_diff={diffs[int(0.99 * (len(diffs) - 1))]:.4f}")
PY
  fi
done

echo
python3 - "$results" <<'PY'
import sys


def rate(tokens, seconds):
    """Tokens per second, nan where a figure is missing."""
    try:
        return float(tokens) / float(seconds)
    except (TypeError, ValueError, ZeroDivisionError):
        return float("nan")


rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    rows.setdefault(f.get("case"), {})[f.get("impl", f.get("bench"))] = f
print(f"{'case':22} {'lstranslate wall':>16} {'translate only':>15} {'kernel bench':>13} {'HF generate':>12} "
      f"{'kernel/lstr':>11} {'kernel/wall':>11} {'lstr/HF':>8} {'base wall':>10} {'same':>5} {'search only':>11} "
      f"{'batchwise only':>14} {'same':>5} {'warm-up only':>12} {'kernel/warm':>11} {'live a step':>11} {'same':>5}")
for case, r in rows.items():
    if "lstranslate" not in r:
        continue
    t = r.get("lstranslate", {})
    tokens = t.get("tokens")
    wall = rate(tokens, t.get("wall_s"))
    only = rate(tokens, t.get("translate_s"))
    kernel = float(r.get("lseq", {}).get("tgt_tok_s", "nan"))
    hf = float(r.get("hf-generate", {}).get("tgt_tok_s", "nan"))
    free = float(r.get("lseq-free", {}).get("tgt_tok_s", "nan"))
    base = r.get("lstranslate-base", {})
    batchwise = r.get("lstranslate-batchwise", {})
    warm = r.get("lstranslate-warm", {})
    warm_only = rate(tokens, warm.get("translate_s"))
    print(f"{case:22} {wall:16.0f} {only:15.0f} {kernel:13.0f} {hf:12.0f} {kernel / only:11.2f} {kernel / wall:11.2f} "
          f"{wall / hf:8.2f} "
          f"{rate(tokens, base.get('wall_s')):10.0f} {base.get('same_output', '-'):>5} {free:11.0f} "
          f"{rate(tokens, batchwise.get('translate_s')):14.0f} {batchwise.get('same_output', '-'):>5} "
          f"{warm_only:12.0f} {kernel / warm_only:11.2f} {warm.get('live_a_step', '-'):>11} {warm.get('same_output', '-'):>5}")
scores = {case: r for case, r in rows.items() if "lsscore" in r}
if scores:
    print(f"\n{'case':18} {'lsscore wall':>13} {'score only':>11} {'HF forward':>11} {'wall/HF':>8} "
          f"{'median |diff|':>14} {'p99 |diff|':>11}")
for case, r in scores.items():
    t, hf, agree = r["lsscore"], r.get("hf-forward", {}), r.get("agreement", {})
    wall, hf_rate = rate(t.get("tokens"), t.get("wall_s")), float(hf.get("tgt_tok_s", "nan"))
    print(f"{case:18} {wall:13.0f} {rate(t.get('tokens'), t.get('score_s')):11.0f} {hf_rate:11.0f} {wall / hf_rate:8.2f} "
          f"{agree.get('median_abs_diff', '-'):>14} {agree.get('p99_abs_diff', '-'):>11}")
PY

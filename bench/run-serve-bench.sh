#!/usr/bin/env bash
# Issue 27's benchmark: lsserve under load beside offline lstranslate on the same sentences, on the GPU machine
# (one GPU; transformer-base, beam 4, bf16; the load client on the same machine over loopback).
#
#  1. The model: MODEL, or a transformer-base trained here as bench/run-translate-bench.sh trains it (DATA:
#     train.de/train.en/test.de; TRAIN_UPDATES updates).
#  2. The sentences: DATA/test.de repeated REPEAT times. Offline: lstranslate on them (--mini-batch BATCH,
#     --maxi-batch 100, --normalize 1): its own summary's target tokens/s (model load apart); its output is the
#     reference for every answer below.
#  3. lsserve with the same options (--max-length-crop: over-long lines cropped as lstranslate crops them).
#     a. saturation on the same sentences: every line once, in order, in requests of 16-64 sentences from
#        SAT_CLIENTS clients; target tokens/s over the run (the server's count) against lstranslate's (target: at
#        least 90%); the answers compared line by line with lstranslate's output;
#     b. 64 clients sending 1-16 sentences each, back to back for LOAD_SECONDS: the saturation rate at that size,
#        p50 and p99 latency;
#     c. half that request rate, open loop (arrivals at fixed times, latency from when a request was due), 64
#        client threads, for LOAD_SECONDS: p50 and p99 (target: p99 under 3 x p50);
#     d. the soak: SOAK_REQUESTS requests of 1-4 sentences, 1% malformed, 64 clients, at most SOAK_SECONDS: every
#        malformed one must get 400 and every valid one an answer (lost: none), with lstranslate's translations
#        (differ: answers with another translation, a near tie flipped by another batch in 16 bits); the server's
#        resident memory sampled every 2 s (start after the first tenth, half-way, peak, end) beside the decoders'
#        recorded steps (lsserve_recorded_steps: CUDA graphs, a bounded number, each costing memory);
#     e. SIGTERM: the exit code and how long the drain took.
#  Prints a table last. The whole run (model reused) stays under about 6 minutes; training adds TRAIN_UPDATES.
#
#   bash bench/run-serve-bench.sh                                  # BUILD=build-gpu OUT=/tmp/lseq-serve-bench
#   MODEL=/tmp/lseq-translate-bench/translate/model bash bench/run-serve-bench.sh
#   CPU=1 BUILD=build MODEL=... PRECISION=fp32 REPEAT=1 SOAK_REQUESTS=2000 bash bench/run-serve-bench.sh  # dry run
set -uo pipefail
export PYTHONUNBUFFERED=1
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
build=${BUILD:-build-gpu}
out=${OUT:-/tmp/lseq-serve-bench}/serve
data=${DATA:-.bench-data/ding-de-en}
model=${MODEL:-$out/model}
updates=${TRAIN_UPDATES:-2000}
precision=${PRECISION:-bf16}
beam=${BEAM:-4}
batch=${BATCH:-64}
repeat=${REPEAT:-5}
sat_clients=${SAT_CLIENTS:-64}
load_seconds=${LOAD_SECONDS:-20}
soak_requests=${SOAK_REQUESTS:-100000}
soak_seconds=${SOAK_SECONDS:-120}
processes=${PROCESSES:-4}
device=()
[ "${CPU:-0}" = 1 ] && device=(--cpu)
mkdir -p "$out"
bin=$build/apps
echo "device: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  { [ -f "$build/build.ninja" ] ||
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DLSEQ_CUDA=ON \
      -DLSEQ_SERVE=ON; } \
    >"$out/build.log" 2>&1 &&
    cmake --build "$build" --target lstrain lstranslate lsserve -j "${JOBS:-16}" >>"$out/build.log" 2>&1 ||
    { echo "build FAILED (see $out/build.log)"; tail -n 20 "$out/build.log"; exit 1; }
fi
for program in train/lstrain translate/lstranslate serve/lsserve; do
  [ -x "$bin/$program" ] || { echo "$bin/$program is missing: build it first (lsserve needs cpp-httplib:" \
    "'lseq: lsserve ...' in cmake's output says whether $build has it)"; exit 1; }
done

# ---- 1. the model ----
if [ ! -f "$model/model.safetensors" ]; then
  t0=$(date +%s)
  "$bin/train/lstrain" -c configs/transformer-base.yaml -m "$model" --precision "$precision" "${device[@]}" \
    -t "$data/train.de" "$data/train.en" --dim-vocabs 8000 8000 --mini-batch-words 16384 --maxi-batch 100 \
    --lr-warmup 2000u --lr-decay-inv-sqrt 2000u --learn-rate 0.0003 --after "${updates}u" --save-freq 0 \
    --valid-freq 0 --valid-metrics cross-entropy --disp-freq 500u --exponential-smoothing 0 >"$out/train.log" 2>&1 ||
    { echo "lstrain FAILED:"; tail -n 20 "$out/train.log"; exit 1; }
  echo "trained $model: $updates updates in $(($(date +%s) - t0)) s (log: $out/train.log)"
fi

# ---- 2. the sentences, and lstranslate offline ----
: >"$out/input.de"
for _ in $(seq 1 "$repeat"); do cat "$data/test.de" >>"$out/input.de"; done
lines=$(wc -l <"$out/input.de")
common=(-m "$model" --precision "$precision" "${device[@]}" --beam-size "$beam" --normalize 1 --mini-batch "$batch")
"$bin/translate/lstranslate" "${common[@]}" --maxi-batch 100 -i "$out/input.de" -o "$out/lstranslate.en" \
  2>"$out/lstranslate.log" || { echo "lstranslate FAILED:"; tail -n 5 "$out/lstranslate.log"; exit 1; }
summary=$(grep -E "target tokens/s" "$out/lstranslate.log" | tail -n 1)
offline_tokens=$(sed -n 's/.*(\([0-9]*\) target tokens).*/\1/p' <<<"$summary")
offline_s=$(sed -n 's/.*) in \([0-9.]*\) s:.*/\1/p' <<<"$summary")
offline_rate=$(awk -v t="$offline_tokens" -v s="$offline_s" 'BEGIN { printf "%.0f", t / s }')
echo "RESULT bench=serve case=offline impl=lstranslate lines=$lines tokens=$offline_tokens translate_s=$offline_s tgt_tok_s=$offline_rate" |
  tee "$out/results.txt"

# ---- 3. lsserve ----
# SERVE_OPTIONS: more lsserve options (for example "--decoders 1").
# shellcheck disable=SC2086
"$bin/serve/lsserve" "${common[@]}" --max-length-crop --port 0 --http-threads 256 --max-queue 100000 \
  --max-request-sentences 1000 ${SERVE_OPTIONS:-} >"$out/lsserve.out" 2>"$out/lsserve.log" &
server=$!
trap 'kill -9 $server 2>/dev/null' EXIT
port=""
for _ in $(seq 1 1200); do
  port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$out/lsserve.log")
  [ -n "$port" ] && break
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "lsserve did not start:"; tail -n 5 "$out/lsserve.log"; exit 1; }
url=http://127.0.0.1:$port
load() { python3 bench/serve_load.py --url "$url" --input "$out/input.de" --expect "$out/lstranslate.en" \
  --processes "$processes" --pid "$server" --timeout 300 "$@"; }
# Warm-up: every batch shape the runs below meet gets recorded once (CUDA graphs) before anything is timed.
load --clients 64 --min-sentences 1 --max-sentences 64 --duration 5 --label warmup >"$out/warmup.log" 2>&1

# a. saturation on the same sentences as lstranslate
load --once --clients "$sat_clients" --min-sentences 16 --max-sentences 64 --save-output "$out/lsserve.en" \
  --label saturation-same-sentences >"$out/saturation.log" 2>&1
grep '^RESULT' "$out/saturation.log" | tee -a "$out/results.txt"
same=$(paste -d '\n' "$out/lstranslate.en" "$out/lsserve.en" | awk 'NR % 2 { a = $0; next } { n++; s += (a == $0) }
  END { printf "%d/%d", s, n }')
echo "RESULT bench=serve case=same-output same_lines=$same" | tee -a "$out/results.txt"

# b. 64 clients, 1-16 sentences, back to back
load --clients 64 --min-sentences 1 --max-sentences 16 --duration "$load_seconds" --label clients64 \
  >"$out/clients64.log" 2>&1
grep '^RESULT' "$out/clients64.log" | tee -a "$out/results.txt"
sat_rate=$(sed -n 's/.* req_s=\([0-9.]*\) .*/\1/p' "$out/clients64.log" | tail -n 1)

# c. half that rate, open loop
half=$(awk -v r="${sat_rate:-0}" 'BEGIN { printf "%.1f", r / 2 }')
load --clients 64 --min-sentences 1 --max-sentences 16 --rate "$half" --duration "$load_seconds" \
  --label half-saturation >"$out/half.log" 2>&1
grep '^RESULT' "$out/half.log" | tee -a "$out/results.txt"

# d. the soak
load --clients 64 --min-sentences 1 --max-sentences 4 --requests "$soak_requests" --max-seconds "$soak_seconds" \
  --malformed 0.01 --rss-interval 2 --rss-log "$out/soak-rss.tsv" --label soak >"$out/soak.log" 2>&1
grep '^RESULT' "$out/soak.log" | tee -a "$out/results.txt"
curl -sS --max-time 10 "$url/metrics" >"$out/metrics.txt" 2>/dev/null

# e. SIGTERM
t0=$(date +%s.%N)
kill -TERM "$server"
for _ in $(seq 1 600); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
wait "$server"
code=$?
drain_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "RESULT bench=serve case=sigterm exit=$code drain_s=$drain_s" | tee -a "$out/results.txt"

echo
for log in saturation clients64 half soak; do sed -n '/^serve_load/,/^RESULT/p' "$out/$log.log" | grep -v '^RESULT'; done
python3 - "$out/results.txt" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    rows[f.get("case")] = f
num = lambda r, k: float(r.get(k, "nan") or "nan")
off = num(rows.get("offline", {}), "tgt_tok_s")
sat = rows.get("saturation-same-sentences", {})
print(f"\n{'':34} {'tgt tok/s':>10} {'sent/s':>8} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'p99/p50':>7} "
      f"{'batch':>6} {'lost':>5} {'differ':>6}")
print(f"{'lstranslate offline':34} {off:10.0f}")
for case in ["saturation-same-sentences", "clients64", "half-saturation", "soak"]:
    r = rows.get(case, {})
    p50, p99 = num(r, "p50_ms"), num(r, "p99_ms")
    print(f"{'lsserve ' + case:34} {num(r, 'tgt_tok_s'):10.0f} {num(r, 'sent_s'):8.0f} {num(r, 'req_s'):7.1f} "
          f"{p50:7.1f} {p99:7.1f} {p99 / p50 if p50 else float('nan'):7.2f} {num(r, 'batch_mean'):6.1f} "
          f"{r.get('lost', '-'):>5} {r.get('differ', '-'):>6}")
print(f"\nsaturation / offline: {num(sat, 'tgt_tok_s') / off:.2f} (target >= 0.90); same output lines: "
      f"{rows.get('same-output', {}).get('same_lines', '-')}")
h = rows.get("half-saturation", {})
print(f"half saturation: p99 / p50 = {num(h, 'p99_ms') / num(h, 'p50_ms'):.2f} (target < 3)")
s = rows.get("soak", {})
print(f"soak: {s.get('requests', '-')} requests, {s.get('malformed', '-')} malformed ({s.get('malformed_wrong', '-')} "
      f"not refused with 400), {s.get('lost', '-')} valid ones lost, {s.get('differ', '-')} answered with other "
      f"translations than lstranslate's; VmRSS MiB after warm-up "
      f"{s.get('rss_warm_mib', '-')}, half-way {s.get('rss_half_mib', '-')}, peak {s.get('rss_peak_mib', '-')}, end "
      f"{s.get('rss_end_mib', '-')}; recorded steps held {s.get('graphs_warm', '-')} / {s.get('graphs_half', '-')} / "
      f"{s.get('graphs_end', '-')} (made {s.get('recordings_warm', '-')} / {s.get('recordings_half', '-')} / "
      f"{s.get('recordings_end', '-')})")
t = rows.get("sigterm", {})
print(f"SIGTERM: exit {t.get('exit', '-')} after {t.get('drain_s', '-')} s")
PY

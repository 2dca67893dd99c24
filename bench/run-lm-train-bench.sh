#!/usr/bin/env bash
# GPT-2 training throughput, lstrain as users run it against PyTorch (issue 25's training target: at least 1.2x
# torch.compile with its fused scaled-dot-product attention, at least 45% model FLOPs utilisation, peak memory at
# most 0.7x PyTorch's). One device call, from the repository root:
#   bash bench/run-lm-train-bench.sh      # BUILD=build-gpu OUT=/tmp/lseq-lm-train SIZES=small BATCH=16 SEQ=1024
#                                         # DROPOUT=0 TORCH_MODES='compile eager' PROFILE=0
# For each size: a random GPT-2 made by transformers from its config (bench/hf_lm_generate.py make; nothing is
# downloaded) and converted by tools/gpt2/gpt2_to_lseq.py (1024 positions); lstrain on text (DATA, default the
# ding-de-en corpus under .bench-data, both sides) cut into blocks of SEQ tokens (--lm-pack-blocks), BATCH blocks an
# update (--mini-batch-words BATCH*SEQ), bf16, dropout DROPOUT on both sides (default 0, as llm.c and nanoGPT
# pretrain GPT-2; 0.1 is GPT-2's config); tokens/s is the median of lstrain's
# own words/s over the display intervals after the first (warm-up). Peak memory: nvidia-smi's memory.used on the
# GPU, sampled every 0.2 s, less what was used before the run (both programs measured the same way; PyTorch's
# allocator peak is printed beside). The peer: bench/torch_lm_train.py (the same shapes and vocabulary, random
# tokens), compiled and eager.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/lseq-lm-train}
SIZES=${SIZES:-small}
BATCH=${BATCH:-16}
SEQ=${SEQ:-1024}
UPDATES=${UPDATES:-60}
DROPOUT=${DROPOUT:-0}
TORCH_MODES=${TORCH_MODES-compile eager}  # set and empty: lstrain alone
PROFILE=${PROFILE:-0}  # 1: also lstrain's per-kernel GPU time (Nsight Compute's ncu)
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
DATA=${DATA:-$root/.bench-data/ding-de-en}
mkdir -p "$OUT"
results="$OUT/results.txt"
: >"$results"
lstrain="$root/$BUILD/apps/train/lstrain"
[ -x "$lstrain" ] || { echo "run-lm-train-bench: $lstrain not built (BUILD=$BUILD)" >&2; exit 1; }
device=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | head -n 1)
echo "device: $device" | tee -a "$results"
cat "$DATA/train.en" "$DATA/train.de" >"$OUT/corpus.txt" ||
  { echo "run-lm-train-bench: no corpus in DATA=$DATA" >&2; exit 1; }

# peak_memory <log> <command...>: runs the command (output to the log) while sampling GPU 0's memory.used; prints
# "<exit code> <peak MiB above what was used before>".
peak_memory() {
  local log=$1 before samples=$OUT/memory.samples pid rc
  shift
  before=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | head -n 1)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 -lms 200 >"$samples" 2>/dev/null &
  pid=$!
  "$@" >"$log" 2>&1
  rc=$?
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "$rc $(sort -n "$samples" | tail -n 1 | awk -v b="$before" '{ print $1 - b }')"
}

for size in $SIZES; do
  hf="$OUT/hf-$size" lseq="$OUT/lseq-$size"
  rm -rf "$hf" "$lseq" "$OUT/run-$size"
  python3 "$root/bench/hf_lm_generate.py" make --size "$size" --out "$hf" || continue
  python3 "$root/tools/gpt2/gpt2_to_lseq.py" "$hf" "$lseq" --max-length $((SEQ - 1)) || continue
  train=("$lstrain" -c "$lseq/config.yml" --vocabs "$lseq/vocab.json" -t "$OUT/corpus.txt" --lm-pack-blocks
    --max-length $((SEQ - 1)) --precision bf16 --transformer-dropout "$DROPOUT" --transformer-dropout-attention
    "$DROPOUT" --mini-batch-words $((BATCH * SEQ)) --mini-batch 1000 --save-freq 0u --valid-freq 0u --seed 1)
  read -r rc peak < <(peak_memory "$OUT/lstrain-$size.log" "${train[@]}" -m "$OUT/run-$size" --after "${UPDATES}u" \
    --disp-freq 10u)
  tok_s=$(grep -o '[0-9.]* words/s' "$OUT/lstrain-$size.log" | awk 'NR > 1 { print $1 }' | sort -n |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "nan" }')
  echo "RESULT bench=lm-train impl=lstrain size=$size seq=$SEQ batch=$BATCH dropout=$DROPOUT rc=$rc tok_s=$tok_s" \
    "peak_mem_mib=$peak" | tee -a "$results"
  if [ "$PROFILE" = 1 ]; then  # GPU time an update by kernel: ncu over 3 updates, summed by bench/kernel_profile.py
    rm -rf "$OUT/profile-run-$size"
    timeout -k 5 300 "$ncu_bin" --csv --metrics gpu__time_duration.sum --clock-control none --cache-control none \
      "${train[@]}" -m "$OUT/profile-run-$size" --after 3u --disp-freq 1u >"$OUT/profile-$size.csv" \
      2>"$OUT/profile-$size.err" || echo "run-lm-train-bench: ncu exit $? (see $OUT/profile-$size.err)"
    python3 "$root/bench/kernel_profile.py" "$OUT/profile-$size.csv" --per 3 --top 40 | tee "$OUT/profile-$size.txt"
  fi
  for mode in $TORCH_MODES; do
    flag=()
    [ "$mode" = eager ] && flag=(--eager)
    read -r rc peak < <(peak_memory "$OUT/torch-$mode-$size.log" python3 "$root/bench/torch_lm_train.py" \
      --size "$size" --seq "$SEQ" --batch "$BATCH" --dropout "$DROPOUT" "${flag[@]}")
    line=$(grep '^RESULT' "$OUT/torch-$mode-$size.log")
    echo "${line:-RESULT bench=lm-train impl=torch-$mode size=$size status=failed} rc=$rc smi_peak_mem_mib=$peak" |
      tee -a "$results"
  done
done

python3 - "$results" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    if line.startswith("RESULT"):
        kv = dict(w.split("=", 1) for w in line.split()[1:] if "=" in w)
        rows[(kv.get("size"), kv.get("impl"))] = kv
for size in sorted({s for s, _ in rows}):
    ours, comp = rows.get((size, "lstrain"), {}), rows.get((size, "torch-compile"), {})
    eager = rows.get((size, "torch-eager"), {})
    try:
        per_tok = float(comp["mfu"]) * 989e12 / float(comp["tok_s"])  # the same FLOPs a token
        mfu = float(ours["tok_s"]) * per_tok / 989e12
        print(f"{size}: lstrain {float(ours['tok_s']):.0f} tok/s (MFU {mfu:.3f}, peak {ours['peak_mem_mib']} MiB); "
              f"torch.compile {float(comp['tok_s']):.0f} (MFU {float(comp['mfu']):.3f}, "
              f"peak {comp.get('smi_peak_mem_mib')} MiB); "
              f"eager {eager.get('tok_s', 'nan')}; lstrain/compile {float(ours['tok_s']) / float(comp['tok_s']):.2f}x, "
              f"memory {float(ours['peak_mem_mib']) / float(comp['smi_peak_mem_mib']):.2f}x")
    except (KeyError, ValueError, ZeroDivisionError) as e:
        print(f"{size}: incomplete ({e})")
PY
echo "run-lm-train-bench: results in $results"

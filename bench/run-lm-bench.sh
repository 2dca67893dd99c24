#!/usr/bin/env bash
# GPT-2 generation, whole program, lseq against Hugging Face generate on the same prompts (issue 25's generation
# target: at least 10x generate's tokens/s). One device call, from the repository root:
#   bash bench/run-lm-bench.sh        # BUILD=build-gpu OUT=/tmp/lseq-lm-bench SIZES="small medium" BATCHES="32 128"
# For each size: a random GPT-2 made by transformers from its config (bench/hf_lm_generate.py make; nothing is
# downloaded), converted by tools/gpt2/gpt2_to_lseq.py (all 1024 positions); 128 prompts of 16-128 random token
# ids; NEW_TOKENS (256, the issue's) new tokens each, sampled top-k TOPK (32; lseq's GPU top-k takes k <= 128,
# Hugging Face's default is 50; top-p and full sampling read whole rows on the host, many times slower). lseq:
# lstranslate --no-spm-encode --no-spm-decode over the prompt file, wall time of the whole program and its own
# "Translated ..." line (its target tokens/s, model load apart). HF: generate in batches, left-padded, with its KV
# cache and min_new_tokens = max_new_tokens. Tokens/s counts the tokens generated (lseq may stop a prompt early at
# eos).
# CPU=1 SIZES=tiny runs everything on the CPU with a tiny model (a dry run of the script, not a figure).
# impl=lstranslate-warm runs the same with --warm-up (the decoders meet their kernels during the load, as generate's
# untimed warm-up batch does for Hugging Face; its tokens/s leaves that out with the load, its wall_s keeps it).
# BASE_LSTRANSLATE=<another build's lstranslate> also runs it on the same model and prompts (impl=lstranslate-base):
# a before/after on one machine.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/lseq-lm-bench}
SIZES=${SIZES:-small medium}
BATCHES=${BATCHES:-32 128}
NEW_TOKENS=${NEW_TOKENS:-256}
TOPK=${TOPK:-32}
PRECISION=${PRECISION:-bf16}
mkdir -p "$OUT"
results="$OUT/results.txt"
: >"$results"
device=()
hf_device=()
if [ -n "${CPU:-}" ]; then
  device=(--cpu)
  hf_device=(--cpu)
  PRECISION=fp32
fi
lstranslate="$root/$BUILD/apps/translate/lstranslate"
[ -x "$lstranslate" ] || { echo "run-lm-bench: $lstranslate not built (BUILD=$BUILD)" >&2; exit 1; }

python3 "$root/bench/hf_lm_generate.py" prompts --count "${PROMPTS:-128}" --out "$OUT/prompts.ids"
for size in $SIZES; do
  hf="$OUT/hf-$size" lseq="$OUT/lseq-$size"
  rm -rf "$hf" "$lseq"
  python3 "$root/bench/hf_lm_generate.py" make --size "$size" --out "$hf"
  python3 "$root/tools/gpt2/gpt2_to_lseq.py" "$hf" "$lseq" || continue
  for batch in $BATCHES; do
    for impl in lstranslate lstranslate-warm ${BASE_LSTRANSLATE:+lstranslate-base}; do
      binary=$lstranslate
      [ "$impl" = lstranslate-base ] && binary=$BASE_LSTRANSLATE
      warm=()
      [ "$impl" = lstranslate-warm ] && warm=(--warm-up)
      name="$impl-$size-$batch"
      begin=$(date +%s%N)
      "$binary" -m "$lseq" "${device[@]}" --precision "$PRECISION" --no-spm-encode --no-spm-decode \
        -i "$OUT/prompts.ids" -o "$OUT/$name.out" --max-length "$NEW_TOKENS" --mini-batch "$batch" \
        --maxi-batch 100 --output-sampling topk "$TOPK" --seed 1 "${warm[@]}" 2>"$OUT/$name.log"
      rc=$?
      wall=$(awk -v a="$begin" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
      tokens=$(wc -w <"$OUT/$name.out")
      translate_s=$(sed -n 's/.*target tokens) in \([0-9.]*\) s.*/\1/p' "$OUT/$name.log")
      # The summary's own rate (its clock, not the 0.01 s of its printed time); the words over the wall time without it.
      rate=$(sed -n 's/.*, \([0-9.]*\) target tokens\/s.*/\1/p' "$OUT/$name.log")
      [ -n "$rate" ] || rate=$(awk -v t="$tokens" -v s="$wall" 'BEGIN { printf "%.1f", t / s }')
      echo "RESULT bench=lm-generate impl=$impl size=$size precision=$PRECISION batch=$batch top_k=$TOPK" \
        "new_tokens=$NEW_TOKENS rc=$rc tokens=$tokens wall_s=$wall translate_s=${translate_s:-nan}" \
        "tokens_per_s=$rate" |
        tee -a "$results"
    done
    for other in lstranslate-warm ${BASE_LSTRANSLATE:+lstranslate-base}; do
      same=no
      cmp -s "$OUT/lstranslate-$size-$batch.out" "$OUT/$other-$size-$batch.out" && same=yes
      echo "RESULT bench=lm-generate impl=agreement size=$size batch=$batch top_k=$TOPK with=$other same_output=$same" |
        tee -a "$results"
    done
    python3 "$root/bench/hf_lm_generate.py" generate --model "$hf" --prompts "$OUT/prompts.ids" --batch "$batch" \
      --new-tokens "$NEW_TOKENS" --top-k "$TOPK" --precision "$PRECISION" --label "$size" "${hf_device[@]}" \
      2>"$OUT/hf-$size-$batch.log" |
      tee -a "$results"
  done
done
echo "run-lm-bench: results in $results"

#!/usr/bin/env bash
# GPU-vs-CPU parity of whole runs (issue 5), on the shipped sample:
#  1. the same 20 training updates of configs/tiny.yaml on the CPU and on the GPU (fp32, same seed, same dropout
#     masks) give the same loss curve;
#  2. a model's translations of the test set are the same on both;
#  3. a transformer-base update (fp32) gives the CPU's loss and gradient norm;
#  4. bf16 and fp16 training converge like fp32 (validation perplexity after the same updates), and bf16 decoding
#     scores BLEU within 0.3 of fp32.
# Needs a built tree with the CUDA backend and a GPU.
# Usage: bash scripts/gpu-parity.sh [build dir] ; logs under ${OUT:-/tmp/gpu-parity}
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-gpu}
out=${OUT:-/tmp/gpu-parity}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$build/apps
sample=$root/data/sample-de-en
failed=0
declare -A ppl bleu
train() {  # train NAME extra-args...
  local name=$1; shift
  "$bin/train/lstrain" -c "$root/configs/tiny.yaml" -m "$work/$name" -t "$sample/train.de" "$sample/train.en" \
    --vocabs "$work/vocab.spm" --disp-freq 1u "$@" >"$out/train-$name.log" 2>&1
}
costs() { grep -o 'Cost [0-9.]*' "$1" | awk '{print $2}'; }

train cpu --after 20u --cpu || failed=1
train gpu --after 20u || failed=1
grep -h 'backend:' "$out/train-cpu.log" "$out/train-gpu.log"
paste <(costs "$out/train-cpu.log") <(costs "$out/train-gpu.log") >"$out/loss-curves.tsv"
echo "update  cpu-cost  gpu-cost  relative-difference"
awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > m) m = d; printf "%6d  %.5f  %.5f  %.2e\n", NR, $1, $2, d }
     END { printf "largest relative difference over %d updates: %.2e\n", NR, m; exit !(NR == 20 && m < 1e-3) }' \
  "$out/loss-curves.tsv" || { echo "FAIL: loss curves differ (or fewer than 20 updates)"; failed=1; }

# Translations of the test set by a model trained a little longer (on the GPU), decoded on both backends.
train model --after 300u --valid-freq 0 || failed=1
for backend in cpu gpu; do
  flag=(); [ "$backend" = cpu ] && flag=(--cpu)
  /usr/bin/time -f "%e s" -o "$out/translate-$backend.time" \
    "$bin/translate/lstranslate" -m "$work/model" "${flag[@]}" -i "$sample/test.de" -o "$out/test-$backend.en" \
    2>"$out/translate-$backend.log" || failed=1
done
if cmp -s "$out/test-cpu.en" "$out/test-gpu.en"; then
  echo "translations: the CPU's and the GPU's $(wc -l <"$out/test-cpu.en") lines are identical"
else
  echo "FAIL: $(diff "$out/test-cpu.en" "$out/test-gpu.en" | grep -c '^<') of $(wc -l <"$out/test-cpu.en") translations differ"
  failed=1
fi
for backend in cpu gpu; do
  echo "$backend: $("$bin/eval/lseval" -r "$sample/test.en" -i "$out/test-$backend.en" -m bleu | cut -f1), $(cat "$out/translate-$backend.time")"
done
# 3. One transformer-base update on both backends (2 updates: the second sees the first's Adam step).
base=(-c "$root/configs/transformer-base.yaml" --mini-batch-words 2048 --max-length 80 --disp-freq 1u --after 2u
      --valid-freq 0 --save-freq 0 --vocabs "$work/vocab8k.spm" --dim-vocabs 8000 8000)
"$bin/train/lstrain" "${base[@]}" -m "$work/base-cpu" -t "$sample/train.de" "$sample/train.en" --cpu \
  >"$out/base-cpu.log" 2>&1 || failed=1
"$bin/train/lstrain" "${base[@]}" -m "$work/base-gpu" -t "$sample/train.de" "$sample/train.en" \
  >"$out/base-gpu.log" 2>&1 || failed=1
stats() { grep -oE 'Cost [0-9.]+|gNorm [0-9.]+' "$1" | awk '{print $2}' | paste - -; }
paste <(stats "$out/base-cpu.log") <(stats "$out/base-gpu.log") >"$out/base.tsv"
echo "transformer-base: update  cpu-cost  gpu-cost  cpu-gnorm  gpu-gnorm"
awk '{ dc = ($1 - $3) / $1; dg = ($2 - $4) / $2; if (dc < 0) dc = -dc; if (dg < 0) dg = -dg; if (dc > m) m = dc; if (dg > m) m = dg
       printf "  %d  %.6f  %.6f  %.6f  %.6f\n", NR, $1, $3, $2, $4 }
     END { printf "largest relative difference: %.2e\n", m; exit !(NR == 2 && m < 1e-4) }' "$out/base.tsv" ||
  { echo "FAIL: transformer-base update differs between CPU and GPU"; failed=1; }

# 4. Precisions: the same 1500 updates of tiny.yaml in fp32, bf16 and fp16 on the GPU.
for precision in fp32 bf16 fp16; do
  train "p-$precision" --precision "$precision" --valid-sets "$sample/valid.de" "$sample/valid.en" \
    --valid-freq 500u || failed=1
  ppl[$precision]=$(grep -o 'perplexity : [0-9.]*' "$out/train-p-$precision.log" | tail -n 1 | awk '{print $3}')
done
echo "validation perplexity after 1500 updates: fp32 ${ppl[fp32]}, bf16 ${ppl[bf16]}, fp16 ${ppl[fp16]}"
for precision in bf16 fp16; do
  awk -v a="${ppl[fp32]}" -v b="${ppl[$precision]}" 'BEGIN { d = (b - a) / a; if (d < 0) d = -d; exit !(d < 0.05) }' ||
    { echo "FAIL: $precision perplexity is not within 5% of fp32's"; failed=1; }
done
for precision in fp32 bf16; do
  "$bin/translate/lstranslate" -m "$work/p-fp32" --precision "$precision" -i "$sample/test.de" \
    -o "$out/test-p-$precision.en" 2>"$out/translate-p-$precision.log" || failed=1
  bleu[$precision]=$("$bin/eval/lseval" -r "$sample/test.en" -i "$out/test-p-$precision.en" -m bleu | awk '{print $3}')
done
echo "BLEU of the fp32 model decoded in fp32: ${bleu[fp32]}, in bf16: ${bleu[bf16]}"
awk -v a="${bleu[fp32]}" -v b="${bleu[bf16]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.3) }' ||
  { echo "FAIL: bf16 BLEU is not within 0.3 of fp32's"; failed=1; }
exit $failed

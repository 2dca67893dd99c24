#!/usr/bin/env bash
# GPU-vs-CPU parity of whole runs (issue 5): the same 20 training updates of configs/tiny.yaml on the shipped sample
# on the CPU and on the GPU (fp32, same seed, same dropout masks) must give the same loss curve, and a model's
# translations of the sample's test set must be the same on both. Needs a built tree with the CUDA backend and a
# GPU. Usage: bash scripts/gpu-parity.sh [build dir] ; logs under ${OUT:-/tmp/gpu-parity}
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
exit $failed

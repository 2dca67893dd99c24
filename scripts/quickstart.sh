#!/usr/bin/env bash
# README command (1): installs the dependencies, builds lseq, and runs the main job on the embedded default:
# trains configs/tiny.yaml on the shipped German-English sample (a couple of minutes on a laptop CPU, or on the GPU
# where there is one) into ./quickstart-model, with validation on the sample's validation set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
bin=${LSEQ_BUILD_DIR:-$root/build}/apps
sample=$root/data/sample-de-en
model=${LSEQ_QUICKSTART_MODEL:-$PWD/quickstart-model}

"$bin/train/lstrain" --config "$root/configs/tiny.yaml" --model "$model" --overwrite \
  --train-sets "$sample/train.de" "$sample/train.en" \
  --valid-sets "$sample/valid.de" "$sample/valid.en" \
  --log "$model.train.log"
echo
echo "quickstart: model in $model; training log in $model.train.log"
echo "validation perplexity during training:"
grep -E ' perplexity : ' "$model.train.log" | sed 's/^.*\] /  /'

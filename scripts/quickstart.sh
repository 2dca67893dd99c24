#!/usr/bin/env bash
# README command (1): installs the dependencies, builds lseq, and runs the main job on the embedded default:
# trains configs/tiny.yaml on the shipped German-English sample (a few minutes on a laptop CPU) into
# ./quickstart-model with validation on the sample's validation set, translates the sample's test set with it, and
# prints BLEU and chrF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
bin=${LSEQ_BUILD_DIR:-$root/build}/apps
sample=$root/data/sample-de-en
model=${LSEQ_QUICKSTART_MODEL:-$PWD/quickstart-model}

rm -f "$model.train.log" "$model.translate.log"
"$bin/train/lstrain" --config "$root/configs/tiny.yaml" --model "$model" --no-reload \
  --train-sets "$sample/train.de" "$sample/train.en" \
  --valid-sets "$sample/valid.de" "$sample/valid.en" \
  --log "$model.train.log"
"$bin/translate/lstranslate" --model "$model" --input "$sample/test.de" --output "$model.test.en" \
  --log "$model.translate.log"
echo
echo "quickstart: model in $model; translations of $sample/test.de in $model.test.en"
echo "validation perplexity during training:"
grep -E ' perplexity : ' "$model.train.log" | sed 's/^.*\] /  /'
echo "test set ($(wc -l <"$sample/test.de") sentences):"
"$bin/eval/lseval" --references "$sample/test.en" --input "$model.test.en"

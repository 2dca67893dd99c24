#!/usr/bin/env bash
# Translates newstest2014 (data/test.en) with the trained model and scores it against data/test.de.
#
#   bash evaluate.sh base                 # or big; more lstranslate options follow (e.g. --cpu, --beam-size 4)
#
# BLEU and chrF come from sacreBLEU when it is installed (its signature is printed, so the numbers can be compared
# with published ones), else from lseval, which computes sacreBLEU's BLEU (13a tokenization, exp smoothing) and
# chrF exactly; the signature then says so. The translation is data/test.<size>.de.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
size=${1:-base}
[ $# -gt 0 ] && shift
bin=${LSEQ_BIN:+$LSEQ_BIN/}
model=model-$size
[ -d "$model" ] || { echo "evaluate.sh: no model directory '$model'; run train.sh $size first" >&2; exit 1; }
hyp=data/test.$size.de
"${bin}lstranslate" -m "$model" -i data/test.en -o "$hyp" --quiet "$@"
echo "evaluate.sh: $(wc -l < "$hyp") translations in $hyp"
if command -v sacrebleu >/dev/null 2>&1; then
  sacrebleu data/test.de -i "$hyp" -m bleu chrf
else
  "${bin}lseval" -r data/test.de -i "$hyp" -m bleu chrf
  echo "signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp (sacreBLEU's BLEU as computed by lseval;" \
       "pip install sacrebleu for its own signature)"
fi

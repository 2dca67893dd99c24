#!/usr/bin/env bash
# Marian compatibility: docs/marian-compat.md is what lstrain --dump-marian-compat generates; the training command
# lines of marian-examples (transformer/run-me.sh, wmt2017-transformer/run-me.sh,
# training-basics-sentencepiece/run-me.sh; only the paths changed: variables, .spm vocabularies) pass through
# lstrain --dump-config with no option refused, except the documented RNN ones, each refused with one line; the
# transformer command line starts training; lstranslate reads Marian's decoder.yml keys and decoder options.
# Usage: marian_compat_test.sh <lstrain's directory> <source dir>
set -uo pipefail
bin=$(cd "$1/.." && pwd)
src=$2
lstrain=$bin/train/lstrain
lstranslate=$bin/translate/lstranslate
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}
# refused <what> <pattern> <command...>: exit 1 and exactly one error line, which matches <pattern>.
refused() {
  local what=$1 pattern=$2; shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  check "$what: exits 1 (got $rc)" test "$rc" -eq 1
  check "$what: one error line" test "$(grep -c '^error: ' "$work/err")" -eq 1
  check "$what: says '$pattern'" grep -q -- "$pattern" <(grep '^error: ' "$work/err")
}

"$lstrain" --dump-marian-compat > "$work/compat.md"
check "docs/marian-compat.md is what lstrain --dump-marian-compat generates (regenerate it)" \
  cmp -s "$work/compat.md" "$src/docs/marian-compat.md"

D=$work/data; M=$work/model; GPUS=0; WORKSPACE=9500; EPOCHS=8; i=1
mkdir -p "$D" "$M"
# transformer/run-me.sh
transformer=(--model $M/model.npz --type transformer --train-sets $D/corpus.bpe.en $D/corpus.bpe.de --max-length 100
  --vocabs $M/vocab.ende.spm $M/vocab.ende.spm --mini-batch-fit -w 10000 --maxi-batch 1000 --early-stopping 10
  --cost-type=ce-mean-words --valid-freq 5000 --save-freq 5000 --disp-freq 500
  --valid-metrics ce-mean-words perplexity translation --valid-sets $D/valid.bpe.en $D/valid.bpe.de
  --valid-script-path "bash ./scripts/validate.sh" --valid-translation-output $D/valid.bpe.en.output
  --quiet-translation --valid-mini-batch 64 --beam-size 6 --normalize 0.6 --log $M/train.log
  --valid-log $M/valid.log --enc-depth 6 --dec-depth 6 --transformer-heads 8 --transformer-postprocess-emb d
  --transformer-postprocess dan --transformer-dropout 0.1 --label-smoothing 0.1 --learn-rate 0.0003
  --lr-warmup 16000 --lr-decay-inv-sqrt 16000 --lr-report --optimizer-params 0.9 0.98 1e-09 --clip-norm 5
  --tied-embeddings-all --devices $GPUS --sync-sgd --seed 1111 --exponential-smoothing)
# wmt2017-transformer/run-me.sh: the ensemble members (transformer), the back-translation model (s2s), the
# right-to-left members (transformer --right-left)
wmt17=(--model $M/ens$i/model.npz --type transformer --train-sets $D/all.bpe.en $D/all.bpe.de --max-length 100
  --vocabs $M/vocab.ende.spm $M/vocab.ende.spm --mini-batch-fit -w $WORKSPACE --mini-batch 1000 --maxi-batch 1000
  --valid-freq 5000 --save-freq 5000 --disp-freq 500 --valid-metrics ce-mean-words perplexity translation
  --valid-sets $D/valid.bpe.en $D/valid.bpe.de --valid-script-path "bash ./scripts/validate.sh"
  --valid-translation-output $D/valid.bpe.en.output --quiet-translation --beam-size 12 --normalize=1
  --valid-mini-batch 64 --overwrite --keep-best --early-stopping 5 --after-epochs $EPOCHS --cost-type=ce-mean-words
  --log $M/ens$i/train.log --valid-log $M/ens$i/valid.log --enc-depth 6 --dec-depth 6 --tied-embeddings-all
  --transformer-dropout 0.1 --label-smoothing 0.1 --learn-rate 0.0003 --lr-warmup 16000 --lr-decay-inv-sqrt 16000
  --lr-report --optimizer-params 0.9 0.98 1e-09 --clip-norm 5 --devices $GPUS --sync-sgd --seed $i$i$i$i
  --exponential-smoothing)
wmt17_back=(--model $M/model.back/model.npz --type s2s --train-sets $D/corpus.bpe.de $D/corpus.bpe.en --max-length 100
  --vocabs $M/vocab.ende.spm $M/vocab.ende.spm --mini-batch-fit -w 3500 --maxi-batch 1000 --valid-freq 10000
  --save-freq 10000 --disp-freq 1000 --valid-metrics ce-mean-words perplexity translation
  --valid-script-path "bash ./scripts/validate.en.sh" --valid-translation-output $D/valid.bpe.de.output
  --quiet-translation --valid-sets $D/valid.bpe.de $D/valid.bpe.en --valid-mini-batch 64 --beam-size 12
  --normalize=1 --overwrite --keep-best --early-stopping 5 --after-epochs 10 --cost-type=ce-mean-words
  --log $M/model.back/train.log --valid-log $M/model.back/valid.log --tied-embeddings-all --layer-normalization
  --devices $GPUS --seed 1111 --exponential-smoothing)
# training-basics-sentencepiece/run-me.sh
spm=(--devices $GPUS --type s2s --model $M/model.npz --train-sets $D/corpus.ro $D/corpus.en
  --vocabs $M/vocab.roen.spm $M/vocab.roen.spm --sentencepiece-options '--normalization_rule_tsv=data/norm_romanian.tsv'
  --dim-vocabs 32000 32000 --mini-batch-fit -w 5000 --layer-normalization --tied-embeddings-all --dropout-rnn 0.2
  --dropout-src 0.1 --dropout-trg 0.1 --early-stopping 5 --max-length 100 --valid-freq 10000 --save-freq 10000
  --disp-freq 1000 --cost-type ce-mean-words --valid-metrics ce-mean-words bleu-detok
  --valid-sets $D/newsdev2016.ro $D/newsdev2016.en --log $M/train.log --valid-log $M/valid.log --tempdir $M
  --overwrite --keep-best --seed 1111 --exponential-smoothing --normalize=0.6 --beam-size=6 --quiet-translation)

"$lstrain" "${transformer[@]}" --dump-config >"$work/t.yml" 2>"$work/t.err"
check "transformer/run-me.sh: accepted" test $? -eq 0
check "... --model model.npz trains into its directory (a warning says so)" grep -q "^model: $M$" "$work/t.yml"
check "... a bare --exponential-smoothing is 1e-4" grep -q "^exponential-smoothing: 0.0001$" "$work/t.yml"
check "... no warning but the model path's" test "$(grep -c '^warning: ' "$work/t.err")" -eq 1
"$lstrain" "${wmt17[@]}" --dump-config >/dev/null 2>"$work/w.err"
check "wmt2017-transformer (ensemble member): accepted" test $? -eq 0
refused "wmt2017-transformer (right-to-left member)" "--right-left" "$lstrain" "${wmt17[@]}" --right-left --dump-config
refused "wmt2017-transformer (back-translation s2s)" "--type s2s is a Marian RNN model" \
  "$lstrain" "${wmt17_back[@]}" --dump-config
"$lstrain" "${wmt17_back[@]}" --type transformer --layer-normalization false --dump-config >/dev/null 2>&1
check "... without its RNN options nothing else is refused" test $? -eq 0
refused "training-basics-sentencepiece (s2s)" "--type s2s" "$lstrain" "${spm[@]}" --dump-config
for rnn in "--layer-normalization" "--dropout-rnn 0.2" "--dropout-src 0.1" "--dropout-trg 0.1"; do
  read -r -a words <<< "$rnn"
  refused "training-basics-sentencepiece: $rnn" "${words[0]}" "$lstrain" "${spm[@]}" --type transformer \
    --layer-normalization false --dropout-rnn 0 --dropout-src 0 --dropout-trg 0 "${words[@]}" --dump-config
done
"$lstrain" "${spm[@]}" --type transformer --layer-normalization false --dropout-rnn 0 --dropout-src 0 \
  --dropout-trg 0 --dump-config >/dev/null 2>"$work/s.err"
check "... without its RNN options nothing else is refused" test $? -eq 0
check "... --tempdir is accepted with a warning that says it has no effect" \
  grep -q "^warning: --tempdir .* has no effect here" "$work/s.err"
refused "a Marian .yml vocabulary" "is a Marian vocabulary" "$lstrain" -m "$work/y" --cpu \
  -t "$src/data/sample-de-en/train.de" "$src/data/sample-de-en/train.en" -v "$work/vocab.ende.yml"

# The transformer command line starts training (sample data; with a few overrides appended so that it is quick).
sample=$src/data/sample-de-en
head -n 1500 "$sample/train.en" > "$D/corpus.bpe.en"; head -n 1500 "$sample/train.de" > "$D/corpus.bpe.de"
head -n 8 "$sample/valid.en" > "$D/valid.bpe.en"; head -n 8 "$sample/valid.de" > "$D/valid.bpe.de"
mkdir -p "$work/scripts"
# --valid-script-args come before the translation file, as in Marian: the score is <lines>.<first argument>.
printf '#!/bin/sh\n# prints a score from its argument ($1) and the translation file ($2)\n%s\n' \
  'echo "BLEU = $(wc -l < "$2").$1"' > "$work/scripts/validate.sh"
(cd "$work" && "$lstrain" "${transformer[@]}" --cpu --cpu-threads 2 -w 24 --enc-depth 1 --dec-depth 1 --dim-emb 64 \
  --transformer-heads 4 --transformer-dim-ffn 128 --dim-vocabs 300 300 --after 2u --max-length 40 \
  --max-length-factor 1 --valid-script-args 5 >"$work/train.log" 2>&1)
check "transformer/run-me.sh starts training" test $? -eq 0
check "... fits its batches to -w (--mini-batch-fit)" grep -q -- "--mini-batch-fit: batches of up to" "$work/train.log"
check "... the 'translation' metric is the script's number (--valid-script-args, then the file)" \
  grep -q "translation : 8.5000" "$M/valid.log"
check "... the translations are written where asked" test "$(wc -l < "$D/valid.bpe.en.output")" -eq 8
check "... the model is in the --model file's directory" test -s "$M/model.safetensors"

# lstranslate: Marian's decoder.yml keys and decoder options.
cat > "$M/model.npz.decoder.yml" <<YML
relative-paths: true
models:
  - model.safetensors
vocabs:
  - vocab.ende.spm
  - vocab.ende.spm
beam-size: 6
normalize: 0.6
word-penalty: 0
mini-batch: 64
maxi-batch: 100
maxi-batch-sort: src
YML
"$lstranslate" -c "$M/model.npz.decoder.yml" --dump-config >"$work/d.yml" 2>"$work/d.err"
check "lstranslate reads Marian's decoder.yml (relative-paths, models, vocabs)" test $? -eq 0
check "... models: [model.safetensors] is its model directory" grep -q "^model: $M$" "$work/d.yml"
check "... vocabs: a warning that the model directory's are used" \
  grep -q "^warning: --vocabs has no effect" "$work/d.err"
printf 'relative-paths: true\nmodels: [model.npz]\n' > "$M/marian.decoder.yml"
refused "a Marian .npz model" "convert it" "$lstranslate" -c "$M/marian.decoder.yml"
head -n 3 "$sample/test.de" > "$work/in.de"
"$lstranslate" -c "$M/model.npz.decoder.yml" -i "$work/in.de" -b 6 --normalize=1 -w 2500 -d 0 --mini-batch 64 \
  --maxi-batch 100 --maxi-batch-sort src --max-length 200 --max-length-crop --cpu -n0.6 -b6 >"$work/out.txt" \
  2>"$work/translate.err"
check "marian-decoder's command line of the recipes translates" test "$(wc -l < "$work/out.txt")" -eq 3

echo "$failures failed"
[ "$failures" -eq 0 ]

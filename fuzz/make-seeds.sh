#!/usr/bin/env bash
# Writes the seed inputs of the fuzz targets (fuzz/corpus/<target>/) and the tiny vocabulary the input targets use
# (fuzz/tiny.spm) from real examples: configs/, data/sample-de-en, and the files lstrain, lstranslate write for a
# micro model trained here. Run it again (and commit the result) when a file format changes; it leaves the
# regression seeds (inputs of fixed findings) alone.
#   bash fuzz/make-seeds.sh <build dir with apps/>     # e.g. build/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
apps=$(cd "${1:?usage: make-seeds.sh <build dir>}" && pwd)/apps
seeds=$root/fuzz/corpus sample=$root/data/sample-de-en
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

# A micro model: 60 sentence pairs, a joint vocabulary of 100 pieces, dim 8, one layer each side.
head -n 60 "$sample/train.de" >"$work/train.de"
head -n 60 "$sample/train.en" >"$work/train.en"
head -n 5 "$sample/valid.de" >"$work/valid.de"
head -n 5 "$sample/valid.en" >"$work/valid.en"
"$apps/train/lstrain" -m "$work/model" -t "$work/train.de" "$work/train.en" \
  --vocabs "$work/vocab.spm" "$work/vocab.spm" --dim-vocabs 100 100 --dim-emb 8 --enc-depth 1 --dec-depth 1 \
  --transformer-heads 2 --transformer-dim-ffn 16 --tied-embeddings-all --max-length 100 --mini-batch-words 300 \
  --after 4u --save-freq 4u --valid-freq 2u --disp-freq 2u --valid-sets "$work/valid.de" "$work/valid.en" \
  --valid-metrics perplexity cross-entropy --cpu-threads 1 --sentencepiece-options=--normalization_rule_name=identity \
  --quiet >"$work/train.log" 2>&1 ||
  { cat "$work/train.log" >&2; exit 1; }
checkpoint=$work/model/checkpoint/$(cat "$work/model/checkpoint/latest")
head -n 3 "$sample/test.de" >"$work/test.de"
"$apps/translate/lstranslate" -m "$work/model" -i "$work/test.de" --n-best --beam-size 2 --cpu-threads 1 \
  >"$work/nbest" 2>/dev/null
"$apps/translate/lstranslate" -m "$work/model" -i "$work/test.de" --n-best --word-scores --beam-size 2 \
  --cpu-threads 1 >"$work/nbest-word-scores" 2>/dev/null

# Files of other names stay: the regression seeds of fixed findings.
for target in config_file command_line corpus_reader translation_input vocab bpe corpus_cache safetensors \
  model_dir nbest; do
  mkdir -p "$seeds/$target"
done
cp "$work/model/vocab.spm" "$root/fuzz/tiny.spm"

cp "$root/configs/tiny.yaml" "$root/configs/transformer-base.yaml" "$seeds/config_file/"
cp "$root/tests/apps/train-small.yaml" "$seeds/config_file/train-small.yaml"
cp "$work/model/config.yml" "$seeds/config_file/model-config.yml"
cp "$work/model/decoder.yml" "$seeds/config_file/decoder.yml"

# One argv word a line, the program first; "@name" is configs/name (command_line_fuzz.cpp).
printf '%s\n' lstrain --config @transformer-base.yaml --model model/ --train-sets corpus.de corpus.en \
  --vocabs vocab.spm --valid-sets dev.de dev.en --valid-metrics cross-entropy perplexity >"$seeds/command_line/train"
printf '%s\n' lstrain -c @tiny.yaml -m model --after 10e --valid-freq 5000u --dim-emb=256 --dump-config \
  >"$seeds/command_line/train-dump"
printf '%s\n' lstranslate --model model/ --beam-size 6 --n-best --normalize 0.6 -i in.de -o out.en \
  >"$seeds/command_line/translate"
printf '%s\n' lsscore -m model/ --train-sets test.de test.en --n-best nbest.txt --summary perplexity \
  >"$seeds/command_line/score"
printf '%s\n' lseval -r test.en -i output.en --metrics bleu chrf >"$seeds/command_line/eval"
printf '%s\n' lstrain --sentencepiece-options "--character_coverage=1 --model_type=bpe" --optimizer-params 0.9 0.98 \
  1e-09 --lr-warmup 16000 --help >"$seeds/command_line/train-help"
# Marian's spellings (marian-examples' command lines): a preset, a model file name, warnings, attached short values.
printf '%s\n' lstrain --task transformer-base -m model/model.npz -t corpus.en corpus.de -v vocab.spm vocab.spm \
  --mini-batch-fit -w 9500 --cost-type=ce-mean-words --valid-metrics ce-mean-words translation \
  --valid-script-path "bash ./validate.sh" --valid-script-args 1 --valid-translation-output "valid.{U}.out" \
  --lr-warmup 2e --lr-decay-inv-sqrt 16000u 8000u --lr-report --exponential-smoothing --sync-sgd --tempdir tmp \
  --shuffle batches --no-reload --overwrite --dump-config minimal >"$seeds/command_line/train-marian"
printf '%s\n' lstrain -m model --type s2s --dim-rnn 1024 --layer-normalization >"$seeds/command_line/train-marian-rnn"
# A language model (issue 25): Marian's lm-transformer and lseq's lm, packed blocks and document masks.
printf '%s\n' lstrain -m lm --type lm-transformer --lm-pack-blocks --lm-document-masks \
  --transformer-train-position-embeddings --max-length 256 --dump-config minimal >"$seeds/command_line/train-lm"
printf '%s\n' lstrain -m lm --type lm -t corpus.txt --lm-pack-blocks >"$seeds/command_line/train-lm-short"
printf '%s\n' lstranslate -m model -b6 -n0.6 -w 2500 -d 0 --maxi-batch-sort src --max-length-crop --dump-config \
  >"$seeds/command_line/translate-marian"

head -n 20 "$sample/train.de" >"$seeds/corpus_reader/train.de"
head -n 20 "$sample/train.en" | gzip -9n >"$seeds/corpus_reader/train.en.gz"
head -n 5 "$sample/valid.de" | sed 's/$/\r/' >"$seeds/corpus_reader/valid-crlf.de"
printf 'Das ist \xff kaputt.\n\nletzte Zeile ohne Zeilenende' >"$seeds/corpus_reader/bad-utf8.de"

head -n 12 "$sample/test.de" >"$seeds/translation_input/test.de"
printf '5 17 33 8\n\n12 4 4 4 60 2\n0 1 2 3\n99\n7 x 9\n' >"$seeds/translation_input/ids.txt"
{
  head -n 2 "$sample/test.de"
  echo
  printf 'Das ist \xff kaputt.\n'
  head -n 3 "$sample/test.de" | tr '\n' ' '
  echo
} >"$seeds/translation_input/mixed.de"

cp "$work/model/vocab.spm" "$seeds/vocab/tiny.spm"

# The byte-level BPE of the tests (tests/data/fixtures): vocab.json, a NUL byte, merges.txt.
{ cat "$root/tests/data/fixtures/bpe-vocab.json"; printf '\0'; cat "$root/tests/data/fixtures/bpe-merges.txt"; } \
  >"$seeds/bpe/fixture"

cp "$work"/model/train.de+train.en.*.lseq-cache "$seeds/corpus_cache/train.lseq-cache"

cp "$work/model/model.safetensors" "$seeds/safetensors/model.safetensors"
cp "$checkpoint/optimizer.safetensors" "$seeds/safetensors/optimizer.safetensors"

cp "$checkpoint/progress.yml" "$seeds/model_dir/progress.yml"
sed 's/^seconds:.*/&\nloss-scale: 32768\nloss-scale-good-steps: 17/' "$checkpoint/progress.yml" \
  >"$seeds/model_dir/progress-fp16.yml"
cp "$work/model/checkpoint/latest" "$seeds/model_dir/latest"

cp "$work/nbest" "$seeds/nbest/nbest.txt"
head -n 2 "$work/nbest-word-scores" >"$seeds/nbest/nbest-word-scores.txt"
echo "make-seeds: wrote $(find "$seeds" -type f | wc -l) seed files under $seeds and $root/fuzz/tiny.spm"

#!/usr/bin/env bash
# recipes/wmt14 end to end on a stand-in corpus (no machine here reaches the WMT servers): data/sample-de-en laid out
# as already-downloaded WMT14 files, prepare-data.sh --from, lstrain --config wmt14.yaml as the README runs it,
# train.sh with a tiny model on the CPU backend, a resume, evaluate.sh. About a minute on 2 cores.
# Usage: wmt14_smoke_test.sh <bin dir with train/ translate/ eval/> <source dir>
set -uo pipefail
bin=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}
mkdir -p "$work/bin"
ln -s "$bin/train/lstrain" "$bin/translate/lstranslate" "$bin/eval/lseval" "$work/bin/"
export LSEQ_BIN=$work/bin

# The stand-in download directory, with WMT14's file names.
sample=$src/data/sample-de-en
mkdir "$work/downloads"
cp "$sample/train.en" "$work/downloads/europarl-v7.de-en.en"
cp "$sample/train.de" "$work/downloads/europarl-v7.de-en.de"
for lang in en de; do
  cp "$sample/valid.$lang" "$work/downloads/newstest2013.$lang"
  cp "$sample/test.$lang" "$work/downloads/newstest2014.$lang"
done
printf 'a duplicate pair\tein doppeltes Paar\n' > "$work/dup"
for copy in 1 2; do
  cut -f1 "$work/dup" >> "$work/downloads/europarl-v7.de-en.en"
  cut -f2 "$work/dup" >> "$work/downloads/europarl-v7.de-en.de"
done
echo "" >> "$work/downloads/europarl-v7.de-en.en"; echo "nur eine Seite" >> "$work/downloads/europarl-v7.de-en.de"

cp -r "$src/recipes/wmt14" "$work/wmt14"
recipe=$work/wmt14
bash "$recipe/prepare-data.sh" --from "$work/downloads" > "$work/prepare.log" 2>&1
check "prepare-data.sh --from a directory succeeds" test $? -eq 0
check "... reports the corpus size" grep -q "pairs before cleaning: 6003" "$recipe/data/corpus-stats.txt"
check "... keeps one copy of a repeated pair" test "$(grep -c '^a duplicate pair$' "$recipe/data/train.en")" -eq 1
check "... drops a pair with an empty side" bash -c "! grep -q '^nur eine Seite$' '$recipe/data/train.de'"
check "... and counts what is left" grep -q "pairs after cleaning: $(wc -l < "$recipe/data/train.en")$" \
  "$recipe/data/corpus-stats.txt"
check "... writes the test set" test "$(wc -l < "$recipe/data/test.en")" -eq 200

# The download path, with stand-ins for curl and sacrebleu on PATH (no network): the archives hold their corpora
# under training/ or at their top level (both layouts must work, and so must a second run over the same raw/).
mkdir -p "$work/stubs" "$work/archives"
for name in europarl-v7 commoncrawl news-commentary-v9; do
  dir=$work/archives/$name
  inner=training
  [ $name = commoncrawl ] && inner=.
  mkdir -p "$dir/$inner"
  head -n 300 "$sample/train.en" > "$dir/$inner/$name.de-en.en"
  head -n 300 "$sample/train.de" > "$dir/$inner/$name.de-en.de"
  echo "other language pair" > "$dir/$inner/$name.fr-en.fr"
  tar -czf "$work/archives/$name.tgz" -C "$dir" .
done
cat > "$work/stubs/curl" <<STUB
#!/bin/sh
# curl -fL -o FILE URL: copies the stand-in archive named by the URL.
out=""; url=""
while [ \$# -gt 0 ]; do case \$1 in -o) out=\$2; shift 2 ;; -*) shift ;; *) url=\$1; shift ;; esac; done
case \$url in
  *europarl-v7*) cp "$work/archives/europarl-v7.tgz" "\$out" ;;
  *commoncrawl*) cp "$work/archives/commoncrawl.tgz" "\$out" ;;
  *nc-v9*) cp "$work/archives/news-commentary-v9.tgz" "\$out" ;;
  *) echo "curl stand-in: unexpected URL \$url" >&2; exit 22 ;;
esac
STUB
cat > "$work/stubs/sacrebleu" <<STUB
#!/bin/sh
# sacrebleu -t wmtYY -l en-de --echo src|ref: the sample's test lines.
case "\$*" in *"--echo src"*) head -n 50 "$sample/test.en" ;; *"--echo ref"*) head -n 50 "$sample/test.de" ;;
  *) exit 2 ;; esac
STUB
chmod +x "$work/stubs/curl" "$work/stubs/sacrebleu"
for run in 1 2; do
  PATH=$work/stubs:$PATH WMT14_DATA=$work/downloaded bash "$recipe/prepare-data.sh" > "$work/download.log" 2>&1
  check "prepare-data.sh downloads (run $run; stand-ins for curl and sacrebleu)" test $? -eq 0
done
check "... takes all three corpora" grep -q \
  "corpora: europarl-v7.de-en commoncrawl.de-en news-commentary-v9.de-en" "$work/downloaded/corpus-stats.txt"
check "... with all their pairs" grep -q "pairs before cleaning: 900$" "$work/downloaded/corpus-stats.txt"
check "... and the test sets from sacrebleu" test "$(wc -l < "$work/downloaded/test.de")" -eq 50

tiny=(--cpu --cpu-threads 2 --precision fp32 --dim-emb 64 --transformer-heads 4 --transformer-dim-ffn 128
      --enc-depth 1 --dec-depth 1 --dim-vocabs 500 500 --sentencepiece-max-lines 10000 --mini-batch-words 1000
      --learn-rate 0.002 --lr-warmup 10 --lr-decay-inv-sqrt 10 --disp-freq 10u --valid-freq 20u --save-freq 20u
      --valid-mini-batch 64 --max-length-factor 1.5)
# The README's command, from the recipe's directory.
(cd "$recipe" && "$LSEQ_BIN/lstrain" --config wmt14.yaml "${tiny[@]}" --dump-config > "$work/dump.yml" 2>&1)
check "cd recipes/wmt14 && lstrain --config wmt14.yaml reads the recipe" test $? -eq 0
check "... with Marian's transformer-base preset" grep -q "^transformer-ffn-activation: relu" "$work/dump.yml"
check "... and the recipe's model directory" grep -q "^model: model-base" "$work/dump.yml"

CPU=1 bash "$recipe/train.sh" base "${tiny[@]}" --after 40u > "$work/train.log" 2>&1
check "train.sh base trains (CPU, tiny model)" test $? -eq 0
check "... with an optimizer delay for 25k-token updates on one device" grep -q "optimizer-delay 2" "$work/train.log"
check "... writes the model" test -s "$recipe/model-base/model.safetensors"
check "... the 32k-style joint vocabulary where wmt14.yaml says" test -s "$recipe/data/vocab.spm"
check "... Marian's valid.log lines" grep -q "\[valid\] Ep. .* : Up. 40 : bleu : " "$recipe/data/valid-base.log"
check "... the translations named by the {U} template" test -s "$recipe/data/valid-base-40.de"
CPU=1 bash "$recipe/train.sh" base "${tiny[@]}" --after 60u > "$work/resume.log" 2>&1
check "running train.sh again resumes" grep -q "resumed from .* at update 40" "$work/resume.log"

bash "$recipe/evaluate.sh" base --cpu --cpu-threads 2 --max-length-factor 1.5 > "$work/eval.log" 2>&1
check "evaluate.sh translates newstest2014" grep -q "200 translations" "$work/eval.log"
check "... and prints BLEU and chrF with a signature" bash -c "grep -qi 'bleu' '$work/eval.log' &&
  grep -qi 'chrf' '$work/eval.log' && grep -q 'nrefs:1' '$work/eval.log'"

if [ "$failures" -ne 0 ]; then
  for log in prepare download train resume eval; do echo "--- $log.log"; tail -n 15 "$work/$log.log"; done
fi
echo "$failures failed"
[ "$failures" -eq 0 ]

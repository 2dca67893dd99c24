#!/usr/bin/env bash
# WMT14 English-German: the training data (Europarl v7, Common Crawl, News Commentary v9), newstest2013 (validation)
# and newstest2014 (test), cleaned into data/. lstrain builds the 32k joint SentencePiece vocabulary from
# data/train.* on its first run (wmt14.yaml: vocabs data/vocab.spm, dim-vocabs 32000).
#
#   bash prepare-data.sh                 # downloads (needs the internet; the test sets through sacreBLEU)
#   bash prepare-data.sh --from DIR      # takes already-downloaded files from DIR:
#       europarl-v7.de-en.{en,de}, commoncrawl.de-en.{en,de}, news-commentary-v9.de-en.{en,de} (those present;
#       at least one), newstest2013.{en,de}, newstest2014.{en,de} (plain text, one sentence a line)
#
# Cleaning, on each pair: both sides non-empty, at most 250 words a side, a word-count ratio of at most 3 either
# way, and no repeated pair. It writes data/train.{en,de}, data/valid.{en,de}, data/test.{en,de} and
# data/corpus-stats.txt (pairs and words before and after cleaning), and prints the same.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=${WMT14_DATA:-$here/data}
from=""
while [ $# -gt 0 ]; do
  case $1 in
    --from) from=$(cd "$2" && pwd); shift 2 ;;
    --data) data=$2; shift 2 ;;
    *) echo "prepare-data.sh: unknown argument '$1'; use --from DIR or --data DIR" >&2; exit 2 ;;
  esac
done
mkdir -p "$data"
raw=$data/raw
mkdir -p "$raw"

download() {
  command -v curl >/dev/null || { echo "prepare-data.sh: curl is needed to download; or use --from DIR" >&2; exit 1; }
  command -v sacrebleu >/dev/null ||
    { echo "prepare-data.sh: sacrebleu is needed for the test sets (pip install sacrebleu); or use --from DIR" >&2
      exit 1; }
  local base=https://www.statmt.org/wmt13 tgz
  for tgz in training-parallel-europarl-v7.tgz training-parallel-commoncrawl.tgz; do
    [ -f "$raw/$tgz" ] || curl -fL -o "$raw/$tgz" "$base/$tgz"
    tar -xzf "$raw/$tgz" -C "$raw"
  done
  [ -f "$raw/training-parallel-nc-v9.tgz" ] ||
    curl -fL -o "$raw/training-parallel-nc-v9.tgz" https://www.statmt.org/wmt14/training-parallel-nc-v9.tgz
  tar -xzf "$raw/training-parallel-nc-v9.tgz" -C "$raw"
  # Corpora extracted into a folder (training/) move up to raw/; those at an archive's top level are there already.
  find "$raw" -mindepth 2 -type f \( -name 'europarl-v7.de-en.*' -o -name 'commoncrawl.de-en.*' \
    -o -name 'news-commentary-v9.de-en.*' \) | while read -r f; do mv -f "$f" "$raw/"; done
  for year in 2013 2014; do
    for side in src ref; do
      lang=$([ $side = src ] && echo en || echo de)
      sacrebleu -t wmt${year#20} -l en-de --echo $side > "$raw/newstest$year.$lang"
    done
  done
  from=$raw
}
[ -n "$from" ] || download

corpora=()
for name in europarl-v7.de-en commoncrawl.de-en news-commentary-v9.de-en; do
  if [ -f "$from/$name.en" ] && [ -f "$from/$name.de" ]; then corpora+=("$name"); fi
done
[ ${#corpora[@]} -gt 0 ] || { echo "prepare-data.sh: no training corpus (europarl-v7.de-en.en/.de, ...) in $from" >&2
                              exit 1; }
for set in newstest2013 newstest2014; do
  for lang in en de; do
    [ -f "$from/$set.$lang" ] || { echo "prepare-data.sh: $from/$set.$lang is missing" >&2; exit 1; }
  done
done

# One pair a line (source TAB target), cleaned; a tab inside a sentence would break the pairing: such pairs go.
for name in "${corpora[@]}"; do
  paste "$from/$name.en" "$from/$name.de" | awk -F'\t' 'NF == 2'
done > "$data/pairs.raw"
awk -F'\t' '
  { s = split($1, a, " "); t = split($2, b, " ") }
  s == 0 || t == 0 { next }
  s > 250 || t > 250 { next }
  s > 3 * t || t > 3 * s { next }
  seen[$0]++ { next }
  { print }' "$data/pairs.raw" > "$data/pairs.clean"
cut -f1 "$data/pairs.clean" > "$data/train.en"
cut -f2 "$data/pairs.clean" > "$data/train.de"
cp "$from/newstest2013.en" "$data/valid.en"
cp "$from/newstest2013.de" "$data/valid.de"
cp "$from/newstest2014.en" "$data/test.en"
cp "$from/newstest2014.de" "$data/test.de"

raw_pairs=$(wc -l < "$data/pairs.raw")
pairs=$(wc -l < "$data/train.de")
words_de=$(wc -w < "$data/train.de")
rm -f "$data/pairs.raw" "$data/pairs.clean"
{
  echo "corpora: ${corpora[*]}"
  echo "pairs before cleaning: $raw_pairs"
  echo "pairs after cleaning: $pairs"
  echo "target-side (German) words after cleaning: $words_de"
  echo "validation (newstest2013): $(wc -l < "$data/valid.en") pairs"
  echo "test (newstest2014): $(wc -l < "$data/test.en") pairs"
} | tee "$data/corpus-stats.txt"

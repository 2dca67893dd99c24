#!/usr/bin/env bash
# End-to-end checks of lstranslate, lsscore and lseval with a small model trained here: one output line per input
# line whatever the input holds, n-best lists, scores that agree between lstranslate and lsscore, validation BLEU
# during training, and lseval's output.
# Usage: bash translate_test.sh <dir of lstrain> <source dir>
set -uo pipefail
apps=$(cd "$1/.." && pwd)
lstrain="$apps/train/lstrain" lstranslate="$apps/translate/lstranslate" lsscore="$apps/score/lsscore"
lseval="$apps/eval/lseval"
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT; echo "work: $work"
failures=0
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

sample="$source_dir/data/sample-de-en"
head -n 1500 "$sample/train.de" >"$work/train.de"
head -n 1500 "$sample/train.en" >"$work/train.en"
head -n 30 "$sample/valid.de" >"$work/valid.de"
head -n 30 "$sample/valid.en" >"$work/valid.en"

# A small model, validated with BLEU and chrF (which decode the validation set) and cross-entropy.
"$lstrain" -c "$source_dir/tests/apps/train-small.yaml" -m "$work/model" -t "$work/train.de" "$work/train.en" \
  --valid-sets "$work/valid.de" "$work/valid.en" --valid-metrics cross-entropy bleu chrf \
  --valid-translation-output "$work/valid.out" --beam-size 2 --after 20u >"$work/train.log" 2>&1
check "training with bleu/chrf validation exits 0" test $? -eq 0
check "validation reports bleu" grep -q ': bleu : [0-9.]*' "$work/train.log"
check "validation reports chrf" grep -q ': chrf : [0-9.]*' "$work/train.log"
check "validation translations: one line per validation line" test "$(wc -l <"$work/valid.out")" -eq 30
check "training wrote decoder.yml" grep -q '^beam-size: 4$' "$work/model/decoder.yml"

# Input with an empty line, invalid UTF-8, and a line far over --max-length (40 in train-small.yaml).
{
  head -n 3 "$work/valid.de"
  echo
  printf 'Das ist \xff kaputt.\n'
  for _ in $(seq 1 30); do printf 'Das Haus ist sehr alt und sehr schön. '; done; echo
  sed -n 4,6p "$work/valid.de"
} >"$work/input.de"
"$lstranslate" -m "$work/model" -i "$work/input.de" -o "$work/out.en" 2>"$work/translate.err"
check "lstranslate exits 0" test $? -eq 0
check "one output line per input line (9)" test "$(wc -l <"$work/out.en")" -eq 9
check "an empty line gives an empty line" test -z "$(sed -n 4p "$work/out.en")"
check "invalid UTF-8 gives an empty line" test -z "$(sed -n 5p "$work/out.en")"
check "... with a warning naming the line" grep -q 'input.de.*5' "$work/translate.err"
"$lstranslate" -m "$work/model" -i "$work/input.de" --n-best --beam-size 2 >"$work/input.nbest" 2>/dev/null
check "an over-long line is decoded (non-zero model score)" \
  awk -F' [|][|][|] ' '$1 == 5 && $3 != "F0= 0" { found = 1 } END { exit !found }' "$work/input.nbest"
check "an empty line is not decoded (score 0)" \
  awk -F' [|][|][|] ' '$1 == 3 && $2 == "" && $3 == "F0= 0" { found = 1 } END { exit !found }' "$work/input.nbest"
check "... with a warning that it was cropped" grep -qi 'crop' "$work/translate.err"
"$lstranslate" -m "$work/model" <"$work/input.de" >"$work/out-stdin.en" 2>/dev/null
check "stdin/stdout give the same translations" cmp -s "$work/out.en" "$work/out-stdin.en"

# n-best: beam-size entries per translated line, sorted by the normalized score.
"$lstranslate" -m "$work/model" -i "$work/valid.de" --n-best --beam-size 3 >"$work/nbest" 2>/dev/null
check "n-best has 3 entries for each of the 30 lines" test "$(wc -l <"$work/nbest")" -eq 90
check "n-best lines have Marian's fields" grep -qE '^0 \|\|\| .* \|\|\| F0= -?[0-9.e+-]+ \|\|\| -?[0-9.e+-]+$' "$work/nbest"
check "n-best sorted by score within each sentence" awk -F' [|][|][|] ' '
  $1 == prev && $4 + 1e-9 > last { bad = 1 } $1 != prev { prev = $1 } { last = $4 } END { exit bad }' "$work/nbest"

# lsscore of the 1-best translations equals the model score beam search reported (F0). Token ids on both sides
# (--no-spm-encode/--no-spm-decode), since decoding ids to text and encoding it again need not give the same ids.
awk 'BEGIN { srand(7) } { n = 3 + int(rand() * 8); line = ""; for (i = 0; i < n; i++) line = line (i ? " " : "") 4 + int(rand() * 290); print line }' \
  "$work/valid.de" >"$work/ids.src"
"$lstranslate" -m "$work/model" --no-spm-encode --no-spm-decode -i "$work/ids.src" --n-best --beam-size 3 \
  >"$work/ids.nbest" 2>/dev/null
awk -F' [|][|][|] ' '!seen[$1]++ { print $2 }' "$work/ids.nbest" >"$work/best.ids"
awk -F' [|][|][|] ' '!seen[$1]++ { sub(/^F0= /, "", $3); print $3 }' "$work/ids.nbest" >"$work/best.f0"
"$lsscore" -m "$work/model" --no-spm-encode -t "$work/ids.src" "$work/best.ids" >"$work/best.scores" 2>/dev/null
check "lsscore exits 0 with one score per pair" test "$(wc -l <"$work/best.scores")" -eq 30
check "lsscore's scores equal beam search's (within the printed precision)" \
  awk 'NR == FNR { f0[FNR] = $1; next } { d = $1 - f0[FNR]; if (d < 0) d = -d; a = f0[FNR] < 0 ? -f0[FNR] : f0[FNR]; if (d > 1e-5 * a + 1e-4) bad = 1 } END { exit bad }' \
  "$work/best.f0" "$work/best.scores"
"$lsscore" -m "$work/model" -t "$work/valid.de" "$work/valid.en" --summary >"$work/summary" 2>/dev/null
check "lsscore --summary prints cross-entropy and perplexity" grep -qE '^cross-entropy [0-9.]+ perplexity [0-9.]+' "$work/summary"
# With --exponential-smoothing, validation scores the smoothed weights, which model.safetensors holds: the last
# validation (at the last update) equals lsscore's cross-entropy of the saved model. (--max-length 100: validation
# crops pairs to --max-length, lsscore does not.)
"$lstrain" -c "$source_dir/tests/apps/train-small.yaml" -m "$work/smoothed" -t "$work/train.de" "$work/train.en" \
  --valid-sets "$work/valid.de" "$work/valid.en" --valid-metrics cross-entropy --exponential-smoothing 0.05 --max-length 100 \
  --after 20u >"$work/smoothed.log" 2>&1
check "training with smoothing exits 0" test $? -eq 0
last_ce=$(grep -o ': cross-entropy : [0-9.]*' "$work/smoothed.log" | tail -n 1 | awk '{print $4}')
"$lsscore" -m "$work/smoothed" -t "$work/valid.de" "$work/valid.en" --summary >"$work/smoothed.summary" 2>/dev/null
saved_ce=$(awk '{print $2}' "$work/smoothed.summary")
check "validation scores the smoothed weights that are saved (${last_ce:-none} vs lsscore's ${saved_ce:-none})" \
  awk -v a="${last_ce:-0}" -v b="${saved_ce:-1}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 2e-4 + 1e-4 * b) }'
"$lsscore" -m "$work/model" -t "$work/valid.de" "$work/nbest" --n-best >"$work/rescored" 2>/dev/null
check "n-best rescoring keeps every line and adds a feature" test "$(grep -c 'Score= ' "$work/rescored")" -eq 90

# lseval scores a file against itself as 100 and names sacreBLEU's settings.
"$lseval" -r "$work/valid.en" -i "$work/valid.en" >"$work/eval"
check "lseval: BLEU of the references against themselves is 100" grep -q '^BLEU = 100.00 ' "$work/eval"
check "lseval prints a signature" grep -q 'tok:13a|smooth:exp' "$work/eval"
"$lstranslate" -m "$work/model" -i "$work/valid.de" 2>/dev/null | "$lseval" -r "$work/valid.en" >"$work/eval.hyp"
check "lseval scores lstranslate's output" grep -q '^BLEU = ' "$work/eval.hyp"
"$lseval" -r "$work/valid.en" -i "$work/input.de" 2>"$work/eval.err" >/dev/null
check "lseval refuses files of different lengths in one line" test "$(grep -c '^error: ' "$work/eval.err")" -eq 1


# The summary line counts the target tokens written: with --no-spm-decode each token is one word of the output.
"$lstranslate" -m "$work/model" -i "$work/valid.de" --no-spm-decode -o "$work/ids.out" --quiet-translation \
  2>"$work/summary.err"
summary_tokens=$(sed -n 's/.*Translated 30 lines (\([0-9]*\) target tokens) in .* target tokens\/s; model load .*/\1/p' \
  "$work/summary.err")
check "lstranslate's summary line counts the target tokens it wrote" test "${summary_tokens:-x}" = "$(wc -w <"$work/ids.out")"
# lsscore's summary line counts the target tokens it scored: each target's ids and its eos.
"$lsscore" -m "$work/model" --no-spm-encode -t "$work/ids.src" "$work/best.ids" >/dev/null 2>"$work/score-summary.err"
summary_tokens=$(sed -n 's/.*Scored 30 lines (\([0-9]*\) target tokens) in .* target tokens\/s; model load .*/\1/p' \
  "$work/score-summary.err")
check "lsscore's summary line counts the target tokens it scored" \
  test "${summary_tokens:-x}" = "$(($(wc -w <"$work/best.ids") + $(wc -l <"$work/best.ids")))"

# Errors on input end the program with exactly one "error:" line naming the file and the option, and a non-zero
# exit; before the readers were told apart (two classes named data::LineReader) these crashed with a double free.
one_error_line() {  # one_error_line <stderr file> <pattern>: one "error:" line, matching, and nothing but log lines
  test "$(grep -c '^error: ' "$1")" -eq 1 && grep -q "^error: .*$2" "$1" &&
    test "$(grep -vc -e '^error: ' -e '^\[[-0-9 :]*\] \[info\] ' "$1")" -eq 0
}
"$lstranslate" -m "$work/model" -i /nonexistent/input.de >/dev/null 2>"$work/err"
check "lstranslate -i /nonexistent exits 1" test $? -eq 1
check "... with one line naming the file and --input" one_error_line "$work/err" "--input.*/nonexistent/input.de"
"$lstranslate" -m "$work/model" -i "$work" >/dev/null 2>"$work/err"
check "lstranslate -i DIRECTORY exits 1 with one line" one_error_line "$work/err" "is a directory"
head -n 5 "$work/valid.de" >"$work/five.de"
head -n 4 "$work/valid.en" >"$work/four.en"
"$lsscore" -m "$work/model" -t "$work/five.de" "$work/four.en" >/dev/null 2>"$work/err"
check "lsscore with 5 and 4 lines exits 1" test $? -eq 1
check "... with one line naming both files" one_error_line "$work/err" "five.de has more lines than .*four.en"
"$lsscore" -m "$work/model" -t /nonexistent.de "$work/four.en" >/dev/null 2>"$work/err"
check "lsscore with a missing file exits 1 with one line" one_error_line "$work/err" "/nonexistent.de"
"$lseval" -r /nonexistent.en -i "$work/valid.en" >/dev/null 2>"$work/err"
check "lseval -r /nonexistent names --references" one_error_line "$work/err" "--references.*/nonexistent.en"
"$lseval" -r "$work/valid.en" -m bleu -i "$work/valid.en" >"$work/eval.bleu"
check "lseval -m bleu prints BLEU alone" test "$(wc -l <"$work/eval.bleu")" -eq 1
"$lseval" -r "$work/valid.en" -m bleu ter -i "$work/valid.en" >/dev/null 2>"$work/err"
check "lseval -m ter is refused in one line naming the metrics" one_error_line "$work/err" "bleu|chrf"

# A vocabulary of another size than the model's is refused before anything is decoded, in one line naming the file
# and both sizes (it used to decode silently into the wrong ids).
"$lstrain" -c "$source_dir/tests/apps/train-small.yaml" -m "$work/model200" -t "$work/train.de" "$work/train.en" \
  --dim-vocabs 200 200 --after 1u >"$work/model200.log" 2>&1
check "a model with a 200-entry vocabulary trains" test -f "$work/model200/vocab.spm"
mkdir -p "$work/mismatch" "$work/split"
cp "$work/model/model.safetensors" "$work/mismatch/"
cp "$work/model200/vocab.spm" "$work/mismatch/vocab.spm"
"$lstranslate" -m "$work/mismatch" -i "$work/valid.de" >"$work/mismatch.out" 2>"$work/err"
check "lstranslate with a 200-entry vocabulary on a 300-id model exits 1" test $? -eq 1
check "... with one line naming the vocabulary and both sizes" one_error_line "$work/err" \
  "mismatch/vocab.spm has 200 entries .*model.safetensors was trained with a source vocabulary of 300"
check "... and writes no translation" test ! -s "$work/mismatch.out"
"$lsscore" -m "$work/mismatch" -t "$work/valid.de" "$work/valid.en" >/dev/null 2>"$work/err"
check "lsscore refuses it too, in one line" one_error_line "$work/err" "mismatch/vocab.spm has 200 entries"
cp "$work/model/model.safetensors" "$work/split/"
cp "$work/model/vocab.spm" "$work/split/vocab.src.spm"
cp "$work/model200/vocab.spm" "$work/split/vocab.tgt.spm"
"$lstranslate" -m "$work/split" -i "$work/valid.de" >/dev/null 2>"$work/err"
check "a target vocabulary of another size is named as the target's" \
  one_error_line "$work/err" "split/vocab.tgt.spm has 200 entries .*target vocabulary of 300"

# Token ids (--no-spm-encode) that overflow, are negative, or lie outside the model's vocabulary give their line an
# empty output and a warning, also in a model directory without vocabularies (an 11-digit id used to abort the run).
mkdir -p "$work/ids-only"
cp "$work/model/model.safetensors" "$work/ids-only/"
printf '5 6 7\n300 5\n12345678901\n8 -1\n9 10\n' >"$work/bad.ids"
"$lstranslate" -m "$work/ids-only" --no-spm-encode --no-spm-decode -i "$work/bad.ids" >"$work/bad.out" 2>"$work/err"
check "lstranslate with bad ids exits 0" test $? -eq 0
check "... with one output line per input line (5)" test "$(wc -l <"$work/bad.out")" -eq 5
check "... empty for the 3 bad lines" test "$(sed -n 2,4p "$work/bad.out" | grep -c .)" -eq 0
check "... and decoded for the good ones" test -n "$(sed -n 1p "$work/bad.out")"
check "... with a warning naming each bad line" test "$(grep -cE 'bad.ids line [234]: token id' "$work/err")" -eq 3
"$lsscore" -m "$work/ids-only" --no-spm-encode -t "$work/bad.ids" "$work/bad.ids" >"$work/bad.scores" 2>"$work/err"
check "lsscore with bad ids exits 0 with 5 lines, 3 of them nan" \
  test "$(wc -l <"$work/bad.scores")" -eq 5 -a "$(grep -c '^nan$' "$work/bad.scores")" -eq 3

# Odd input keeps one output line per input line and takes seconds: CRLF, a NUL byte, a line of 10 MB of words (it
# took 18 s and 1.2 GB of memory to encode whole), 3 MB without a space, an empty line, no final newline.
{
  printf 'Das Haus.\r\n'
  printf 'Ein \0 Hund.\n'
  yes 'Das Haus ist sehr alt.' | head -n 450000 | tr '\n' ' '; echo
  head -c 3000000 /dev/zero | tr '\0' 'x'; echo
  echo
  printf 'Kein Zeilenende'
} >"$work/odd.de"
SECONDS=0
"$lstranslate" -m "$work/model" -i "$work/odd.de" -o "$work/odd.out" 2>"$work/err"
check "lstranslate with odd input exits 0" test $? -eq 0
check "... in under 20 s (${SECONDS} s)" test "$SECONDS" -lt 20
check "... with one output line per input line (6)" test "$(wc -l <"$work/odd.out")" -eq 6
check "... and a warning that the 10 MB line was cropped" grep -q 'odd.de line 3: more than 40 tokens' "$work/err"
"$lsscore" -m "$work/model" -t "$work/odd.de" "$work/odd.de" >"$work/odd.scores" 2>/dev/null
check "lsscore with odd input writes one score per pair (6)" test "$(wc -l <"$work/odd.scores")" -eq 6
: >"$work/empty.txt"
"$lstranslate" -m "$work/model" -i "$work/empty.txt" >"$work/empty.out" 2>/dev/null
check "an empty input file gives an empty output and exit 0" test $? -eq 0 -a ! -s "$work/empty.out"
printf '5 6\r\n7 \xff 8\n\0\n9 \x01\n10' >"$work/odd.ids"
"$lstranslate" -m "$work/model" --no-spm-encode -i "$work/odd.ids" >"$work/odd-ids.out" 2>"$work/err"
check "ids input with invalid UTF-8, NUL and control bytes: 5 lines out" test "$(wc -l <"$work/odd-ids.out")" -eq 5
check "... with warnings that are printable text" test "$(grep -c 'odd.ids line [2-4]:' "$work/err")" -eq 3 -a \
  "$(tr -d '\n' <"$work/err" | LC_ALL=C tr -d '[:print:]' | wc -c)" -eq 0

echo "$failures failed"
[ "$failures" -eq 0 ]

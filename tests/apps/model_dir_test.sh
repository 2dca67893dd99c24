#!/usr/bin/env bash
# End-to-end checks that lstrain never loses or silently misuses a model directory: refusals that leave the
# directory byte for byte as it was (a missing `latest`, weights without a checkpoint, a resume with other
# options or vocabularies), --no-reload keeping the files the options name (Marian's --overwrite deletes nothing), damaged weights and progress files,
# output paths checked before training, one run per directory, and clear messages for bad paths.
# Usage: bash model_dir_test.sh <dir of lstrain> <source dir>
set -uo pipefail
apps=$(cd "$1/.." && pwd)
lstrain="$apps/train/lstrain" lstranslate="$apps/translate/lstranslate" lsscore="$apps/score/lsscore"
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
pid=""
trap '[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
failures=0
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

head -n 1500 "$source_dir/data/sample-de-en/train.de" >"$work/train.de"
head -n 1500 "$source_dir/data/sample-de-en/train.en" >"$work/train.en"
head -n 40 "$source_dir/data/sample-de-en/valid.de" >"$work/valid.de"
head -n 40 "$source_dir/data/sample-de-en/valid.en" >"$work/valid.en"
base=(-c "$source_dir/tests/apps/train-small.yaml" -t "$work/train.de" "$work/train.en" --cpu
      --valid-sets "$work/valid.de" "$work/valid.en")
common=("${base[@]}" --vocabs "$work/vocab.spm")

# expect_error <description> <pattern> <lstrain args...>: one "error:" line naming the pattern, exit 1.
expect_error() {
  local what=$1 pattern=$2; shift 2
  "$lstrain" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  check "$what: exits 1 (got $rc)" test "$rc" -eq 1
  check "$what: one error line" test "$(grep -c '^error: ' "$work/err")" -eq 1
  check "$what: says '$pattern'" grep -q -- "$pattern" <(grep '^error: ' "$work/err")
}
# A fingerprint of every file in a directory (names and contents), to show that a refusal changed nothing.
fingerprint() { (cd "$1" && find . -type f ! -name .lock | sort | xargs md5sum); }
# poison <safetensors file>: the first value of its first tensor becomes NaN.
poison() {
  local header
  header=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  printf '\x00\x00\xc0\x7f' | dd of="$1" bs=1 seek=$((8 + header)) conv=notrunc status=none
}

# The model the cases start from: 20 updates, checkpoints at 10 and 20. Each save is logged once.
"$lstrain" "${common[@]}" -m "$work/a" --after 20u >"$work/a.log" 2>&1
check "the reference run exits 0" test $? -eq 0
check "each checkpoint is saved (and logged) once" \
  test "$(grep -c 'saved checkpoint at update 20 ' "$work/a.log")" -eq 1
fresh() { rm -rf "$work/$1"; cp -a "$work/a" "$work/$1"; }  # cp -a keeps model.safetensors a hard link
# A second vocabulary of the same size (300 pieces), sampled from fewer lines.
"$lstrain" "${base[@]}" --vocabs "$work/other.spm" --sentencepiece-max-lines 700 -m "$work/o" --after 1u \
  >/dev/null 2>&1
check "a second vocabulary of the same size differs" bash -c "! cmp -s '$work/vocab.spm' '$work/other.spm'"

# 1. Lost models.
fresh m1 && rm "$work/m1/checkpoint/latest" && before=$(fingerprint "$work/m1")
expect_error "latest removed, checkpoint intact" "holds the complete checkpoint(s) u000000020: to resume" \
  "${common[@]}" -m "$work/m1" --after 30u
check "... names what to do" grep -q -- "echo u000000020 > .*--no-reload" "$work/err"
check "... and leaves the directory as it was" test "$(fingerprint "$work/m1")" = "$before"

fresh m2 && rm "$work/m2/checkpoint/latest" "$work/m2/model.safetensors"
"$lstrain" "${common[@]}" -m "$work/m2" --after 25u >"$work/m2.log" 2>&1
check "an interrupted first save (no latest, no weights yet) resumes" test $? -eq 0
check "... from its checkpoint" grep -q 'resumed from .*u000000020 at update 20' "$work/m2.log"

fresh m3 && rm -r "$work/m3/checkpoint" && before=$(fingerprint "$work/m3")
expect_error "trained weights without checkpoint" "holds a trained model (model.safetensors) but no checkpoint" \
  "${common[@]}" -m "$work/m3" --after 5u
check "... and leaves the weights as they were" test "$(fingerprint "$work/m3")" = "$before"
expect_error "Marian's --overwrite (no numbered model files) does not start anew" \
  "holds a trained model (model.safetensors) but no checkpoint" "${common[@]}" -m "$work/m3" --after 5u --overwrite
check "... and deletes nothing" test "$(fingerprint "$work/m3")" = "$before"
"$lstrain" "${common[@]}" -m "$work/m3" --after 5u --no-reload >"$work/m3.log" 2>&1
check "... --no-reload replaces them" test $? -eq 0
check "... logging each deletion" grep -q -- "--no-reload: deleted '$work/m3/model.safetensors'" "$work/m3.log"

fresh m4 && before=$(fingerprint "$work/m4")
expect_error "resume with another --max-length" "max-length is 40 in the checkpoint but 30" \
  "${common[@]}" -m "$work/m4" --after 30u --max-length 30
check "... rewrites neither config.yml, decoder.yml nor vocab.spm" test "$(fingerprint "$work/m4")" = "$before"
expect_error "resume with another architecture" "dim-emb" "${common[@]}" -m "$work/m4" --after 30u --dim-emb 64
check "... leaves the directory as it was" test "$(fingerprint "$work/m4")" = "$before"

# (other.spm: a vocabulary that lstrain would not train again the same way from these options)
mkdir "$work/m5" && cp "$work/other.spm" "$work/m5/vocab.spm" && cp "$work/valid.de" "$work/m5/valid.de"
"$lstrain" "${base[@]}" --vocabs "$work/m5/vocab.spm" -m "$work/m5" --after 2u >/dev/null 2>&1
vocab_sum=$(md5sum <"$work/m5/vocab.spm")
"$lstrain" "${base[@]}" --vocabs "$work/m5/vocab.spm" -m "$work/m5" --after 2u --no-reload \
  --valid-sets "$work/m5/valid.de" "$work/valid.en" >"$work/m5.log" 2>&1
check "--no-reload with the vocabulary inside the model directory trains" test $? -eq 0
check "... keeps the --vocabs file" test "$(md5sum <"$work/m5/vocab.spm")" = "$vocab_sum"
check "... says so" grep -q -- "--no-reload: keeping '$work/m5/vocab.spm', given with --vocabs" "$work/m5.log"
check "... keeps a --valid-sets file there too" test -s "$work/m5/valid.de"
check "... logs the checkpoint's deletion" grep -q -- "--no-reload: deleted '$work/m5/checkpoint'" "$work/m5.log"
check "... and trained no new vocabulary" bash -c "! grep -q 'creating joint vocabulary' '$work/m5.log'"

# 2. Silent wrong results.
fresh v1 && before=$(fingerprint "$work/v1")
expect_error "resume with another vocabulary of the same size" \
  "another joint vocabulary than '$work/other.spm' (--vocabs)" \
  "${base[@]}" --vocabs "$work/other.spm" -m "$work/v1" --after 30u
check "... leaves the directory as it was" test "$(fingerprint "$work/v1")" = "$before"

fresh w1 && poison "$work/w1/model.safetensors"  # the hard link: the checkpoint's weights too
head -n 3 "$work/valid.de" >"$work/three.de"
"$lstranslate" -m "$work/w1" --cpu -i "$work/three.de" >"$work/w1.out" 2>"$work/w1.err"
check "lstranslate refuses NaN weights (exit 1)" test $? -eq 1
check "... naming the file and the tensor" grep -q "^error: '$work/w1/model.safetensors': tensor '.*' holds NaN" \
  "$work/w1.err"
check "... and prints no translations" test ! -s "$work/w1.out"
"$lsscore" -m "$work/w1" --cpu -t "$work/three.de" "$work/three.de" >"$work/w1.out" 2>"$work/w1.err"
check "lsscore refuses NaN weights (exit 1)" test $? -eq 1
check "... naming the tensor" grep -q "^error: .*holds NaN" "$work/w1.err"
expect_error "resuming from NaN weights" "holds NaN" "${common[@]}" -m "$work/w1" --after 30u

"$lstrain" "${common[@]}" -m "$work/two" --after 2u --enc-depth 2 >/dev/null 2>&1
perl -0777 -pi -e 's/enc-depth: 2/enc-depth: 1/' "$work/two/model.safetensors"
"$lstranslate" -m "$work/two" --cpu -i "$work/three.de" >"$work/two.out" 2>"$work/two.err"
check "weights whose config (enc-depth 1) leaves out a layer are refused" test $? -eq 1
check "... naming the first tensor without a place" grep -q "holds tensor 'encoder.l2\." "$work/two.err"

fresh p1 && sed -i 's/^updates: .*/updates: -5/' "$work/p1/checkpoint/u000000020/progress.yml"
expect_error "progress.yml with negative updates" "progress.yml' is damaged: field 'updates' is -5" \
  "${common[@]}" -m "$work/p1" --after 30u
fresh p2 && sed -i 's/^batcher-batch: .*/batcher-batch: 99999/' "$work/p2/checkpoint/u000000020/progress.yml"
expect_error "progress.yml past the end of the epoch" "batcher-batch 99999, but epoch 1 has" \
  "${common[@]}" -m "$work/p2" --after 30u
check "... suggests --no-restore-corpus" grep -q -- "--no-restore-corpus" "$work/err"
"$lstrain" "${common[@]}" -m "$work/p2" --after 22u --no-restore-corpus >"$work/p2.log" 2>&1
check "... which resumes" test $? -eq 0
fresh p3
for _ in $(seq 1 200); do printf '\x01garbage: [unclosed '; done >"$work/p3/checkpoint/u000000020/progress.yml"
expect_error "a garbage progress.yml" "progress.yml' is damaged" "${common[@]}" -m "$work/p3" --after 30u
check "... is not echoed" test "$(grep '^error: ' "$work/err" | wc -c)" -lt 400

# 3. Output paths are checked before anything starts.
expect_error "--valid-translation-output in a missing directory" \
  "valid-translation-output '/nonexistent/dir/x': the directory '/nonexistent/dir' does not exist" \
  "${common[@]}" -m "$work/t1" --after 20u --valid-metrics bleu --valid-translation-output /nonexistent/dir/x
check "... before the model directory is made" test ! -e "$work/t1"
mkdir "$work/t2"
expect_error "--valid-translation-output naming a directory" "is a directory" \
  "${common[@]}" -m "$work/t3" --after 20u --valid-metrics bleu --valid-translation-output "$work/t2"

# 4. One run per model directory; a killed run leaves no stale lock.
"$lstrain" "${common[@]}" -m "$work/l" --after 3000u >"$work/l1.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q 'Up\. 3 ' "$work/l1.log" 2>/dev/null && break; sleep 0.1; done
expect_error "a second lstrain on the same directory" "in use by another lstrain (pid $pid," \
  "${common[@]}" -m "$work/l" --after 5u
check "... while the first one trains on" kill -0 "$pid"
kill -9 "$pid"
wait "$pid" 2>/dev/null
pid=""
"$lstrain" "${common[@]}" -m "$work/l" --after 2u >"$work/l2.log" 2>&1
check "after kill -9 the directory trains again" test $? -eq 0

# 5. Clear messages.
expect_error "--vocabs naming a directory" "vocabs '$work' is a directory; give the path of a SentencePiece model" \
  "${base[@]}" --vocabs "$work" -m "$work/x1" --after 2u
expect_error "--vocabs in a missing directory" "the directory '$work/nodir' does not exist" \
  "${base[@]}" --vocabs "$work/nodir/v.spm" -m "$work/x2" --after 2u
check "... which is not created" test ! -e "$work/nodir"
expect_error "divergence before any checkpoint" "no checkpoint was saved yet" \
  "${common[@]}" -m "$work/x3" --after 80u --learn-rate 1e30 --clip-norm 0 --max-nan-steps 3
check "... and claims no good checkpoint" bash -c "! grep -q 'good checkpoint' '$work/err'"
fresh x4 && for _ in $(seq 1 50); do printf 'garbage\001 '; done >"$work/x4/checkpoint/latest"
expect_error "a damaged checkpoint/latest" "latest' is damaged: it holds 'garbage? garbage?" \
  "${common[@]}" -m "$work/x4" --after 30u
check "... names the complete checkpoint" grep -q "complete checkpoints found: u000000020" "$work/err"
check "... and quotes only a short excerpt" test "$(grep -o garbage "$work/err" | wc -l)" -lt 6

echo "$failures failed"
[ "$failures" -eq 0 ]

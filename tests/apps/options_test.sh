#!/usr/bin/env bash
# End-to-end checks of option handling in the three apps: --dump-config, --help, --version, and that a mistake
# exits non-zero with exactly one "error: ..." line on stderr.
# Usage: bash options_test.sh <dir of lstrain> <source dir>   (the apps live in <build>/apps/{train,translate,score})
set -uo pipefail
train_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
apps_dir=$(dirname "$train_dir")
lstrain="$train_dir/lstrain"
lstranslate="$apps_dir/translate/lstranslate"
lsscore="$apps_dir/score/lsscore"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

check() {  # check <description> <condition...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# Runs an app, keeping its exit code, stdout and stderr in $rc, $work/out, $work/err.
run() { "$@" >"$work/out" 2>"$work/err"; rc=$?; }

one_error_line() {
  [ "$rc" -ne 0 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q '^error: ' "$work/err"
}

for app in "$lstrain" "$lstranslate" "$lsscore"; do
  name=$(basename "$app")
  check "$name exists" test -x "$app"

  run "$app" --dump-config
  check "$name --dump-config exits 0" test "$rc" -eq 0
  check "$name --dump-config prints YAML with seed" grep -q '^seed: 1234$' "$work/out"
  cp "$work/out" "$work/dump-$name.yaml"
  run "$app" -c "$work/dump-$name.yaml" --dump-config
  check "$name reads its own dump back unchanged" cmp -s "$work/out" "$work/dump-$name.yaml"

  run "$app" --help
  check "$name --help exits 0" test "$rc" -eq 0
  check "$name --help lists general options" grep -q 'General options:' "$work/out"

  run "$app" --version
  check "$name --version exits 0" test "$rc" -eq 0
  check "$name --version prints the version" grep -q '^lseq [0-9]' "$work/out"

  run "$app" --no-such-option 3
  check "$name: unknown option gives one error line" one_error_line
  check "$name: the error names the option" grep -q "no-such-option" "$work/err"

  run "$app"
  check "$name without --model gives one error line naming --model" one_error_line
  check "$name: the error names --model" grep -q -- "--model" "$work/err"
done

run "$lstrain" -m "$work/model" --dim-embb 256
check "lstrain: a typo gets a suggestion" grep -q "did you mean '--dim-emb'" "$work/err"

printf 'dim-emb: 256\nlearn-rate: fast\n' >"$work/bad.yaml"
run "$lstrain" -m "$work/model" -c "$work/bad.yaml"
check "lstrain: a wrong type in a file gives one error line" one_error_line
check "lstrain: it names option, file and line" grep -q "option 'learn-rate' in $work/bad.yaml line 2" "$work/err"

run "$lstranslate" -m "$work/model" --learn-rate 0.1
check "lstranslate rejects a training option" one_error_line
check "lstranslate says whose option it is" grep -q "lstrain" "$work/err"

for preset in "$source_dir"/configs/*.yaml; do
  run "$lstrain" -c "$preset" --dump-config
  check "preset $(basename "$preset") loads" test "$rc" -eq 0
done

# Merging: the second file wins over the first, the command line over both.
printf 'dim-emb: 256\nenc-depth: 3\n' >"$work/a.yaml"
printf 'dim-emb: 384\n' >"$work/b.yaml"
run "$lstrain" -c "$work/a.yaml" "$work/b.yaml" --enc-depth 4 --dump-config
check "files merge in order" grep -q '^dim-emb: 384$' "$work/out"
check "the command line wins" grep -q '^enc-depth: 4$' "$work/out"

# Logging: the log file starts with the command line and the version; --quiet keeps info off the terminal.
# (No model exists in $work, so the app stops early; only the log is checked, not the exit code.)
run "$lsscore" -m "$work/no-model" --log "$work/score.log" --quiet
check "the log file has the command line" grep -q "Command line: .*lsscore -m $work/no-model" "$work/score.log"
check "the log file has the version" grep -q "lseq [0-9]" "$work/score.log"
check "--quiet keeps info messages off the terminal" bash -c "! grep -q '\[info\]' '$work/err'"

if [ "$failures" -ne 0 ]; then
  echo "options_test.sh: $failures check(s) failed"
  exit 1
fi
echo "options_test.sh: all checks passed"

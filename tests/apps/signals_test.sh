#!/usr/bin/env bash
# SIGTERM and SIGINT end lstrain promptly at any stage: during set-up (here: blocked opening a FIFO given as the
# corpus, which never gets a writer) at once, with one error line and the shell's exit code; during training after
# saving a checkpoint (tests/apps/train_test.sh checks that resume).
# Usage: bash signals_test.sh <dir of lstrain> <source dir>
set -uo pipefail
lstrain="$(cd "$1" && pwd)/lstrain"
source_dir=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
check() {  # check <description> <command...>
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
sample="$source_dir/data/sample-de-en"

# signal_during_setup SIGNAL EXPECTED_CODE: lstrain blocks opening a FIFO; the signal must end it within 5 s.
signal_during_setup() {
  local signal=$1 expected=$2 fifo="$work/fifo-$1.de"
  mkfifo "$fifo"
  "$lstrain" --cpu -c "$source_dir/tests/apps/train-small.yaml" -m "$work/model-$signal" \
    -t "$fifo" "$sample/train.en" --vocabs "$work/vocab-$signal.spm" >"$work/$signal.log" 2>&1 &
  local pid=$! waited=0
  sleep 1
  kill -s "$signal" "$pid"
  while kill -0 "$pid" 2>/dev/null && [ $waited -lt 50 ]; do sleep 0.1; waited=$((waited + 1)); done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    echo "FAIL: lstrain still running 5 s after $signal"; failures=$((failures + 1))
    return
  fi
  wait "$pid"
  local code=$?
  check "$signal during set-up: exit code $expected (got $code)" test "$code" -eq "$expected"
  check "$signal during set-up: one error line naming the signal" \
    test "$(grep -c "^error: .*$signal.*before training started" "$work/$signal.log")" -eq 1
  check "$signal during set-up: no checkpoint" test ! -e "$work/model-$signal/checkpoint/latest"
}
signal_during_setup TERM 143
signal_during_setup INT 130

echo "$failures failed"
[ "$failures" -eq 0 ]

#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan + UBSan, CPU only) in the tree it shares with scripts/sanitize.sh
# (scripts/sanitized-tree.sh: build-sanitize/, or $LSEQ_SANITIZE_BUILD_DIR) and runs each for
# FUZZ_SECONDS (default 15) from its seeds in fuzz/corpus/<target>/, FUZZ_JOBS targets at a time (default: one per
# core), then prints per target the executions, the seconds, the coverage gained and the findings. A finding (a
# crash, a sanitizer report, a leak, a timeout, running out of memory, an exception other than lseq::Error, a broken
# promise of the code) fails the run unless fuzz/known-open.txt lists it: then it is printed as known-open.
# CI runs it after the tests (.ci/run); fuzz/README.md says how to fuzz for longer and where findings go.
#   bash scripts/fuzz.sh                          # every target, 15 s each
#   FUZZ_SECONDS=3600 bash scripts/fuzz.sh nbest  # one target (or several: name them) for an hour
set -euo pipefail
source "$(dirname "$0")/sanitized-tree.sh"
root=$sanitized_root
build=$sanitized_build
seconds=${FUZZ_SECONDS:-15}
jobs=${FUZZ_JOBS:-$(nproc)}

start=$SECONDS
build_sanitized_tree lseq_fuzz_targets
echo "fuzz: built the targets in $((SECONDS - start)) s"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for source in "$root"/fuzz/*_fuzz.cpp; do targets+=("$(basename "$source" _fuzz.cpp)"); done
fi
for target in "${targets[@]}"; do
  [ -x "$build/fuzz/fuzz_$target" ] || { echo "fuzz: no target '$target' (they are fuzz/*_fuzz.cpp)" >&2; exit 1; }
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
known="$root/fuzz/known-open.txt"

# The description of the fuzz/known-open.txt entry whose target and patterns (grep -E, joined by " && ": all must
# match) match a finding's report; fails when none does.
known_open() {  # known_open <target> <report file>
  [ -f "$known" ] || return 1
  local line target patterns description pattern matched
  while IFS= read -r line; do
    case $line in '' | '#'*) continue ;; esac
    target=${line%% | *} patterns=${line#* | }  # fields are separated by " | " (a pattern may hold "|")
    description=${patterns#* | } patterns=${patterns%% | *}
    [ "$(trim "$target")" = "$1" ] || continue
    matched=1
    while IFS= read -r pattern; do
      pattern=$(trim "$pattern")
      [ -z "$pattern" ] || grep -qE -- "$pattern" "$2" || matched=0
    done < <(sed 's/ && /\n/g' <<<"$patterns")
    if [ $matched = 1 ]; then
      trim "$description"
      return 0
    fi
  done <"$known"
  return 1
}

trim() { sed 's/^ *//; s/ *$//' <<<"$1"; }
status_field() { sed -nE "s/.* $1: ([0-9]+) .*/\1/p" <<<"$2"; }  # status_field <name> <libFuzzer status line>

# Fuzzes one target and writes its summary and its count of new findings into its findings folder.
fuzz_target() {  # fuzz_target <target>
  local target=$1 binary="$build/fuzz/fuzz_$1"
  local corpus="$build/corpus/$target" findings="$build/findings/$target" scratch="$build/tmp/$target"
  rm -rf "$findings" "$scratch"
  mkdir -p "$corpus" "$findings" "$scratch"
  local log="$findings/fuzz.log" began=$SECONDS
  # -fork=1: the fuzzing runs in a child process that is restarted after a finding, so that a known-open bug
  # found early does not end the target's time; every finding is saved and judged below.
  TMPDIR=$scratch "$binary" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$findings/" \
    "$corpus" "$root/fuzz/corpus/$target" >"$log" 2>&1 || true
  local took=$((SECONDS - began))
  local first last
  first=$(grep -m1 -E '^#[0-9]+: cov:' "$log" || true)
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
  local verdicts=() known_count=0 new_count=0 artifact report description
  local -A known_inputs=() known_example=()  # per known-open bug: how many inputs hit it, and one of them
  for artifact in "$findings"/crash-* "$findings"/leak-* "$findings"/timeout-* "$findings"/oom-*; do
    [ -f "$artifact" ] || continue
    report="$artifact.report"
    TMPDIR=$scratch "$binary" -timeout=10 -rss_limit_mb=2048 "$artifact" >"$report" 2>&1 || true
    if description=$(known_open "$target" "$report"); then
      known_count=$((known_count + 1))
      known_inputs[$description]=$((${known_inputs[$description]:-0} + 1))
      known_example[$description]=$(basename "$artifact")
    else
      new_count=$((new_count + 1))
      verdicts+=("NEW: $artifact (report: $report)")
      # What the report says, and the input's first bytes: a CI log then tells the finding without its files.
      verdicts+=("  $(grep -m1 -E 'fuzz finding:|ERROR: |runtime error:' "$report" || echo 'no error line in the report')")
      verdicts+=("  input: $(head -c 48 "$artifact" | od -An -c | tr -s ' \n' ' ')")
    fi
  done
  for description in "${!known_inputs[@]}"; do
    verdicts+=("known-open (${known_inputs[$description]} inputs, e.g. ${known_example[$description]}): $description")
  done
  if [ -z "$last" ]; then
    new_count=$((new_count + 1))
    verdicts+=("NEW: the target did not fuzz (log: $log): $(tail -n 1 "$log")")
  fi
  {
    echo "fuzz: $target: $(sed -E 's/^#([0-9]+):.*/\1/' <<<"${last:-#0:}") executions in $took s; coverage" \
      "$(status_field cov "$first") -> $(status_field cov "$last") edges, $(status_field ft "$first") ->" \
      "$(status_field ft "$last") features, $(status_field corp "$last") inputs in the corpus; findings:" \
      "$new_count new, $known_count known-open"
    for verdict in "${verdicts[@]}"; do echo "  $verdict"; done
  } >"$findings/summary"
  echo "$new_count" >"$findings/new"
  rm -rf "$scratch"
}

echo "fuzz: ${#targets[@]} targets, $seconds s each, $jobs at a time"
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_target "$target" &
done
wait
new_findings=0
for target in "${targets[@]}"; do
  if [ -f "$build/findings/$target/new" ]; then
    cat "$build/findings/$target/summary"
    new_findings=$((new_findings + $(cat "$build/findings/$target/new")))
  else
    echo "fuzz: $target: the script's run of the target failed (see $build/findings/$target/)"
    new_findings=$((new_findings + 1))
  fi
done
if [ "$new_findings" -gt 0 ]; then
  echo "fuzz: FAILED: $new_findings new finding(s); reproduce one with $build/fuzz/fuzz_<target> <file>" \
    "(fuzz/README.md)" >&2
  exit 1
fi
echo "fuzz: no new findings in $((SECONDS - start)) s"
